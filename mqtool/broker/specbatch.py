"""JSON lines of message specs to batches the compiled append path takes, each line parsed once.

`mqtool append` at a broker's speed cannot afford a per-message object, a JSON parse
in Python or a HashMap model per message.  Here a line is parsed by orjson, and a
plain line (a topic, a queue, tags, keys, a body, user properties, born host and
times: what a producer's send carries) goes straight into the columns of a
PlainBatch.  The stored property order (java.util.HashMap order) depends only on
which names are put, in which order: it is worked out once per shape of line (its
field names and its property names), by running the broker's own steps
(brokerprops) on a template, and every line of that shape fills in its values.

Anything else (delay levels, transactions, compression, lines the json module reads
differently from orjson, bad lines) goes through spec.to_message, the reference,
which also words every error.  tests/test_specbatch.py checks that both give the
same messages.
"""

from __future__ import annotations

import base64
import binascii
import json
from operator import itemgetter

import numpy as np
import orjson

from mqtool.broker import brokerprops
from mqtool.broker.spec import DEFAULT_BORN_HOST, RANGES, RESERVED_PROPERTIES, SpecError, signed_flag, to_message
from mqtool.engine.batchappend import PlainBatch
from mqtool.errors import UsageError
from mqtool.formats.properties import CLUSTER, DELAY, KEYS, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, TAGS, UNIQ_KEY
from mqtool.storage.topics import producer_refused

# the fields of a plain line; "expect" is the fixtures' note of what the broker answered
PLAIN_FIELDS = frozenset({"topic", "queueId", "tags", "keys", "body", "bodyBase64", "properties", "bornHost",
                          "bornTimestamp", "flag", "reconsumeTimes", "storeTimestamp", "expect"})


def parse_line(raw: bytes, number: int):
    """(spec, plain_ok) of one line's bytes; (None, False) for a blank line.

    orjson first; what it refuses (not UTF-8, not JSON, NaN, 1e400, a lone surrogate)
    is read by the json module, which words the error or reads what orjson cannot;
    such a line never takes the plain path (its strings may need Java's treatment)."""
    try:
        return orjson.loads(raw), True
    except orjson.JSONDecodeError:
        pass
    return reference_parse(raw, number), False


def reference_parse(raw: bytes, number: int):
    """The json module's reading of a line (None when blank), errors worded for the user."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"input line {number}: not UTF-8 (byte {exc.start} of the line)") from None
    if not line.strip():
        return None
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise UsageError(f"input line {number}: not JSON ({exc.msg} at column {exc.colno})") from None


def _picker(indexes):
    """A function giving the items at indexes of a sequence, always as a tuple."""
    if len(indexes) == 1:
        index = indexes[0]
        return lambda seq: (seq[index],)
    return itemgetter(*indexes) if indexes else (lambda seq: ())


class Plan:
    """How one shape of line (its field names, its property names) becomes a message: the
    stored properties string with a slot for each value, where each value comes from, and
    which optional fields the line has.  A line's values are (tags, keys, *properties, None)."""

    def __init__(self, fields, names: tuple, cluster: str | None, version: str):
        template = {"topic": "T", "queueId": 0, "properties": {n: "v" for n in names}}
        if "tags" in fields:
            template["tags"] = "t"
        if "keys" in fields:
            template["keys"] = "k"
        text = brokerprops.broker_message(template, cluster=cluster, version=version).properties
        stored = [pair.split(NAME_VALUE_SEPARATOR, 1)[0] for pair in text.split(PROPERTY_SEPARATOR) if pair]
        slot = {TAGS: 0, KEYS: 1, **{name: 2 + i for i, name in enumerate(names)}}   # later puts win
        parts, sources = [], []
        self.template = []    # the stored text as pieces: literal text, or the slot of a value
        for name in stored:
            if parts:
                self.template.append(PROPERTY_SEPARATOR)
            if name == CLUSTER and cluster is not None:   # put last: the broker's value wins
                parts.append(_escaped(name + NAME_VALUE_SEPARATOR + cluster))
                self.template.append(name + NAME_VALUE_SEPARATOR + cluster)
            else:
                parts.append(_escaped(name + NAME_VALUE_SEPARATOR) + "%s")
                sources.append(slot[name])
                self.template += [name + NAME_VALUE_SEPARATOR, slot[name]]
        # a line's stored text holds exactly these separators: one more is a value holding one
        # (spec.text_problem refuses it, on the reference path)
        self.separators = text.count(NAME_VALUE_SEPARATOR) + text.count(PROPERTY_SEPARATOR)
        trailing = PROPERTY_SEPARATOR if text.endswith(PROPERTY_SEPARATOR) else ""
        self.format = PROPERTY_SEPARATOR.join(parts) + trailing
        if trailing:
            self.template.append(trailing)
        self.values = _picker(sources)                 # the format's values, from a line's values
        self.props = _picker(names) if names else None  # the property values, from the properties
        self.dispatch = _picker([slot[TAGS], slot[KEYS], slot.get(UNIQ_KEY, len(names) + 2)])
        self.tags, self.keys, self.host = "tags" in fields, "keys" in fields, "bornHost" in fields
        self.body = "body" if "body" in fields else ("bodyBase64" if "bodyBase64" in fields else None)
        # the optional numbers this shape has: (field, low, high)
        self.numbers = tuple((f, low, high) for f, low, high in _NUMBERS if f in fields)


