"""The data pipeline: stores -> file partitions -> rows, one read path for every engine.

A partition is one commitlog (or consume queue) file, described by a small
picklable object.  The same generators turn a partition into rows in this
process, in a pool of local processes (`--engine local`, no Java needed) and
in Spark's Python workers (`--engine spark`, see mqtool/pipeline/sparksource.py).
Nothing here parses bytes: records come from the one commitlog walker
(`commitlog.walk_file`) and become rows through `messageview.message_fields`,
so every engine sees exactly what `mqtool dump` sees.

This module never imports pyspark or pyarrow.
"""

from __future__ import annotations

import importlib
import operator
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from mqtool.engine.behind import Behind  # noqa: F401  (the second thread's helper, in its layer)
from mqtool.errors import NotAStoreError, UsageError
from mqtool.forensics.filters import Filters
from mqtool.forensics.messageview import message_fields
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats import batchconsumequeue as batch_format
from mqtool.formats.consumequeue import is_valid_unit
from mqtool.formats.filenames import is_offset_name
from mqtool.storage import batchqueue, commitlog, dispatchrequest, fsutil
from mqtool.storage.consumequeue import ConsumeQueue
from mqtool.storage.mappedfile import MappedFile
from mqtool.storage.layout import is_new_store
from mqtool.storage.mappedfilequeue import MappedFileQueue
from mqtool.storage.settings import open_layout

BATCH_ROWS = 4096

# ------------------------------------------------------------------ the schema
# The columns of a commitlog row, in order, with Spark SQL types.  The message
# columns are messageview.message_fields' stable names (the same as dump --json).
PROBLEMS_TYPE = "array<struct<kind:string,message:string>>"
LOCATION_COLUMNS = [("broker", "string"), ("store", "string"), ("file", "string"), ("fileOffset", "bigint")]
MESSAGE_COLUMNS = [
    ("topic", "string"), ("queueId", "int"), ("queueOffset", "bigint"), ("commitLogOffset", "bigint"),
    ("physicalOffset", "bigint"), ("storeSize", "int"), ("magicCode", "string"), ("version", "int"),
    ("bodyCRC", "int"), ("bodyCRCRecomputed", "int"), ("flag", "int"), ("sysFlag", "int"),
    ("sysFlagText", "string"), ("bornTimestamp", "bigint"), ("bornHost", "string"),
    ("storeTimestamp", "bigint"), ("storeHost", "string"), ("reconsumeTimes", "int"),
    ("preparedTransactionOffset", "bigint"), ("tags", "string"), ("keys", "string"),
    ("properties", "map<string,string>"), ("propertiesString", "string"), ("bodyLength", "int"),
    ("msgId", "string"), ("uniqKey", "string"),
]
DISPATCH_COLUMNS = [("tagsCode", "bigint"), ("dispatchedToConsumeQueue", "boolean")]
BODY_COLUMN = ("body", "binary")
CHECK_COLUMNS = [("ok", "boolean"), ("problems", PROBLEMS_TYPE)]

CQ_COLUMNS = [
    ("broker", "string"), ("store", "string"), ("file", "string"), ("fileOffset", "bigint"),
    ("topic", "string"), ("queueId", "int"), ("queueOffset", "bigint"), ("commitLogOffset", "bigint"),
    ("size", "int"), ("tagsCode", "bigint"), ("ok", "boolean"), ("cqType", "string"), ("batchSize", "int"),
]

_FIELD_NAMES = [name for name, _ in MESSAGE_COLUMNS]
_message_values = operator.itemgetter(*_FIELD_NAMES)


def columns(with_body: bool = False) -> list[tuple[str, str]]:
    """The commitlog row columns; `body` (the stored bytes) only when asked for."""
    return (LOCATION_COLUMNS + MESSAGE_COLUMNS + DISPATCH_COLUMNS + ([BODY_COLUMN] if with_body else [])
            + CHECK_COLUMNS)


def ddl(cols) -> str:
    """A Spark DDL schema string for columns."""
    return ", ".join(f"`{name}` {kind}" for name, kind in cols)


