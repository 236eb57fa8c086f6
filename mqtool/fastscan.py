"""The commitlog walk, compiled: records of a mapped file as numpy columns.

mqtool/commitlog.py is the reference walker (one Record object per record);
commands that must read gigabytes per second (verify-crc, rebuild-cq,
recovery's re-dispatch) use these kernels instead, which decode the same
layout (mqtool/formats/commitlog.py) into arrays, check body CRCs with
ISA-L, and parse what dispatch needs from the properties (tags hash code,
delay level, the Java hash codes of the index keys).  They stop at the first
entry that is not a valid record and say why; the caller resynchronises with
commitlog.resync, the same as the reference walker.  tests/test_fastscan.py
checks every column against the reference walker on the fixtures and on
damaged copies.

verify-crc checks consume queue units and index entries against the records
it has just scanned and parsed (check_units_scanned, check_entries_scanned);
what those columns cannot settle goes to the kernels that read the records
(check_units, check_entries).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mqtool.native import crc32, njit, prefetch

I64 = np.int64

# scan_records stops with one of these
REACHED_LIMIT = 0
BLANK = 1
ZEROS = 2
DAMAGE = 3
FULL = 4

# damage reasons (the reference walker's RecordError kinds)
REASONS = {1: "bad-magic", 2: "bad-size", 3: "bad-length", 4: "bad-blank", 5: "truncated"}

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194
MIN_RECORD = 91

# per-record flag bits set by parse_records
UTF8_IRREGULAR = 1     # topic or a parsed property is not plain UTF-8: recompute in Python
HAS_DELAY = 2


@njit(cache=True, inline="always")
def _u32(buf, p):
    return (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])


@njit(cache=True, inline="always")
def _i32(buf, p):
    v = _u32(buf, p)
    return v - 0x100000000 if v >= 0x80000000 else v


@njit(cache=True, inline="always")
def _i64(buf, p):
    return (_u32(buf, p) << 32) | _u32(buf, p + 4)


@njit(cache=True, inline="always")
def _decode_at(buf, pos, limit):
    """One entry at pos: (kind, reason, total, magic, sysFlag, storeTimestamp, body pos, body length,
    topic pos, topic length, properties pos, properties length).  kind is -1 for a record, else
    BLANK, ZEROS or DAMAGE (with a reason code); the layout is formats/commitlog.py's."""
    if limit - pos < 8:
        for k in range(pos, limit):
            if buf[k] != 0:
                return DAMAGE, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        return ZEROS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    total = _i32(buf, pos)
    magic = _u32(buf, pos + 4)
    if magic == BLANK_MAGIC:
        if total < 8 or total != limit - pos:
            return DAMAGE, 4, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
        return BLANK, 0, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        if total == 0 and magic == 0:
            return ZEROS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        return DAMAGE, 1, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
    if total < MIN_RECORD or total > limit - pos:
        return DAMAGE, 2, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
    end = pos + total
    flag = _i32(buf, pos + 36)
    p = pos + 48 + (20 if flag & 0x10 else 8)
    ts = _i64(buf, p)
    p += 8 + (20 if flag & 0x20 else 8)
    if p + 16 > end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    blen = _i32(buf, p + 12)
    p += 16
    if blen < 0 or p + blen > end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    bpos = p
    p += blen
    if magic == MAGIC_V2:
        if p + 2 > end:
            return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
        tlen = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
        if tlen >= 0x8000:
            tlen -= 0x10000
        p += 2
    else:
        if p + 1 > end:
            return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
        tlen = np.int64(buf[p])
        if tlen >= 0x80:
            tlen -= 0x100
        p += 1
    if tlen < 0 or p + tlen + 2 > end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    tpos = p
    p += tlen
    plen = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
    if plen >= 0x8000:
        plen -= 0x10000
    p += 2
    if plen < 0 or p + plen != end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    return -1, 0, total, magic, flag, ts, bpos, blen, tpos, tlen, p, plen


@njit(cache=True, inline="always")
def _fnv(buf, p, n):
    """FNV-1a of buf[p:p+n] as int64: groups records by topic without Python strings."""
    h = np.uint64(0xCBF29CE484222325)
    for k in range(n):
        h = (h ^ np.uint64(buf[p + k])) * np.uint64(0x100000001B3)
    return np.int64(h)


