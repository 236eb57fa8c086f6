"""The commitlog walk, compiled: records of a mapped file as numpy columns.

mqtool/storage/commitlog.py is the reference walker (one Record object per record);
commands that must read gigabytes per second (verify-crc, rebuild-cq,
recovery's re-dispatch) use these kernels instead, which decode the same
layout (mqtool/formats/commitlog.py) into arrays, check body CRCs with
ISA-L, and parse what dispatch needs from the properties (tags hash code,
delay level, the Java hash codes of the index keys).  They stop at the first
entry that is not a valid record and say why; the caller resynchronises with
commitlog.resync, the same as the reference walker.  tests/test_fastscan.py
checks every column against the reference walker on the fixtures and on
damaged copies.

verify-crc's own kernels (units and index entries against the records they
point at) are mqtool/forensics/verify/kernels.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mqtool.formats import commitlog, dledger
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6, TRANSACTION_MASK, TRANSACTION_ROLLBACK
from mqtool.formats.primitives import (
    delay_level,
    has_value,
    i32,
    i64,
    index_hash,
    is_name,
    java_hash,
    key_end,
    key_prefix,
    pair_at,
    signed32,
    u32,
    U,
    word_at,
)
from mqtool.native import aot
from mqtool.native.jit import crc32, njit, prefetch

I64 = np.int64

# scan_records stops with one of these
REACHED_LIMIT = 0
BLANK = 1
ZEROS = 2
DAMAGE = 3
FULL = 4

# damage reasons (the reference walker's RecordError kinds)
REASONS = {1: "bad-magic", 2: "bad-size", 3: "bad-length", 4: "bad-blank", 5: "truncated"}

MAGIC_V1 = commitlog.MAGIC_V1
MAGIC_V2 = commitlog.MAGIC_V2
BLANK_MAGIC = commitlog.BLANK_MAGIC
MIN_RECORD = commitlog.MIN_RECORD_LENGTH
BLANK_HEADER = commitlog.BLANK_HEADER_SIZE
# the record's layout (formats/commitlog.py derives it from the schema): module-level ints, which
# numba compiles in as constants
MAGIC_AT = commitlog.MAGIC_AT
BODY_CRC_AT = commitlog.BODY_CRC_AT
QUEUE_ID_AT = commitlog.QUEUE_ID_AT
QUEUE_OFFSET_AT = commitlog.QUEUE_OFFSET_AT
PHYSICAL_OFFSET_AT = commitlog.PHYSICAL_OFFSET_AT
SYS_FLAG_AT = commitlog.SYS_FLAG_AT
BORN_HOST_AT = commitlog.BORN_HOST_AT
HOST_V4 = commitlog.HOST_V4_SIZE
HOST_V6 = commitlog.HOST_V6_SIZE
STORE_HOST_AFTER = commitlog.STORE_HOST_AFTER_BORN_HOST
BODY_LENGTH_IN_TAIL = commitlog.BODY_LENGTH_IN_TAIL
BODY_IN_TAIL = commitlog.BODY_IN_TAIL
TOPIC_LENGTH_V1 = commitlog.TOPIC_LENGTH_SIZE_V1      # the topic's length: 1 byte in V1, 2 in V2
TOPIC_LENGTH_V2 = commitlog.TOPIC_LENGTH_SIZE_V2
PROPERTIES_LENGTH = commitlog.PROPERTIES_LENGTH_SIZE

# per-record flag bits set by parse_records
UTF8_IRREGULAR = 1     # topic or a parsed property is not plain UTF-8: recompute in Python
HAS_DELAY = 2


@njit(cache=True, inline="always")
def decode_at(buf, pos, limit):
    """One entry at pos: (kind, reason, total, magic, sysFlag, storeTimestamp, body pos, body length,
    topic pos, topic length, properties pos, properties length).  kind is -1 for a record, else
    BLANK, ZEROS or DAMAGE (with a reason code); the layout is formats/commitlog.py's."""
    if limit - pos < BLANK_HEADER:
        for k in range(pos, limit):
            if buf[k] != 0:
                return DAMAGE, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        return ZEROS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
    total = i32(buf, pos)
    magic = u32(buf, pos + MAGIC_AT)
    if magic == BLANK_MAGIC:
        if total < BLANK_HEADER or total != limit - pos:
            return DAMAGE, 4, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
        return BLANK, 0, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        if total == 0 and magic == 0:
            return ZEROS, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
        return DAMAGE, 1, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
    if total < MIN_RECORD or total > limit - pos:
        return DAMAGE, 2, total, magic, 0, 0, 0, 0, 0, 0, 0, 0
    end = pos + total
    flag = i32(buf, pos + SYS_FLAG_AT)
    p = pos + BORN_HOST_AT + (HOST_V6 if flag & BORNHOST_V6 else HOST_V4)    # storeTimestamp
    ts = i64(buf, p)
    p += STORE_HOST_AFTER + (HOST_V6 if flag & STOREHOST_V6 else HOST_V4)   # the tail
    if p + BODY_IN_TAIL > end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    blen = i32(buf, p + BODY_LENGTH_IN_TAIL)
    p += BODY_IN_TAIL
    if blen < 0 or p + blen > end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    bpos = p
    p += blen
    if magic == MAGIC_V2:
        if p + TOPIC_LENGTH_V2 > end:
            return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
        tlen = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
        if tlen >= 0x8000:
            tlen -= 0x10000
        p += TOPIC_LENGTH_V2
    else:
        if p + TOPIC_LENGTH_V1 > end:
            return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
        tlen = np.int64(buf[p])
        if tlen >= 0x80:
            tlen -= 0x100
        p += TOPIC_LENGTH_V1
    if tlen < 0 or p + tlen + PROPERTIES_LENGTH > end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    tpos = p
    p += tlen
    plen = (np.int64(buf[p]) << 8) | np.int64(buf[p + 1])
    if plen >= 0x8000:
        plen -= 0x10000
    p += PROPERTIES_LENGTH
    if plen < 0 or p + plen != end:
        return DAMAGE, 3, total, magic, flag, ts, 0, 0, 0, 0, 0, 0
    return -1, 0, total, magic, flag, ts, bpos, blen, tpos, tlen, p, plen


