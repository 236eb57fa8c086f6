"""verify-crc's compiled checks: consume queue units and index entries against the records they
point at, and an index file's own structure.

They read the commitlog through mqtool/native/fastscan.py's decoders; verify's commitlog,
queues and index modules decide what a code means and how to say it.
"""

from __future__ import annotations

import numpy as np

# an index file's layout, derived from its schema (numba's constants)
from mqtool.formats.index import ENTRY_SIZE, KEY_HASH_AT, PHY_OFFSET_AT, PREV_INDEX_AT, SLOT_SIZE, TIME_DIFF_AT, entry_dtype
from mqtool.formats.index import HEADER_SIZE as INDEX_HEADER
from mqtool.formats import consumequeue
from mqtool.formats.consumequeue import COMMIT_LOG_OFFSET_AT, SIZE_AT, TAGS_CODE_AT, UNIT_SIZE, unit_dtype
from mqtool.formats.primitives import i32, i64, index_hash, java_hash, key_end, key_prefix
from mqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK
from mqtool.native.fastscan import (
    HAS_DELAY,
    I64,
    PARSED,
    QUEUE_ID_AT,
    QUEUE_OFFSET_AT,
    UTF8_IRREGULAR,
    decode_at,
    read_props,
    tags_hash_of,
)
from mqtool.native import aot, fastscan
from mqtool.native.jit import njit


UNIT_OK = 0
UNIT_NOT_A_RECORD = 1      # no valid record starts at the unit's offset
UNIT_SIZE_MISMATCH = 2
UNIT_WRONG_TOPIC = 3
UNIT_WRONG_QUEUE = 4
UNIT_WRONG_QUEUE_OFFSET = 5
UNIT_WRONG_TAGS_CODE = 6
UNIT_NOT_DISPATCHED = 7    # points at a prepared or rollback record, which never get a unit
UNIT_IRREGULAR = 8         # tags or topic not plain UTF-8: the caller rechecks in Python


