"""verify-crc: check every byte of a store and every reference between its files.

Read-only.  Three scopes, each split into independent tasks (one commitlog
file, one consume queue, one index file, parts of big commitlog files) so that
`--jobs` can spread them over threads (the per-record work runs in compiled
kernels that release the GIL, so threads share the cores without the cost of
forking and pickling):

- commitlog: the walker's structural checks (magic, sizes, BLANK records,
  non-zero bytes after the data, files without their BLANK, zero gaps), the
  body CRC of every record, the physical-offset field, and queue offsets that
  go up one by one in every queue (prepared and rollback records carry 0 and
  are skipped, as the broker skips them).  After damage the walk goes on at
  the next valid record and says how many bytes it skipped.
- cq: every consume-queue unit points at a record of its topic and queue, at
  its queue offset, of its size and tags code; no unit is invalid or missing
  between the first and the last; every queue holds every record the
  commitlog has for it.
- index: every entry points at a record whose `topic#key` hashes to it; the
  header (counts, first and last offsets and times) and the slot chains agree
  with the entries.

The per-record work runs in compiled kernels (mqtool/fastscan.py); this
module decides what is a problem and how to say it.
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqtool import commitlog, fastscan
from mqtool.commitlog import EndOfData, Problem
from mqtool.consumequeue import ConsumeQueue
from mqtool.dispatchrequest import SCHEDULE_TOPIC, from_record
from mqtool.errors import MqError
from mqtool.formats import index as index_format
from mqtool.formats.commitlog import Blank, RecordError, decode_entry
from mqtool.formats.consumequeue import UNIT_SIZE
from mqtool.formats.crc import body_crc
from mqtool.formats.filenames import is_index_name
from mqtool.formats.javastr import index_key_hash
from mqtool.indexfile import IndexFile
from mqtool.mappedfile import MappedFile

SCOPES = ("commitlog", "cq", "index")
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
ENTRY_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])
PRE_BLANK = (0, 0x7FFFFFFF, 0)   # ConsumeQueue.fillPreBlank's unit
PREPARED, ROLLBACK = 4, 12

_UNIT_PROBLEMS = {
    fastscan.UNIT_NOT_A_RECORD: ("unit-not-a-record", "no valid record starts at the unit's commitlog offset"),
    fastscan.UNIT_SIZE_MISMATCH: ("unit-size-mismatch", "the unit's size is not the record's size"),
    fastscan.UNIT_WRONG_TOPIC: ("unit-wrong-topic", "the record belongs to another topic"),
    fastscan.UNIT_WRONG_QUEUE: ("unit-wrong-queue", "the record belongs to another queue"),
    fastscan.UNIT_WRONG_QUEUE_OFFSET: ("unit-wrong-queue-offset", "the record's queue offset is not the unit's"),
    fastscan.UNIT_WRONG_TAGS_CODE: ("unit-wrong-tags-code", "the unit's tags code is not the record's"),
    fastscan.UNIT_NOT_DISPATCHED: ("unit-not-dispatched",
                                   "the unit points at a prepared or rollback record, which never get one"),
}
_ENTRY_PROBLEMS = {
    fastscan.ENTRY_NOT_A_RECORD: ("entry-not-a-record", "no valid record starts at the entry's commitlog offset"),
    fastscan.ENTRY_WRONG_HASH: ("entry-wrong-hash", "no key of the record hashes to the entry's hash"),
    fastscan.ENTRY_NOT_INDEXED: ("entry-not-indexed", "the entry points at a rollback record, which is never indexed"),
}


@dataclass
class Finding:
    """One problem: what, where (file and byte offset), what was expected and what was found."""

    scope: str
    kind: str
    file: str | None
    file_offset: int | None
    offset: int | None
    message: str
    expected: object = None
    found: object = None
    skipped: int = 0

    def to_json(self) -> dict:
        out = {"type": "problem", "scope": self.scope, "kind": self.kind, "file": self.file,
               "fileOffset": self.file_offset, "offset": self.offset, "message": self.message}
        if self.expected is not None or self.found is not None:
            out["expected"], out["found"] = self.expected, self.found
        if self.skipped:
            out["skippedBytes"] = self.skipped
        return out


@dataclass
class QueueRun:
    """What one part of the commitlog says about one queue: its first and last queue offsets."""

    topic: str
    queue_id: int
    first: int
    first_offset: int
    last: int
    last_offset: int


@dataclass
class Pointers:
    """A consume queue or index file, and the span of commitlog offsets its entries point at:
    a commitlog part checks the entries pointing into it while its pages are in memory."""

    kind: str                 # "cq" or "index"
    path: str
    low: int
    high: int
    topic: str = ""
    queue_id: int = 0
    logical0: int = 0         # cq: the queue offset of the file's first unit
    first: int = 0            # the first and one past the last entry that point anywhere,
    last: int = 0             #   sorted by commitlog offset between them (else sorted is False)
    sorted: bool = True
    slots: int = 0            # index: maxHashSlotNum, maxIndexNum, the header's beginTimestamp,
    index_num: int = 0        #        beginTimestamp and endTimestamp, and indexCount
    begin_timestamp: int = 0
    end_timestamp: int = 0
    count: int = 0


@dataclass
class TaskResult:
    findings: list[Finding] = field(default_factory=list)
    bytes: int = 0
    records: int = 0
    blanks: int = 0
    units: int = 0
    entries: int = 0
    skipped: int = 0
    runs: dict = field(default_factory=dict)         # (topic hash, queue id) -> QueueRun (commitlog tasks)
    data_end: int | None = None                       # commitlog tasks: where the data ends in this file
    queue_max: dict = field(default_factory=dict)    # (topic, queue id) -> max offset (cq tasks)
    queue_min: dict = field(default_factory=dict)    # (topic, queue id) -> first unit's offset
    pointers: list = field(default_factory=list)     # cq and index tasks: Pointers of their files
    files: int = 0


# ------------------------------------------------------------------ commitlog

# a commitlog task checks the units and entries pointing into a stretch of its records once it has
# scanned this many bytes or records (each stretch costs a look at every file pointing into it;
# the records bound the memory)
SEGMENT_BYTES = 64 << 20
SEGMENT_RECORDS = 1 << 19


def _commitlog_task(layout, path_text: str, file_size: int, is_last: bool, check_crc: bool, start: int,
                    stop: int | None, pointers: list[Pointers], delays: list[int]) -> TaskResult:
    """Check [start, stop) of one commitlog file (a part, or the whole file): its entries, CRCs,
    offset fields and queue offset order; then the consume queue units and index entries that
    point into it, against the records as they were scanned and parsed, a stretch of
    SEGMENT_BYTES or SEGMENT_RECORDS at a time."""
    result = TaskResult()
    mf = MappedFile(Path(path_text), file_size, strict=False)   # this file only: a task per part of
    try:                                                        # each file must not list them all
        path = _display(layout)(mf.path)
        end = mf.file_size if stop is None else stop
        cq_file_size = layout.consume_queue_file_size() if any(p.kind == "cq" for p in pointers) else 0
        chunks, segment = [], start    # the parsed chunks of the stretch from segment on
        for entry in commitlog.walk_file(mf, start=start, stop=stop, check_crc=check_crc,
                                         is_last=is_last, display_path=path, chunked=True,
                                         parse_props=bool(pointers)):
            if isinstance(entry, fastscan.Chunk):
                _check_chunk(entry, mf, path, result)
                if pointers:
                    chunks.append(entry)
                    if entry.stop - segment >= SEGMENT_BYTES or sum(c.count for c in chunks) >= SEGMENT_RECORDS:
                        _check_pointers(layout, pointers, mf, segment, entry.stop, chunks, delays, cq_file_size,
                                        result)
                        chunks, segment = [], entry.stop
            elif isinstance(entry, Problem):
                result.findings.append(Finding("commitlog", entry.kind, path, entry.file_offset, entry.offset,
                                               entry.message, skipped=entry.skipped))
                result.skipped += entry.skipped
            elif isinstance(entry, Blank):
                result.blanks += 1
            elif isinstance(entry, EndOfData):
                result.data_end = entry.offset
        if pointers:
            _check_pointers(layout, pointers, mf, segment, end, chunks, delays, cq_file_size, result)
        chunks = entry = None   # no views of the mapping left: it can be closed
        result.bytes = end - start
        result.files = 1 if start == 0 else 0
    finally:
        mf.close()
    return result


def _check_pointers(layout, pointers, cl, start: int, stop: int, chunks, delays, cq_file_size, result) -> None:
    """The units and index entries pointing into [start, stop) of commitlog file cl, against the
    records scanned there (chunks, parsed).  Those that point elsewhere than at the start of
    one of them are checked by reading the commitlog there; its pages are let go after."""
    low, high = cl.file_from_offset + start, cl.file_from_offset + stop
    records = fastscan.scanned(chunks)
    buf = np.frombuffer(cl.buf, dtype=np.uint8)
    delay_levels = np.array(delays or [0], dtype=np.int64)
    read = 0
    try:
        for pointer in pointers:
            if pointer.low >= high or pointer.high < low:
                continue
            if pointer.kind == "cq":
                read += _check_units_into(layout, pointer, cq_file_size, cl, buf, records, low, high, delays,
                                          delay_levels, result)
            else:
                read += _check_entries_into(layout, pointer, cl, buf, records, low, high, result)
    finally:
        del buf
        if read:
            cl.release_pages()


def _check_chunk(chunk, mf, path: str, result: TaskResult) -> None:
    c = chunk.columns
    base = mf.file_from_offset
    result.records += chunk.count
    for i in np.flatnonzero(~c["crc_ok"]).tolist():
        pos = int(c["offset"][i]) - base
        stored = int.from_bytes(mf.buf[pos + 8:pos + 12], "big", signed=True)
        body_at = int(c["body_pos"][i])
        computed = body_crc(mf.buf[body_at:body_at + int(c["body_len"][i])])
        result.findings.append(Finding("commitlog", "crc-mismatch", path, pos, int(c["offset"][i]),
                                       "body CRC does not match the body", expected=stored, found=computed))
    for i in np.flatnonzero(c["physical"] != c["offset"]).tolist():
        result.findings.append(Finding("commitlog", "offset-mismatch", path, int(c["offset"][i]) - base,
                                       int(c["offset"][i]), "the physicalOffset field is not the record's offset",
                                       expected=int(c["offset"][i]), found=int(c["physical"][i])))
    tx = c["sys_flag"] & 0xC
    skipped_tx = (tx == PREPARED) | (tx == ROLLBACK)
    for i in np.flatnonzero(skipped_tx & (c["queue_offset"] != 0)).tolist():
        result.findings.append(Finding("commitlog", "bad-queue-offset", path, int(c["offset"][i]) - base,
                                       int(c["offset"][i]), "a prepared or rollback record carries a queue offset",
                                       expected=0, found=int(c["queue_offset"][i])))
    rows = np.flatnonzero(~skipped_tx)
    if not len(rows):
        return
    # queue offsets per queue, in commitlog order: each one more than the one before
    order = rows[np.lexsort((rows, c["queue_id"][rows], c["topic_hash"][rows]))]
    topics, queues, qoffs = c["topic_hash"][order], c["queue_id"][order], c["queue_offset"][order]
    starts = np.flatnonzero(np.r_[True, (topics[1:] != topics[:-1]) | (queues[1:] != queues[:-1])])
    inside = np.ones(len(order), dtype=bool)
    inside[starts] = False
    jumps = np.flatnonzero(inside & (qoffs != np.r_[0, qoffs[:-1]] + 1))
    for j in jumps.tolist():
        i = int(order[j])
        result.findings.append(_order_finding(path, base, c, i, int(qoffs[j - 1]) + 1, chunk))
    ends = np.r_[starts[1:], len(order)] - 1
    for s, e in zip(starts.tolist(), ends.tolist()):
        key = (int(topics[s]), int(queues[s]))
        first, last = int(order[s]), int(order[e])
        run = result.runs.get(key)
        if run is None:
            result.runs[key] = QueueRun(chunk.topic(first), int(queues[s]), int(qoffs[s]),
                                        int(c["offset"][first]), int(qoffs[e]), int(c["offset"][last]))
            continue
        if int(qoffs[s]) != run.last + 1:
            result.findings.append(_order_finding(path, base, c, first, run.last + 1, chunk))
        run.last, run.last_offset = int(qoffs[e]), int(c["offset"][last])


def _order_finding(path, base, c, i, expected, chunk) -> Finding:
    offset = int(c["offset"][i])
    return Finding("commitlog", "queue-offset-order", path, offset - base, offset,
                   f"queue offsets of {chunk.topic(i)}/{int(c['queue_id'][i])} do not go up one by one",
                   expected=expected, found=int(c["queue_offset"][i]))


def _merge_runs(tasks: list[TaskResult], files: list[tuple[str, int]]) -> tuple[dict, list[Finding]]:
    """Queue offsets must also continue from one commitlog file (or part) to the next.  files:
    each task's file, as its path and its first offset."""
    merged: dict = {}
    findings = []
    for result, (path, base) in zip(tasks, files):
        for key, run in result.runs.items():
            seen = merged.get(key)
            if seen is None:
                merged[key] = QueueRun(run.topic, run.queue_id, run.first, run.first_offset, run.last,
                                       run.last_offset)
                continue
            if run.first != seen.last + 1:
                findings.append(Finding("commitlog", "queue-offset-order", path, run.first_offset - base,
                                        run.first_offset,
                                        f"queue offsets of {run.topic}/{run.queue_id} do not go up one by one",
                                        expected=seen.last + 1, found=run.first))
            seen.last, seen.last_offset = run.last, run.last_offset
    return merged, findings