TOPIC_HASH_SEED = 0xCBF29CE484222325
TOPIC_HASH_MULTIPLIER = 0x9E3779B97F4A7C15


@njit(cache=True, inline="always")
def _topic_hash(buf, p, n):
    """The topic_hash column: a 64-bit hash of a topic's bytes buf[p:p+n], which groups records by
    topic without Python strings.  Eight bytes a step (a byte a step, FNV-1a's chain of
    multiplications cost a tenth of a scan); topic_hash() is the same in Python."""
    h = U(TOPIC_HASH_SEED) ^ U(n)
    k = 0
    while k < n:
        h = (h ^ word_at(buf, p + k, min(8, n - k))) * U(TOPIC_HASH_MULTIPLIER)
        h ^= h >> U(32)
        k += 8
    return np.int64(h)


def topic_hash(topic: str) -> int:
    """The topic_hash column's value for a topic (_topic_hash of its UTF-8 bytes)."""
    data = topic.encode("utf-8")
    h = TOPIC_HASH_SEED ^ len(data)
    for k in range(0, len(data), 8):
        h = ((h ^ int.from_bytes(data[k:k + 8], "little")) * TOPIC_HASH_MULTIPLIER) & 0xFFFFFFFFFFFFFFFF
        h ^= h >> 32
    return h - (1 << 64) if h >= 1 << 63 else h


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
        if limit - pos >= BLANK_HEADER:
            ahead = i32(buf, pos)
            if 0 < ahead and pos + 9 * ahead <= limit:
                # records of one size are common: the header and the tail (topic, properties)
                # of the record 8 ahead, so that they are in the cache when the walk gets there
                prefetch(addr + pos + 8 * ahead)
                prefetch(addr + pos + 9 * ahead - 1)
        (kind, reason, total, magic, flag, ts, bpos, blen, tpos, tlen, ppos,
         plen) = decode_at(buf, pos, limit)
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
            ok = crc == i32(buf, pos + BODY_CRC_AT)
        offset[n] = base + pos
        size[n] = total
        queue_id[n] = i32(buf, pos + QUEUE_ID_AT)
        queue_offset[n] = i64(buf, pos + QUEUE_OFFSET_AT)
        physical[n] = i64(buf, pos + PHYSICAL_OFFSET_AT)
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
        topic_hash[n] = _topic_hash(buf, tpos, tlen)
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
    while limit - pos >= BLANK_HEADER:
        total = i32(buf, pos)
        if 0 < total and pos + 16 * total < limit:
            prefetch(addr + pos + 16 * total)   # records of one size are common: their headers ahead
        magic = u32(buf, pos + MAGIC_AT)
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
        if i64(buf, start + mid * stride) < value:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, inline="always")