@njit(cache=True, nogil=True)
def check_units(buf, base, limit, offsets, sizes, tags, logical, topic, queue, schedule, delays, found):
    """For consume-queue units pointing into one commitlog file (buf, starting at base): does
    each point at a record of this topic (bytes) and queue, at this queue offset, of this size,
    with this tags code (the delivery time for SCHEDULE_TOPIC_XXXX delay levels)?  Writes a
    UNIT_* code per unit into found and returns how many are not UNIT_OK."""
    state = np.zeros(1, dtype=np.int64)
    bad = 0
    tl = len(topic)
    for i in range(len(offsets)):
        pos = offsets[i] - base
        code = UNIT_OK
        if pos < 0 or pos >= limit:
            code = UNIT_NOT_A_RECORD
        else:
            (kind, reason, total, magic, flag, ts, bpos, blen, tpos, tlen, ppos,
             plen) = decode_at(buf, pos, limit)
            if kind != -1:
                code = UNIT_NOT_A_RECORD
            elif total != sizes[i]:
                code = UNIT_SIZE_MISMATCH
            elif (flag & TRANSACTION_MASK) == TRANSACTION_PREPARED or (flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK:
                code = UNIT_NOT_DISPATCHED
            else:
                same = tlen == tl
                if same:
                    for k in range(tl):
                        if buf[tpos + k] != topic[k]:
                            same = False
                            break
                if not same:
                    code = UNIT_WRONG_TOPIC
                elif i32(buf, pos + QUEUE_ID_AT) != queue:
                    code = UNIT_WRONG_QUEUE
                elif i64(buf, pos + QUEUE_OFFSET_AT) != logical[i]:
                    code = UNIT_WRONG_QUEUE_OFFSET
                else:
                    state[0] = 0
                    (tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay,
                     has_delay) = read_props(buf, ppos, ppos + plen)
                    expected = tags_hash_of(buf, tags_lo, tags_hi, state)
                    if schedule and has_delay:
                        if delay < 0:
                            state[0] = 1
                        elif delay > 0:
                            level = min(delay, len(delays))
                            expected = ts + delays[level - 1]
                    if state[0]:
                        code = UNIT_IRREGULAR
                    elif expected != tags[i]:
                        code = UNIT_WRONG_TAGS_CODE
        found[i] = code
        if code != UNIT_OK:
            bad += 1
    return bad


ENTRY_OK = 0
ENTRY_NOT_A_RECORD = 1     # no valid record at the entry's offset
ENTRY_WRONG_HASH = 2       # none of the record's keys hashes to the entry's hash
ENTRY_NOT_INDEXED = 3      # a rollback record, which the index never holds
ENTRY_IRREGULAR = 4        # keys or topic not plain UTF-8: the caller rechecks in Python


@njit(cache=True, nogil=True)
def check_entries(buf, base, limit, phy, hashes, store_ts, found):
    """For index entries pointing into one commitlog file: is there a record, is it indexable,
    does one of its keys (UNIQ_KEY, KEYS pieces) under its topic hash to the entry's hash?
    store_ts receives the record's store time (for the caller's time checks).  Writes an
    ENTRY_* code per entry; returns how many are not ENTRY_OK."""
    state = np.zeros(1, dtype=np.int64)
    bad = 0
    for i in range(len(phy)):
        pos = phy[i] - base
        code = ENTRY_OK
        store_ts[i] = 0
        if pos < 0 or pos >= limit:
            code = ENTRY_NOT_A_RECORD
        else:
            (kind, reason, total, magic, flag, ts, bpos, blen, tpos, tlen, ppos,
             plen) = decode_at(buf, pos, limit)
            if kind != -1:
                code = ENTRY_NOT_A_RECORD
            elif (flag & TRANSACTION_MASK) == TRANSACTION_ROLLBACK:
                code = ENTRY_NOT_INDEXED
            else:
                store_ts[i] = ts
                state[0] = 0
                prefix = key_prefix(java_hash(buf, tpos, tpos + tlen, 0, state))
                (tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay,
                 has_delay) = read_props(buf, ppos, ppos + plen)
                matched = False
                if uniq_lo >= 0:
                    matched = index_hash(java_hash(buf, uniq_lo, uniq_hi, prefix, state)) == hashes[i]
                if not matched and keys_lo >= 0:
                    a = keys_lo
                    while a <= keys_hi and not matched:
                        b = key_end(buf, a, keys_hi)
                        if b > a and index_hash(java_hash(buf, a, b, prefix, state)) == hashes[i]:
                            matched = True
                        a = b + 1
                if state[0]:
                    code = ENTRY_IRREGULAR
                elif not matched:
                    code = ENTRY_WRONG_HASH
        found[i] = code
        if code != ENTRY_OK:
            bad += 1
    return bad


# ------------------------------------------------------- an index file's own structure

SLOT_OUT_OF_RANGE = 1      # a slot's value is not an entry number of the file
SLOT_WRONG_HEAD = 2        # a slot's head entry hashes to another slot


@njit(cache=True, nogil=True)
def index_structure(buf, slots, count, bad_entries, bad_slots, slot_kinds):
    """One pass over an index file's slots and entries 1..count-1 (the layout of
    formats/index.py): the slots that are used, the slots that point outside the entries or
    at a head of another slot, and the entries whose hash, time difference or previous-entry
    link cannot be right.  Writes up to len(bad_*) of them; returns (used slots, bad entries,
    bad slots, lowest and highest commitlog offset, whether the offsets go up)."""
    first = INDEX_HEADER + slots * SLOT_SIZE
    used = 0
    n_slots = 0
    for slot in range(slots):
        head = i32(buf, INDEX_HEADER + slot * SLOT_SIZE)
        if head == 0:
            continue
        kind = 0
        if head < 0 or head >= count:
            kind = SLOT_OUT_OF_RANGE
        else:
            used += 1
            h = i32(buf, first + head * ENTRY_SIZE + KEY_HASH_AT)
            if h < 0 or h % slots != slot:
                kind = SLOT_WRONG_HEAD
        if kind:
            if n_slots < len(bad_slots):
                bad_slots[n_slots] = slot
                slot_kinds[n_slots] = kind
            n_slots += 1
    n_entries = 0
    low, high, ordered, last = np.int64(-1), np.int64(-1), True, np.int64(-1)
    for i in range(1, count):
        at = first + i * ENTRY_SIZE
        h = i32(buf, at + KEY_HASH_AT)
        phy = i64(buf, at + PHY_OFFSET_AT)
        diff = i32(buf, at + TIME_DIFF_AT)
        prev = i32(buf, at + PREV_INDEX_AT)
        bad = h < 0 or diff < 0 or prev < 0 or prev >= i
        if not bad and prev > 0:
            ph = i32(buf, first + prev * ENTRY_SIZE + KEY_HASH_AT)
            bad = ph < 0 or ph % slots != h % slots
        if bad:
            if n_entries < len(bad_entries):
                bad_entries[n_entries] = i
            n_entries += 1
        if i == 1 or phy < low:
            low = phy
        if i == 1 or phy > high:
            high = phy
        if i > 1 and phy < last:
            ordered = False
        last = phy
    return used, n_entries, n_slots, low, high, ordered


# ------------------------------------------------------- queue offsets in commitlog order

@njit(cache=True, nogil=True)
def queue_runs(topic_hash, queue_id, queue_offset, nums, dispatched, table, runs, jumps, expected):
    """The queue offsets of a chunk's records, in commitlog order: in each queue (topic_hash,
    queue_id) every dispatched record's is the one before's plus that one's nums (1, or its
    INNER_NUM).  table: an open-addressing table of run numbers (-1: free; a power of two in
    size, at least twice the queues).  Each queue's run, in the order they first appear, goes to
    runs[k] = (first row, last row, the next queue offset); the rows whose queue offset breaks
    the rule go to jumps (as far as it has room), with what they should have held to expected.
    Returns (runs, jumps), or (-1, 0) when the table is over half full: call again with a bigger
    one."""
    mask = len(table) - 1
    n_runs = n_jumps = 0
    for i in range(len(topic_hash)):
        if not dispatched[i]:
            continue
        h = (topic_hash[i] * 31 + queue_id[i]) & mask
        while True:
            k = table[h]
            if k < 0:
                break
            first = runs[k, 0]
            if topic_hash[first] == topic_hash[i] and queue_id[first] == queue_id[i]:
                break
            h = (h + 1) & mask
        if k < 0:
            if 2 * (n_runs + 1) > len(table):
                return -1, 0
            k = table[h] = n_runs
            n_runs += 1
            runs[k, 0] = i
        elif queue_offset[i] != runs[k, 2]:
            if n_jumps < len(jumps):
                jumps[n_jumps] = i
                expected[n_jumps] = runs[k, 2]
            n_jumps += 1
        runs[k, 1] = i
        runs[k, 2] = queue_offset[i] + nums[i]
    return n_runs, n_jumps


# ------------------------------------------------------- a consume queue file on its own

_is_valid_unit = njit(cache=True, inline="always")(consumequeue.is_valid_unit)   # the rules, compiled in
_is_pre_blank = njit(cache=True, inline="always")(consumequeue.is_pre_blank)


@njit(cache=True, nogil=True)
def unit_summary(raw, count, first_file, bad_rows, holes):
    """One pass over the first count units of a consume queue file (raw: its bytes; the layout of
    formats/consumequeue.py).  A unit is written when a field is not zero, a pre-blank when it is
    ConsumeQueue.fillPreBlank's, valid when its offset >= 0 and its size > 0 and it is no
    pre-blank.  bad_rows receives (as far as it has room) the rows of the written units that are
    neither, and of the pre-blanks anywhere but at the start of the queue's first file
    (first_file); holes, the rows of the units not written before the last written one.  Returns
    (valid units, last written row, first valid row, one past the last, the lowest and highest
    offset they point at, whether they go up with no other unit between them, bad rows, holes);
    rows are -1 where there is none."""
    valid_units = 0
    last_written = first_valid = last_valid = -1
    low = high = previous = np.int64(0)
    ordered = True
    other_since = False          # a unit that is not valid since the last valid one
    leading = first_file         # still in the pre-blanks that start the queue
    n_bad = n_unwritten = unwritten_since = 0
    for row in range(count):
        at = row * UNIT_SIZE
        offset = i64(raw, at + COMMIT_LOG_OFFSET_AT)
        size = i32(raw, at + SIZE_AT)
        tags = i64(raw, at + TAGS_CODE_AT)
        written = offset != 0 or size != 0 or tags != 0
        pre_blank = _is_pre_blank(offset, size, tags)
        leading = leading and pre_blank
        valid = _is_valid_unit(offset, size) and not pre_blank
        if written:
            last_written = row
            unwritten_since = 0
        else:
            if n_unwritten < len(holes):
                holes[n_unwritten] = row
            n_unwritten += 1
            unwritten_since += 1
        if valid:
            if first_valid < 0:
                first_valid, low, high = row, offset, offset
            else:
                if other_since or offset <= previous:
                    ordered = False
                low, high = min(low, offset), max(high, offset)
            previous, last_valid, other_since = offset, row, False
            valid_units += 1
        else:
            other_since = True
            if (written and not pre_blank) or (pre_blank and not leading):
                if n_bad < len(bad_rows):
                    bad_rows[n_bad] = row
                n_bad += 1
    return (valid_units, last_written, first_valid, last_valid + 1, low, high, ordered, n_bad,
            n_unwritten - unwritten_since)


# ------------------------------------------ the same checks, against records already scanned

SCANNED = ("offset", "size", "queue_id", "queue_offset", "sys_flag", "store_ts", "topic_hash", "topic_len")
UNSETTLED = -1    # the columns cannot tell: the kernel reading the commitlog decides


def scanned(chunks: list) -> dict:
    """The columns units and entries are checked against, from consecutive parsed chunks of one
    file: the scanned records, sorted by offset, with their parse() columns; record r's keys are
    key_hash[first_key[r]:first_key[r + 1]]."""
    def joined(arrays):
        return arrays[0] if len(arrays) == 1 else np.concatenate(arrays or [np.zeros(0, dtype=I64)])

    out = {k: joined([c.columns[k] for c in chunks]) for k in SCANNED}
    out.update({k: joined([c.parsed[k] for c in chunks]) for k in PARSED + ("key_hash",)})
    keys = [np.bincount(c.parsed["key_record"], minlength=c.count) for c in chunks]
    out["first_key"] = np.concatenate([[0]] + keys).cumsum()
    return out


@njit(cache=True, inline="always")
def _find(a, value, j):
    """The first index of sorted a whose value is >= value.  Searched from j on (galloping) when
    a[j - 1] < value, as when the values come in order; else from the start."""
    n = len(a)
    if j > n or (j > 0 and a[j - 1] >= value):
        j = 0
    hi, step = j, 1
    while hi < n and a[hi] < value:
        j = hi + 1
        hi, step = j + step, step * 2
    hi = min(hi, n)
    while j < hi:
        mid = (j + hi) >> 1
        if a[mid] < value:
            j = mid + 1
        else:
            hi = mid
    return j


@njit(cache=True, nogil=True)
def units_by_records(records, raw, a, b, rows, logical0, topic_hash, topic_len, queue, schedule, delays, found):
    """check_units' UNIT_* code for units of a consume queue file (raw: its bytes), read where
    they lie: rows a..b-1, or the row numbers in rows when it is not empty; each against the
    columns of the records (scanned()'s SCANNED and PARSED columns, as a tuple).  UNSETTLED where
    the unit does not point at the start of a scanned record, or the record's strings are not
    plain UTF-8, or its DELAY is unreadable.  The topic is compared by its topic_hash and length
    (as _check_chunk groups queues).  found[k] is the code of the k-th unit.  Returns how many
    are unsettled."""
    (offset, size, queue_id, queue_offset, sys_flag, store_ts, t_hash, t_len, tags_hash, delay_level,
     flags) = records
    unsettled = 0
    j = 0
    n = len(rows) if len(rows) else b - a
    for k in range(n):
        row = rows[k] if len(rows) else a + k
        at = row * UNIT_SIZE
        unit_offset = i64(raw, at + COMMIT_LOG_OFFSET_AT)
        j = _find(offset, unit_offset, j)
        code = UNSETTLED
        if j < len(offset) and offset[j] == unit_offset and not flags[j] & UTF8_IRREGULAR:
            delayed = schedule and (flags[j] & HAS_DELAY) != 0
            delay = delay_level[j]
            if not (delayed and delay < 0):
                expected = tags_hash[j]
                if delayed and delay > 0:
                    expected = store_ts[j] + delays[min(delay, len(delays)) - 1]
                tx = sys_flag[j] & TRANSACTION_MASK
                if size[j] != i32(raw, at + SIZE_AT):
                    code = UNIT_SIZE_MISMATCH
                elif tx == TRANSACTION_PREPARED or tx == TRANSACTION_ROLLBACK:
                    code = UNIT_NOT_DISPATCHED
                elif t_hash[j] != topic_hash or t_len[j] != topic_len:
                    code = UNIT_WRONG_TOPIC
                elif queue_id[j] != queue:
                    code = UNIT_WRONG_QUEUE
                elif queue_offset[j] != logical0 + row:
                    code = UNIT_WRONG_QUEUE_OFFSET
                elif expected != i64(raw, at + TAGS_CODE_AT):
                    code = UNIT_WRONG_TAGS_CODE
                else:
                    code = UNIT_OK
        found[k] = code
        if code == UNSETTLED:
            unsettled += 1
    return unsettled


@njit(cache=True, nogil=True)
def entries_by_records(offset, sys_flag, store_ts, flags, first_key, key_hash, raw, first_entry, a, b, rows, found,
                       ts, diffs):
    """check_entries' ENTRY_* code and store time for entries of an index file (raw: its bytes,
    entry 0 at first_entry), read where they lie: entries a..b-1, or the entry numbers in rows
    when it is not empty; each against the columns of the records (scanned()).  UNSETTLED where
    the entry does not point at the start of a scanned record, or the record's strings are not
    plain UTF-8.  found[k], ts[k] and diffs[k] (the entry's timeDiff) are the k-th entry's.
    Returns how many are unsettled."""
    unsettled = 0
    j = 0
    n = len(rows) if len(rows) else b - a
    for i in range(n):
        at = first_entry + (rows[i] if len(rows) else a + i) * ENTRY_SIZE
        phy = i64(raw, at + PHY_OFFSET_AT)
        diffs[i] = i32(raw, at + TIME_DIFF_AT)
        j = _find(offset, phy, j)
        code = UNSETTLED
        ts[i] = 0
        if j < len(offset) and offset[j] == phy and not flags[j] & UTF8_IRREGULAR:
            if (sys_flag[j] & TRANSACTION_MASK) == TRANSACTION_ROLLBACK:
                code = ENTRY_NOT_INDEXED
            else:
                ts[i] = store_ts[j]
                code = ENTRY_WRONG_HASH
                entry_hash = i32(raw, at + KEY_HASH_AT)
                for k in range(first_key[j], first_key[j + 1]):
                    if key_hash[k] == entry_hash:
                        code = ENTRY_OK
                        break
        found[i] = code
        if code == UNSETTLED:
            unsettled += 1
    return unsettled


def check_units_scanned(records: dict, buf, base, limit, raw, a, b, rows, logical0, topic: str, queue,
                        schedule, delays):
    """check_units' codes for units of a consume queue file (raw: its bytes; rows a..b-1, or the
    rows given), from the columns of the records (scanned()) instead of their bytes; check_units
    itself for the units those cannot settle.  Returns (codes, how many units were checked by
    reading buf)."""
    found = np.empty(len(rows) if len(rows) else b - a, dtype=I64)
    name = topic.encode("utf-8")
    unsettled = units_by_records(tuple(records[k] for k in SCANNED + PARSED), raw, a, b, rows, logical0,
                                 fastscan.topic_hash(topic), len(name), queue, schedule, delays, found)
    if unsettled:
        rest = np.flatnonzero(found == UNSETTLED)
        numbers = rows[rest] if len(rows) else a + rest
        units = np.frombuffer(raw, dtype=unit_dtype(), count=len(raw) // UNIT_SIZE)[numbers]
        codes = np.empty(len(rest), dtype=I64)
        check_units(buf, base, limit, *(units[k].astype(I64) for k in ("commitLogOffset", "size", "tagsCode")),
                    logical0 + numbers, np.frombuffer(name, dtype=np.uint8), queue, schedule, delays, codes)
        found[rest] = codes
    return found, unsettled


def check_entries_scanned(records: dict, buf, base, limit, raw, first_entry, a, b, rows):
    """check_entries' codes, store times and the entries' timeDiffs for entries of an index file
    (raw: its bytes; entries a..b-1, or the entry numbers given), from the columns of the records
    (scanned()) instead of their bytes; check_entries itself for the entries those cannot settle.
    Returns (codes, store times, timeDiffs, how many entries were checked by reading buf)."""
    n = len(rows) if len(rows) else b - a
    found, ts, diffs = np.empty(n, dtype=I64), np.empty(n, dtype=I64), np.empty(n, dtype=I64)
    unsettled = entries_by_records(records["offset"], records["sys_flag"], records["store_ts"], records["flags"],
                                   records["first_key"], records["key_hash"], raw, first_entry, a, b, rows, found,
                                   ts, diffs)
    if unsettled:
        rest = np.flatnonzero(found == UNSETTLED)
        numbers = rows[rest] if len(rows) else a + rest
        entries = np.frombuffer(raw, dtype=entry_dtype(), count=(len(raw) - first_entry) // ENTRY_SIZE,
                                offset=first_entry)[numbers]
        codes, times = np.empty(len(rest), dtype=I64), np.empty(len(rest), dtype=I64)
        check_entries(buf, base, limit, entries["phyOffset"].astype(I64), entries["keyHash"].astype(I64), times,
                      codes)
        found[rest], ts[rest] = codes, times
    return found, ts, diffs, unsettled


def warm_up() -> None:
    """Load these kernels from the compile cache now (see fastscan.warm_up)."""
    buf = np.frombuffer(bytes(64), dtype=np.uint8)           # read-only, like a file mapping
    one = np.zeros(1, dtype=I64)
    check_units(buf, 0, 64, one, one, one, one, np.frombuffer(b"T", dtype=np.uint8), 0, False, one, one.copy())
    check_entries(buf, 0, 64, one, one, one.copy(), one.copy())
    index_structure(buf, 1, 1, one.copy(), one.copy(), one.copy())
    records = scanned([])
    unit_summary(buf, 1, True, one.copy(), one.copy())
    queue_runs(one, one, one, one, np.ones(1, dtype=np.bool_), np.full(2, -1, dtype=I64), np.zeros((1, 3), dtype=I64),
               one.copy(), one.copy())
    check_units_scanned(records, buf, 0, 64, buf, 0, 1, np.zeros(0, dtype=I64), 0, "T", 0, False, one)
    check_entries_scanned(records, buf, 0, 64, buf, 0, 0, 1, np.zeros(0, dtype=I64))


aot.adopt(globals(), "verify")   # the kernels built ahead of time, where they are (native/aot.py)
