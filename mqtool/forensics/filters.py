"""Which rows a command wants: one Filters for dump, export, stats and the Spark data sources
(which push theirs down into it), so that --topic or --since mean the same everywhere."""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.formats.commitlog import Record
from mqtool.storage.settings import parse_time


@dataclass
class Filters:
    """Row filters: brokers, topics and queue ids by equality; store time, commitlog offset and
    queue offset by inclusive integer ranges.  A row without the value (a problem row has no
    topic) never matches a filter on it, as in SQL."""

    brokers: frozenset | None = None
    topics: frozenset | None = None
    queue_ids: frozenset | None = None
    time_range: tuple[int | None, int | None] = (None, None)
    offset_range: tuple[int | None, int | None] = (None, None)
    queue_offset_range: tuple[int | None, int | None] = (None, None)

    _SETS = {"broker": "brokers", "topic": "topics", "queueId": "queue_ids"}
    _RANGES = {"storeTimestamp": "time_range", "commitLogOffset": "offset_range", "queueOffset": "queue_offset_range"}

    @classmethod
    def from_options(cls, topics=(), queue_ids=(), since=None, until=None, offset_from=None, offset_to=None,
                     queue_offset_from=None, queue_offset_to=None) -> "Filters":
        """The filters of the command line: --topic, --queue, --since (inclusive, epoch ms or ISO
        8601), --until (exclusive), --offset-from/--offset-to and --queue-offset-from/-to (the
        upper bounds exclusive)."""
        f = cls()
        if topics:
            f.push("in", "topic", tuple(topics))
        if queue_ids:
            f.push("in", "queueId", tuple(queue_ids))
        for column, lo, hi in (("storeTimestamp", parse_time(since, "--since"), parse_time(until, "--until")),
                               ("commitLogOffset", offset_from, offset_to),
                               ("queueOffset", queue_offset_from, queue_offset_to)):
            if lo is not None:
                f.push("ge", column, lo)
            if hi is not None:
                f.push("lt", column, hi)
        return f

    def push(self, op: str, column: str, value) -> bool:
        """Add `column op value` (op: eq, in, gt, ge, lt, le); False when it cannot be applied here."""
        if column in self._SETS:
            want = str if column != "queueId" else int
            values = [value] if op == "eq" else list(value) if op == "in" else None
            if values is None or not all(isinstance(v, want) and not isinstance(v, bool) or v is None
                                         for v in values):
                return False
            attr = self._SETS[column]
            new = frozenset(v for v in values if v is not None)
            old = getattr(self, attr)
            setattr(self, attr, new if old is None else old & new)
            return True
        if column in self._RANGES and op in ("eq", "gt", "ge", "lt", "le"):
            if not isinstance(value, int) or isinstance(value, bool):
                return False
            lo, hi = getattr(self, self._RANGES[column])
            if op in ("eq", "ge", "gt"):
                bound = value + (op == "gt")
                lo = bound if lo is None else max(lo, bound)
            if op in ("eq", "le", "lt"):
                bound = value - (op == "lt")
                hi = bound if hi is None else min(hi, bound)
            setattr(self, self._RANGES[column], (lo, hi))
            return True
        return False

    @property
    def needs_message(self) -> bool:
        """True when only message rows can match (problem rows have no topic, queue or time)."""
        return (self.topics is not None or self.queue_ids is not None or self.time_range != (None, None)
                or self.queue_offset_range != (None, None))

    def offset_ok(self, offset: int) -> bool:
        lo, hi = self.offset_range
        return (lo is None or offset >= lo) and (hi is None or offset <= hi)

    def time_ok(self, millis: int) -> bool:
        lo, hi = self.time_range
        return (lo is None or millis >= lo) and (hi is None or millis <= hi)

    def queue_ok(self, topic: str, queue_id: int) -> bool:
        return (self.topics is None or topic in self.topics) and (self.queue_ids is None or queue_id in self.queue_ids)

    def queue_offset_ok(self, queue_offset: int) -> bool:
        lo, hi = self.queue_offset_range
        return (lo is None or queue_offset >= lo) and (hi is None or queue_offset <= hi)

    def record_ok(self, record: Record) -> bool:
        return (self.queue_ok(record.topic, record.queue_id) and self.time_ok(record.store_timestamp)
                and self.offset_ok(record.offset) and self.queue_offset_ok(record.queue_offset))

    def file_ok(self, start: int, end: int) -> bool:
        """Can the file covering commitlog offsets [start, end) hold a matching row?"""
        lo, hi = self.offset_range
        return (lo is None or end > lo) and (hi is None or start <= hi)
