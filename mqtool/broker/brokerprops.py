"""The properties string (and topic, queue, sysFlag) a broker stores for one spec line.

The stored pair order is java.util.HashMap iteration order, so it depends on
the exact sequence of map operations between the producer and the commit
log.  This module replays that sequence on a JavaHashMap.  The sequence was
read from the 4.9.8 / 5.3.3 sources and checked against every stored record
of the fixtures (tests/test_brokerprops.py):

1. Producer (``Message``, default HashMap): TAGS, KEYS (a list is joined with
   one space), the user properties in the order given, DELAY when a delay
   level is set, TRAN_MSG=true for half and prepared messages.  (A real
   producer puts UNIQ_KEY last in sendKernelImpl; the fixtures give it in
   ``properties``, so it is put where it appears there.)
2. Broker receive (4.9.8 SendMessageProcessor, 5.x
   MessageExtBrokerInner.removeWaitStorePropertyString): the pairs are
   re-read into a fresh default-size HashMap in step-1 iteration order, CLUSTER
   is put, WAIT is removed, the map is serialised, and WAIT is put back (it
   now sits at the tail of its bucket).  A spec ``cluster: null`` means no
   CLUSTER.
3. Half message (TransactionalMessageBridge.parseHalfMessageInner): 5.x first
   puts ``__transactionId__`` = UNIQ_KEY; then REAL_TOPIC and REAL_QID are put,
   the transaction bits are cleared, the topic becomes RMQ_SYS_TRANS_HALF_TOPIC
   queue 0 and the map is serialised again -- so WAIT reappears.
4. Delay (4.9.8 CommitLog.asyncPutMessage, 5.x HookUtils.handleScheduleMessage),
   only for transaction type none/commit and DELAY > 0: DELAY is clamped to
   the highest level (put of an existing key: position kept), REAL_TOPIC and
   REAL_QID are put, the map is serialised again (WAIT reappears), the topic
   becomes SCHEDULE_TOPIC_XXXX, queue level-1.
5. 4.x drops the final 0x02 separator, 5.x keeps it.

``real_broker_5x=True`` models the real 5.3.3 SendMessageProcessor instead of
step 2: it decodes into ``new HashMap<>(128)`` (a different order) and does
not drop WAIT.  (That broker also puts a fresh UNIQ_KEY when the producer sent
none; give one in ``properties``.)  The 5.3.3 fixture was not written that
way -- its order is the default-capacity order -- so that flag is checked only
against OpenJDK's HashMap, not against a fixture.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from mqtool.engine.javamap import JavaHashMap, properties_to_string
from mqtool.formats import sysflag
from mqtool.formats.hosts import parse_host
from mqtool.formats.topicnames import SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from mqtool.formats.properties import (
    CLUSTER,
    DELAY,
    KEYS,
    REAL_QID,
    REAL_TOPIC,
    TAGS,
    TRAN_MSG,
    TRANSACTION_ID,
    UNIQ_KEY,
    WAIT,
)

MAX_DELAY_LEVEL = 18  # levels in the default messageDelayLevel

TRANSACTION_BITS = {
    "half": sysflag.TRANSACTION_PREPARED,  # the producer's flag; the broker clears it
    "prepared": sysflag.TRANSACTION_PREPARED,
    "commit": sysflag.TRANSACTION_COMMIT,
    "rollback": sysflag.TRANSACTION_ROLLBACK,
}


@dataclass
class StoredMessage:
    """What the broker hands to the commit log for one spec line."""

    properties: str
    topic: str
    queue_id: int
    sys_flag: int
    delay_level: int = 0  # after clamping; 0 when not delayed


def _is_v5(version) -> bool:
    return str(version).startswith("5")


def _keys_string(keys) -> str | None:
    if keys is None:
        return None
    if isinstance(keys, str):
        return keys
    return " ".join(keys)


def producer_properties(spec: dict) -> JavaHashMap:
    """Step 1: the producer-side Message property map, in put order."""
    props = JavaHashMap()
    tags = spec.get("tags")
    if tags:
        props.put(TAGS, tags)
    keys = _keys_string(spec.get("keys"))
    if keys:
        props.put(KEYS, keys)
    for name, value in (spec.get("properties") or {}).items():
        props.put(name, value)
    if spec.get("delayLevel"):
        props.put(DELAY, str(spec["delayLevel"]))
    if spec.get("transaction") in ("half", "prepared"):
        props.put(TRAN_MSG, "true")
    return props


def sys_flag_for(spec: dict) -> int:
    """The sysFlag before broker changes: spec bits, codec bits, transaction bits, IPv6 born host."""
    flag = spec.get("sysFlag", 0) or 0
    codec = spec.get("compress")
    if codec:
        flag |= sysflag.COMPRESSED | sysflag.COMPRESSION_FLAGS[codec.upper()]
    if spec.get("transaction"):
        flag = (flag & ~sysflag.TRANSACTION_MASK) | TRANSACTION_BITS[spec["transaction"]]
    if _born_v6(spec.get("bornHost")):
        flag |= sysflag.BORNHOST_V6  # CommitLog sets it when the born address is an Inet6Address
    return flag


def _born_v6(host: str | None) -> bool:
    """Java makes an Inet4Address of an IPv4-mapped IPv6 address, so only real IPv6 counts."""
    if host is None:
        return False
    try:
        packed, _ = parse_host(host)
    except ValueError:
        raise ValueError(f"bornHost must be host:port, not {host!r}") from None
    return len(packed) == 16 and ipaddress.IPv6Address(packed).ipv4_mapped is None


@dataclass
class BrokerMessage:
    """What the broker hands to the store (steps 1-3): the map and the string serialised from it."""

    props: JavaHashMap
    properties: str
    topic: str
    queue_id: int
    sys_flag: int


def broker_message(
    spec: dict,
    *,
    cluster: str | None = "DefaultCluster",
    version: str = "4",
    real_broker_5x: bool = False,
) -> BrokerMessage:
    """Steps 1-3 for one spec line (a parsed spec.jsonl object); step 4 is the store's."""
    v5 = _is_v5(version)
    trailing = v5
    topic = spec["topic"]
    queue_id = spec.get("queueId", 0)
    sys_flag = sys_flag_for(spec)
    if "cluster" in spec:
        cluster = spec["cluster"]

    # Step 2: the broker re-reads the producer's string into a fresh map.
    producer = producer_properties(spec)
    props = JavaHashMap(128 if (v5 and real_broker_5x) else None, producer.items())
    if cluster is not None:
        props.put(CLUSTER, cluster)
    if WAIT in props and not (v5 and real_broker_5x):
        wait = props.remove(WAIT)
        text = properties_to_string(props, trailing_separator=trailing)
        props.put(WAIT, wait)
    else:
        text = properties_to_string(props, trailing_separator=trailing)

    # Step 3: half message.
    if spec.get("transaction") == "half":
        if v5:
            uniq = props.get(UNIQ_KEY)
            if uniq:
                props.put(TRANSACTION_ID, uniq)
        props.put(REAL_TOPIC, topic)
        props.put(REAL_QID, str(queue_id))
        sys_flag &= ~sysflag.TRANSACTION_MASK
        topic, queue_id = TRANS_HALF_TOPIC, 0
        text = properties_to_string(props, trailing_separator=trailing)
    return BrokerMessage(props, text, topic, queue_id, sys_flag)


