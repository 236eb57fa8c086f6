"""verify-crc's index scope: each index file's header, slots and entries, and the records the
entries point at.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mqtool.errors import MqError
from mqtool.forensics.verify import kernels
from mqtool.forensics.verify.findings import ENTRY_PROBLEMS, Finding, PointerFiles, Pointers, TaskResult
from mqtool.formats import index as index_format
from mqtool.formats.commitlog import RecordError, decode_entry
from mqtool.formats.javastr import index_key_hash
from mqtool.native import fastscan
from mqtool.storage.dispatchrequest import from_record
from mqtool.storage.fsutil import shown_path
from mqtool.storage.indexfile import IndexFile

# ---------------------------------------------------------------------- index

HEADER_AT = index_format.HEADER_FIELD_AT    # where a finding about a header field points

def read_entries(ix, count: int):
    first_entry = index_format.entry_position(ix.hash_slot_num, 0)
    entries = np.frombuffer(ix.buf, dtype=index_format.entry_dtype(), count=count, offset=first_entry)
    return (first_entry, *(entries[k].astype(np.int64) for k in ("keyHash", "phyOffset", "timeDiff", "prevIndex")))


def _slot_of(ix, number: int) -> int:
    """The slot an entry's hash belongs to (-1 for a negative hash, which belongs nowhere)."""
    key_hash = ix.entry(number).key_hash
    return key_hash % ix.hash_slot_num if key_hash >= 0 else -1


def index_task(layout, path_text: str, slots: int, index_num: int, newest: bool = False) -> TaskResult:
    """Check one index file on its own: header, slots, chains; and say which commitlog offsets
    its entries point at."""
    result = TaskResult()
    shown = shown_path(path_text, layout.root)
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
            used, n_entries, n_slots, low, high, ordered = kernels.index_structure(
                buf, slots, count, bad_entries, bad_slots, slot_kinds)
            if max(n_entries, n_slots) <= cap:
                break
            cap = max(n_entries, n_slots)    # a badly damaged file: room for every finding
        del buf
        result.entries = max(count - 1, 0)
        if used != h.hash_slot_count:
            result.findings.append(Finding("index", "bad-header", shown, HEADER_AT["hashSlotCount"], None,
                                           "hashSlotCount is not the number of used slots",
                                           expected=used, found=h.hash_slot_count))
        for slot, kind in zip(bad_slots[:n_slots].tolist(), slot_kinds[:n_slots].tolist()):
            head = ix.slot(slot)
            if kind == kernels.SLOT_OUT_OF_RANGE:
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
                result.findings.append(Finding("index", "bad-header", shown, HEADER_AT["beginPhyOffset"], None,
                                               "beginPhyOffset/endPhyOffset are not the first and last entries'",
                                               expected=[first, last], found=[h.begin_phy_offset, h.end_phy_offset]))
            result.pointers.append(Pointers("index", path_text, int(low), int(high), slots=slots,
                                            index_num=index_num, begin_timestamp=h.begin_timestamp,
                                            end_timestamp=h.end_timestamp, count=count, first=1, last=count,
                                            sorted=bool(ordered)))
    finally:
        ix.close()
    return result