# ------------------------------------------------------------- consume queues

def _units(mf):
    """A consume queue file's units as int64 columns, with the masks that classify them."""
    count = mf.file_size // UNIT_SIZE
    units = np.frombuffer(mf.buf, dtype=UNIT_DTYPE, count=count)
    offsets = units["offset"].astype(np.int64)
    sizes = units["size"].astype(np.int64)
    tags = units["tags"].astype(np.int64)
    pre_blank = (offsets == 0) & (sizes == PRE_BLANK[1]) & (tags == 0)
    valid = (offsets >= 0) & (sizes > 0) & ~pre_blank
    return offsets, sizes, tags, pre_blank, valid


def _cq_task(layout, topic: str, queue_id: int, directory: str) -> TaskResult:
    """Check one consume queue on its own: invalid units, holes, pre-blank units where they may
    be; and say which commitlog offsets each of its files points at."""
    result = TaskResult()
    display = _display(layout)
    cq = ConsumeQueue(topic, queue_id, Path(directory), layout.consume_queue_file_size())
    try:
        for problem in cq.files.problems:
            result.findings.append(Finding("cq", problem.kind, display(problem.path), None, None, problem.message))
        seen_end = False        # an invalid or empty unit was met: every later written unit is a hole
        expected_next = None
        for mf in cq.files:
            path = display(mf.path)
            offsets, sizes, tags, pre_blank, valid = _units(mf)
            count = len(offsets)
            result.bytes += mf.file_size
            result.files += 1
            written = (offsets != 0) | (sizes != 0) | (tags != 0)
            if mf is cq.files.files[0]:
                stray = pre_blank.copy()     # pre-blanks only before the first unit
                stray[:len(stray) if stray.all() else int(np.argmin(stray))] = False
            else:
                stray = pre_blank
            last_written = int(np.flatnonzero(written)[-1]) if written.any() else -1
            logical0 = mf.file_from_offset // UNIT_SIZE
            for i in np.flatnonzero((written & ~valid & ~pre_blank) | stray).tolist():
                result.findings.append(Finding("cq", "invalid-unit", path, i * UNIT_SIZE, int(offsets[i]),
                                               f"unit {logical0 + i} is not a valid unit",
                                               found=[int(offsets[i]), int(sizes[i]), int(tags[i])]))
            holes = np.flatnonzero(~written[:max(last_written, 0)])
            if seen_end and last_written >= 0 and not written[0]:
                holes = np.r_[0, holes]
            for i in holes.tolist():
                result.findings.append(Finding("cq", "cq-hole", path, i * UNIT_SIZE, None,
                                               f"unit {logical0 + i} is empty but later units are written"))
            if last_written >= 0 and expected_next is not None and logical0 > expected_next:
                result.findings.append(Finding("cq", "cq-hole", path, 0, None,
                                               f"units {expected_next}..{logical0 - 1} are missing (no file)"))
            if last_written < count - 1:
                seen_end = True
            if last_written >= 0:
                expected_next = logical0 + last_written + 1
            result.units += int(valid.sum())
            if valid.any():
                rows = np.flatnonzero(valid)
                pointed = offsets[rows]
                first, last = int(rows[0]), int(rows[-1]) + 1
                in_order = bool(valid[first:last].all() and (np.diff(pointed) > 0).all())
                result.pointers.append(Pointers("cq", str(mf.path), int(pointed.min()), int(pointed.max()),
                                                topic=topic, queue_id=queue_id, logical0=logical0,
                                                first=first, last=last, sorted=in_order))
        result.queue_max[(topic, queue_id)] = expected_next if expected_next is not None else cq.min_offset()
        result.queue_min[(topic, queue_id)] = cq.min_offset()
    finally:
        cq.close()
    return result