def read_props(buf, p, end):
    """The properties the store reads, found in buf[p:end] by the broker's rules (pairs split on
    0x02, name and value on the first 0x01, empty names or values skipped, the last duplicate
    wins): (TAGS lo, hi, KEYS lo, hi, UNIQ_KEY lo, hi, DELAY value or -1 if unreadable, has DELAY)."""
    tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi = -1, -1, -1, -1, -1, -1
    delay = 0
    has_delay = False
    while p < end:
        s, q = pair_at(buf, p, end)
        if has_value(p, s, q):
            if is_name(buf, p, s, (84, 65, 71, 83)):                       # TAGS
                tags_lo, tags_hi = s + 1, q
            elif is_name(buf, p, s, (75, 69, 89, 83)):                     # KEYS
                keys_lo, keys_hi = s + 1, q
            elif is_name(buf, p, s, (85, 78, 73, 81, 95, 75, 69, 89)):     # UNIQ_KEY
                uniq_lo, uniq_hi = s + 1, q
            elif is_name(buf, p, s, (68, 69, 76, 65, 89)):                 # DELAY
                has_delay = True
                delay = delay_level(buf, s + 1, q)
        p = q + 1
    return tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay, has_delay


@njit(cache=True, inline="always")
def tags_hash_of(buf, lo, hi, state):
    """The tags code of a record whose TAGS value is buf[lo:hi] (none: lo = hi = -1, read_props'
    answer, which hashes to 0, the code of no tags).  No branch of its own: around one, numba
    could not drop the reference counts of the arrays it is given, which cost a tenth of a scan."""
    return signed32(java_hash(buf, lo, hi, 0, state))


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
        prefix = key_prefix(java_hash(buf, tp, tp + tl, 0, state))
        p = props_pos[i]
        (tags_lo, tags_hi, keys_lo, keys_hi, uniq_lo, uniq_hi, delay,
         has_delay) = read_props(buf, p, p + props_len[i])
        tags_hash[i] = tags_hash_of(buf, tags_lo, tags_hi, state)
        delay_level[i] = delay if has_delay else 0
        if (sys_flag[i] & TRANSACTION_MASK) != TRANSACTION_ROLLBACK:    # rollback records are not indexed
            if uniq_lo >= 0 and keys < key_cap:
                key_record[keys] = i
                key_hash[keys] = index_hash(java_hash(buf, uniq_lo, uniq_hi, prefix, state))
                keys += 1
            if keys_lo >= 0:
                a = keys_lo
                while a <= keys_hi:
                    b = key_end(buf, a, keys_hi)
                    if b > a and keys < key_cap:
                        key_record[keys] = i
                        key_hash[keys] = index_hash(java_hash(buf, a, b, prefix, state))
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


def _room(names, cap: int, parse_props: bool, key_factor: int):
    """The arrays a scan fills: (columns of cap rows, parse()'s columns and key room, key room)."""
    cols = {name: np.empty(cap, dtype=np.bool_ if name == "crc_ok" else I64) for name in names}
    rows, key_cap = (cap, max(16, key_factor * cap)) if parse_props else (0, 0)
    parsed = {name: np.empty(rows, dtype=I64) for name in PARSED}
    parsed.update(key_record=np.empty(key_cap, dtype=I64), key_hash=np.empty(key_cap, dtype=I64))
    return cols, parsed, key_cap


def _parsed(chunk: Chunk, parsed: dict, keys: int, key_cap: int, parse_props: bool, key_factor: int) -> Chunk:
    """The chunk with its parse() columns (when asked), cut to its rows and keys; with as many
    keys as room, parse() again, which makes room."""
    if parse_props:
        if keys < key_cap:
            chunk.parsed = {k: v[:keys] if k.startswith("key_") else v[:chunk.count] for k, v in parsed.items()}
        else:
            chunk.parsed = parse(chunk.buf, chunk, key_factor * 4)
    return chunk