# queueId and bornTimestamp are read on every line; these only when a shape has them
_NUMBERS = tuple((field, *RANGES[field]) for field in ("storeTimestamp", "flag", "reconsumeTimes"))


class SpecBatcher:
    """Collects plain lines into a PlainBatch; add() says whether it took a line."""

    def __init__(self, *, version: str, cluster: str | None, allow_system_topics: bool):
        self.version, self.cluster, self.allow_system_topics = version, cluster, allow_system_topics
        self._plans: dict = {}
        self._topics: dict = {}   # topic -> may a producer send to it
        self._hosts: dict = {DEFAULT_BORN_HOST: 0}   # born host -> its sysFlag bits, None when not a host
        self._rows: list = []

    def __len__(self) -> int:
        return len(self._rows)

    def _plan(self, shape, spec, props):
        plan = self._plans.get(shape, False)
        if plan is False:
            plan = None
            fields = set(spec)
            names = tuple(props) if props else ()
            if ("topic" in fields and fields <= PLAIN_FIELDS and not ("body" in fields and "bodyBase64" in fields)
                    and DELAY not in names and not any(n in RESERVED_PROPERTIES for n in names)
                    and not any(NAME_VALUE_SEPARATOR in n or PROPERTY_SEPARATOR in n for n in names)):
                plan = Plan(fields, names, self.cluster, self.version)
            self._plans[shape] = plan
        return plan

    def add(self, number: int, spec) -> bool:
        """Take a plain line's message into the batch; False (nothing taken) for any other.
        The checks are spec.to_message's, for the fields a plain line has."""
        if type(spec) is not dict:
            return False
        props = spec.get("properties")
        if props is None:
            plan = self._plan(tuple(spec), spec, None)
        elif type(props) is dict:
            plan = self._plan((tuple(spec), tuple(props)), spec, props)
        else:
            return False
        if plan is None or (props is None and "properties" in spec):
            return False
        topic = spec["topic"]
        if type(topic) is not str:
            return False
        allowed = self._topics.get(topic)
        if allowed is None:
            allowed = self._topics[topic] = self.allow_system_topics or not producer_refused(topic)
        queue = spec.get("queueId", 0)
        born_ts = spec.get("bornTimestamp", 0)
        if not (allowed and type(queue) is int and RANGES["queueId"][0] <= queue <= RANGES["queueId"][1]
                and type(born_ts) is int and RANGES["bornTimestamp"][0] <= born_ts <= RANGES["bornTimestamp"][1]):
            return False
        extra = None   # the optional numbers this line gives
        for field, low, high in plan.numbers:
            value = spec[field]
            if value is None and field == "storeTimestamp":
                continue
            if type(value) is not int or not low <= value <= high:
                return False
            extra = {field: value} if extra is None else {**extra, field: value}
        tags = keys = None
        if plan.tags:   # the plan puts TAGS: it must be non-empty text
            tags = spec["tags"]
            if type(tags) is not str or not tags:
                return False
        if plan.keys:
            keys = spec["keys"]
            if type(keys) is list:
                try:
                    keys = " ".join(keys)
                except TypeError:
                    return False
            if type(keys) is not str or not keys:
                return False
        host = spec["bornHost"] if plan.host else DEFAULT_BORN_HOST
        bits = self._hosts.get(host, False) if type(host) is str else None
        if bits is False:
            bits = self._hosts[host] = host_flag(host)
        if bits is None:
            return False
        if plan.body == "body":
            body = spec["body"]
            if type(body) is not str:
                return False
        elif plan.body:
            try:
                body = base64.b64decode(spec["bodyBase64"], validate=True)
            except (binascii.Error, TypeError, ValueError):
                return False
        else:
            body = ""
        if props:
            values = plan.props(props)
            try:
                "".join(values)      # properties are text: join refuses anything else
            except TypeError:
                return False
            values = (tags, keys, *values, None)
        else:
            values = (tags, keys, None)   # the None: UNIQ_KEY of a line without one
        text = plan.format % plan.values(values)
        if text.count(NAME_VALUE_SEPARATOR) + text.count(PROPERTY_SEPARATOR) != plan.separators:
            return False
        self._rows.append((number, topic, queue, text, *plan.dispatch(values),
                           host, bits, born_ts, body, extra))
        return True

    def take(self) -> tuple[list[int], PlainBatch]:
        """(line numbers, batch) of the lines taken so far; the batcher starts afresh."""
        rows, self._rows = self._rows, []
        numbers, topics, queues, texts, tags, keys, uniq, hosts, host_flags, born_ts, bodies, extras = \
            map(list, zip(*rows))
        body_buf, body_len = _bodies(bodies)
        batch = PlainBatch(topics=topics, queue_ids=queues, body_buf=body_buf, body_len=body_len,
                           properties=texts, tags=tags, keys=keys, uniq=uniq, born_hosts=hosts,
                           sys_flags=host_flags, born_ts=born_ts)
        if any(extras):
            extras = [e or {} for e in extras]
            batch.store_ts = [e.get("storeTimestamp") for e in extras]
            batch.flags = [signed_flag(e.get("flag", 0)) for e in extras]
            batch.reconsume = [e.get("reconsumeTimes", 0) for e in extras]
        return numbers, batch

    def message(self, number: int, spec, raw: bytes | None, prepared: dict):
        """The reference path for a line add() did not take: spec.to_message, with its errors
        worded from the json module's reading of the line (orjson reads some bad numbers
        differently)."""
        try:
            return to_message(spec, line=number, version=self.version, cluster=self.cluster,
                              prepared_offsets=prepared, allow_system_topics=self.allow_system_topics)
        except SpecError as err:
            if raw is not None:
                again = reference_parse(raw, number)
                if again != spec:
                    return self.message(number, again, None, prepared)
            raise UsageError(f"input {err}") from None


def _escaped(text: str) -> str:
    return text.replace("%", "%%")


def host_flag(host: str) -> int | None:
    """The sysFlag bits a born host gives (IPv6), or None when it is not a host."""
    try:
        return brokerprops.sys_flag_for({"bornHost": host})
    except (ValueError, TypeError):
        return None


def _bodies(bodies: list) -> tuple[bytes, np.ndarray]:
    """The bodies' bytes one after the other (text as UTF-8), and each one's length."""
    n = len(bodies)
    if all(type(b) is str for b in bodies):
        joined = "".join(bodies)
        if joined.isascii():
            return joined.encode("ascii"), np.fromiter(map(len, bodies), dtype=np.int64, count=n)
    encoded = [b.encode("utf-8") if type(b) is str else b for b in bodies]
    return b"".join(encoded), np.fromiter(map(len, encoded), dtype=np.int64, count=n)