PARSE_EVERY = 64   # scan_records parses the records it decoded every this many, while they are in the cache


@njit(cache=True, nogil=True)
def scan_records(buf, pos, limit, base, check_crc, cap, offset, size, queue_id, queue_offset, physical,
                 sys_flag, store_ts, crc_ok, magic_out, body_pos, body_len, topic_pos, topic_len,
                 props_pos, props_len, topic_hash, parse, tags_hash, delay_level, flags, key_cap, key_record,
                 key_hash):
    """Decode records from pos while they are valid; with parse, also parse_records them as it
    goes.  Returns (count, stop position, stop kind, damage reason, blank size, number of keys)."""
    addr = buf.ctypes.data
    n = parsed = keys = 0
    kind = reason = blank = 0
    while True:
        if n >= cap:
            kind = FULL
            break
        if pos >= limit:
            kind = REACHED_LIMIT
            break
        if limit - pos >= 8:
            ahead = _i32(buf, pos)
            if 0 < ahead and pos + 9 * ahead <= limit:
                # records of one size are common: the header and the tail (topic, properties)
                # of the record 8 ahead, so that they are in the cache when the walk gets there
                prefetch(addr + pos + 8 * ahead)
                prefetch(addr + pos + 9 * ahead - 1)
        (kind, reason, total, magic, flag, ts, bpos, blen, tpos, tlen, ppos,
         plen) = _decode_at(buf, pos, limit)
        if kind == BLANK:
            blank = total
            break
        if kind != -1:
            break
        ok = True
        if check_crc:
            crc = 0
            if blen > 0:
                crc = crc32(0, addr + bpos, blen) & 0x7FFFFFFF
            ok = crc == _i32(buf, pos + 8)
        offset[n] = base + pos
        size[n] = total
        queue_id[n] = _i32(buf, pos + 12)
        queue_offset[n] = _i64(buf, pos + 20)
        physical[n] = _i64(buf, pos + 28)
        sys_flag[n] = flag
        store_ts[n] = ts
        crc_ok[n] = ok
        magic_out[n] = magic
        body_pos[n] = bpos
        body_len[n] = blen
        topic_pos[n] = tpos
        topic_len[n] = tlen
        props_pos[n] = ppos
        props_len[n] = plen
        topic_hash[n] = _fnv(buf, tpos, tlen)
        n += 1
        pos += total
        if parse and n - parsed == PARSE_EVERY:
            keys = parse_records(buf, parsed, n, sys_flag, topic_pos, topic_len, props_pos, props_len, tags_hash,
                                 delay_level, flags, key_cap, keys, key_record, key_hash)
            parsed = n
    if parse:
        keys = parse_records(buf, parsed, n, sys_flag, topic_pos, topic_len, props_pos, props_len, tags_hash,
                             delay_level, flags, key_cap, keys, key_record, key_hash)
    return n, pos, kind, reason, blank, keys


@njit(cache=True, nogil=True)
def hop_to(buf, pos, limit, target):
    """Hop over record headers (totalSize and magic only) from pos to the first record that
    starts at or after target: where a file can be split into parts.  -1 when an entry that is
    not a record comes first."""
    addr = buf.ctypes.data
    while limit - pos >= 8:
        total = _i32(buf, pos)
        if 0 < total and pos + 16 * total < limit:
            prefetch(addr + pos + 16 * total)   # records of one size are common: their headers ahead
        magic = _u32(buf, pos + 4)
        if (magic != MAGIC_V1 and magic != MAGIC_V2) or total < MIN_RECORD or total > limit - pos:
            return -1
        if pos >= target:
            return pos
        pos += total
    return -1


