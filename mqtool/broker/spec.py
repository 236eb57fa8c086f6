"""Message specs: the JSON shape `mqtool append` reads (one object per line).

The shape is the fixtures' spec.jsonl: topic, queueId, tags, keys (a list or
a space-separated string), body (UTF-8 text) / bodyBase64 / bodyPattern
{text, size}, properties, bornHost, bornTimestamp, flag, sysFlag,
reconsumeTimes, delayLevel, compress (ZLIB, LZ4, ZSTD as the 4.9.8 producer
compresses), transaction (half, prepared, commit, rollback),
preparedTransactionOffset or preparedTransactionOffsetOf (an earlier half or prepared line),
cluster (null for none) and, for replays, storeTimestamp and storeHost.
A spec goes through the broker's handling (brokerprops) before the store
sees it, so the stored bytes are those a broker would write.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from mqtool.broker import brokerprops, compression
from mqtool.engine.message import MessageInner
from mqtool.errors import UsageError
from mqtool.formats import multidispatch
from mqtool.formats.properties import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from mqtool.storage.topics import lmq_reserved, send_forbidden

KNOWN_FIELDS = {
    "topic", "queueId", "tags", "keys", "body", "bodyBase64", "bodyPattern", "properties", "bornHost",
    "bornTimestamp", "flag", "sysFlag", "reconsumeTimes", "delayLevel", "compress", "transaction",
    "preparedTransactionOffset", "preparedTransactionOffsetOf", "cluster", "storeTimestamp", "storeHost",
    "expect",
}
TRANSACTIONS = ("half", "prepared", "commit", "rollback")


@dataclass
class SpecError(Exception):
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def body_of(spec: dict) -> bytes:
    if "bodyBase64" in spec:
        try:
            return base64.b64decode(spec["bodyBase64"], validate=True)
        except ValueError:
            raise ValueError("bodyBase64 is not base64") from None
    if "bodyPattern" in spec:
        pattern = spec["bodyPattern"]
        unit = str(pattern["text"]).encode("utf-8")
        size = int(pattern["size"])
        if not unit and size:
            raise ValueError("bodyPattern text is empty")
        return (unit * (size // max(len(unit), 1) + 1))[:size]
    body = spec.get("body", "")
    if not isinstance(body, str):
        raise ValueError("body must be a string (use bodyBase64 for bytes)")
    return body.encode("utf-8")


def to_message(spec: dict, *, line: int = 0, version: str = "4", cluster: str | None = "DefaultCluster",
               prepared_offsets: dict[int, int] | None = None, allow_system_topics: bool = False) -> MessageInner:
    """One spec object to the MessageInner the broker would hand to its store."""
    if not isinstance(spec, dict):
        raise SpecError(line, "expected a JSON object")
    unknown = set(spec) - KNOWN_FIELDS
    if unknown:
        raise SpecError(line, f"unknown field(s): {', '.join(sorted(unknown))}")
    if not isinstance(spec.get("topic"), str):
        raise SpecError(line, "topic is required")
    if "bornHost" in spec and not isinstance(spec["bornHost"], str):
        raise SpecError(line, f"bornHost must be host:port, not {spec['bornHost']!r}")
    if send_forbidden(spec["topic"]) and not allow_system_topics:
        raise SpecError(line, f"sending to topic {spec['topic']} is forbidden (a broker refuses it too)")
    if lmq_reserved(spec["topic"]) and not allow_system_topics:
        raise SpecError(line, f"topic {spec['topic']}: {LMQ_REFUSED}")
    for name, (low, high) in RANGES.items():
        value = spec.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SpecError(line, f"{name} must be a whole number in {low}..{high}, not {value!r}")
    props = spec.get("properties")
    if props is not None and not (isinstance(props, dict)
                                  and all(isinstance(k, str) and isinstance(v, str) for k, v in props.items())):
        raise SpecError(line, "properties must be an object of strings")
    problem = text_problem(spec, allow_reserved=allow_system_topics)
    if problem:
        raise SpecError(line, problem)
    # a Java string reaches the store through getBytes(UTF-8), which writes '?' for a lone
    # surrogate: the same here, before anything (the tags code, the index keys) is computed
    spec = {k: (_java_text(v) if k in ("tags", "keys", "properties", "bornHost") else v) for k, v in spec.items()}
    tx = spec.get("transaction")
    if tx is not None and tx not in TRANSACTIONS:
        raise SpecError(line, f"transaction must be one of {', '.join(TRANSACTIONS)}")
    codec = spec.get("compress")
    if codec is not None and str(codec).upper() not in ("ZLIB", "LZ4", "ZSTD"):
        raise SpecError(line, "compress must be ZLIB, LZ4 or ZSTD")
    try:
        body = body_of(spec)
        if codec:
            body = compression.compress(body, str(codec).upper())
        bm = brokerprops.broker_message(spec, cluster=cluster, version=version)
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise SpecError(line, str(exc)) from None
    prepared = int(spec.get("preparedTransactionOffset", 0) or 0)
    if "preparedTransactionOffsetOf" in spec:
        ref = spec["preparedTransactionOffsetOf"]
        if not prepared_offsets or ref not in prepared_offsets:
            raise SpecError(line, f"preparedTransactionOffsetOf {ref}: no earlier half or prepared line {ref}")
        prepared = prepared_offsets[ref]
    try:
        return MessageInner(
            topic=bm.topic, queue_id=int(bm.queue_id), body=body, properties=bm.props,
            properties_string=bm.properties, flag=signed_flag(spec.get("flag", 0)), sys_flag=bm.sys_flag,
            born_timestamp=int(spec.get("bornTimestamp", 0)), born_host=spec.get("bornHost", DEFAULT_BORN_HOST),
            store_host=spec.get("storeHost"), reconsume_times=int(spec.get("reconsumeTimes", 0)),
            prepared_transaction_offset=prepared, store_timestamp=spec.get("storeTimestamp"))
    except (ValueError, TypeError, OverflowError) as exc:
        raise SpecError(line, str(exc)) from None


INT32, INT64 = (-(1 << 31), (1 << 31) - 1), (-(1 << 63), (1 << 63) - 1)
# the whole numbers a line may give, and their ranges (Java's int and long; a flag may be given
# unsigned): the one table the per-line checks, the batcher and the compiled scan all use
RANGES = {"queueId": (0, INT32[1]), "bornTimestamp": INT64, "storeTimestamp": INT64,
          "reconsumeTimes": INT32, "preparedTransactionOffset": INT64, "delayLevel": INT32,
          "sysFlag": INT32, "flag": (INT32[0], (1 << 32) - 1)}


# the properties a broker's multi-dispatch writes (LMQ): a line that gives them would be
# dispatched into LMQ queues the store does not keep
RESERVED_PROPERTIES = (multidispatch.INNER_MULTI_DISPATCH, multidispatch.INNER_MULTI_QUEUE_OFFSET)
LMQ_REFUSED = ("%LMQ% queues are written by a broker's multi-dispatch (enableLmq), which append does not do; "
               "nothing of this line was stored (--allow-system-topics stores it as given)")
SEPARATORS = (NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR)


def text_problem(spec: dict, *, allow_reserved: bool = False) -> str | None:
    """Why the line's tags, keys or properties cannot be stored as given, or None.

    The properties are stored as name 0x01 value 0x02 ...: a text holding either byte is read
    back (MessageDecoder.string2messageProperties, and a broker indexing the keys) as other
    properties than the line gave, so it is refused, as are the multi-dispatch properties
    (unless allow_reserved: --allow-system-topics, which builds test stores)."""
    texts = []
    for field in ("tags", "keys"):
        value = spec.get(field)
        if isinstance(value, str):
            texts.append((field, value))
        elif isinstance(value, list):
            texts.extend((field, v) for v in value if isinstance(v, str))
    for name, value in (spec.get("properties") or {}).items():
        if name in RESERVED_PROPERTIES and not allow_reserved:
            return f"property {name} is written by a broker's multi-dispatch (LMQ), not by a producer: {LMQ_REFUSED}"
        texts.append(("a property name", name))
        texts.append((f"property {name!r}", value))
    for what, text in texts:
        for byte in SEPARATORS:
            if byte in text:
                return (f"{what} holds the byte 0x{ord(byte):02x}, which separates a message's properties "
                        "(they would be read back as other properties); nothing of this line was stored")
    return None


def _java_text(value):
    """Strings as a Java String's UTF-8 bytes would carry them (lone surrogates become '?')."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_java_text(v) for v in value]
    if isinstance(value, dict):
        return {_java_text(k): _java_text(v) for k, v in value.items()}
    return value


DEFAULT_BORN_HOST = "127.0.0.1:0"


def signed_flag(value: int) -> int:
    """A flag (checked against RANGES) as the int Java stores: given unsigned, it wraps."""
    return value - (1 << 32) if value >= (1 << 31) else value


def usage(err: SpecError) -> UsageError:
    return UsageError(str(err))


def spec_from_options(topic, queue_id, tags, keys, props, body: str | None, body_bytes: bytes | None,
                      born_host, delay_level, flag) -> dict:
    """The spec of one message given by `append`'s options (--property NAME=VALUE pairs)."""
    spec = {"topic": topic, "queueId": queue_id}
    if tags:
        spec["tags"] = tags
    if keys:
        spec["keys"] = list(keys)
    if props:
        spec["properties"] = {}
        for item in props:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise UsageError(f"--property {item!r}: expected NAME=VALUE")
            spec["properties"][name] = value
    if body_bytes is not None:
        spec["bodyBase64"] = base64.b64encode(body_bytes).decode()
    else:
        spec["body"] = body or ""
    if born_host is not None:
        spec["bornHost"] = born_host
    if delay_level:
        spec["delayLevel"] = delay_level
    if flag:
        spec["flag"] = flag
    return spec