def scan(buf, pos: int, limit: int, base: int, check_crc: bool = True, cap: int = 1 << 16,
         parse_props: bool = False, key_factor: int = 4) -> Chunk:
    """Decode up to cap records from buf[pos:limit] (buf: the file's bytes as a uint8 array).
    parse_props: also fill chunk.parsed (parse()'s columns), in the same pass over the bytes."""
    cols, parsed, key_cap = _room(COLUMNS, cap, parse_props, key_factor)
    n, stop, kind, reason, blank, keys = scan_records(
        buf, pos, limit, base, check_crc, cap, *(cols[c] for c in COLUMNS), parse_props,
        *(parsed[c] for c in PARSED), key_cap, parsed["key_record"], parsed["key_hash"])
    chunk = Chunk(n, stop, kind, REASONS.get(reason), blank, {k: v[:n] for k, v in cols.items()}, buf)
    return _parsed(chunk, parsed, keys, key_cap, parse_props, key_factor)


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



# ------------------------------------------------------------------ DLedger entries
# A DLedger data file (mqtool/formats/dledger.py) holds one record per entry, at the entry's
# pos + its header's size.  scan_entries decodes each entry's body as scan_records decodes a region of one record
# (the same decode_at, inline, with no call or array slices per entry), so a run of entries costs
# what a run of records does.

DLEDGER_HEADER = dledger.HEADER_SIZE
DLEDGER_MAGIC = dledger.MAGIC_1
ENTRY_SIZE_AT = dledger.ENTRY_FIELD_AT["size"]
ENTRY_INDEX_AT = dledger.ENTRY_FIELD_AT["index"]
ENTRY_TERM_AT = dledger.ENTRY_FIELD_AT["term"]
ENTRY_POS_AT = dledger.ENTRY_FIELD_AT["pos"]
ENTRY_BODY_LENGTH_AT = dledger.ENTRY_FIELD_AT["bodyLength"]
ENTRY_COLUMNS = ("entry_index", "entry_term")   # scan_dledger's columns beyond scan()'s


@njit(cache=True, nogil=True)
def scan_entries(buf, pos, limit, base, check_crc, cap, offset, size, queue_id, queue_offset, physical,
                 sys_flag, store_ts, crc_ok, magic_out, body_pos, body_len, topic_pos, topic_len,
                 props_pos, props_len, topic_hash, parse, tags_hash, delay_level, flags, key_cap, key_record,
                 key_hash, entry_index, entry_term):
    """The records of the DLedger entries from pos on, while each entry is one DLedger's recovery
    accepts (magic, size against the header and body length, pos field) whose body is exactly one
    valid record; the columns as scan_records fills them, and each entry's index and term
    (entry_index, entry_term: what verify's ledger checks need, read here in the same pass).  Returns (count, stop position, stop
    kind, number of keys): REACHED_LIMIT, FULL (cap records or key_cap keys) or DAMAGE for
    anything else at the stop position (a blank, zeros, a bad entry or body: the reference walk
    says which)."""
    addr = buf.ctypes.data
    n = keys = 0
    kind = REACHED_LIMIT
    while True:
        if n >= cap or (parse and keys >= key_cap):
            kind = FULL
            break
        if pos >= limit:
            kind = REACHED_LIMIT
            break
        if limit - pos < DLEDGER_HEADER or i32(buf, pos) != DLEDGER_MAGIC:
            kind = DAMAGE
            break
        total = i32(buf, pos + ENTRY_SIZE_AT)
        if 0 < total and pos + 9 * total <= limit:
            # as scan_records does: the entry 8 ahead (its header, the record's tail), in the
            # cache by the time the walk gets there
            prefetch(addr + pos + 8 * total)
            prefetch(addr + pos + 9 * total - 1)
        if (total <= DLEDGER_HEADER or i32(buf, pos + ENTRY_BODY_LENGTH_AT) + DLEDGER_HEADER != total
                or i64(buf, pos + ENTRY_POS_AT) != base + pos or total > limit - pos):
            kind = DAMAGE
            break
        end = pos + total
        # the body as scan_records decodes a region of one record, inline (no call, no array
        # slices per entry): exactly one valid record, ending where the entry ends
        at = pos + DLEDGER_HEADER
        (got, _, size_, magic, flag, ts, bpos, blen, tpos, tlen, ppos,
         plen) = decode_at(buf, at, end)
        if got != -1 or at + size_ != end:
            kind = DAMAGE
            break
        # the columns as scan_records fills them, written out again on purpose: a shared
        # (non-inlined) helper made the ahead-of-time walk half as fast again, and numba cannot
        # inline a function of this many arguments
        ok = True
        if check_crc:
            crc = 0
            if blen > 0:
                crc = crc32(0, addr + bpos, blen) & 0x7FFFFFFF
            ok = crc == i32(buf, at + BODY_CRC_AT)
        offset[n] = base + at
        size[n] = size_
        queue_id[n] = i32(buf, at + QUEUE_ID_AT)
        queue_offset[n] = i64(buf, at + QUEUE_OFFSET_AT)
        physical[n] = i64(buf, at + PHYSICAL_OFFSET_AT)
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
        topic_hash[n] = _topic_hash(buf, tpos, tlen)
        entry_index[n] = i64(buf, pos + ENTRY_INDEX_AT)
        entry_term[n] = i64(buf, pos + ENTRY_TERM_AT)
        if parse:
            keys = parse_records(buf, n, n + 1, sys_flag, topic_pos, topic_len, props_pos, props_len, tags_hash,
                                 delay_level, flags, key_cap, keys, key_record, key_hash)
        n += 1
        pos = end
    return n, pos, kind, keys