@njit(cache=True, nogil=True)
def lower_bound(buf, start, stride, lo, hi, value):
    """The first i in [lo, hi) whose big-endian int64 at start + i * stride is >= value (a
    binary search over consume queue units or index entries, sorted by commitlog offset)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if _i64(buf, start + mid * stride) < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def _cont(buf, p):
    return (np.int64(buf[p]) & 0xC0) == 0x80


@njit(cache=True, inline="always")
def _utf8_units(buf, p, end, h, state):
    """Feed the UTF-8 bytes buf[p:end] as UTF-16 code units into a Java hash h.  Malformed
    UTF-8 sets state[0] = 1: the caller then recomputes that record in Python, which decodes
    malformed input as Java does (replacement characters)."""
    while p < end:
        b = np.int64(buf[p])
        if b < 0x80:
            h = (h * 31 + b) & 0xFFFFFFFF
            p += 1
        elif 0xC2 <= b < 0xE0 and p + 1 < end and _cont(buf, p + 1):
            h = (h * 31 + (((b & 0x1F) << 6) | (np.int64(buf[p + 1]) & 0x3F))) & 0xFFFFFFFF
            p += 2
        elif 0xE0 <= b < 0xF0 and p + 2 < end and _cont(buf, p + 1) and _cont(buf, p + 2) \
                and not (b == 0xE0 and buf[p + 1] < 0xA0) and not (b == 0xED and buf[p + 1] >= 0xA0):
            cp = ((b & 0x0F) << 12) | ((np.int64(buf[p + 1]) & 0x3F) << 6) | (np.int64(buf[p + 2]) & 0x3F)
            h = (h * 31 + cp) & 0xFFFFFFFF
            p += 3
        elif 0xF0 <= b < 0xF5 and p + 3 < end and _cont(buf, p + 1) and _cont(buf, p + 2) \
                and _cont(buf, p + 3) and not (b == 0xF0 and buf[p + 1] < 0x90) \
                and not (b == 0xF4 and buf[p + 1] >= 0x90):
            cp = (((b & 0x07) << 18) | ((np.int64(buf[p + 1]) & 0x3F) << 12)
                  | ((np.int64(buf[p + 2]) & 0x3F) << 6) | (np.int64(buf[p + 3]) & 0x3F)) - 0x10000
            h = (h * 31 + (0xD800 + (cp >> 10))) & 0xFFFFFFFF
            h = (h * 31 + (0xDC00 + (cp & 0x3FF))) & 0xFFFFFFFF
            p += 4
        else:
            state[0] = 1
            p += 1
    return h


@njit(cache=True, inline="always")
def _index_hash(h):
    if h >= 0x80000000:
        h -= 0x100000000
    if h == -0x80000000:
        return 0
    return -h if h < 0 else h


@njit(cache=True, inline="always")
def _is_name(buf, p, end, a, b, c, d, e, f, g, hh, length):
    """Does buf[p:end] equal the ASCII name given as up to 8 byte codes (length of them)?"""
    if end - p != length:
        return False
    codes = (a, b, c, d, e, f, g, hh)
    for k in range(length):
        if buf[p + k] != codes[k]:
            return False
    return True


@njit(cache=True, inline="always")
def _props(buf, p, end):
    """The properties the store reads, found in buf[p:end] by the broker's rules (pairs split on
    0x02, name and value on the first 0x01, empty names or values skipped, the last duplicate
    wins): (TAGS lo, hi, KEYS lo, hi, UNIQ_KEY lo, hi, DELAY value or -1 if unreadable, has DELAY)."""
    tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi = -1, -1, -1, -1, -1, -1
    delay = 0
    has_delay = False
    while p < end:
        q = p
        while q < end and buf[q] != 2:
            q += 1
        s = p
        while s < q and buf[s] != 1:
            s += 1
        if s > p and s < q - 1:
            if _is_name(buf, p, s, 84, 65, 71, 83, 0, 0, 0, 0, 4):            # TAGS
                tags_lo, tags_hi = s + 1, q
            elif _is_name(buf, p, s, 75, 69, 89, 83, 0, 0, 0, 0, 4):          # KEYS
                keys_lo, keys_hi = s + 1, q
            elif _is_name(buf, p, s, 85, 78, 73, 81, 95, 75, 69, 89, 8):      # UNIQ_KEY
                uniq_lo, uniq_hi = s + 1, q
            elif _is_name(buf, p, s, 68, 69, 76, 65, 89, 0, 0, 0, 5):         # DELAY
                has_delay = True
                value = 0
                valid = q - s - 1 <= 10
                for k in range(s + 1, q):
                    c = buf[k]
                    if c < 48 or c > 57:
                        valid = False
                        break
                    value = value * 10 + (c - 48)
                delay = value if valid and value <= 0x7FFFFFFF else -1
        p = q + 1
    return tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay, has_delay


@njit(cache=True, inline="always")
def _tags_hash(buf, lo, hi, state):
    if lo < 0:
        return 0
    h = _utf8_units(buf, lo, hi, 0, state)
    return h - 0x100000000 if h >= 0x80000000 else h


@njit(cache=True, nogil=True)
def parse_records(buf, start, n, sys_flag, topic_pos, topic_len, props_pos, props_len, tags_hash,
                  delay_level, flags, key_cap, keys, key_record, key_hash):
    """From the properties of records start..n-1: the Java hash of TAGS, the DELAY level and the
    index keys (UNIQ_KEY first, then each KEYS piece) with their index hash of `topic#key`,
    added after the first `keys` keys.  Returns the number of keys then (stops adding keys at
    key_cap)."""
    state = np.zeros(1, dtype=np.int64)
    for i in range(start, n):
        state[0] = 0
        tp, tl = topic_pos[i], topic_len[i]
        prefix = (_utf8_units(buf, tp, tp + tl, 0, state) * 31 + 35) & 0xFFFFFFFF   # "topic#"
        p = props_pos[i]
        (tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay,
         has_delay) = _props(buf, p, p + props_len[i])
        tags_hash[i] = _tags_hash(buf, tags_lo, tags_hi, state)
        delay_level[i] = delay if has_delay else 0
        if (sys_flag[i] & 0xC) != 0xC:    # rollback records are not indexed
            if uniq_lo >= 0 and keys < key_cap:
                key_record[keys] = i
                key_hash[keys] = _index_hash(_utf8_units(buf, uniq_lo, uniq_hi, prefix, state))
                keys += 1
            if keys_lo >= 0:
                a = keys_lo
                while a <= keys_hi:
                    b = a
                    while b < keys_hi and buf[b] != 32:
                        b += 1
                    if b > a and keys < key_cap:
                        key_record[keys] = i
                        key_hash[keys] = _index_hash(_utf8_units(buf, a, b, prefix, state))
                        keys += 1
                    a = b + 1
        f = HAS_DELAY if has_delay else 0
        if state[0]:
            f |= UTF8_IRREGULAR
        flags[i] = f
    return keys


@dataclass
class Chunk:
    """Records decoded from one file: numpy columns, plus where and why the scan stopped.

    buf is the file's bytes (a uint8 array over its mapping): the *_pos columns
    point into it.  The commitlog walker yields these in its chunked mode."""

    count: int
    stop: int            # file position where decoding stopped
    kind: int            # REACHED_LIMIT, BLANK, ZEROS, DAMAGE or FULL
    reason: str | None   # for DAMAGE
    blank_size: int
    columns: dict
    buf: object = None
    path: str | None = None
    parsed: dict | None = None    # parse()'s columns, when someone has computed them
    names: dict | None = None     # topic_hash -> topic, for a chunk sent on without its buf

    def take(self, mask) -> "Chunk":
        """The records where mask is true (a walk window's edges)."""
        columns = {k: v[mask] for k, v in self.columns.items()}
        parsed = None
        if self.parsed is not None:
            mask = np.asarray(mask, dtype=np.bool_)
            parsed = {k: self.parsed[k][mask] for k in ("tags_hash", "delay_level", "flags")}
            kept = mask[self.parsed["key_record"]]
            renumber = np.cumsum(mask) - 1           # old record number -> new
            parsed["key_record"] = renumber[self.parsed["key_record"][kept]]
            parsed["key_hash"] = self.parsed["key_hash"][kept]
        return Chunk(len(columns["offset"]), self.stop, self.kind, self.reason, self.blank_size, columns,
                     self.buf, self.path, parsed, self.names)

    def topic(self, i: int) -> str:
        if self.buf is None:
            return self.names[int(self.columns["topic_hash"][i])]
        p, n = int(self.columns["topic_pos"][i]), int(self.columns["topic_len"][i])
        return bytes(self.buf[p:p + n]).decode("utf-8", "replace")

    def detached(self, keep=None) -> "Chunk":
        """This chunk without its buf (to send to another process): the parsed columns and the
        topic names come along, the *_pos columns (which point into buf) stay behind unless kept."""
        if self.parsed is None:
            self.parsed = parse(self.buf, self)
        hashes, first = np.unique(self.columns["topic_hash"], return_index=True)
        names = {int(h): self.topic(int(i)) for h, i in zip(hashes, first)}
        columns = {k: v for k, v in self.columns.items() if keep is None or k in keep}
        return Chunk(self.count, self.stop, self.kind, self.reason, self.blank_size, columns, None, self.path,
                     self.parsed, names)


COLUMNS = ("offset", "size", "queue_id", "queue_offset", "physical", "sys_flag", "store_ts", "crc_ok", "magic",
           "body_pos", "body_len", "topic_pos", "topic_len", "props_pos", "props_len", "topic_hash")


PARSED = ("tags_hash", "delay_level", "flags")


def scan(buf, pos: int, limit: int, base: int, check_crc: bool = True, cap: int = 1 << 16,
         parse_props: bool = False, key_factor: int = 4) -> Chunk:
    """Decode up to cap records from buf[pos:limit] (buf: the file's bytes as a uint8 array).
    parse_props: also fill chunk.parsed (parse()'s columns), in the same pass over the bytes."""
    cols = {name: np.empty(cap, dtype=np.bool_ if name == "crc_ok" else I64) for name in COLUMNS}
    rows, key_cap = (cap, max(16, key_factor * cap)) if parse_props else (0, 0)
    parsed = {name: np.empty(rows, dtype=I64) for name in PARSED}
    parsed.update(key_record=np.empty(key_cap, dtype=I64), key_hash=np.empty(key_cap, dtype=I64))
    n, stop, kind, reason, blank, keys = scan_records(
        buf, pos, limit, base, check_crc, cap, *(cols[c] for c in COLUMNS), parse_props,
        *(parsed[c] for c in PARSED), key_cap, parsed["key_record"], parsed["key_hash"])
    chunk = Chunk(n, stop, kind, REASONS.get(reason), blank, {k: v[:n] for k, v in cols.items()}, buf)
    if parse_props:
        if keys < key_cap:
            chunk.parsed = {k: v[:keys] if k.startswith("key_") else v[:n] for k, v in parsed.items()}
        else:   # more keys than room: parse() again, which makes room
            chunk.parsed = parse(buf, chunk, key_factor * 4)
    return chunk


def parse(buf, chunk: Chunk, key_factor: int = 4) -> dict:
    """parse_records for a chunk: tags_hash, delay_level, flags columns and the index keys
    (key_record, key_hash)."""
    c = chunk.columns
    n = chunk.count
    out = {name: np.empty(n, dtype=I64) for name in PARSED}
    cap = max(16, key_factor * n)
    while True:
        key_record = np.empty(cap, dtype=I64)
        key_hash = np.empty(cap, dtype=I64)
        keys = parse_records(buf, 0, n, c["sys_flag"], c["topic_pos"], c["topic_len"], c["props_pos"],
                             c["props_len"], out["tags_hash"], out["delay_level"], out["flags"], cap, 0,
                             key_record, key_hash)
        if keys < cap:
            break
        cap *= 4   # more keys than room: do it again with more room
    out["key_record"] = key_record[:keys]
    out["key_hash"] = key_hash[:keys]
    return out


# ------------------------------------------------- random access: consume queue and index checks

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
             plen) = _decode_at(buf, pos, limit)
            if kind != -1:
                code = UNIT_NOT_A_RECORD
            elif total != sizes[i]:
                code = UNIT_SIZE_MISMATCH
            elif (flag & 0xC) == 4 or (flag & 0xC) == 0xC:
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
                elif _i32(buf, pos + 12) != queue:
                    code = UNIT_WRONG_QUEUE
                elif _i64(buf, pos + 20) != logical[i]:
                    code = UNIT_WRONG_QUEUE_OFFSET
                else:
                    state[0] = 0
                    (tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay,
                     has_delay) = _props(buf, ppos, ppos + plen)
                    expected = _tags_hash(buf, tags_lo, tags_hi, state)
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
             plen) = _decode_at(buf, pos, limit)
            if kind != -1:
                code = ENTRY_NOT_A_RECORD
            elif (flag & 0xC) == 0xC:
                code = ENTRY_NOT_INDEXED
            else:
                store_ts[i] = ts
                state[0] = 0
                prefix = (_utf8_units(buf, tpos, tpos + tlen, 0, state) * 31 + 35) & 0xFFFFFFFF
                (tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay,
                 has_delay) = _props(buf, ppos, ppos + plen)
                matched = False
                if uniq_lo >= 0:
                    matched = _index_hash(_utf8_units(buf, uniq_lo, uniq_hi, prefix, state)) == hashes[i]
                if not matched and keys_lo >= 0:
                    a = keys_lo
                    while a <= keys_hi and not matched:
                        b = a
                        while b < keys_hi and buf[b] != 32:
                            b += 1
                        if b > a and _index_hash(_utf8_units(buf, a, b, prefix, state)) == hashes[i]:
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
    header = 40
    first = header + slots * 4
    used = 0
    n_slots = 0
    for slot in range(slots):
        head = _i32(buf, header + slot * 4)
        if head == 0:
            continue
        kind = 0
        if head < 0 or head >= count:
            kind = SLOT_OUT_OF_RANGE
        else:
            used += 1
            h = _i32(buf, first + head * 20)
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
        at = first + i * 20
        h = _i32(buf, at)
        phy = _i64(buf, at + 4)
        diff = _i32(buf, at + 12)
        prev = _i32(buf, at + 16)
        bad = h < 0 or diff < 0 or prev < 0 or prev >= i
        if not bad and prev > 0:
            ph = _i32(buf, first + prev * 20)
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
def units_by_records(records, offsets, sizes, tags, logical, topic_hash, topic_len, queue, schedule, delays, found):
    """check_units' UNIT_* code for each unit, from the columns of the records (scanned()'s
    SCANNED and PARSED columns, as a tuple): UNSETTLED where the unit does not point at the start
    of a scanned record, or the record's strings are not plain UTF-8, or its DELAY is unreadable.
    The topic is compared by its topic_hash and length (as _check_chunk groups queues).  Returns
    how many are unsettled."""
    (offset, size, queue_id, queue_offset, sys_flag, store_ts, t_hash, t_len, tags_hash, delay_level,
     flags) = records
    unsettled = 0
    j = 0
    for i in range(len(offsets)):
        j = _find(offset, offsets[i], j)
        code = UNSETTLED
        if j < len(offset) and offset[j] == offsets[i] and not flags[j] & UTF8_IRREGULAR:
            delayed = schedule and (flags[j] & HAS_DELAY) != 0
            delay = delay_level[j]
            if not (delayed and delay < 0):
                expected = tags_hash[j]
                if delayed and delay > 0:
                    expected = store_ts[j] + delays[min(delay, len(delays)) - 1]
                tx = sys_flag[j] & 0xC
                if size[j] != sizes[i]:
                    code = UNIT_SIZE_MISMATCH
                elif tx == 4 or tx == 0xC:
                    code = UNIT_NOT_DISPATCHED
                elif t_hash[j] != topic_hash or t_len[j] != topic_len:
                    code = UNIT_WRONG_TOPIC
                elif queue_id[j] != queue:
                    code = UNIT_WRONG_QUEUE
                elif queue_offset[j] != logical[i]:
                    code = UNIT_WRONG_QUEUE_OFFSET
                elif expected != tags[i]:
                    code = UNIT_WRONG_TAGS_CODE
                else:
                    code = UNIT_OK
        found[i] = code
        if code == UNSETTLED:
            unsettled += 1
    return unsettled