def _check_units_into(layout, pointer: Pointers, file_size: int, cl, buf, records, low: int, high: int, delays,
                      delay_levels, result) -> int:
    """The units of one consume queue file that point into [low, high) of commitlog file cl
    (buf), whose records there are `records` (fastscan.scanned).  Returns how many of them
    were checked by reading the commitlog."""
    mf = MappedFile(pointer.path, file_size, strict=False)
    schedule = pointer.topic == SCHEDULE_TOPIC
    try:
        if pointer.sorted:   # a binary search finds the units pointing here; convert only those
            raw = np.frombuffer(mf.buf, dtype=np.uint8)
            a = fastscan.lower_bound(raw, 0, UNIT_SIZE, pointer.first, pointer.last, low)
            b = fastscan.lower_bound(raw, 0, UNIT_SIZE, a, pointer.last, high)
            del raw
            units = np.frombuffer(mf.buf, dtype=UNIT_DTYPE, count=b - a, offset=a * UNIT_SIZE)
            rows = np.arange(a, b)
            offsets, sizes, tags = (units[k].astype(np.int64) for k in ("offset", "size", "tags"))
            del units
        else:
            offsets, sizes, tags, _, valid = _units(mf)
            rows = np.flatnonzero(valid & (offsets >= low) & (offsets < high))
            offsets, sizes, tags = offsets[rows], sizes[rows], tags[rows]
        if not len(rows):
            return 0
        found, read = fastscan.check_units_scanned(records, buf, cl.file_from_offset, cl.file_size, offsets, sizes,
                                                   tags, pointer.logical0 + rows, pointer.topic, pointer.queue_id,
                                                   schedule, delay_levels)
        bad = np.flatnonzero(found)
        rows, offsets, sizes, tags, codes = rows[bad], offsets[bad], sizes[bad], tags[bad], found[bad]
        if len(rows):
            path = _display(layout)(mf.path)
            for j, i in enumerate(rows.tolist()):
                finding = _unit_finding(int(codes[j]), cl, path, i, pointer.logical0 + i, offsets[j], sizes[j],
                                        tags[j], pointer.topic, pointer.queue_id, delays)
                if finding is not None:
                    result.findings.append(finding)
        return read
    finally:
        mf.close()