def scan_dledger(buf, pos: int, limit: int, base: int, check_crc: bool = True, cap: int = 1 << 16,
                 parse_props: bool = False, key_factor: int = 4) -> Chunk:
    """scan() of a DLedger data file: the records of up to cap entries from pos (an entry's
    start); the chunk stops (kind DAMAGE, no reason) at anything but such an entry.  Its columns
    are scan()'s and ENTRY_COLUMNS (each record's entry index and term)."""
    cols, parsed, key_cap = _room(COLUMNS + ENTRY_COLUMNS, cap, parse_props, key_factor)
    n, stop, kind, keys = scan_entries(
        buf, pos, limit, base, check_crc, cap, *(cols[c] for c in COLUMNS), parse_props,
        *(parsed[c] for c in PARSED), key_cap, parsed["key_record"], parsed["key_hash"],
        *(cols[c] for c in ENTRY_COLUMNS))
    chunk = Chunk(n, stop, kind, None, 0, {k: v[:n] for k, v in cols.items()}, buf)
    return _parsed(chunk, parsed, keys, key_cap, parse_props, key_factor)


@njit(cache=True, nogil=True)
def hop_entries(buf, pos, limit, target):
    """hop_to over DLedger entries (magic 1, then the size): the first entry that starts at or after
    target, -1 when anything else (a blank, zeros, damage) comes first."""
    addr = buf.ctypes.data
    while limit - pos >= DLEDGER_HEADER:
        total = i32(buf, pos + ENTRY_SIZE_AT)
        if 0 < total and pos + 16 * total < limit:
            prefetch(addr + pos + 16 * total)
        if i32(buf, pos) != DLEDGER_MAGIC or total <= DLEDGER_HEADER or total > limit - pos:
            return -1
        if pos >= target:
            return pos
        pos += total
    return -1


# ------------------------------------------------------------------ a walk of copies

WINDOW_BYTES = 4 << 20     # scan_copies' window: it stays in the CPU's cache while a walk reads it
POSITION_COLUMNS = ("body_pos", "topic_pos", "props_pos")   # positions in the file's bytes