# ------------------------------------------------------------------ the stores
@dataclass(frozen=True)
class Store:
    """One store to read: its root, the name rows carry as `broker`, and --config/--set."""

    broker: str
    root: str
    config_path: str | None = None
    settings: tuple[str, ...] = ()

    def layout(self):
        return open_layout(self.root, self.config_path, self.settings)


def _looks_like_store(path: Path) -> bool:
    return (any((path / name).exists() for name in ("commitlog", "consumequeue", "checkpoint", "index"))
            or is_new_store(path))


def _default_name(path: Path) -> str:
    """A store called `store` (RocketMQ's default) is named after its parent: broker-a/store -> broker-a."""
    path = path.resolve()
    return path.parent.name if path.name == "store" and path.parent.name else path.name


def find_stores(paths, config_path: str | None = None, settings=()) -> list[Store]:
    """The stores named by paths: each a store, `NAME=PATH`, or a directory holding one store per
    broker (DIR/broker-a/ or DIR/broker-a/store/), named after those directories."""
    found: list[Store] = []
    for given in paths:
        given = str(given)
        name = None
        if "=" in given and not os.path.exists(given):
            name, given = given.split("=", 1)
            if not name or not given:
                raise UsageError(f"{name}={given}: expected NAME=DIR, both given")
        path = Path(given)
        if not path.exists():
            raise NotAStoreError("no such store directory", path=path)
        if _looks_like_store(path) or name or not path.is_dir():
            found.append(Store(name or _default_name(path), str(path.resolve()), config_path, tuple(settings)))
            continue
        children = []
        for child in sorted(path / name for name, _, is_dir, _ in fsutil.scandir(path) if is_dir):
            if _looks_like_store(child):
                children.append(Store(child.name, str(child.resolve()), config_path, tuple(settings)))
            elif _looks_like_store(child / "store"):
                children.append(Store(child.name, str((child / "store").resolve()), config_path,
                                      tuple(settings)))
        if not children:
            raise NotAStoreError("not a RocketMQ store, nor a directory of stores (one per broker)", path=path)
        found.extend(children)
    names = [s.broker for s in found]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"two stores are named {name!r}; name them as NAME=PATH")
    return found


# ------------------------------------------------------------------ partitions
@dataclass(frozen=True)
class CommitLogPart:
    """One commitlog file of one store, as a unit of work.  `is_last` is the walker's notion:
    no later file holds data (so a missing BLANK here is not damage).  `load_problems` are the
    store's file-level problems (bad names, sizes, gaps), carried by its first partition."""

    broker: str
    store: str
    path: str | None
    display: str
    file_from: int
    file_size: int
    is_last: bool
    delay_levels: tuple[int, ...]
    index: int = 0
    load_problems: tuple[tuple[str, str, int, str], ...] = ()


@dataclass(frozen=True)
class QueuePart:
    """One consume queue file, or one batch consume queue file (kind BatchCQ)."""

    broker: str
    store: str
    topic: str
    queue_id: int
    path: str
    display: str
    file_size: int
    index: int = 0
    kind: str = "SimpleCQ"


def _display(root: Path):
    def show(path) -> str:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            return str(path)
    return show


def _starts_with_data(path: Path) -> bool:
    """Whether the file's first 8 bytes are not all zero (read with pread, not a mapping)."""
    fd = fsutil.open_read(path)
    try:
        return any(os.pread(fd, 8, 0))
    finally:
        os.close(fd)