def check_entries_into(layout, pointer: Pointers, cl, buf, records, low: int, high: int, result,
                       opened: PointerFiles) -> int:
    """The entries of one index file that point into [low, high) of commitlog file cl (buf),
    whose records there are `records` (kernels.scanned): their records, their hashes, their
    times.  Returns how many of them were checked by reading the commitlog.  opened: the
    commitlog task's open files (the index file is mapped once a task)."""
    ix = opened.get(pointer.path, lambda: IndexFile(Path(pointer.path), pointer.slots, pointer.index_num))
    count = pointer.count
    first_entry = index_format.entry_position(ix.hash_slot_num, 0)
    raw = np.frombuffer(ix.buf, dtype=np.uint8)
    try:
        if pointer.sorted:   # a binary search finds the entries pointing here
            a = fastscan.lower_bound(raw, first_entry + index_format.PHY_OFFSET_AT, index_format.ENTRY_SIZE, 1,
                                     count, low)
            b = fastscan.lower_bound(raw, first_entry + index_format.PHY_OFFSET_AT, index_format.ENTRY_SIZE, a,
                                     count, high)
            if a == b:
                return 0
            opened.reading(pointer.path, first_entry + a * index_format.ENTRY_SIZE,
                           first_entry + b * index_format.ENTRY_SIZE)
            numbers = np.zeros(0, dtype=np.int64)
        else:
            opened.reading(pointer.path)
            _, _, phy, _, _ = read_entries(ix, count)
            a = b = 0
            numbers = np.flatnonzero((np.arange(count) >= 1) & (phy >= low) & (phy < high))
            if not len(numbers):
                return 0
        found, ts, diffs, read = kernels.check_entries_scanned(records, buf, cl.file_from_offset, cl.file_size, raw,
                                                                first_entry, a, b, numbers)
    finally:
        del raw
    def number_of(j: int) -> int:                # the entry number of the j-th entry checked
        return int(numbers[j]) if len(numbers) else a + j

    def checked(number: int) -> int | None:      # where entry `number` is among those checked
        if not len(numbers):
            return number - a if a <= number < b else None
        j = int(np.searchsorted(numbers, number))
        return j if j < len(numbers) and numbers[j] == number else None

    shown = shown_path(pointer.path, layout.root)
    for j in np.flatnonzero(found).tolist():
        i = number_of(j)
        entry = ix.entry(i)
        finding = _entry_finding(int(found[j]), cl, shown, first_entry + i * index_format.ENTRY_SIZE, i,
                                 entry.phy_offset, entry.key_hash)
        if finding is not None:
            result.findings.append(finding)
    # the header's times are the first and the last entry's store times
    for number, expected_ts, field_name in ((1, pointer.begin_timestamp, "beginTimestamp"),
                                            (count - 1, pointer.end_timestamp, "endTimestamp")):
        j = checked(number)
        if j is not None and ts[j] > 0 and int(ts[j]) != expected_ts:
            result.findings.append(Finding("index", "bad-header", shown, HEADER_AT[field_name], None,
                                           f"{field_name} is not the {'first' if number == 1 else 'last'} "
                                           "entry's store time", expected=int(ts[j]), found=expected_ts))
    # timeDiff is (store time - beginTimestamp) / 1000 from the second entry on (the first was
    # computed against the previous file's end, then beginTimestamp moved to it)
    expect = np.clip((ts - pointer.begin_timestamp) // 1000, 0, 0x7FFFFFFF)
    for j in np.flatnonzero((ts > 0) & (diffs != expect)).tolist():
        i = number_of(j)
        if i < 2:
            continue
        at = first_entry + i * index_format.ENTRY_SIZE + index_format.TIME_DIFF_AT
        result.findings.append(Finding("index", "entry-wrong-time", shown, at, ix.entry(i).phy_offset,
                                       f"entry {i}: timeDiff is not the record's store time - beginTimestamp",
                                       expected=int(expect[j]), found=int(diffs[j])))
    return read


def _entry_finding(code, cl, shown, file_offset, number, phy, key_hash) -> Finding | None:
    if code == kernels.ENTRY_IRREGULAR:
        try:
            record = decode_entry(cl.buf, phy - cl.file_from_offset, cl.file_size, cl.file_from_offset)
        except RecordError:
            return Finding("index", "entry-not-a-record", shown, file_offset, phy,
                           f"entry {number}: no valid record starts at the entry's commitlog offset")
        request = from_record(record, [])
        if any(index_key_hash(f"{record.topic}#{k}") == key_hash for k in request.index_keys()):
            return None
        code = kernels.ENTRY_WRONG_HASH
    kind, message = ENTRY_PROBLEMS[code]
    return Finding("index", kind, shown, file_offset, phy, f"entry {number}: {message}", found=key_hash)