def _unit_finding(code, cl, path, i, logical, offset, size, tags, topic, queue_id, delays) -> Finding | None:
    offset, size, tags = int(offset), int(size), int(tags)
    if code == fastscan.UNIT_IRREGULAR:   # decode in Python, as the broker's Java strings do
        try:
            record = decode_entry(cl.buf, offset - cl.file_from_offset, cl.file_size, cl.file_from_offset)
        except RecordError:
            return Finding("cq", "unit-not-a-record", path, i * UNIT_SIZE, offset,
                           "no valid record starts at the unit's commitlog offset")
        if record.topic != topic:
            return Finding("cq", "unit-wrong-topic", path, i * UNIT_SIZE, offset,
                           "the record belongs to another topic", expected=topic, found=record.topic)
        expected_tags = from_record(record, delays).tags_code
        if expected_tags != tags:
            return Finding("cq", "unit-wrong-tags-code", path, i * UNIT_SIZE, offset,
                           "the unit's tags code is not the record's", expected=expected_tags, found=tags)
        return None
    kind, message = _UNIT_PROBLEMS[code]
    expected = found = None
    if code in (fastscan.UNIT_SIZE_MISMATCH, fastscan.UNIT_WRONG_QUEUE, fastscan.UNIT_WRONG_QUEUE_OFFSET,
                fastscan.UNIT_WRONG_TOPIC, fastscan.UNIT_WRONG_TAGS_CODE):
        try:
            record = decode_entry(cl.buf, offset - cl.file_from_offset, cl.file_size, cl.file_from_offset)
        except RecordError:
            record = None
        if record is not None:
            expected, found = {
                fastscan.UNIT_SIZE_MISMATCH: (record.total_size, size),
                fastscan.UNIT_WRONG_QUEUE: (queue_id, record.queue_id),
                fastscan.UNIT_WRONG_QUEUE_OFFSET: (logical, record.queue_offset),
                fastscan.UNIT_WRONG_TOPIC: (topic, record.topic),
                fastscan.UNIT_WRONG_TAGS_CODE: (from_record(record, delays).tags_code, tags),
            }[code]
    return Finding("cq", kind, path, i * UNIT_SIZE, offset, f"unit {logical}: {message}", expected=expected,
                   found=found)