def commitlog_parts(stores, filters: Filters | None = None) -> list[CommitLogPart]:
    """One partition per commitlog file of every store, in store and offset order; files whose
    offsets the filters rule out are left out."""
    filters = filters or Filters()
    parts: list[CommitLogPart] = []
    for store in stores:
        if filters.brokers is not None and store.broker not in filters.brokers:
            continue
        layout = store.layout()
        show = _display(layout.root)
        delay = tuple(layout.config.delay_levels_ms())
        # the queue checks names, sizes and gaps as a broker's load does; its mappings are not read
        with commitlog.open_queue(layout) as queue:
            loads = tuple((lp.kind, show(lp.path), lp.offset if lp.offset is not None else -1, lp.message)
                          for lp in queue.problems)
            files = [(Path(mf.path), mf.file_from_offset, mf.file_size) for mf in queue.files]
            size = queue.file_size
        with_data = [i for i, (path, _, _) in enumerate(files) if _starts_with_data(path)]
        last_data = with_data[-1] if with_data else len(files) - 1
        mine = []
        for i, (path, start, real_size) in enumerate(files):
            if filters.file_ok(start, start + real_size):
                mine.append(CommitLogPart(store.broker, str(layout.root), str(path), show(path), start, size,
                                          i >= last_data, delay))
        if loads:
            if mine:
                mine[0] = _replace(mine[0], load_problems=loads)
            else:
                mine.append(CommitLogPart(store.broker, str(layout.root), None, "", 0, size, True, delay,
                                          load_problems=loads))
        parts.extend(mine)
    return [_replace(p, index=i) for i, p in enumerate(parts)]


def queue_parts(stores, filters: Filters | None = None) -> list[QueuePart]:
    """One partition per consume queue file of every store (topic and queue filters applied)."""
    filters = filters or Filters()
    parts = []
    for store in stores:
        if filters.brokers is not None and store.broker not in filters.brokers:
            continue
        layout = store.layout()
        show = _display(layout.root)
        kinds = [("SimpleCQ", layout.consume_queue_file_size(), layout.consume_queues(), layout.consume_queue_files),
                 ("BatchCQ", batchqueue.file_size(layout), batchqueue.queues(layout), batchqueue.files)]
        for kind, size, queues, files in kinds:
            for topic, queue_id, directory in queues:
                if filters.topics is not None and topic not in filters.topics:
                    continue
                if filters.queue_ids is not None and queue_id not in filters.queue_ids:
                    continue
                for info in files(directory):
                    if is_offset_name(info.name):
                        parts.append(QueuePart(store.broker, str(layout.root), topic, queue_id, str(info.path),
                                               show(info.path), size, kind=kind))
    return [_replace(p, index=i) for i, p in enumerate(parts)]


def _replace(part, **changes):
    return replace(part, **changes)


# ------------------------------------------------------------------ reading
def entries(part: CommitLogPart, check_crc: bool = True, scanner=None, chunk_records: int | None = None):
    """The walker's entries of one partition: its load problems first, then what walk_file yields
    for the file (Record, Blank, Problem, EndOfData), exactly as commitlog.walk would.  With
    scanner (mqtool.native.fastscan), runs of valid records come as its Chunks, of at most
    chunk_records (BLOCK_ROWS by default: a chunk's file pages are resident while it is worked on)."""
    for kind, path, offset, message in part.load_problems:
        yield commitlog.Problem(kind, path, 0, offset, message)
    if part.path is None:
        return
    mf = MappedFile(Path(part.path), part.file_size, strict=False)
    try:
        yield from commitlog.walk_file(mf, check_crc=check_crc, is_last=part.is_last,
                                       display_path=part.display, scanner=scanner,
                                       chunk_records=chunk_records or BLOCK_ROWS)
    finally:
        mf.close()


def record_row(part: CommitLogPart, record: Record, found, with_body: bool = False) -> tuple:
    """One commitlog row (see columns()) from a record and its record_problems."""
    fields = message_fields(record, body=None)
    dispatch = dispatchrequest.from_record(record, part.delay_levels, fields["properties"])
    row = [part.broker, part.store, part.display, record.offset - part.file_from]
    row.extend(_message_values(fields))
    row.append(dispatch.tags_code)
    row.append(dispatch.goes_to_consume_queue)
    if with_body:
        row.append(bytes(record.body))
    row.append(not found)
    row.append([{"kind": k, "message": m} for k, m in found])
    return tuple(row)


