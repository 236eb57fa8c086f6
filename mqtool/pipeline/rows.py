"""A partition's rows, one read path for every engine: the same generators turn a partition
(plan.CommitLogPart or QueuePart) into rows in this process, in the local engine's processes
and in Spark's Python workers.  Nothing here parses bytes: records come from the one commitlog
walker (`commitlog.walk_file`) and become rows through `messageview.message_fields`, so every
engine sees exactly what `mqtool dump` sees.  Also the per-partition counts of the scans.

This module never imports pyspark or pyarrow.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.forensics.filters import Filters
from mqtool.forensics.messageview import message_fields
from mqtool.formats import batchconsumequeue as batch_format
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats.consumequeue import is_valid_unit
from mqtool.pipeline.plan import CommitLogPart, QueuePart
from mqtool.pipeline.schema import LOCATION_COLUMNS, MESSAGE_COLUMNS
from mqtool.storage import batchqueue, commitlog, dispatchrequest
from mqtool.storage.consumequeue import ConsumeQueue
from mqtool.storage.mappedfile import MappedFile
from mqtool.storage.mappedfilequeue import MappedFileQueue

BATCH_ROWS = 4096
BLOCK_ROWS = 8192      # rows a block at most, and records a scanned chunk (its file pages stay resident)

_FIELD_NAMES = [name for name, _ in MESSAGE_COLUMNS]
_message_values = operator.itemgetter(*_FIELD_NAMES)


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