@njit(cache=True, nogil=True)
def entries_by_records(offset, sys_flag, store_ts, flags, first_key, key_hash, phy, hashes, ts, found):
    """check_entries' ENTRY_* code and store time for each entry, from the columns of the
    records (scanned()): UNSETTLED where the entry does not point at the start of a scanned
    record, or the record's strings are not plain UTF-8.  Returns how many are unsettled."""
    unsettled = 0
    j = 0
    for i in range(len(phy)):
        j = _find(offset, phy[i], j)
        code = UNSETTLED
        ts[i] = 0
        if j < len(offset) and offset[j] == phy[i] and not flags[j] & UTF8_IRREGULAR:
            if (sys_flag[j] & 0xC) == 0xC:
                code = ENTRY_NOT_INDEXED
            else:
                ts[i] = store_ts[j]
                code = ENTRY_WRONG_HASH
                for k in range(first_key[j], first_key[j + 1]):
                    if key_hash[k] == hashes[i]:
                        code = ENTRY_OK
                        break
        found[i] = code
        if code == UNSETTLED:
            unsettled += 1
    return unsettled


def topic_hash(topic: str) -> int:
    """The topic_hash column's value for a topic: FNV-1a of its UTF-8 bytes, as a signed int64."""
    h = 0xCBF29CE484222325
    for b in topic.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h


