"""Consumer lag offline: what `mqadmin consumerProgress` tells of a live broker, from the store.

Per consumer group, topic and queue: the committed offset (config/consumerOffset.json, or
lmqConsumerOffset.json; storage/offsets.py reads them as a broker does), the queue's min and max
offsets (the broker's: the first unit at or above the commitlog's minimum offset, one past the last
valid unit; for a batch consume queue, message offsets: msgBaseOffset, and msgBaseOffset + batchSize
of the last unit), the lag in messages and in bytes (the sizes the units between hold) and the store
time of the oldest message not consumed yet.  What a broker does with each offset is said:

- below-min: the messages between were deleted before the group read them; the consumer's pull gets
  OFFSET_TOO_SMALL and goes on from the min offset: `skippedMessages` are lost to it;
- above-max: typical after a recovery cut the queue; the pull gets OFFSET_OVERFLOW_BADLY and the
  consumer waits or resets, depending on its settings (`beyondMaxBy`);
- never-committed: a queue of a topic the group consumes holds no offset of it (the consumer starts
  where its ConsumeFromWhere says; the lag counts the whole queue);
- unknown-topic / unknown-queue: an offset of a queue the store does not hold (the broker sees an
  empty queue, min = max = 0: an offset above 0 is out of range).

The 4.x delay levels (config/delayOffset.json) are the delay scheduler's progress in
SCHEDULE_TOPIC_XXXX, one queue per level, and come out the same way (`delay` lines).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from itertools import accumulate

from mqtool.formats.consumequeue import UNIT_SIZE, UNIT_STRUCT, unit_dtype
from mqtool.formats.commitlog import Record
from mqtool.formats.topicnames import SCHEDULE_TOPIC
from mqtool.storage import batchqueue, commitlog, consumequeue, offsets
from mqtool.storage.consumequeue import queue_min_offset

OK, BELOW_MIN, ABOVE_MAX, NEVER, UNKNOWN_TOPIC, UNKNOWN_QUEUE, NEGATIVE = (
    "ok", "below-min", "above-max", "never-committed", "unknown-topic", "unknown-queue", "negative")
OUT_OF_RANGE = (BELOW_MIN, ABOVE_MAX, NEGATIVE)
DELAY_GROUP = "(delay scheduler)"
_FEW = 512
_units = functools.cache(unit_dtype)


@dataclass
class QueueLag:
    group: str
    topic: str
    queue_id: int
    committed: int | None          # None: never committed
    status: str = OK
    queue_type: str = "ConsumeQueue"   # or BatchCQ
    min_offset: int = 0
    max_offset: int = 0
    lag_messages: int = 0
    lag_bytes: int = 0
    oldest_unconsumed: int | None = None   # store time (ms) of the first message not consumed
    skipped: int = 0               # below-min: messages deleted before the group read them
    beyond: int = 0                # above-max: by how much
    level: int | None = None       # delay lines: the delay level
    delay_ms: int | None = None

    @property
    def out_of_range(self) -> bool:
        return self.status in OUT_OF_RANGE or (self.status in (UNKNOWN_TOPIC, UNKNOWN_QUEUE)
                                               and (self.committed or 0) > 0)

    def to_json(self) -> dict:
        out = {"type": "lag" if self.level is None else "delay", "group": self.group, "topic": self.topic,
               "queueId": self.queue_id, "queueType": self.queue_type, "status": self.status,
               "committedOffset": self.committed, "minOffset": self.min_offset, "maxOffset": self.max_offset,
               "lagMessages": self.lag_messages, "lagBytes": self.lag_bytes,
               "oldestUnconsumedTimestamp": self.oldest_unconsumed, "skippedMessages": self.skipped,
               "beyondMaxBy": self.beyond, "outOfRange": self.out_of_range}
        if self.level is not None:
            out.update(level=self.level, delayMs=self.delay_ms)
        return out


@dataclass
class GroupLag:
    group: str
    topics: set = field(default_factory=set)
    queues: int = 0
    lag_messages: int = 0
    lag_bytes: int = 0
    oldest_unconsumed: int | None = None
    out_of_range: int = 0
    never_committed: int = 0
    skipped: int = 0

    def add(self, q: QueueLag) -> None:
        self.topics.add(q.topic)
        self.queues += 1
        self.lag_messages += q.lag_messages
        self.lag_bytes += q.lag_bytes
        if q.oldest_unconsumed is not None:
            self.oldest_unconsumed = min(self.oldest_unconsumed or q.oldest_unconsumed, q.oldest_unconsumed)
        self.out_of_range += q.out_of_range
        self.never_committed += q.status == NEVER
        self.skipped += q.skipped

    def to_json(self) -> dict:
        return {"type": "group", "group": self.group, "topics": len(self.topics), "queues": self.queues,
                "lagMessages": self.lag_messages, "lagBytes": self.lag_bytes,
                "oldestUnconsumedTimestamp": self.oldest_unconsumed, "outOfRange": self.out_of_range,
                "neverCommitted": self.never_committed, "skippedMessages": self.skipped}


@dataclass
class LagReport:
    queues: list[QueueLag] = field(default_factory=list)     # consumer groups' lines
    delays: list[QueueLag] = field(default_factory=list)     # the delay scheduler's levels
    files: list = field(default_factory=list)                # storage.offsets.OffsetFile
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)           # not problems: what there is not to show

    def groups(self) -> list[GroupLag]:
        found: dict[str, GroupLag] = {}
        for q in self.queues:
            found.setdefault(q.group, GroupLag(q.group)).add(q)
        return [found[name] for name in sorted(found)]

    def summary(self) -> dict:
        lines = self.queues + self.delays
        return {"type": "summary", "groups": len({q.group for q in self.queues}), "queues": len(self.queues),
                "lagMessages": sum(q.lag_messages for q in self.queues),
                "lagBytes": sum(q.lag_bytes for q in self.queues),
                "outOfRange": sum(q.out_of_range for q in lines),
                "neverCommitted": sum(q.status == NEVER for q in self.queues),
                "unknownQueues": sum(q.status in (UNKNOWN_TOPIC, UNKNOWN_QUEUE) for q in self.queues),
                "delayLagMessages": sum(q.lag_messages for q in self.delays),
                "offsetFiles": [f.to_json() for f in self.files], "problems": self.problems,
                "notes": self.notes}


# ---------------------------------------------------------------------- reading queues

class _Queue:
    """One queue as lag reads it: its min and max offsets, the bytes from an offset to its end, the
    store time of the message at an offset."""

    def __init__(self, kind: str, handle, min_offset: int, max_offset: int):
        self.kind, self.handle, self.min, self.max = kind, handle, min_offset, max_offset

    def tail(self, starts: list[int], log) -> dict[int, tuple[int, int | None]]:
        """{start: (bytes of the units from start to the max offset, store time at start)}."""
        starts = sorted({s for s in starts if s < self.max})
        if not starts:
            return {}
        if self.kind == "BatchCQ":
            return self._batch_tail(starts)
        partial, totals, where = {}, [], {}
        s0, end = starts[0], self.max
        for mf in self.handle.files.files:
            f0 = mf.file_from_offset // UNIT_SIZE
            lo, hi = max(f0, s0), min(f0 + mf.file_size // UNIT_SIZE, end)
            if lo >= hi:
                continue
            if hi - lo <= _FEW:      # a few units: plain Python costs less than numpy's calls
                sizes = [size for _, size, _ in UNIT_STRUCT.iter_unpack(
                    mf.buf[(lo - f0) * UNIT_SIZE:(hi - f0) * UNIT_SIZE])]
                suffix = list(accumulate(reversed(sizes)))[::-1]
            else:                    # numpy here: lag of a store of few messages never loads it
                import numpy as np

                sizes = np.frombuffer(mf.buf, dtype=_units(), count=hi - lo, offset=(lo - f0) * UNIT_SIZE)["size"]
                suffix = np.cumsum(sizes[::-1].astype(np.int64))[::-1]
            for s in starts:
                if lo <= s < hi:
                    partial[s], where[s] = int(suffix[s - lo]), len(totals)
            totals.append(int(suffix[0]))
        after = list(accumulate(reversed(totals)))[::-1] + [0]    # bytes of the files after each
        result = {}
        for s in starts:
            if s not in partial:
                continue
            unit = self.handle.unit_at(s)
            record = commitlog.record_at(log, unit.commitlog_offset) if unit is not None else None
            stored = record.store_timestamp if isinstance(record, Record) else None
            result[s] = (partial[s] + after[where[s] + 1], stored)
        return result

    def _batch_tail(self, starts: list[int]) -> dict[int, tuple[int, int | None]]:
        """Batch units hold message offsets (msgBaseOffset, batchSize) and their store time: a start
        inside a batch counts the batch's whole record, as the consumer fetches it again."""
        import numpy as np   # a batch queue's units are read as numpy's (batchqueue.units)

        result = {s: [0, None] for s in starts}
        for mf in self.handle.files.files:
            units = self.handle.units(mf)
            units = units[batchqueue.valid_units(units)]
            if not len(units):
                continue
            ends = units["msgBaseOffset"] + units["batchSize"].astype(np.int64)
            sizes = np.cumsum(units["size"][::-1].astype(np.int64))[::-1]
            for s in starts:
                first = int(np.searchsorted(ends, s, side="right"))
                if first < len(units):
                    result[s][0] += int(sizes[first])
                    if result[s][1] is None:
                        result[s][1] = int(units["storeTime"][first])
        return {s: (b, t) for s, (b, t) in result.items()}

    def close(self) -> None:
        self.handle.close()