def stored_message(
    spec: dict,
    *,
    cluster: str | None = "DefaultCluster",
    version: str = "4",
    max_delay_level: int = MAX_DELAY_LEVEL,
    real_broker_5x: bool = False,
) -> StoredMessage:
    """Replay steps 1-5 for one spec line: the broker's part, then the store's delay step."""
    from mqtool.engine.commitlogwriter import rewrite_delayed

    bm = broker_message(spec, cluster=cluster, version=version, real_broker_5x=real_broker_5x)
    text, topic, queue_id, level = bm.properties, bm.topic, bm.queue_id, 0
    if sysflag.transaction_type(bm.sys_flag) in (sysflag.TRANSACTION_NOT_TYPE, sysflag.TRANSACTION_COMMIT):
        delayed = rewrite_delayed(bm.props, topic, queue_id, max_delay_level,
                                  trailing_separator=_is_v5(version))
        if delayed is not None:
            text, topic, queue_id, level = delayed
    return StoredMessage(text, topic, queue_id, bm.sys_flag, level)


def stored_properties(spec: dict, *, cluster: str | None = "DefaultCluster", version: str = "4", **kw) -> str:
    """The exact propertiesString the broker stores for one spec line."""
    return stored_message(spec, cluster=cluster, version=version, **kw).properties