def problem_row(part: CommitLogPart, problem, with_body: bool = False) -> tuple:
    """A row for damage that is no record: only location, commitLogOffset, ok and problems."""
    message = [None] * len(_FIELD_NAMES)
    message[_FIELD_NAMES.index("commitLogOffset")] = problem.offset
    extra = [None, None] + ([None] if with_body else [])
    text = problem.message + (f" ({problem.skipped} bytes skipped)" if problem.skipped else "")
    return tuple([part.broker, part.store, problem.path, problem.file_offset] + message + extra
                 + [False, [{"kind": problem.kind, "message": text}]])


def rows(part: CommitLogPart, filters: Filters | None = None, *, with_body: bool = False,
         with_problems: bool = False, check_crc: bool = True):
    """The rows of one partition: every record (ok or flagged), and with with_problems a row for
    each damaged stretch that is not a record."""
    filters = filters or Filters()
    want_problems = with_problems and not filters.needs_message
    for entry in entries(part, check_crc):
        if isinstance(entry, Record):
            if filters.record_ok(entry):
                yield record_row(part, entry, commitlog.record_problems(entry, check_crc), with_body)
        elif want_problems and isinstance(entry, commitlog.Problem) and filters.offset_ok(entry.offset):
            yield problem_row(part, entry, with_body)


BLOCK_ROWS = 8192      # rows a block at most, and records a scanned chunk (its file pages stay resident)


def row_blocks(part: CommitLogPart, filters: Filters | None = None, *, with_body: bool = False,
               with_problems: bool = False, check_crc: bool = True, rows: int = BLOCK_ROWS, columns=None):
    """rows() compiled: the same rows in the same order, as rowblocks.Block for runs of records
    (at most `rows` each) and lists of row tuples for the rest (problem rows, and a record the
    kernels leave to the reference decoder).  columns: the names a reader needs (None: all); the
    blocks may then hold only those (rowblocks.blocks), the row tuples still hold every column."""
    from mqtool.forensics import rowblocks
    from mqtool.native import fastscan

    filters = filters or Filters()
    want_problems = with_problems and not filters.needs_message
    pending = []
    for entry in entries(part, check_crc, scanner=fastscan, chunk_records=rows):
        if isinstance(entry, fastscan.Chunk):
            if pending:
                yield pending
                pending = []
            keep = rowblocks.keep_mask(entry, filters)
            yield from rowblocks.blocks(entry, part.file_from, part.delay_levels, keep=keep, check_crc=check_crc,
                                        with_body=with_body, rows=rows, columns=columns)
        elif isinstance(entry, Record):
            if filters.record_ok(entry):
                pending.append(record_row(part, entry, commitlog.record_problems(entry, check_crc), with_body))
        elif want_problems and isinstance(entry, commitlog.Problem) and filters.offset_ok(entry.offset):
            pending.append(problem_row(part, entry, with_body))
    if pending:
        yield pending


def batches(row_iter, size: int = BATCH_ROWS):
    """Rows grouped into lists of at most size rows (engines convert whole batches at once)."""
    batch = []
    for row in row_iter:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def queue_rows(part: QueuePart):
    """The units of one consume queue file; `ok` is False for a unit that is not valid.  A batch
    consume queue's unit gives its msgBaseOffset as queueOffset, and its batchSize (the messages
    from that queue offset on that its record holds)."""
    if part.kind == "BatchCQ":
        units = batchqueue.read_units(Path(part.path))
        valid = batchqueue.valid_units(units).tolist()
        for n, (offset, size, tags, _, base, batch, _, _) in enumerate(units.tolist()):
            yield (part.broker, part.store, part.display, n * batch_format.UNIT_SIZE, part.topic, part.queue_id,
                   base, offset, size, tags, valid[n], part.kind, batch)
        return
    cq = ConsumeQueue(part.topic, part.queue_id, Path(part.path).parent, part.file_size)
    cq.files.close()   # this one file, not the queue's whole directory (as dump does for a file)
    cq.files = MappedFileQueue([Path(part.path)], part.file_size, strict=False)
    try:
        for unit in cq.units(0, None, stop_at_invalid=False):
            yield (part.broker, part.store, part.display, unit.file_offset, unit.topic, unit.queue_id,
                   unit.queue_offset, unit.commitlog_offset, unit.size, unit.tags_code,
                   is_valid_unit(unit.commitlog_offset, unit.size), part.kind, 1)
    finally:
        cq.close()