def _open_queues(layout, phy_min: int, wanted):
    """(topic, queueId) -> _Queue for the queues `wanted` accepts (consume queues and batch queues)."""
    size = batchqueue.file_size(layout)
    for topic, queue_id, directory in batchqueue.queues(layout):
        if wanted(topic):
            bq = batchqueue.BatchQueue(topic, queue_id, directory, size)
            # a batch queue's offsets are message offsets: correctMinOffset's answer, and the end of
            # its last unit (what correctMinOffset answers when no unit is at or above the offset)
            yield (topic, queue_id), _Queue("BatchCQ", bq, batchqueue.min_offset(bq, phy_min),
                                            batchqueue.max_offset(bq))
    size = layout.consume_queue_file_size()
    for topic, queue_id, directory in layout.consume_queues():
        if wanted(topic):
            cq = consumequeue.ConsumeQueue(topic, queue_id, directory, size)
            yield (topic, queue_id), _Queue("ConsumeQueue", cq, queue_min_offset(cq, phy_min), cq.max_offset())


def _judge(line: QueueLag, queue: _Queue | None, topic_known: bool) -> int | None:
    """Fill in the queue's offsets and the status; the offset consumption goes on from (None: none)."""
    if queue is None:
        line.status = UNKNOWN_QUEUE if topic_known else UNKNOWN_TOPIC
        line.beyond = max(0, line.committed or 0)
        return None
    line.queue_type, line.min_offset, line.max_offset = queue.kind, queue.min, queue.max
    if line.committed is None:
        line.status = NEVER
        start = queue.min
    elif line.committed < 0:       # no message has one: a damaged or edited file, not deleted messages
        line.status = NEGATIVE
        start = queue.min
    elif line.committed < queue.min:
        line.status, line.skipped = BELOW_MIN, queue.min - line.committed
        start = queue.min
    elif line.committed > queue.max:
        line.status, line.beyond = ABOVE_MAX, line.committed - queue.max
        return None
    else:
        start = line.committed
    line.lag_messages = queue.max - start
    return start