# ---------------------------------------------------------------------- index

# ---------------------------------------------------------------------- index

def _entries(ix, count: int):
    first_entry = index_format.entry_position(ix.hash_slot_num, 0)
    entries = np.frombuffer(ix.buf, dtype=ENTRY_DTYPE, count=count, offset=first_entry)
    return (first_entry, entries["hash"].astype(np.int64), entries["phy"].astype(np.int64),
            entries["diff"].astype(np.int64), entries["prev"].astype(np.int64))


def _slot_of(ix, number: int) -> int:
    """The slot an entry's hash belongs to (-1 for a negative hash, which belongs nowhere)."""
    key_hash = ix.entry(number).key_hash
    return key_hash % ix.hash_slot_num if key_hash >= 0 else -1


def _index_task(layout, path_text: str, slots: int, index_num: int, newest: bool = False) -> TaskResult:
    """Check one index file on its own: header, slots, chains; and say which commitlog offsets
    its entries point at."""
    result = TaskResult()
    shown = _display(layout)(path_text)
    try:
        ix = IndexFile(Path(path_text), slots, index_num)
    except MqError as exc:
        result.findings.append(Finding("index", "bad-index-file", shown, exc.offset, None, exc.message))
        return result
    try:
        result.bytes = ix.size
        result.files = 1
        if not ix.size_ok:
            result.findings.append(Finding("index", "bad-file-size", shown, None, None,
                                           "index file size does not match maxHashSlotNum/maxIndexNum",
                                           expected=ix.expected_size, found=ix.size))
            return result
        h = ix.header()
        for where, what, expected, found in ix.header_problems(newest):
            result.findings.append(Finding("index", "bad-header", shown, where, None, what,
                                           expected=expected, found=found))
        count = min(max(h.index_count, 1), index_num)
        first_entry = index_format.entry_position(slots, 0)
        buf = np.frombuffer(ix.buf, dtype=np.uint8)
        cap = 1024
        while True:
            bad_entries, bad_slots, slot_kinds = (np.empty(cap, dtype=np.int64) for _ in range(3))
            used, n_entries, n_slots, low, high, ordered = fastscan.index_structure(
                buf, slots, count, bad_entries, bad_slots, slot_kinds)
            if max(n_entries, n_slots) <= cap:
                break
            cap = max(n_entries, n_slots)    # a badly damaged file: room for every finding
        del buf
        result.entries = max(count - 1, 0)
        if used != h.hash_slot_count:
            result.findings.append(Finding("index", "bad-header", shown, 32, None,
                                           "hashSlotCount is not the number of used slots",
                                           expected=used, found=h.hash_slot_count))
        for slot, kind in zip(bad_slots[:n_slots].tolist(), slot_kinds[:n_slots].tolist()):
            head = ix.slot(slot)
            if kind == fastscan.SLOT_OUT_OF_RANGE:
                what = f"slot {slot} points at entry {head}, outside 1..{count - 1}"
            else:
                what = f"slot {slot} points at entry {head}, whose hash belongs to slot {_slot_of(ix, head)}"
            result.findings.append(Finding("index", "bad-slot", shown, index_format.slot_position(slot), None, what))
        for i in bad_entries[:n_entries].tolist():
            entry = ix.entry(i)
            result.findings.append(Finding("index", "bad-entry", shown, first_entry + i * index_format.ENTRY_SIZE,
                                           entry.phy_offset, f"entry {i}: hash {entry.key_hash}, prevIndex "
                                           f"{entry.prev_index}, timeDiff {entry.time_diff} do not form a valid "
                                           "chain"))
        if count > 1:
            first, last = ix.entry(1).phy_offset, ix.entry(count - 1).phy_offset
            if h.begin_phy_offset != first or h.end_phy_offset != last:
                result.findings.append(Finding("index", "bad-header", shown, 16, None,
                                               "beginPhyOffset/endPhyOffset are not the first and last entries'",
                                               expected=[first, last], found=[h.begin_phy_offset, h.end_phy_offset]))
            result.pointers.append(Pointers("index", path_text, int(low), int(high), slots=slots,
                                            index_num=index_num, begin_timestamp=h.begin_timestamp,
                                            end_timestamp=h.end_timestamp, count=count, first=1, last=count,
                                            sorted=bool(ordered)))
    finally:
        ix.close()
    return result