def check_units_scanned(records: dict, buf, base, limit, offsets, sizes, tags, logical, topic: str, queue,
                        schedule, delays):
    """check_units' codes, from the columns of the records (scanned()) instead of their bytes;
    check_units itself for the units those cannot settle.  Returns (codes, how many units were
    checked by reading buf)."""
    found = np.empty(len(offsets), dtype=I64)
    name = topic.encode("utf-8")
    unsettled = units_by_records(tuple(records[k] for k in SCANNED + PARSED), offsets, sizes, tags, logical,
                                 topic_hash(topic), len(name), queue, schedule, delays, found)
    if unsettled:
        rest = np.flatnonzero(found == UNSETTLED)
        codes = np.empty(len(rest), dtype=I64)
        check_units(buf, base, limit, offsets[rest], sizes[rest], tags[rest], logical[rest],
                    np.frombuffer(name, dtype=np.uint8), queue, schedule, delays, codes)
        found[rest] = codes
    return found, unsettled


def check_entries_scanned(records: dict, buf, base, limit, phy, hashes, store_ts):
    """check_entries' codes and store times (into store_ts), from the columns of the records
    (scanned()) instead of their bytes; check_entries itself for the entries those cannot settle.
    Returns (codes, how many entries were checked by reading buf)."""
    found = np.empty(len(phy), dtype=I64)
    unsettled = entries_by_records(records["offset"], records["sys_flag"], records["store_ts"], records["flags"],
                                   records["first_key"], records["key_hash"], phy, hashes, store_ts, found)
    if unsettled:
        rest = np.flatnonzero(found == UNSETTLED)
        codes, times = np.empty(len(rest), dtype=I64), np.empty(len(rest), dtype=I64)
        check_entries(buf, base, limit, phy[rest], hashes[rest], times, codes)
        found[rest], store_ts[rest] = codes, times
    return found, unsettled


def warm_up() -> None:
    """Load every kernel from the compile cache now, with the argument types of the real
    calls (a read-only mapping is a different array type to numba), so that forked
    workers inherit them instead of each loading them again."""
    buf = np.frombuffer(bytes(64), dtype=np.uint8)           # read-only, like a file mapping
    scan(buf, 0, 64, 0, True, 1)
    one = np.zeros(1, dtype=I64)
    check_units(buf, 0, 64, one, one, one, one, np.frombuffer(b"T", dtype=np.uint8), 0, False, one, one.copy())
    check_entries(buf, 0, 64, one, one, one.copy(), one.copy())
    hop_to(buf, 0, 64, 64)
    lower_bound(buf, 0, 20, 0, 1, 0)
    index_structure(buf, 1, 1, one.copy(), one.copy(), one.copy())
    records = scanned([])
    check_units_scanned(records, buf, 0, 64, one, one, one, one, "T", 0, False, one)
    check_entries_scanned(records, buf, 0, 64, one, one, one.copy())