# ---------------------------------------------------------------------- the report

def compute(layout, *, groups=None, topics=None) -> LagReport:
    """The lag of every group (or of `groups`) on every topic (or `topics`), and the delay levels'."""
    consumequeue.require_files(layout)
    report = LagReport()
    found = offsets.consumer_offsets(layout)
    report.files = list(found.files)
    for f in found.files:
        if f.error:
            report.problems.append(f"config/{f.name} cannot be read ({f.error}), nor its .bak: "
                                   "no consumer offsets")
        elif f.note:
            report.problems.append(f"config/{f.note}")
        elif not f.exists and groups:     # asked for a group, and there is nothing to show of it
            report.problems.append(f"config/{f.name} is missing: no consumer offsets, none of group(s) "
                                   f"{', '.join(sorted(groups))}")
        elif not f.exists:   # a broker nobody has consumed from yet: nothing is wrong
            report.notes.append(f"config/{f.name} is missing: no consumer offsets (no consumer has "
                                "committed one yet)")
        elif not f.read:
            report.problems.append(f"config/{f.name} is empty, and so is its .bak: no consumer offsets")
    levels, delay_file = offsets.delay_offsets(layout)
    if delay_file.exists or delay_file.read:
        report.files.append(delay_file)
        if delay_file.error:
            report.problems.append(f"config/{delay_file.name} cannot be read ({delay_file.error})")
        elif delay_file.note:
            report.problems.append(f"config/{delay_file.note}")

    groups, topics = set(groups or ()), set(topics or ())
    table = {(t, g): q for (t, g), q in found.table.items()
             if (not groups or g in groups) and (not topics or t in topics)}
    consumed = {t for t, _ in table}
    delay_wanted = levels and (not groups or DELAY_GROUP in groups) and (not topics or SCHEDULE_TOPIC in topics)
    wanted = consumed | ({SCHEDULE_TOPIC} if delay_wanted else set())

    by_queue: dict[tuple[str, int], list[QueueLag]] = {}
    for (topic, group), committed in sorted(table.items()):
        for queue_id, offset in sorted(committed.items()):
            by_queue.setdefault((topic, queue_id), []).append(QueueLag(group, topic, queue_id, offset))
    if delay_wanted:
        delays_ms = _delay_levels(layout)
        for level, offset in sorted(levels.items()):
            line = QueueLag(DELAY_GROUP, SCHEDULE_TOPIC, offsets.level_queue(level), offset, level=level,
                            delay_ms=delays_ms[level - 1] if 0 < level <= len(delays_ms) else None)
            by_queue.setdefault((line.topic, line.queue_id), []).append(line)
            report.delays.append(line)
    group_topics: dict[str, set] = {}
    for topic, group in table:
        group_topics.setdefault(topic, set()).add(group)

    log = commitlog.open_queue(layout)
    try:
        phy_min = max(log.min_offset, 0) if log.files else 0
        seen_topics = set()
        for key, queue in _open_queues(layout, phy_min, wanted.__contains__):
            try:
                seen_topics.add(key[0])
                lines = by_queue.pop(key, [])
                have = {q.group for q in lines}
                lines += [QueueLag(g, key[0], key[1], None) for g in sorted(group_topics.get(key[0], ()))
                          if g not in have]
                starts = {id(q): _judge(q, queue, True) for q in lines}
                tails = queue.tail([s for s in starts.values() if s is not None], log)
                for q in lines:
                    q.lag_bytes, q.oldest_unconsumed = tails.get(starts[id(q)], (0, None))
                    if q.level is None:
                        report.queues.append(q)
            finally:
                queue.close()
        for (topic, _), lines in by_queue.items():    # offsets of queues the store does not hold
            for q in lines:
                _judge(q, None, topic in seen_topics)
                if q.level is None:
                    report.queues.append(q)
    finally:
        log.close()
    report.queues.sort(key=lambda q: (q.group, q.topic, q.queue_id))
    for q in report.queues + report.delays:
        if q.out_of_range:
            report.problems.append(_problem(q))
    return report


def _delay_levels(layout) -> list[int]:
    try:
        return layout.config.delay_levels_ms()
    except Exception:  # noqa: BLE001 - a bad messageDelayLevel: the levels are shown without their delay
        return []


def _problem(q: QueueLag) -> str:
    who = f"delay level {q.level}" if q.level is not None else f"group {q.group}"
    where = f"{q.topic}/{q.queue_id}"
    if q.status == NEGATIVE:
        return (f"{who} on {where}: offset {q.committed} is negative, and no message has a queue offset below 0 "
                f"(the offsets file is damaged or was edited); its lag is counted from the queue's min offset "
                f"{q.min_offset}")
    if q.status == BELOW_MIN:
        return (f"{who} on {where}: offset {q.committed} is below the queue's min offset {q.min_offset}: "
                f"{q.skipped} message(s) were deleted before it read them (the consumer skips them)")
    if q.status == ABOVE_MAX:
        return (f"{who} on {where}: offset {q.committed} is {q.beyond} above the queue's max offset "
                f"{q.max_offset} (after a recovery cut the queue? the consumer waits or resets, as its "
                "settings say)")
    return f"{who} on {where}: offset {q.committed} of a queue the store does not hold ({q.status})"