# ------------------------------------------------------------------ scans
@dataclass
class FileCounts:
    """What one partition holds, as the walker sees it (the simple per-file scan)."""

    file: str
    records: int = 0
    blanks: int = 0
    problems: int = 0           # damage entries plus failed record checks
    damaged_records: int = 0
    data_end: int | None = None
    kinds: dict = field(default_factory=dict)


def count_entries(part: CommitLogPart, check_crc: bool = True) -> FileCounts:
    """Count records, BLANKs and problems of one partition (what verify-crc-like scans do)."""
    counts = FileCounts(part.display)
    for entry in entries(part, check_crc):
        if isinstance(entry, Record):
            counts.records += 1
            found = commitlog.record_problems(entry, check_crc)
            if found:
                counts.damaged_records += 1
                counts.problems += len(found)
                for kind, _ in found:
                    counts.kinds[kind] = counts.kinds.get(kind, 0) + 1
        elif isinstance(entry, Blank):
            counts.blanks += 1
        elif isinstance(entry, commitlog.Problem):
            counts.problems += 1
            counts.kinds[entry.kind] = counts.kinds.get(entry.kind, 0) + 1
        elif isinstance(entry, commitlog.EndOfData):
            counts.data_end = entry.offset
    return counts


def count_rows(part: CommitLogPart, filters: Filters | None = None, with_body: bool = False,
               columns=None) -> tuple[int, int]:
    """(rows, storeSize bytes) of one partition, building every row on the columnar read path, as
    export and the Spark source do (the benchmark's unit of work); columns as in row_blocks
    (the rows with only storeSize: what a pruned read of the Spark source does)."""
    n = size = 0
    at = len(LOCATION_COLUMNS) + _FIELD_NAMES.index("storeSize")
    for piece in row_blocks(part, filters, with_body=with_body, columns=columns):
        if isinstance(piece, list):
            n += len(piece)
            size += sum(row[at] for row in piece)
        else:
            n += piece.n
            size += int(piece.numbers["storeSize"].sum())
    return n, size


# ------------------------------------------------------------------ engines
def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class LocalEngine:
    """Partitions on this machine: in this process (jobs=1) or a pool of `jobs` processes.
    Plain Python: no Java, no pyspark."""

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = jobs or default_jobs()

    @property
    def cores(self) -> int:
        return self.jobs

    def map(self, scan, parts) -> list:
        """scan(part) for every partition, results in partition order.  scan must be picklable
        (a module-level function or a functools.partial of one)."""
        return list(self.imap(scan, parts))

    def imap(self, scan, parts):
        """map() as a stream: results in partition order as they are ready."""
        parts = list(parts)
        jobs = min(self.jobs, len(parts))
        if jobs <= 1:
            yield from (scan(p) for p in parts)
            return
        with ProcessPoolExecutor(jobs) as pool:
            yield from pool.map(scan, parts)

    def close(self) -> None:
        pass


# named, not imported: pyspark loads only when --engine spark is asked for (the fsspec way)
SPARK_ENGINE = "mqtool.pipeline.sparksource:SparkEngine"


def open_engine(name: str, *, jobs: int | None = None, master: str | None = None, conf=()):
    """The engine a command asked for: LocalEngine, or a SparkEngine (pyspark imported only here)."""
    if name == "local":
        if master:
            raise UsageError("--master needs --engine spark")
        if conf:
            raise UsageError("--spark-conf needs --engine spark")
        return LocalEngine(jobs)
    module, _, name = SPARK_ENGINE.partition(":")
    try:
        engine = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise UsageError(f"--engine spark needs PySpark 4.1 or newer and pyarrow ({exc}): "
                         "pip install 'mqtool[spark]'") from None
    return engine.open(master=master, conf=conf)
