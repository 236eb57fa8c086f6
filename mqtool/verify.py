"""verify-crc: check every byte of a store and every reference between its files.

Read-only.  Three scopes, each split into independent tasks (one commitlog
file, one consume queue, one index file) so that `--jobs` can spread them over
processes:

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

import time
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
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
    """What one commitlog file says about one queue: its first and last queue offsets."""

    topic: str
    queue_id: int
    first: int
    first_offset: int
    last: int
    last_offset: int


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


# ------------------------------------------------------------------ commitlog

def _commitlog_task(layout, index: int, last_data: int, check_crc: bool, start: int = 0,
                    stop: int | None = None) -> TaskResult:
    """Check one commitlog file, or its part [start, stop): entries, CRCs, offset fields and
    queue offset order."""
    result = TaskResult()
    queue = commitlog.open_queue(layout)
    try:
        mf = queue.files[index]
        display = _display(layout)
        path = display(mf.path)
        for entry in commitlog.walk_file(mf, start=start, stop=stop, check_crc=check_crc,
                                         is_last=index >= last_data, display_path=path, chunked=True):
            if isinstance(entry, fastscan.Chunk):
                _check_chunk(entry, mf, path, result)
            elif isinstance(entry, Problem):
                result.findings.append(Finding("commitlog", entry.kind, path, entry.file_offset, entry.offset,
                                               entry.message, skipped=entry.skipped))
                result.skipped += entry.skipped
            elif isinstance(entry, Blank):
                result.blanks += 1
            elif isinstance(entry, EndOfData):
                result.data_end = entry.offset
        result.bytes = (mf.file_size if stop is None else stop) - start
    finally:
        queue.close()
    return result


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


def _merge_runs(tasks: list[TaskResult], paths: list[str]) -> tuple[dict, list[Finding]]:
    """Queue offsets must also continue from one commitlog file to the next."""
    merged: dict = {}
    findings = []
    for result, path in zip(tasks, paths):
        for key, run in result.runs.items():
            seen = merged.get(key)
            if seen is None:
                merged[key] = QueueRun(run.topic, run.queue_id, run.first, run.first_offset, run.last,
                                       run.last_offset)
                continue
            if run.first != seen.last + 1:
                findings.append(Finding("commitlog", "queue-offset-order", path, None, run.first_offset,
                                        f"queue offsets of {run.topic}/{run.queue_id} do not go up one by one",
                                        expected=seen.last + 1, found=run.first))
            seen.last, seen.last_offset = run.last, run.last_offset
    return merged, findings


# ------------------------------------------------------------- consume queues

def _cq_task(layout, topic: str, queue_id: int, directory: str, delays: list[int]) -> TaskResult:
    """Check one consume queue: its units, and the records they point at."""
    result = TaskResult()
    display = _display(layout)
    cq = ConsumeQueue(topic, queue_id, Path(directory), layout.consume_queue_file_size())
    clq = commitlog.open_queue(layout)
    try:
        for problem in cq.files.problems:
            result.findings.append(Finding("cq", problem.kind, display(problem.path), None, None, problem.message))
        cl_files = clq.files
        starts = np.array([mf.file_from_offset for mf in cl_files], dtype=np.int64)
        cl_min = int(starts[0]) if len(cl_files) else 0
        topic_bytes = np.frombuffer(topic.encode("utf-8"), dtype=np.uint8)
        delay_array = np.array(delays or [0], dtype=np.int64)
        seen_end = False        # an invalid or empty unit was met: every later written unit is a hole
        expected_next = None
        for mf in cq.files:
            path = display(mf.path)
            count = mf.file_size // UNIT_SIZE
            units = np.frombuffer(mf.buf, dtype=UNIT_DTYPE, count=count)
            result.bytes += mf.file_size
            offsets = units["offset"].astype(np.int64)
            sizes = units["size"].astype(np.int64)
            tags = units["tags"].astype(np.int64)
            written = (offsets != 0) | (sizes != 0) | (tags != 0)
            pre_blank = (offsets == 0) & (sizes == PRE_BLANK[1]) & (tags == 0)
            valid = (offsets >= 0) & (sizes > 0) & ~pre_blank
            if mf is cq.files.files[0]:
                leading = np.cumprod(pre_blank).astype(bool)     # pre-blanks only before the first unit
                stray = pre_blank & ~leading
            else:
                stray = pre_blank
            last_written = int(np.flatnonzero(written)[-1]) if written.any() else -1
            logical0 = mf.file_from_offset // UNIT_SIZE
            for i in np.flatnonzero((written & ~valid & ~pre_blank) | stray).tolist():
                result.findings.append(Finding("cq", "invalid-unit", path, i * UNIT_SIZE, int(offsets[i]),
                                               f"unit {logical0 + i} is not a valid unit",
                                               found=[int(offsets[i]), int(sizes[i]), int(tags[i])]))
            holes = np.flatnonzero(~written[:max(last_written, 0)])
            if seen_end and last_written >= 0:
                holes = np.r_[np.arange(0, 1), holes] if not written[0] else holes
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
            rows = np.flatnonzero(valid)
            result.units += len(rows)
            if not len(rows):
                continue
            # units that point below the commitlog's first file were reclaimed: not checked
            rows = rows[offsets[rows] >= cl_min]
            file_of = np.searchsorted(starts, offsets[rows], side="right") - 1
            for f in np.unique(file_of).tolist():
                group = rows[file_of == f]
                cl = cl_files[f]
                found = np.empty(len(group), dtype=np.int64)
                cl.populate(int(offsets[group[0]]) - cl.file_from_offset,
                            int(offsets[group[-1]] + sizes[group[-1]] - offsets[group[0]]))
                buf = np.frombuffer(cl.buf, dtype=np.uint8)
                bad = fastscan.check_units(buf, cl.file_from_offset, cl.file_size, offsets[group], sizes[group],
                                           tags[group], logical0 + group, topic_bytes, queue_id,
                                           topic == SCHEDULE_TOPIC, delay_array, found)
                del buf
                cl.release_pages()
                if bad:
                    for j in np.flatnonzero(found).tolist():
                        i = int(group[j])
                        finding = _unit_finding(int(found[j]), cl, clq, path, i, logical0 + i, offsets[i],
                                                sizes[i], tags[i], topic, queue_id, delays)
                        if finding is not None:
                            result.findings.append(finding)
        result.queue_max[(topic, queue_id)] = expected_next if expected_next is not None else cq.min_offset()
        result.queue_min[(topic, queue_id)] = cq.min_offset()
    finally:
        cq.close()
        clq.close()
    return result


def _unit_finding(code, cl, clq, path, i, logical, offset, size, tags, topic, queue_id, delays) -> Finding | None:
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

def _index_task(layout, path_text: str, slots: int, index_num: int, part: int = 0, parts: int = 1) -> TaskResult:
    """Check one index file: header, slots, chains, and the records the entries point at.
    With parts > 1 only the part-th share of the entries is checked against its records (the
    header, slots and chains are checked by part 0)."""
    result = TaskResult()
    display = _display(layout)
    path = Path(path_text)
    shown = display(path)
    try:
        ix = IndexFile(path, slots, index_num)
    except MqError as exc:
        if part == 0:
            result.findings.append(Finding("index", "bad-index-file", shown, exc.offset, None, exc.message))
        return result
    clq = commitlog.open_queue(layout)
    try:
        result.bytes = ix.size if part == 0 else 0
        if not ix.size_ok:
            if part:
                return result
            result.findings.append(Finding("index", "bad-file-size", shown, None, None,
                                           "index file size does not match maxHashSlotNum/maxIndexNum",
                                           expected=ix.expected_size, found=ix.size))
            return result
        h = ix.header()
        count = h.index_count
        if (count < 1 or count > index_num) and part == 0:
            result.findings.append(Finding("index", "bad-header", shown, 32 + 4, None,
                                           "indexCount is out of range", expected=f"1..{index_num}", found=count))
        count = min(max(count, 1), index_num)
        first_entry = index_format.entry_position(slots, 0)
        entries = np.frombuffer(ix.buf, dtype=ENTRY_DTYPE, count=count, offset=first_entry)
        slot_values = np.frombuffer(ix.buf, dtype=">i4", count=slots, offset=index_format.HEADER_SIZE).astype(np.int64)
        hashes = entries["hash"].astype(np.int64)
        phy = entries["phy"].astype(np.int64)
        diffs = entries["diff"].astype(np.int64)
        prevs = entries["prev"].astype(np.int64)
        numbers = np.arange(count)
        lo = 1 + (count - 1) * part // parts
        hi = 1 + (count - 1) * (part + 1) // parts
        mine = (numbers >= lo) & (numbers < hi)
        result.entries = hi - lo
        structure = result.findings if part == 0 else []   # header, slots, chains: part 0 only
        used = (slot_values > 0) & (slot_values < count)
        if int(used.sum()) != h.hash_slot_count:
            structure.append(Finding("index", "bad-header", shown, 32, None,
                                           "hashSlotCount is not the number of used slots",
                                           expected=int(used.sum()), found=h.hash_slot_count))
        for slot in np.flatnonzero((slot_values != 0) & ~used).tolist():
            structure.append(Finding("index", "bad-slot", shown, index_format.slot_position(slot), None,
                                           f"slot {slot} points at entry {int(slot_values[slot])}, outside 1..{count - 1}"))
        live = numbers >= 1
        slot_of = np.where(hashes >= 0, hashes % slots, -1)
        used_slots = np.flatnonzero(used)
        heads = slot_values[used_slots]
        for slot in used_slots[slot_of[heads] != used_slots].tolist():
            head = int(slot_values[slot])
            structure.append(Finding("index", "bad-slot", shown, index_format.slot_position(slot), None,
                                           f"slot {slot} points at entry {head}, whose hash belongs to slot "
                                           f"{int(slot_of[head])}"))
        bad_prev = live & ((prevs < 0) | (prevs >= numbers))
        chained = live & ~bad_prev & (prevs > 0)
        wrong_chain = chained & (slot_of[np.where(chained, prevs, 0)] != slot_of)
        for i in np.flatnonzero(bad_prev | wrong_chain | (live & (hashes < 0)) | (live & (diffs < 0))).tolist():
            structure.append(Finding("index", "bad-entry", shown, first_entry + i * index_format.ENTRY_SIZE,
                                           int(phy[i]), f"entry {i}: hash {int(hashes[i])}, prevIndex "
                                           f"{int(prevs[i])}, timeDiff {int(diffs[i])} do not form a valid chain"))
        if count > 1:
            if h.begin_phy_offset != int(phy[1]) or h.end_phy_offset != int(phy[count - 1]):
                structure.append(Finding("index", "bad-header", shown, 16, None,
                                               "beginPhyOffset/endPhyOffset are not the first and last entries'",
                                               expected=[int(phy[1]), int(phy[count - 1])],
                                               found=[h.begin_phy_offset, h.end_phy_offset]))
        # the records the entries point at
        cl_files = clq.files
        if not cl_files or count <= 1:
            return result
        starts = np.array([mf.file_from_offset for mf in cl_files], dtype=np.int64)
        rows = np.flatnonzero(mine & (phy >= starts[0]))
        file_of = np.searchsorted(starts, phy[rows], side="right") - 1
        store_ts = np.zeros(count, dtype=np.int64)
        for f in np.unique(file_of).tolist():
            group = rows[file_of == f]
            cl = cl_files[f]
            found = np.empty(len(group), dtype=np.int64)
            ts = np.empty(len(group), dtype=np.int64)
            cl.populate(int(phy[group].min()) - cl.file_from_offset,
                        int(phy[group].max()) - int(phy[group].min()) + 4096)
            buf = np.frombuffer(cl.buf, dtype=np.uint8)
            fastscan.check_entries(buf, cl.file_from_offset, cl.file_size, phy[group], hashes[group], ts, found)
            del buf
            cl.release_pages()
            store_ts[group] = ts
            for j in np.flatnonzero(found).tolist():
                i = int(group[j])
                finding = _entry_finding(int(found[j]), cl, shown, first_entry + i * index_format.ENTRY_SIZE, i,
                                         int(phy[i]), int(hashes[i]))
                if finding is not None:
                    result.findings.append(finding)
        # times: entry i's timeDiff is (store time - beginTimestamp) / 1000, from the second entry on
        # (the first was computed against the previous file's end, then beginTimestamp moved to it)
        known = store_ts > 0
        if known[1] and h.begin_timestamp != int(store_ts[1]):
            result.findings.append(Finding("index", "bad-header", shown, 0, None,
                                           "beginTimestamp is not the first entry's store time",
                                           expected=int(store_ts[1]), found=h.begin_timestamp))
        if known[count - 1] and hi == count and h.end_timestamp != int(store_ts[count - 1]):
            result.findings.append(Finding("index", "bad-header", shown, 8, None,
                                           "endTimestamp is not the last entry's store time",
                                           expected=int(store_ts[count - 1]), found=h.end_timestamp))
        expect = np.clip((store_ts - h.begin_timestamp) // 1000, 0, 0x7FFFFFFF)
        wrong_time = known & (numbers >= 2) & (diffs != expect)
        for i in np.flatnonzero(wrong_time).tolist():
            result.findings.append(Finding("index", "entry-wrong-time", shown,
                                           first_entry + i * index_format.ENTRY_SIZE + 12, int(phy[i]),
                                           f"entry {i}: timeDiff is not the record's store time - beginTimestamp",
                                           expected=int(expect[i]), found=int(diffs[i])))
    finally:
        ix.close()
        clq.close()
    return result


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
    seconds: float = 0.0

    def add(self, result: TaskResult) -> None:
        self.files += 1
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
                "seconds": round(self.seconds, 3),
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
           on_progress=None) -> Summary:
    """Run the checks of the given scopes; findings go to on_finding as they are known.

    on_progress(bytes) is called as tasks finish.  With jobs > 1 tasks run on that many threads."""
    summary = Summary(tuple(scopes))
    started = time.perf_counter()
    delays = layout.config.delay_levels_ms()
    display = _display(layout)

    def emit(finding: Finding) -> None:
        summary.count(finding)
        if on_finding is not None:
            on_finding(finding)

    tasks = []     # (scope, function, args)
    cl_parts = []  # the display path of each commitlog task, in order
    queue = commitlog.open_queue(layout)
    try:
        for problem in queue.problems:
            emit(Finding("commitlog", problem.kind, display(problem.path), None, problem.offset, problem.message))
        files = queue.files
        last_data = max((i for i, mf in enumerate(files) if any(commitlog._file_head(mf, 8))),
                        default=len(files) - 1)
        cl_paths = [display(mf.path) for mf in files]
        count = len(files)
    finally:
        queue.close()
    if "commitlog" in scopes or "cq" in scopes:
        crc = check_crc and "commitlog" in scopes
        for i, bounds in enumerate(_parts(layout, count, jobs)):
            edges = [0] + bounds + [None]
            for start, stop in zip(edges, edges[1:]):
                tasks.append(("commitlog", _commitlog_task, (i, last_data, crc, start, stop)))
                cl_parts.append(cl_paths[i])
    if "cq" in scopes:
        for topic, queue_id, directory in layout.consume_queues():
            tasks.append(("cq", _cq_task, (topic, queue_id, str(directory), delays)))
    if "index" in scopes:
        slots, index_num = layout.index_geometry()
        for info in layout.index_files():
            if not is_index_name(info.name):
                emit(Finding("index", "bad-file-name", display(info.path), None, None,
                             "not an index file name (yyyyMMddHHmmssSSS)"))
                continue
            parts = max(1, min(jobs, info.size // (64 << 20) + 1)) if jobs > 1 else 1
            for part in range(parts):
                tasks.append(("index", _index_task, (str(info.path), slots, index_num, part, parts)))

    results: list[tuple[str, TaskResult]] = []
    if jobs > 1 and len(tasks) > 1:
        fastscan.warm_up()   # load the compiled kernels once, before the workers fork
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            futures = [(scope, pool.submit(fn, layout, *args)) for scope, fn, args in tasks]
            for scope, future in futures:
                results.append((scope, future.result()))
                _report(scope, results[-1][1], scopes, emit, on_progress)
    else:
        for scope, fn, args in tasks:
            results.append((scope, fn(layout, *args)))
            _report(scope, results[-1][1], scopes, emit, on_progress)
    for scope, result in results:
        if scope in scopes:
            summary.add(result)
    cl_results = [r for s, r in results if s == "commitlog"]
    runs, order_findings = _merge_runs(cl_results, cl_parts)
    if "commitlog" in scopes:
        for finding in order_findings:
            emit(finding)
    if "cq" in scopes:
        queue_max, queue_min = {}, {}
        for s, r in results:
            if s == "cq":
                queue_max.update(r.queue_max)
                queue_min.update(r.queue_min)
        for (_, queue_id), run in sorted(runs.items(), key=lambda kv: (kv[1].topic, kv[1].queue_id)):
            have = queue_max.get((run.topic, queue_id))
            if have is None:
                emit(Finding("cq", "cq-missing", f"consumequeue/{run.topic}/{queue_id}", None, run.first_offset,
                             f"the commitlog holds queue offsets {run.first}..{run.last} of {run.topic}/{queue_id} "
                             "but there is no consume queue for it"))
            elif have <= run.last:
                emit(Finding("cq", "cq-behind", f"consumequeue/{run.topic}/{queue_id}", None, run.last_offset,
                             f"the consume queue ends at {have} but the commitlog holds queue offsets up to "
                             f"{run.last}", expected=run.last + 1, found=have))
            start = queue_min.get((run.topic, queue_id))
            if start is not None and start > run.first:
                emit(Finding("cq", "cq-missing-start", f"consumequeue/{run.topic}/{queue_id}", None,
                             run.first_offset, f"the consume queue starts at {start} but the commitlog holds "
                             f"queue offsets from {run.first}", expected=run.first, found=start))
    summary.seconds = time.perf_counter() - started
    return summary


PART_BYTES = 128 << 20   # with --jobs, commitlog files are checked in parts of about this size


def _parts(layout, count: int, jobs: int) -> list[list[int]]:
    """For each commitlog file, the record boundaries where it is split into parts (none
    without --jobs): found by hopping over record headers, which is quick."""
    if jobs <= 1:
        return [[] for _ in range(count)]
    queue = commitlog.open_queue(layout)
    try:
        out = []
        for mf in queue.files:
            if mf.file_size < 2 * PART_BYTES:
                out.append([])
                continue
            buf = np.frombuffer(mf.buf, dtype=np.uint8)
            out.append(fastscan.record_boundaries(buf, 0, mf.file_size, PART_BYTES).tolist())
            del buf
        return out
    finally:
        queue.close()


def _report(scope, result, scopes, emit, on_progress) -> None:
    if scope in scopes:
        for finding in result.findings:
            emit(finding)
    if on_progress is not None:
        on_progress(result.bytes)