def _check_entries_into(layout, pointer: Pointers, cl, buf, records, low: int, high: int, result) -> int:
    """The entries of one index file that point into [low, high) of commitlog file cl (buf),
    whose records there are `records` (fastscan.scanned): their records, their hashes, their
    times.  Returns how many of them were checked by reading the commitlog."""
    ix = IndexFile(Path(pointer.path), pointer.slots, pointer.index_num)
    try:
        count = pointer.count
        first_entry = index_format.entry_position(ix.hash_slot_num, 0)
        if pointer.sorted:   # a binary search finds the entries pointing here; convert only those
            raw = np.frombuffer(ix.buf, dtype=np.uint8)
            a = fastscan.lower_bound(raw, first_entry + 4, index_format.ENTRY_SIZE, 1, count, low)
            b = fastscan.lower_bound(raw, first_entry + 4, index_format.ENTRY_SIZE, a, count, high)
            del raw
            part = np.frombuffer(ix.buf, dtype=ENTRY_DTYPE, count=b - a,
                                 offset=first_entry + a * index_format.ENTRY_SIZE)
            hashes, phy, diffs = (part[k].astype(np.int64) for k in ("hash", "phy", "diff"))
            del part
            rows = np.arange(a, b)
        else:
            first_entry, hashes, phy, diffs, _ = _entries(ix, count)
            numbers = np.arange(count)
            rows = np.flatnonzero((numbers >= 1) & (phy >= low) & (phy < high))
            hashes, phy, diffs = hashes[rows], phy[rows], diffs[rows]
        if not len(rows):
            return 0
        shown = _display(layout)(pointer.path)
        ts = np.empty(len(rows), dtype=np.int64)
        found, read = fastscan.check_entries_scanned(records, buf, cl.file_from_offset, cl.file_size, phy, hashes, ts)
        for j in np.flatnonzero(found).tolist():
            i = int(rows[j])
            finding = _entry_finding(int(found[j]), cl, shown, first_entry + i * index_format.ENTRY_SIZE, i,
                                     int(phy[j]), int(hashes[j]))
            if finding is not None:
                result.findings.append(finding)
        known = ts > 0
        # the header's times are the first and the last entry's store times
        for number, where, expected_ts, field_name in ((1, 0, pointer.begin_timestamp, "beginTimestamp"),
                                                       (count - 1, 8, pointer.end_timestamp, "endTimestamp")):
            at = np.flatnonzero(rows == number)
            if len(at) and known[at[0]] and int(ts[at[0]]) != expected_ts:
                result.findings.append(Finding("index", "bad-header", shown, where, None,
                                               f"{field_name} is not the {'first' if number == 1 else 'last'} "
                                               "entry's store time", expected=int(ts[at[0]]), found=expected_ts))
        # timeDiff is (store time - beginTimestamp) / 1000 from the second entry on (the first was
        # computed against the previous file's end, then beginTimestamp moved to it)
        expect = np.clip((ts - pointer.begin_timestamp) // 1000, 0, 0x7FFFFFFF)
        wrong = known & (rows >= 2) & (diffs != expect)
        for j in np.flatnonzero(wrong).tolist():
            i = int(rows[j])
            result.findings.append(Finding("index", "entry-wrong-time", shown,
                                           first_entry + i * index_format.ENTRY_SIZE + 12, int(phy[j]),
                                           f"entry {i}: timeDiff is not the record's store time - beginTimestamp",
                                           expected=int(expect[j]), found=int(diffs[j])))
        return read
    finally:
        ix.close()


def _entry_finding(code, cl, shown, file_offset, number, phy, key_hash) -> Finding | None:
    if code == fastscan.ENTRY_IRREGULAR:
        try:
            record = decode_entry(cl.buf, phy - cl.file_from_offset, cl.file_size, cl.file_from_offset)
        except RecordError:
            return Finding("index", "entry-not-a-record", shown, file_offset, phy,
                           f"entry {number}: no valid record starts at the entry's commitlog offset")
        request = from_record(record, [])
        if any(index_key_hash(f"{record.topic}#{k}") == key_hash for k in request.index_keys()):
            return None
        code = fastscan.ENTRY_WRONG_HASH
    kind, message = _ENTRY_PROBLEMS[code]
    return Finding("index", kind, shown, file_offset, phy, f"entry {number}: {message}", found=key_hash)


# ------------------------------------------------------------------- driving

@dataclass
class Summary:
    scopes: tuple
    files: int = 0
    bytes: int = 0
    records: int = 0
    blanks: int = 0
    units: int = 0
    entries: int = 0
    skipped: int = 0
    problems: int = 0
    by_kind: dict = field(default_factory=dict)
    seconds: float = 0.0         # the checking
    load_seconds: float = 0.0    # loading the compiled kernels first (about 0.15 s in a fresh process)

    def add(self, result: TaskResult, counted: bool = True) -> None:
        """counted False: a commitlog part run only for the cross-checks (its bytes are not the
        scope's)."""
        if counted:
            self.files += result.files
            self.bytes += result.bytes
        self.records += result.records
        self.blanks += result.blanks
        self.units += result.units
        self.entries += result.entries
        self.skipped += result.skipped

    def count(self, finding: Finding) -> None:
        self.problems += 1
        self.by_kind[finding.kind] = self.by_kind.get(finding.kind, 0) + 1

    def to_json(self) -> dict:
        return {"type": "summary", "scopes": list(self.scopes), "files": self.files, "bytes": self.bytes,
                "records": self.records, "blanks": self.blanks, "units": self.units, "entries": self.entries,
                "skippedBytes": self.skipped, "problems": self.problems, "problemsByKind": self.by_kind,
                "seconds": round(self.seconds, 3), "loadSeconds": round(self.load_seconds, 3),
                "mbPerSecond": round(self.bytes / self.seconds / 1e6, 1) if self.seconds else None}


def _display(layout):
    root = layout.root

    def display(path) -> str:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            return str(path)
    return display


def verify(layout, *, scopes=SCOPES, check_crc: bool = True, jobs: int = 1, on_finding=None,
           on_progress=None, engine=None) -> Summary:
    """Run the checks of the given scopes; findings go to on_finding as they are known.

    First every consume queue and index file is checked on its own (and says where its entries
    point); then every commitlog part, with the entries pointing into it.  on_progress(bytes)
    is called as tasks finish.  With jobs > 1 tasks run in that many threads; with an engine
    (pipeline.LocalEngine or sparksource.SparkEngine) they are its partitions, so on Spark the
    checks run on the executors (which must see the store at the same path)."""
    summary = Summary(tuple(scopes))
    loading = time.perf_counter()
    fastscan.warm_up()   # loading the compiled kernels is start-up, timed on its own (load_seconds)
    started = time.perf_counter()
    summary.load_seconds = started - loading
    delays = layout.config.delay_levels_ms()
    display = _display(layout)

    def emit(finding: Finding) -> None:
        summary.count(finding)
        if on_finding is not None:
            on_finding(finding)

    queue = commitlog.open_queue(layout)
    try:
        for problem in queue.problems:
            emit(Finding("commitlog", problem.kind, display(problem.path), None, problem.offset, problem.message))
        files = queue.files
        last_data = commitlog.last_data_file(queue)
        spans = [(mf.file_from_offset, mf.file_size) for mf in files]
        paths = [display(mf.path) for mf in files]
        file_paths = [str(mf.path) for mf in files]
        file_size = queue.file_size
    finally:
        queue.close()
    structure, sizes = [], []     # sizes: how much each task reads, to start the biggest first
    if "cq" in scopes:
        for topic, queue_id, directory in layout.consume_queues():
            structure.append(("cq", _cq_task, (topic, queue_id, str(directory))))
            sizes.append(0)
    if "index" in scopes:
        slots, index_num = layout.index_geometry()
        files = layout.index_files()
        named = [info for info in files if is_index_name(info.name)]
        for info in files:
            if not is_index_name(info.name):
                emit(Finding("index", "bad-file-name", display(info.path), None, None,
                             "not an index file name (yyyyMMddHHmmssSSS)"))
                continue
            structure.append(("index", _index_task, (str(info.path), slots, index_num, info is named[-1])))
            sizes.append(info.size)
    with (_EnginePool(engine) if engine is not None else _Pool(jobs)) as pool:
        pending = pool.submit(layout, structure, sizes)
        # tasks in parallel: files are cut into parts (found while the first stage runs); one
        # after the other: each file is one task, which keeps its memory bounded on its own
        bounds = _parts(layout) if pool.parallel else [[] for _ in spans]
        first = pool.collect(pending, scopes, emit, on_progress)
        pointers = [p for _, r in first for p in r.pointers]
        parts, sizes = [], []
        crc = check_crc and "commitlog" in scopes
        for i, (base, size) in enumerate(spans):
            edges = [0] + bounds[i] + [None]
            for start, stop in zip(edges, edges[1:]):
                low, high = base + start, base + (size if stop is None else stop)
                routed = [p for p in pointers if p.low < high and p.high >= low]
                parts.append((i, ("commitlog", _commitlog_task,
                                  (file_paths[i], file_size, i >= last_data, crc, start, stop, routed, delays))))
                sizes.append(high - low)
        second = pool.collect(pool.submit(layout, [task for _, task in parts], sizes), scopes, emit, on_progress)
    for pointer in pointers:          # what points past the commitlog, or into a missing file, no part saw
        if pointer.kind in scopes and _sticks_out(pointer, spans):
            for finding in _outside(layout, pointer, spans):
                emit(finding)
    results = first + second
    for scope, result in results:
        if scope in scopes or (scope == "commitlog" and ("cq" in scopes or "index" in scopes)):
            summary.add(result, scope in scopes)
    cl_results = [r for s, r in second]
    runs, order_findings = _merge_runs(cl_results, [(paths[i], spans[i][0]) for i, _ in parts])
    if "commitlog" in scopes:
        for finding in order_findings:
            emit(finding)
    if "cq" in scopes:
        _coverage(first, runs, emit)
    summary.seconds = time.perf_counter() - started
    return summary


def _sticks_out(pointer: Pointers, spans) -> bool:
    """Do some of a file's units or entries point at or past the commitlog's end, or between
    two of its files?  (Below its first file is normal: the broker deletes queue and index
    files only once all of theirs point there.)"""
    if not spans:
        return pointer.high >= 0
    if pointer.high >= spans[-1][0] + spans[-1][1]:
        return True
    return any(a + size < b and pointer.low < b and pointer.high >= a + size
               for (a, size), (b, _) in zip(spans, spans[1:]))


def _outside(layout, pointer: Pointers, spans) -> list[Finding]:
    """Findings for the units or entries of one file that point where the commitlog has no file."""
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    ends = np.array([a + size for a, size in spans], dtype=np.int64)
    shown = _display(layout)(pointer.path)
    if pointer.kind == "cq":
        mf = MappedFile(pointer.path, layout.consume_queue_file_size(), strict=False)
        try:
            offsets, sizes, _, _, valid = _units(mf)
        finally:
            mf.close()
        rows = np.flatnonzero(valid)
        targets = offsets[rows]
        where = lambda i: i * UNIT_SIZE  # noqa: E731
        kind, what = "unit-outside-commitlog", "unit {n} points at commitlog offset {o}, where the commitlog has no file"
        number = lambda i: pointer.logical0 + i  # noqa: E731
    else:
        ix = IndexFile(Path(pointer.path), pointer.slots, pointer.index_num)
        try:
            first_entry, _, phy, _, _ = _entries(ix, pointer.count)
        finally:
            ix.close()
        rows = np.arange(1, pointer.count)
        targets = phy[rows]
        where = lambda i: first_entry + i * index_format.ENTRY_SIZE  # noqa: E731
        kind, what = "entry-outside-commitlog", "entry {n} points at commitlog offset {o}, where the commitlog has no file"
        number = lambda i: i  # noqa: E731
    at = np.searchsorted(starts, targets, side="right") - 1
    inside = (at >= 0) & (targets < ends[np.maximum(at, 0)])
    below = targets < (starts[0] if len(starts) else np.iinfo(np.int64).max)
    findings = []
    for j in np.flatnonzero(~inside & ~below).tolist():
        i, offset = int(rows[j]), int(targets[j])
        findings.append(Finding(pointer.kind, kind, shown, where(i), offset,
                                what.format(n=number(i), o=offset),
                                expected=f"{int(starts[0]) if len(starts) else 0}..{int(ends[-1]) if len(ends) else 0}",
                                found=offset))
    return findings


def _coverage(results, runs, emit) -> None:
    """Every queue holds every record the commitlog has for it."""
    queue_max, queue_min = {}, {}
    for scope, r in results:
        if scope == "cq":
            queue_max.update(r.queue_max)
            queue_min.update(r.queue_min)
    for (_, queue_id), run in sorted(runs.items(), key=lambda kv: (kv[1].topic, kv[1].queue_id)):
        where = f"consumequeue/{run.topic}/{queue_id}"
        have = queue_max.get((run.topic, queue_id))
        if have is None:
            emit(Finding("cq", "cq-missing", where, None, run.first_offset,
                         f"the commitlog holds queue offsets {run.first}..{run.last} of {run.topic}/{queue_id} "
                         "but there is no consume queue for it"))
            continue
        if have <= run.last:
            emit(Finding("cq", "cq-behind", where, None, run.last_offset,
                         f"the consume queue ends at {have} but the commitlog holds queue offsets up to "
                         f"{run.last}", expected=run.last + 1, found=have))
        start = queue_min.get((run.topic, queue_id))
        if start is not None and start > run.first:
            emit(Finding("cq", "cq-missing-start", where, None, run.first_offset,
                         f"the consume queue starts at {start} but the commitlog holds queue offsets from "
                         f"{run.first}", expected=run.first, found=start))


class _Pool:
    """Runs tasks one after the other, or with jobs > 1 in that many threads."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.pool = None
        self.parallel = jobs > 1

    def __enter__(self):
        if self.parallel:
            self.pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="verify")
        return self

    def __exit__(self, *exc):
        if self.pool is not None:   # after a failure (or Ctrl-C) the tasks not started yet are dropped
            self.pool.shutdown(cancel_futures=exc[0] is not None)

    def submit(self, layout, tasks, sizes) -> list:
        """Start the tasks, the biggest first (in the pool; in this process they run in collect)."""
        if self.pool is None:
            return [(scope, functools.partial(fn, layout, *args)) for scope, fn, args in tasks]
        started = {}
        for i in _biggest_first(sizes):
            scope, fn, args = tasks[i]
            started[i] = self.pool.submit(fn, layout, *args).result
        return [(tasks[i][0], started[i]) for i in range(len(tasks))]

    def collect(self, pending, scopes, emit, on_progress) -> list:
        """The submitted tasks' results, in order, reported as they come."""
        results = []
        for scope, result in pending:
            results.append((scope, result()))
            _report(scope, results[-1][1], scopes, emit, on_progress)
        return results


def _biggest_first(sizes) -> list[int]:
    """The order to start tasks in so that workers finish together: the biggest first."""
    return sorted(range(len(sizes)), key=lambda i: -sizes[i])


def _run_task(layout, task) -> TaskResult:
    """One task of a plan, where an engine runs it: (scope, function, arguments)."""
    _, fn, args = task
    return fn(layout, *args)


class _EnginePool:
    """Runs a stage's tasks as an engine's partitions (Spark tasks, or local processes)."""

    parallel = True

    def __init__(self, engine):
        self.engine = engine

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def submit(self, layout, tasks, sizes) -> tuple:
        return layout, tasks, sizes

    def collect(self, pending, scopes, emit, on_progress) -> list:
        layout, tasks, sizes = pending
        order = _biggest_first(sizes)
        results = [None] * len(tasks)
        for i, result in zip(order, self.engine.map(functools.partial(_run_task, layout),
                                                    [tasks[i] for i in order])):
            results[i] = result
        out = []
        for (scope, _, _), result in zip(tasks, results):
            out.append((scope, result))
            _report(scope, result, scopes, emit, on_progress)
        return out


def _parts(layout) -> list[list[int]]:
    """For each commitlog file, where it is cut into parts that tasks check in parallel."""
    queue = commitlog.open_queue(layout)
    try:
        return [commitlog.split_points(mf) for mf in queue.files]
    finally:
        queue.close()


def _report(scope, result, scopes, emit, on_progress) -> None:
    for finding in result.findings:
        if finding.scope in scopes:
            emit(finding)
    if on_progress is not None:
        on_progress(result.bytes)
