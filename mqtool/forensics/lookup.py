"""Finding messages: by key (through the index, or by a commitlog scan), by offset message
id, and by queue offset through a consume queue.

The logic behind `lookup-by-key`, `lookup-by-id` and `get`, kept free of output so that it
can be called in-process (tests, benchmarks).  A `StoreReader` maps the commitlog files and
the index files once; each lookup after that reads only the pages it needs.

Every answer is re-checked against the commitlog: an index entry matches on a 32-bit hash
only (`Ωa` and `ΪB` collide), so a hit counts only when the record at its offset is a valid
record of the topic whose KEYS or UNIQ_KEY holds the key; a consume queue unit counts only
when the record at its offset has the unit's size, topic, queue and queue offset.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from mqtool.errors import MqError
from mqtool.formats import commitlog as fmt
from mqtool.formats import properties as props
from mqtool.formats import sysflag
from mqtool.formats.commitlog import Blank, Record, RecordError
from mqtool.formats.consumequeue import is_valid_unit
from mqtool.formats.filenames import is_index_name
from mqtool.formats.index import index_key
from mqtool.storage import batchqueue, commitlog, consumequeue
from mqtool.storage.commitlog import Problem
from mqtool.storage.fsutil import shown_path
from mqtool.storage.indexfile import IndexFile, query_offsets
from mqtool.storage.topics import is_safe_directory_name

LONG_MAX = (1 << 63) - 1
MAX_MSGS_NUM_BATCH = 64  # the broker's maxMsgsNumBatch: what queryMessage returns at most


@dataclass
class Found:
    """A message the lookup found; `problems` are the checks it fails (body CRC,
    physical-offset field, a consume queue unit that disagrees with it)."""

    record: Record
    problems: list[tuple[str, str]] = field(default_factory=list)
    extra: dict = field(default_factory=dict)   # stable extra JSON fields (matchedKey, ...)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class KeyResult:
    """The answer to a key lookup, with the count of everything left out and why."""

    topic: str | None
    key: str
    source: str                    # "index" or "scan"
    messages: list[Found] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    hits: int = 0                  # raw index answers (or matching records of a scan)
    duplicates: int = 0            # the same offset answered again
    dropped: int = 0               # hash collisions: a record of another topic or key
    expired_offsets: list[int] = field(default_factory=list)   # below the commitlog's first file (deleted)
    index_files: int = 0

    def summary(self) -> dict:
        return {"type": "summary", "topic": self.topic, "key": self.key, "source": self.source,
                "found": len(self.messages), "hits": self.hits, "duplicates": self.duplicates,
                "dropped": self.dropped, "expired": self.expired, "problems": self.problem_count,
                "indexFiles": self.index_files}

    @property
    def expired(self) -> int:
        return len(self.expired_offsets)

    @property
    def problem_count(self) -> int:
        return len(self.problems) + sum(1 for m in self.messages if not m.ok)


@dataclass
class GetResult:
    """getMessage's answer: its status (RocketMQ's GetMessageStatus names), the queue's
    offsets, and the messages or problems at each queue offset read."""

    topic: str
    queue_id: int
    status: str
    min_offset: int = 0
    max_offset: int = 0
    items: list = field(default_factory=list)   # Found or Problem, in queue order
    next_offset: int = 0

    @property
    def problems(self) -> list[Problem]:
        """Units that are damaged or point at no record (not those of deleted messages)."""
        return [i for i in self.items if isinstance(i, Problem) and i.kind != "expired"]

    @property
    def expired(self) -> int:
        """Units whose message was deleted with its commitlog file (the broker's min offset
        correction hides them; the consume queue file still holds them)."""
        return sum(1 for i in self.items if isinstance(i, Problem) and i.kind == "expired")

    @property
    def problem_count(self) -> int:
        return len(self.problems) + sum(1 for i in self.items if isinstance(i, Found) and not i.ok)

    def summary(self) -> dict:
        return {"type": "summary", "topic": self.topic, "queueId": self.queue_id, "status": self.status,
                "minOffset": self.min_offset, "maxOffset": self.max_offset, "nextOffset": self.next_offset,
                "found": sum(1 for i in self.items if isinstance(i, Found)), "expired": self.expired,
                "problems": self.problem_count}


def matched_by(record: Record, topic: str | None, key: str) -> str | None:
    """How the record holds the key ("UNIQ_KEY" or "KEYS", split as the index splits them),
    or None; topic None matches any topic."""
    if topic is not None and record.topic != topic:
        return None
    properties = record.properties if record.properties_bytes else {}
    if properties.get(props.UNIQ_KEY) == key:
        return "UNIQ_KEY"
    if key in props.split_keys(properties.get(props.KEYS)):
        return "KEYS"
    return None


class StoreReader:
    """A store opened read-only for lookups: files are mapped on first use and kept mapped
    until close(), so repeated lookups cost only their own reads."""

    def __init__(self, layout):
        self.layout = layout
        self.commitlog = commitlog.open_queue(layout)
        self._index: list[IndexFile] | None = None
        self.index_problems: list[Problem] = []
        self._queues: dict[tuple[str, int], consumequeue.ConsumeQueue | None] = {}
        self._batch: dict[tuple[str, int], batchqueue.BatchQueue | None] = {}
        self._ranges: dict[tuple[str, int], tuple[int, int]] = {}
        self._shown: dict = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.commitlog.close()
        for f in self._index or []:
            f.close()
        for cq in [*self._queues.values(), *self._batch.values()]:
            if cq is not None:
                cq.close()
        self._index, self._queues, self._batch = [], {}, {}

    def display(self, path) -> str:
        """path relative to the store, as answers name files (once per file: every record read names one)."""
        shown = self._shown.get(path)
        if shown is None:
            shown = self._shown[path] = shown_path(path, self.layout.root)
        return shown

    # ------------------------------------------------------------- commitlog
    def record_at(self, offset: int) -> Record | Problem:
        """The record that starts at commitlog offset, or a Problem saying what is there."""
        mf = self.commitlog.find_by_offset(offset)
        if mf is None:
            where = self.display(self.layout.commitlog_dirs[0]) if self.layout.commitlog_dirs else "commitlog"
            first = self.commitlog.min_offset
            if 0 <= offset < first:
                what = f"offset {offset} is below the commitlog's first file (starts at {first}): deleted"
                return Problem("expired", where, 0, offset, what)
            last = self.commitlog.files[-1].file_end_offset if self.commitlog.files else 0
            return Problem("outside-commitlog", where, 0, offset,
                           f"offset {offset} is outside the commitlog's files ({first} .. {last})")
        pos = offset - mf.file_from_offset
        path = self.display(mf.path)
        try:
            entry = fmt.decode_entry(mf.buf, pos, mf.file_size, mf.file_from_offset)
        except RecordError as err:
            return Problem("not-a-record", path, pos, offset, f"no record starts here: {err.reason}")
        if isinstance(entry, Record):
            return entry
        if isinstance(entry, Blank):
            return Problem("not-a-record", path, pos, offset, "a BLANK end-of-file record starts here")
        return Problem("not-a-record", path, pos, offset, "beyond the end of the written data")

    def found(self, record: Record, **extra) -> Found:
        """The record with its checks and where it is (file, fileOffset), plus extra fields."""
        mf = self.commitlog.find_by_offset(record.offset)
        location = {"file": self.display(mf.path), "fileOffset": record.offset - mf.file_from_offset} \
            if mf is not None else {}
        return Found(record, commitlog.record_problems(record), {**location, **extra})

    # ----------------------------------------------------------------- index
    def index_files(self) -> list[IndexFile]:
        """The index files, oldest first, mapped once; damaged ones are in index_problems."""
        if self._index is None:
            self._index = []
            infos = [f for f in self.layout.index_files() if is_index_name(f.name)]
            try:
                slots, entries = self.layout.index_geometry()
            except MqError as exc:   # sizes that fit no geometry: no file can be read
                self.index_problems.append(Problem("bad-index-file", self.display(exc.path or "index"), 0, None,
                                                   exc.message))
                infos = []
            for info in infos:
                try:
                    f = IndexFile(info.path, slots, entries)
                except MqError as exc:
                    self.index_problems.append(Problem("bad-index-file", self.display(info.path),
                                                       exc.offset or 0, None, exc.message))
                    continue
                if not f.size_ok:
                    self.index_problems.append(Problem(
                        "bad-index-file", self.display(info.path), 0, None,
                        f"index file is {f.size} bytes, expected {f.expected_size}"))
                for where, what, expected, found in f.header_problems(newest=info is infos[-1]):
                    self.index_problems.append(Problem("bad-index-header", self.display(info.path), where, None,
                                                       f"{what} (expected {expected}, found {found})"))
                self._index.append(f)
        return self._index

    def by_key(self, topic: str, key: str, *, max_num: int = MAX_MSGS_NUM_BATCH, begin: int = 0,
               end: int = LONG_MAX) -> KeyResult:
        """DefaultMessageStore.queryMessage (without its cap on max_num), then the re-check:
        each offset once, in commitlog order; collisions dropped and counted."""
        files = self.index_files()
        result = KeyResult(topic, key, "index", problems=list(self.index_problems), index_files=len(files))
        offsets = query_offsets(files, index_key(topic, key), max_num, begin, end)
        result.hits = len(offsets)
        unique = sorted(set(offsets))
        result.duplicates = len(offsets) - len(unique)
        for offset in unique:
            entry = self.record_at(offset)
            if isinstance(entry, Problem):
                if entry.kind == "expired":
                    result.expired_offsets.append(offset)
                else:
                    entry.details["indexKey"] = index_key(topic, key)
                    result.problems.append(entry)
                continue
            how = matched_by(entry, topic, key)
            if how is None:
                result.dropped += 1
                continue
            result.messages.append(self.found(entry, matchedKey=key, matchedBy=how))
        return result

    # ------------------------------------------------------------------ scan
    def records(self, problems: list, progress=None):
        """Every record of the commitlog, in order: the one walk the scans share. What is not a
        record goes to problems; progress(offset) is called about once a MiB."""
        next_report = 0
        for entry in commitlog.walk(self.commitlog, path_display=self.display):
            if isinstance(entry, Problem):
                problems.append(entry)
            elif isinstance(entry, Record):
                if progress is not None and entry.offset >= next_report:
                    progress(entry.offset)
                    next_report = entry.offset + (1 << 20)
                yield entry

    def scan(self, topic: str | None, key: str, *, max_num: int | None = None, begin: int = 0,
             end: int = LONG_MAX, uniq_only: bool = False, progress=None) -> KeyResult:
        """The key lookup without the index: every record of the commitlog, in order.

        Finds what the index would (rollback records are not indexed, so not found here
        either), filtered on the exact store time; with max_num the newest max_num
        matches are kept.  topic None: any topic (only sensible with uniq_only).
        progress(offset) is called now and then with the walk's position."""
        result = KeyResult(topic, key, "scan")
        # bytes that are not UTF-8 on the command line come as surrogate escapes: the same bytes
        topic_bytes = topic.encode("utf-8", "surrogateescape") if topic is not None else None
        needle = key.encode("utf-8", "surrogateescape")
        kept: deque[Record] = deque(maxlen=max_num)
        for entry in self.records(result.problems, progress):
            if needle not in entry.properties_bytes:     # cheap test before decoding properties
                continue
            if topic_bytes is not None and entry.topic_bytes != topic_bytes:
                continue
            if sysflag.transaction_type(entry.sys_flag) == sysflag.TRANSACTION_ROLLBACK:
                continue
            if not begin <= entry.store_timestamp <= end:
                continue
            how = matched_by(entry, topic, key)
            if how is None or (uniq_only and how != "UNIQ_KEY"):
                continue
            result.hits += 1
            kept.append(entry)
        result.messages = [self.found(r, matchedKey=key, matchedBy=matched_by(r, topic, key))
                           for r in kept]
        return result

    # --------------------------------------------------------- consume queue
    def consume_queue(self, topic: str, queue_id: int) -> consumequeue.ConsumeQueue | None:
        """The queue's files, mapped once (None when the queue is not on disk)."""
        k = (topic, queue_id)
        if k not in self._queues:
            consumequeue.require_files(self.layout)
            directory = self.layout.consumequeue_dir / topic / str(queue_id)
            # a name that is no valid topic (`..`, `a/b`) names no queue: never a path out of the store
            exists = is_safe_directory_name(topic) and queue_id >= 0 and directory.is_dir()
            self._queues[k] = consumequeue.ConsumeQueue(topic, queue_id, directory,
                                                        self.layout.consume_queue_file_size()) \
                if exists else None
        return self._queues[k]

    def batch_queue(self, topic: str, queue_id: int) -> batchqueue.BatchQueue | None:
        """A BatchCQ topic's queue, loaded once (None when it is not on disk)."""
        k = (topic, queue_id)
        if k not in self._batch:
            directory = batchqueue.directory(self.layout) / topic / str(queue_id)
            exists = is_safe_directory_name(topic) and queue_id >= 0 and directory.is_dir()
            self._batch[k] = batchqueue.BatchQueue(topic, queue_id, directory, batchqueue.file_size(self.layout)) \
                if exists else None
        return self._batch[k]

    def get(self, topic: str, queue_id: int, offset: int, count: int = 1) -> GetResult:
        """DefaultMessageStore.getMessage for queue offsets offset .. offset+count-1 (without
        subscription filters), each unit checked against the record it points at.  A batch
        queue's offsets count messages: the unit holding a queue offset gives its whole record
        (an inner batch once, for all its messages)."""
        bq = self.batch_queue(topic, queue_id)
        cq = self.consume_queue(topic, queue_id) if bq is None else None
        if cq is None and bq is None:
            return GetResult(topic, queue_id, "NO_MATCHED_LOGIC_QUEUE", next_offset=offset)
        if (topic, queue_id) not in self._ranges:   # max_offset reads the last file: once per reader
            self._ranges[topic, queue_id] = (cq.min_offset(), cq.max_offset()) if bq is None else \
                (batchqueue.min_offset(bq, max(self.commitlog.min_offset, 0)), batchqueue.max_offset(bq))
        low, high = self._ranges[topic, queue_id]
        result = GetResult(topic, queue_id, "FOUND", low, high, next_offset=offset)
        if high == 0:
            result.status = "NO_MESSAGE_IN_QUEUE"
        elif offset < low:
            result.status = "OFFSET_TOO_SMALL"
        elif offset == high:
            result.status = "OFFSET_OVERFLOW_ONE"
        elif offset > high:
            result.status = "OFFSET_OVERFLOW_BADLY"
        if result.status != "FOUND":
            return result
        stop = min(offset + count, high)
        if bq is not None:
            return self._get_batch(bq, result, offset, stop)
        for queue_offset in range(offset, stop):
            unit = cq.raw_unit_at(queue_offset)
            if unit is None:
                result.items.append(Problem(
                    "missing-unit", self.display(cq.directory), 0, None,
                    f"queue offset {queue_offset} is in no consume queue file",
                    details={"topic": topic, "queueId": queue_id, "queueOffset": queue_offset}))
            else:
                result.items.append(self._check_unit(unit))
        result.next_offset = stop
        return result

    def _get_batch(self, bq, result: GetResult, offset: int, stop: int) -> GetResult:
        """The units of a batch queue holding queue offsets offset .. stop-1, each once, read on
        from the one holding offset; queue offsets no valid unit holds are problems."""
        queue_offset = offset
        for mf, pos, unit in batchqueue.units_from(bq, offset):
            base, batch = int(unit["msgBaseOffset"]), int(unit["batchSize"])
            if base >= stop:
                break
            if base > queue_offset:
                result.items.append(self._no_batch_unit(bq, queue_offset, base))
            result.items.append(self._check_unit(consumequeue.Unit(
                bq.topic, bq.queue_id, base, int(unit["offset"]), int(unit["size"]), int(unit["tagsCode"]), mf.path,
                pos)))
            queue_offset = max(queue_offset, base + batch)
        if queue_offset < stop:
            result.items.append(self._no_batch_unit(bq, queue_offset, stop))
            queue_offset = stop
        result.next_offset = queue_offset
        return result

    def _no_batch_unit(self, bq, low: int, high: int) -> Problem:
        return Problem("missing-unit", self.display(bq.directory), 0, None,
                       f"queue offsets {low} .. {high - 1} are in no valid batch consume queue unit",
                       details={"topic": bq.topic, "queueId": bq.queue_id, "queueOffset": low})

    def _check_unit(self, unit):
        where = {"topic": unit.topic, "queueId": unit.queue_id, "queueOffset": unit.queue_offset,
                 "commitLogOffset": unit.commitlog_offset, "unitSize": unit.size}
        path = self.display(unit.path)
        if not is_valid_unit(unit.commitlog_offset, unit.size):
            return Problem("invalid-unit", path, unit.file_offset, None,
                           f"queue offset {unit.queue_offset}: unit ({unit.commitlog_offset}, {unit.size}) "
                           "is not a valid unit", details=where)
        entry = self.record_at(unit.commitlog_offset)
        if isinstance(entry, Problem):
            entry.details.update(where)
            entry.message = f"queue offset {unit.queue_offset}: {entry.message}"
            return entry
        found = self.found(entry, tagsCode=unit.tags_code)
        checks = [("size", entry.total_size, unit.size), ("topic", entry.topic, unit.topic),
                  ("queueId", entry.queue_id, unit.queue_id),
                  ("queueOffset", entry.queue_offset, unit.queue_offset)]
        for name, record_value, unit_value in checks:
            if record_value != unit_value:
                found.problems.append(("unit-mismatch", f"the consume queue says {name} {unit_value}, "
                                                        f"the record has {record_value}"))
        return found
