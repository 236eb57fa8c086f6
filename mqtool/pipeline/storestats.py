"""`stats`' numbers: per topic and queue, aggregated per partition, merged on the driver.

`scan` runs once per partition (in this process, a local pool or a Spark task)
and returns a small picklable partial; `merge` adds the partials up.  The
partials are sums, minima, maxima, counters and sorted arrays of key hashes,
so merging is exact whatever the partitioning.  Distinct keys are counted by
64-bit hashes of the keys (native/chunkstats: 8 bytes a key on the driver
instead of the key itself; two different keys collide with odds of about n^2 / 2^65).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mqtool.forensics import storeinfo
from mqtool.formats import properties as props
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats.filenames import is_offset_name, name_to_offset
from mqtool.formats.topicnames import DLQ_PREFIX, group_of
from mqtool.forensics.filters import Filters
from mqtool.pipeline.plan import CommitLogPart
from mqtool.pipeline.rows import entries
from mqtool.formats.sysflag import INNER_BATCH
from mqtool.storage import commitlog, dispatchrequest

HOUR_MS = 3_600_000
DAMAGE_KEPT = 1000   # where damage is: the first this many places per store (the counts stay exact)
MIN_BUCKET = 64


def distinct(values) -> np.ndarray:
    """The distinct values of an array, sorted (np.unique, by sorting: numpy 2.4's np.unique hashes
    integers, ~100 times slower on a million key hashes)."""
    values = np.sort(np.asarray(values).ravel())
    if len(values) < 2:
        return values
    keep = np.empty(len(values), dtype=np.bool_)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def size_bucket(size: int) -> int:
    """The histogram bucket of a record size: the smallest power of two >= size (at least 64)."""
    return 1 << max(MIN_BUCKET.bit_length() - 1, (max(size, 1) - 1).bit_length())


@dataclass
class QueueAgg:
    messages: int = 0
    bytes: int = 0
    first: int | None = None
    last: int | None = None
    sizes: dict = field(default_factory=dict)
    hours: dict = field(default_factory=dict)
    hour_bytes: dict = field(default_factory=dict)
    keys: list = field(default_factory=list)   # arrays of key hashes
    keys_distinct: bool = False                # keys is one sorted array of distinct hashes
    records: int = 0    # commitlog records: fewer than messages where an inner batch holds many
    # (sizes count records, hours messages: a record has one size, its messages one store time)

    def add(self, other: "QueueAgg") -> None:
        self.messages += other.messages
        self.records += other.records
        self.bytes += other.bytes
        self.first = other.first if self.first is None else min(self.first, other.first)
        self.last = other.last if self.last is None else max(self.last, other.last)
        for mine, theirs in ((self.sizes, other.sizes), (self.hours, other.hours), (self.hour_bytes, other.hour_bytes)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v
        if other.keys:
            self.keys_distinct = not self.keys and other.keys_distinct
            self.keys.extend(other.keys)

    def settle_keys(self) -> None:
        """keys as one sorted array of distinct hashes (once: later calls cost nothing)."""
        if self.keys and not self.keys_distinct:
            self.keys = [distinct(np.concatenate(self.keys))]
        self.keys_distinct = True

    def distinct_keys(self) -> int:
        """How many distinct keys (settling them: asked again, this costs nothing)."""
        self.settle_keys()
        return int(self.keys[0].size) if self.keys else 0


@dataclass
class StoreAgg:
    store: str
    files: int = 0
    records: int = 0
    damaged_records: int = 0
    problems: int = 0
    blanks: int = 0
    bytes: int = 0
    kinds: dict = field(default_factory=dict)
    damage: list = field(default_factory=list)   # (commitlog offset, bytes, kind), the first DAMAGE_KEPT

    def add(self, other: "StoreAgg") -> None:
        for name in ("files", "records", "damaged_records", "problems", "blanks", "bytes"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.damage = sorted(self.damage + other.damage)[:DAMAGE_KEPT]
        for k, v in other.kinds.items():
            self.kinds[k] = self.kinds.get(k, 0) + v


@dataclass
class Partial:
    queues: dict = field(default_factory=dict)   # (broker, topic, queueId) -> QueueAgg
    stores: dict = field(default_factory=dict)   # broker -> StoreAgg


def scan(part: CommitLogPart, filters: Filters | None = None,
         check_crc: bool = True) -> Partial:
    """The partial stats of one partition: messages that pass their checks (and the filters)
    count per queue; damaged records and other damage count per store.  Runs of records come
    from the compiled scan and are added up by vectorised code (add_chunk)."""
    from mqtool.native import fastscan

    filters = filters or Filters()
    store = StoreAgg(part.store, files=1 if part.path else 0)
    queues: dict = {}
    for entry in entries(part, check_crc, scanner=fastscan):
        if isinstance(entry, fastscan.Chunk):
            add_chunk(entry, part, filters, check_crc, store, queues)
        elif isinstance(entry, Record):
            _add_record(entry, part, filters, check_crc, store, queues)
        elif isinstance(entry, Blank):
            store.blanks += 1
        elif isinstance(entry, commitlog.Problem):
            store.problems += 1
            store.kinds[entry.kind] = store.kinds.get(entry.kind, 0) + 1
            if len(store.damage) < DAMAGE_KEPT:
                store.damage.append((entry.offset, max(entry.skipped, 1), entry.kind))
    for agg in queues.values():
        agg.settle_keys()
    return Partial(queues, {part.broker: store})


def warm_up() -> None:
    """Load the compiled kernels scan uses now: that is start-up, timed apart from stats' work
    (`loadSeconds`), and forked workers inherit them."""
    from mqtool.native import chunkstats

    chunkstats.warm_up()


def _count_problems(store: StoreAgg, found, offset: int, size: int) -> None:
    store.damaged_records += 1
    if len(store.damage) < DAMAGE_KEPT:
        store.damage.append((offset, size, found[0][0]))
    store.problems += len(found)
    for kind, _ in found:
        store.kinds[kind] = store.kinds.get(kind, 0) + 1


def _add_record(entry: Record, part, filters, check_crc: bool, store: StoreAgg, queues: dict) -> None:
    """One record the kernels left to the reference decoder."""
    from mqtool.native.chunkstats import hash_text

    store.records += 1
    store.bytes += entry.total_size
    found = commitlog.record_problems(entry, check_crc)
    if found:
        _count_problems(store, found, entry.offset, entry.total_size)
        return
    if not filters.record_ok(entry):
        return
    agg = queues.setdefault((part.broker, entry.topic, entry.queue_id), QueueAgg())
    ts = entry.store_timestamp
    n = dispatchrequest.messages_held(entry.sys_flag, entry.properties) if entry.sys_flag & INNER_BATCH else 1
    agg.add(QueueAgg(n, entry.total_size, ts, ts, {size_bucket(entry.total_size): 1}, {ts // HOUR_MS: n},
                     {ts // HOUR_MS: entry.total_size}, records=1))
    keys = entry.properties.get(props.KEYS) if entry.properties_bytes else None
    if keys:
        agg.keys.append(np.array([hash_text(k) for k in props.split_keys(keys)], dtype=np.uint64))


def add_chunk(chunk, part, filters, check_crc: bool, store: StoreAgg, queues: dict) -> None:
    """A chunk's records into the partial: damaged ones per store (their problems from
    record_problems), the others that pass the filters per queue (chunkstats, one compiled pass)."""
    from mqtool.forensics import rowblocks
    from mqtool.native import chunkstats

    store.records += chunk.count
    store.bytes += int(chunk.columns["size"].sum())
    good = np.ones(chunk.count, dtype=np.bool_)
    for i, found in rowblocks.chunk_problems(chunk, part.file_from, check_crc).items():
        good[i] = False
        _count_problems(store, found, int(chunk.columns["offset"][i]), int(chunk.columns["size"][i]))
    keep = rowblocks.keep_mask(chunk, filters)
    if keep is not None:
        good &= keep
    (_, group_q, group_row, messages, sizes, first, last, hist, hour_g, hour_h, hour_n, hour_b, key_off,
     key_hash) = chunkstats.stats_of(chunk, good, HOUR_MS)
    aggs = [QueueAgg(int(messages[k]), int(sizes[k]), int(first[k]), int(last[k]),
                     keys=[key_hash[key_off[k]:key_off[k + 1]]], records=int(messages[k])) for k in range(len(group_q))]
    for k, e in zip(*np.nonzero(hist)):
        aggs[k].sizes[size_bucket(1 << int(e))] = int(hist[k, e])
    for k, hour, n, b in zip(hour_g.tolist(), hour_h.tolist(), hour_n.tolist(), hour_b.tolist()):
        aggs[k].hours[hour] = n
        aggs[k].hour_bytes[hour] = b
    for k, agg in enumerate(aggs):
        queues.setdefault((part.broker, chunk.topic(int(group_row[k])), int(group_q[k])), QueueAgg()).add(agg)
    _add_inner_batches(chunk, good, part.broker, queues)


def _add_inner_batches(chunk, good, broker: str, queues: dict) -> None:
    """An inner batch is one record of many messages (dispatchrequest.messages_held): the messages
    it holds beyond the one chunkstats counted, added to its queue and hour."""
    c = chunk.columns
    for i in np.flatnonzero(good & ((c["sys_flag"] & INNER_BATCH) != 0)).tolist():
        if chunk.buf is None:      # (a detached chunk: its properties stayed behind)
            continue
        at, n = int(c["props_pos"][i]), int(c["props_len"][i])
        held = dispatchrequest.messages_held(int(c["sys_flag"][i]), props.decode_properties(
            bytes(chunk.buf[at:at + n]).decode("utf-8", "replace")))
        if held > 1:
            agg = queues[(broker, chunk.topic(i), int(c["queue_id"][i]))]
            hour = int(c["store_ts"][i]) // HOUR_MS
            agg.messages += held - 1
            agg.hours[hour] = agg.hours.get(hour, 0) + held - 1


def merge(partials) -> Partial:
    total = Partial()
    for partial in partials:
        for key, agg in partial.queues.items():
            if key in total.queues:
                total.queues[key].add(agg)
            else:
                total.queues[key] = agg
        for broker, agg in partial.stores.items():
            if broker in total.stores:
                total.stores[broker].add(agg)
            else:
                total.stores[broker] = agg
    return total


def _hour_iso(hour: int) -> str:
    return (storeinfo.iso(hour * HOUR_MS) or str(hour * HOUR_MS)).replace(".000Z", "Z")


def _line(kind: str, agg: QueueAgg, total_messages: int, total_bytes: int, **ident) -> dict:
    hours = sorted(agg.hours.items())
    return {"type": kind, **ident, "messages": agg.messages, "records": agg.records,
            "messagesPercent": round(100 * agg.messages / total_messages, 2) if total_messages else 0.0,
            "bytes": agg.bytes,
            "bytesPercent": round(100 * agg.bytes / total_bytes, 2) if total_bytes else 0.0,
            "firstStoreTimestamp": agg.first, "lastStoreTimestamp": agg.last,
            "firstStoreTime": storeinfo.iso(agg.first), "lastStoreTime": storeinfo.iso(agg.last),
            "sizeHistogram": {str(k): v for k, v in sorted(agg.sizes.items())},
            "distinctKeys": agg.distinct_keys(),
            "messagesPerHour": {_hour_iso(h): n for h, n in hours},
            "bytesPerHour": {_hour_iso(h): agg.hour_bytes.get(h, 0) for h, _ in hours}}


def timer_lines(stores, topics=None) -> list[dict]:
    """A `timer` line per store and real topic: the timer messages still pending there (the 5.x
    timer store's units not delivered yet, counted by the REAL_TOPIC of their records)."""
    lines = []
    for store in stores:
        summary = storeinfo.timer_summary(store.layout())
        if summary is None:
            continue
        for topic, n in summary["byTopic"].items():
            if topics is None or topic in topics:
                lines.append({"type": "timer", "broker": store.broker, "topic": topic, "pending": n})
    return lines


def batch_queue_lines(stores, topics=None) -> list[dict]:
    """A `batch_queue` line per store and batch consume queue (5.x BatchCQ topics): its min and
    max offsets in messages as the broker reports them (an inner batch is one record of many
    messages, so they count more than the queue's records)."""
    lines = []
    for store in stores:
        layout = store.layout()
        files = [f for f in layout.commitlog_files() if is_offset_name(f.name)]
        phy_min = name_to_offset(files[0].name) if files else 0
        for q in storeinfo.batch_queues(layout, phy_min):
            if topics is None or q["topic"] in topics:
                lines.append({"type": "batch_queue", "broker": store.broker, "topic": q["topic"],
                              "queueId": q["queueId"], "cqType": q["cqType"], "minOffset": q["minOffset"],
                              "maxOffset": q["maxOffset"], "messages": q["maxOffset"] - q["minOffset"]})
    return lines


def group_lines(topic_lines: list[dict]) -> list[dict]:
    """A `group` line per broker and consumer group that has a retry or dead-letter topic: the
    messages its consumers sent back that were delivered into %RETRY%group (`retries`) and those that
    went to %DLQ%group (`deadLetters`), in all and per hour.  The topic names say the group
    (formats/topicnames.group_of), so this is a sum of stats' own topic lines."""
    groups: dict = {}
    for line in topic_lines:
        group = group_of(line["topic"])
        if group is None:
            continue
        kind = "deadLetters" if line["topic"].startswith(DLQ_PREFIX) else "retries"
        g = groups.setdefault((line["broker"], group), {"type": "group", "broker": line["broker"], "group": group,
                                                       "retries": 0, "deadLetters": 0, "retriesPerHour": {},
                                                       "deadLettersPerHour": {}})
        g[kind] += line["messages"]
        for hour, n in line["messagesPerHour"].items():
            g[kind + "PerHour"][hour] = g[kind + "PerHour"].get(hour, 0) + n
    return [groups[k] for k in sorted(groups)]


def report(stats: Partial, timer: list | None = None, batch: list | None = None) -> list[dict]:
    """The JSON lines of `stats --json`: a `queue` line per broker, topic and queue, a `topic` line
    per broker and topic, a `store` line per store, a `group` line per consumer group with retries or
    dead letters, a `timer` line per store and real topic with
    pending timer messages, a `batch_queue` line per batch consume queue, and a final `total`."""
    messages = sum(agg.messages for agg in stats.queues.values())
    size = sum(agg.bytes for agg in stats.queues.values())
    lines = []
    topics: dict = {}
    queue_counts: dict = {}
    for (broker, topic, queue_id), agg in sorted(stats.queues.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        lines.append(_line("queue", agg, messages, size, broker=broker, topic=topic, queueId=queue_id))
        topics.setdefault((broker, topic), QueueAgg()).add(agg)
        queue_counts[(broker, topic)] = queue_counts.get((broker, topic), 0) + 1
    total = QueueAgg()
    for (broker, topic), agg in topics.items():
        line = _line("topic", agg, messages, size, broker=broker, topic=topic)
        line["queues"] = queue_counts[(broker, topic)]
        lines.append(line)
        total.add(agg)
    for broker, agg in sorted(stats.stores.items()):
        lines.append({"type": "store", "broker": broker, "store": agg.store, "files": agg.files,
                      "records": agg.records, "damagedRecords": agg.damaged_records, "problems": agg.problems,
                      "problemKinds": dict(sorted(agg.kinds.items())), "blanks": agg.blanks,
                      "bytes": agg.bytes})
    lines.extend(group_lines([l for l in lines if l["type"] == "topic"]))
    lines.extend(timer or [])
    lines.extend(batch or [])
    line = _line("total", total, total.messages, total.bytes)
    line["pendingTimerMessages"] = sum(t["pending"] for t in timer or [])
    line["queues"] = len(stats.queues)
    line["topics"] = len(topics)
    line["problems"] = sum(s.problems for s in stats.stores.values())
    lines.append(line)
    return lines
