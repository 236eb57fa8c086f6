"""dump's walking and counting: what `dump` shows of a commitlog, a consume queue, an index
file, a batch consume queue or a DLedger store, each entry with the checks it fails, as plain
events (forensics/dumpkinds.py has which walker serves which kind; the timer store's walkers are
forensics/timerwalk.py); mqtool/cli/dumpview.py renders them (a table or JSON lines).

One Tally serves a whole dump: it counts what was walked and shown, keeps --limit, and
remembers the first problem, which the command's error line names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqtool.forensics.filters import Filters
from mqtool.formats import batchconsumequeue as batch_format
from mqtool.formats import dledger as dledger_format
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats.consumequeue import is_valid_unit
from mqtool.formats.filenames import name_to_offset
from mqtool.storage import batchqueue, commitlog, dledger
from mqtool.storage.layout import FileInfo
from mqtool.storage.commitlog import EndOfData, Problem

PROGRESS_STEP = 1 << 20  # bytes of commitlog between progress updates
CHUNK_RECORDS = 8192    # records a chunk at most with a scanner (their file pages are resident meanwhile)


@dataclass
class Tally:
    limit: int | None = None
    records: int = 0
    blanks: int = 0
    problems: int = 0
    shown: int = 0
    end_offset: int | None = None
    stopped_at: int | None = None     # where --limit ended a commitlog walk (the rest was not read)
    first_problem: tuple | None = None    # (file, byte offset in it, kind)

    def full(self) -> bool:
        return self.limit is not None and self.shown >= self.limit

    def note_problem(self, path, offset, kind) -> None:
        """Remember where the first problem is (counting is the caller's)."""
        if self.first_problem is None:
            self.first_problem = (str(path), offset, kind)


class FileOf:
    """queue.find_by_offset with the file's display path, looked up once per file, not per record.

    After at(offset): mf is the file (None outside the queue), path its display path
    (None outside) and start its first offset (0 outside).  The last answer is reused
    only while the files tile the offsets exactly (no load problems): then it is the
    only file that can hold the offset.
    """

    def __init__(self, queue, display):
        self.queue = queue
        self.display = display
        self.reuse = not queue.problems
        self.mf = None
        self.path = None
        self.start = 0
        self.end = 0

    def at(self, offset: int):
        if not (self.reuse and self.mf is not None and self.start <= offset < self.end):
            self.mf = self.queue.find_by_offset(offset)
            if self.mf is None:
                self.path, self.start, self.end = None, 0, 0
            else:
                self.path = self.display(self.mf.path)
                self.start, self.end = self.mf.file_from_offset, self.mf.file_end_offset
        return self.mf


def walk_commitlog(queue, filters: Filters, tally: Tally, *, check_crc: bool, display, on_progress=None,
                   scanner=None):
    """Yield what dump shows of a commitlog: ("record", Record, found problems, FileOf) for each
    record the filters keep, ("blank", Blank, FileOf), ("problem", Problem), ("end", EndOfData).
    With scanner (mqtool.native.fastscan) runs of records come as ("records", Chunk, shown,
    FileOf) instead: shown is a mask of the chunk's records to show.  Counts every record, blank
    and problem in tally, shown or not; stops at --limit."""
    for lp in queue.problems[:1]:  # the walk yields these first
        tally.note_problem(display(lp.path), None, lp.kind)
    files = FileOf(queue, display)
    lo, hi = filters.offset_range
    next_update = 0
    for entry in commitlog.walk(queue, start=lo, end=None if hi is None else hi + 1, check_crc=check_crc,
                                path_display=display, scanner=scanner, chunk_records=CHUNK_RECORDS):
        if scanner is not None and isinstance(entry, scanner.Chunk):
            shown = _count_chunk(entry, files, filters, tally, check_crc)
            if on_progress:
                on_progress(tally.end_offset - queue.min_offset)
            if shown.any():
                yield "records", entry, shown, files
            if tally.stopped_at is not None:
                return
        elif isinstance(entry, Record):
            tally.records += 1
            tally.end_offset = entry.offset + entry.total_size
            mf = files.at(entry.offset)
            if on_progress and entry.offset >= next_update:   # every PROGRESS_STEP bytes, not every record
                on_progress(entry.offset - queue.min_offset)
                next_update = entry.offset + PROGRESS_STEP
            found = commitlog.record_problems(entry, check_crc)
            if found:
                tally.problems += len(found)
                if mf is not None:
                    tally.note_problem(files.path, entry.offset - files.start, found[0][0])
            if not (filters.time_ok(entry.store_timestamp) and filters.queue_ok(entry.topic, entry.queue_id)
                    and filters.queue_offset_ok(entry.queue_offset)):
                continue
            tally.shown += 1
            yield "record", entry, found, files
            if tally.full():
                tally.stopped_at = entry.offset + entry.total_size
                return
        elif isinstance(entry, Blank):
            tally.blanks += 1
            tally.end_offset = entry.offset + entry.total_size
            files.at(entry.offset)
            yield "blank", entry, files
        elif isinstance(entry, Problem):
            tally.problems += 1
            tally.note_problem(entry.path, entry.file_offset, entry.kind)
            yield "problem", entry
        elif isinstance(entry, EndOfData):
            tally.end_offset = entry.offset
            yield "end", entry


def _count_chunk(chunk, files: FileOf, filters: Filters, tally: Tally, check_crc: bool):
    """What walk_commitlog counts of each record, for a chunk of them at once; returns the mask of
    the records to show (the filters', cut at --limit, which then sets tally.stopped_at)."""
    import numpy as np   # numpy and the compiled code: loaded only when chunks come

    from mqtool.forensics import rowblocks

    c = chunk.columns
    files.at(int(c["offset"][0]))       # a chunk lies in one file
    keep = rowblocks.keep_mask(chunk, filters)
    keep = np.ones(chunk.count, dtype=np.bool_) if keep is None else keep
    end = chunk.count
    if tally.limit is not None:
        kept = np.flatnonzero(keep)
        room = max(tally.limit - tally.shown, 1)     # a record is shown before the limit is looked at
        if len(kept) >= room:
            end = int(kept[room - 1]) + 1
            keep[end:] = False
    found = rowblocks.chunk_problems(chunk, files.start, check_crc)
    for i in sorted(i for i in found if i < end):
        tally.problems += len(found[i])
        tally.note_problem(files.path, int(c["offset"][i]) - files.start, found[i][0][0])
    tally.records += end
    tally.end_offset = int(c["offset"][end - 1] + c["size"][end - 1])
    tally.shown += int(keep.sum())
    if end < chunk.count or tally.full():
        tally.stopped_at = tally.end_offset
    return keep


def walk_queue(cq, filters: Filters, tally: Tally, display):
    """Yield what dump shows of one consume queue: ("problem", Problem) for each file that could not
    be loaded, then ("unit", Unit, check) with check "ok", "invalid" or "after-invalid" (a unit
    the broker never reads, after its queue's first invalid one).  Every unit is checked and
    counted; those outside the filters, or past --limit, are not yielded."""
    for lp in cq.files.problems:
        tally.problems += 1
        tally.note_problem(display(lp.path), None, lp.kind)
        yield "problem", Problem(lp.kind, display(lp.path), 0, lp.offset or 0, lp.message)
    lo, hi = filters.queue_offset_range
    ended = False
    for unit in cq.units(lo or 0, None if hi is None else hi + 1, stop_at_invalid=False):
        check = "ok"
        if not is_valid_unit(unit.commitlog_offset, unit.size):
            check = "invalid"
            ended = True
        elif ended:
            check = "after-invalid"
        if check != "ok":
            tally.problems += 1
            tally.note_problem(display(unit.path), unit.file_offset, f"{check} unit")
        if tally.full() or not filters.offset_ok(unit.commitlog_offset):
            continue
        tally.shown += 1
        yield "unit", unit, check


def index_entries(ix, header, filters: Filters, tally: Tally):
    """Yield (entry, its store time in ms) for the entries of an open index file that the filters
    keep, until --limit."""
    for entry in ix.entries():
        if tally.full():
            return
        time_ms = header.begin_timestamp + entry.time_diff * 1000
        if not filters.offset_ok(entry.phy_offset) or not filters.time_ok(time_ms):
            continue
        tally.shown += 1
        yield entry, time_ms


def store_batch_queues(layout):
    """(topic, queueId, [(FileInfo, units)]) for each batch consume queue of a store."""
    for topic, queue_id, directory in batchqueue.queues(layout):
        yield topic, queue_id, batchqueue.queue_units(directory)


def file_batch_queue(path: Path):
    """store_batch_queues for one batch consume queue file on its own (queue id -1 when its
    folder is not a number)."""
    topic, queue = path.parent.parent.name, path.parent.name
    st = path.stat()
    info = FileInfo(path, path.name, st.st_size, st.st_mtime)
    yield topic, int(queue) if queue.isdigit() else -1, [(info, batchqueue.read_units(path))]


def walk_batch_queues(queues, dump):
    """("batch_unit", JSON line) for each 46-byte unit the filters keep (until --limit, per file),
    then ("summary", dict)."""
    filters, tally, display = dump.options.filters, dump.tally, dump.display
    for topic, queue_id, files in queues:
        if not filters.queue_ok(topic, queue_id):
            continue
        for info, units in files:
            for n, unit in enumerate(units.tolist()):
                if tally.full():
                    break
                offset, size, tags, store_time, base, batch, compacted, reserved = unit
                if not (filters.offset_ok(offset) and filters.time_ok(store_time) and filters.queue_offset_ok(base)):
                    continue
                tally.records += 1
                tally.shown += 1
                at = n * batch_format.UNIT_SIZE
                yield "batch_unit", {"type": "batch_unit", "topic": topic, "queueId": queue_id,
                                     "file": display(info.path), "fileOffset": at,
                                     "logicalOffset": name_to_offset(info.name) + at, "commitLogOffset": offset,
                                     "size": size, "tagsCode": tags, "storeTimestamp": store_time,
                                     "msgBaseOffset": base, "batchSize": batch, "compactedOffset": compacted,
                                     "reserved": reserved}
    yield "summary", {"type": "summary", "kind": "batchconsumequeue", "units": tally.records, "shown": tally.shown}


def walk_dledger(layout, dump):
    """A DLedger store's raw entries and blanks in file order with their ledger checks
    (("entry", JSON line), ("blank", Blank), ("problem", Problem)), ("entries_end",), its index
    units (("index_unit", JSON line)), then ("summary", ledger state, summary)."""
    from mqtool.forensics import dledgerscan

    tally, display, scan = dump.tally, dump.display, dledgerscan.LedgerScan()
    lo, hi = dump.options.filters.offset_range     # inclusive
    for item in dledgerscan.scan(layout, scan, display, offset_from=lo, offset_to=None if hi is None else hi + 1):
        if tally.full():     # --limit: this item (the scan counted it) is where the dump stopped
            tally.stopped_at = item.entry.offset if isinstance(item, dledgerscan.Checked) else item.offset
            break
        if isinstance(item, dledgerscan.Checked):
            line = dledgerscan.entry_json(item)
            tally.shown += 1
            if item.problems:
                tally.problems += len(item.problems)
                tally.note_problem(line["file"], line["fileOffset"], item.problems[0][0])
            yield "entry", line
        elif isinstance(item, Blank):
            tally.blanks += 1
            yield "blank", item
        elif isinstance(item, Problem):
            tally.problems += 1
            tally.note_problem(item.path, item.file_offset, item.kind)
            yield "problem", item
    yield ("entries_end",)
    units = 0
    for path, pos, unit in dledgerscan.index_units(layout, display):
        if tally.full():
            break
        units += 1
        yield "index_unit", {"type": "dledger_index_unit", "file": path, "unitOffset": pos,
                             "slot": pos // dledger_format.INDEX_UNIT_SIZE, "magic": unit.magic, "pos": unit.pos,
                             "size": unit.size, "index": unit.index, "term": unit.term}
    with commitlog.open_queue(layout) as queue:
        state = dledger.read_ledger(layout, queue).to_json()
    stopped = tally.stopped_at is not None
    yield "summary", state, {"entries": scan.entries - (stopped and isinstance(item, dledgerscan.Checked)),
                             "blanks": scan.blanks - (stopped and isinstance(item, Blank)), "indexUnits": units,
                             "stoppedAt": tally.stopped_at,
                             "uncommitted": scan.uncommitted, "endOffset": scan.end_offset, "problems": scan.problems}