def scan_copies(read, window, whole, pos: int, limit: int, base: int, check_crc: bool = True,
                cap: int = 1 << 16, parse_props: bool = False, entries: bool = False, key_factor: int = 4) -> Chunk:
    """scan() (scan_dledger() with entries) of a file whose bytes are copied into window (a uint8
    array) a window at a time, read(view, position) copying them (MappedFile.read_into), instead
    of read through its mapping: up to cap records into one chunk, from as many windows as they
    take.  A window's end cuts a record: the next window starts with it.  Where decoding stops
    at the start of a window that ends short of limit (a record longer than the window, a
    BLANK, damage), the stop is decided on the file itself, whole (its mapping as a uint8 array),
    as scan() decides it.  The chunk's positions and buf are whole's."""
    cols, parsed, key_cap = _room(COLUMNS + (ENTRY_COLUMNS if entries else ()), cap, parse_props, key_factor)
    n = keys = 0
    kind, reason, blank = REACHED_LIMIT, 0, 0
    while pos < limit:
        if n >= cap or (parse_props and keys >= key_cap):
            kind = FULL
            break
        got = read(window[:min(len(window), limit - pos)], pos)
        short = pos + got < limit           # the window ends before limit: a stop in it may be its end's
        buf, at, end, shift = (window, 0, got, pos) if got > 0 else (whole, pos, limit, 0)
        count, stop, kind, reason, blank, found = _scan_into(buf, at, end, base + pos - at, check_crc, cap,
                                                             cols, n, parse_props, parsed, key_cap, keys, entries)
        if not count and short and kind != FULL and buf is window:   # stopped at the window's start
            count, stop, kind, reason, blank, found = _scan_into(whole, pos, limit, base, check_crc, n + 1, cols, n,
                                                                 parse_props, parsed, key_cap, keys, entries)
            shift = 0
            if kind == FULL:          # the one record asked for: the walk goes on in the next window
                kind = REACHED_LIMIT
        if shift:
            for name in POSITION_COLUMNS:
                cols[name][n:n + count] += shift
        if found:
            parsed["key_record"][keys:keys + found] += n
        n, keys, pos = n + count, keys + found, stop + shift
        if kind == FULL or not count or not short and kind != REACHED_LIMIT:
            break
    chunk = Chunk(n, pos, kind, None if entries else REASONS.get(reason), blank, {k: v[:n] for k, v in cols.items()},
                  whole)
    return _parsed(chunk, parsed, keys, key_cap, parse_props, key_factor)


def _scan_into(buf, pos, limit, base, check_crc, cap, cols, n, parse_props, parsed, key_cap, keys, entries):
    """scan_records (scan_entries) from buf[pos] into the columns from row n (and keys from key
    number keys) on: (records, stop, kind, reason, blank size, keys found); stop is in buf."""
    tail = [cols[c][n:] for c in COLUMNS]
    rest = [parsed[c][n:] for c in PARSED]
    key_room = max(key_cap - keys, 0)
    if entries:
        count, stop, kind, found = scan_entries(
            buf, pos, limit, base, check_crc, cap - n, *tail, parse_props, *rest, key_room,
            parsed["key_record"][keys:], parsed["key_hash"][keys:], *(cols[c][n:] for c in ENTRY_COLUMNS))
        return count, stop, kind, 0, 0, found
    return scan_records(buf, pos, limit, base, check_crc, cap - n, *tail, parse_props, *rest, key_room,
                        parsed["key_record"][keys:], parsed["key_hash"][keys:])


PART_BYTES = 128 << 20   # files are walked in parts of about this size where work is spread out


def split_points(mf, part_bytes: int | None = None, entries: bool = False) -> list[int]:
    """Record boundaries about part_bytes (PART_BYTES) apart where a file can be cut into parts
    that are walked on their own, in parallel: cut_points, all of them."""
    return list(cut_points(mf, part_bytes, entries))


def cut_points(mf, part_bytes: int | None = None, entries: bool = False):
    """split_points one at a time, each as soon as the hop over record headers (quick, but it
    reads every page) has found it: a part can start while the hop goes on to the next.  The
    hop's pages are let go as it goes.  mf: a storage.mappedfile.MappedFile.  entries: mf is a
    DLedger data file (the cuts are at entry starts, hopping over entries)."""
    part_bytes = part_bytes or PART_BYTES
    if mf.file_size < 2 * part_bytes:
        return
    buf = np.frombuffer(mf.buf, dtype=np.uint8)
    pos = 0
    try:
        while pos + 2 * part_bytes <= mf.file_size:
            pos = (hop_entries if entries else hop_to)(buf, pos, mf.file_size, pos + part_bytes)
            if pos < 0:
                break
            mf.drop_pages_before(pos)
            yield pos
    finally:
        del buf


def warm_up() -> None:
    """Load every kernel from the compile cache now, with the argument types of the real
    calls (a read-only mapping is a different array type to numba), so that forked
    workers inherit them instead of each loading them again."""
    buf = np.frombuffer(bytes(64), dtype=np.uint8)           # read-only, like a file mapping
    scan(buf, 0, 64, 0, True, 1)
    scan_dledger(buf, 0, 64, 0, True, 1)
    hop_to(buf, 0, 64, 64)
    hop_entries(buf, 0, 64, 64)
    lower_bound(buf, 0, 20, 0, 1, 0)


aot.adopt(globals(), "fastscan")   # the kernels built ahead of time, where they are (native/aot.py)
