"""Compiled reading of JSON lines of message specs, for the common shape only.

`mqtool append` at a broker's rate cannot afford a JSON parse and checks in Python per
line.  A block of lines is scanned here at once: a line is "fast" when it is one flat
object whose fields are among FIELDS (each at most once), text values printable ASCII
without escapes, numbers whole and in range; its values stay where they are in the
block (start and length).  Every other line is "slow" and goes through the reference
path (orjson, spec.to_message), which also words every error: nothing is refused here.

mqtool/broker/specblock.py is the only caller; tests/test_specblock.py checks that the
fast lines store exactly what the reference path stores.
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.primitives import HIGHS, ONES, index_hash, java_hash, key_end, key_prefix, signed32
from mqtool.native import aot
from mqtool.native.jit import njit

I64 = np.int64

# text fields first (their values are slices of the block), then whole numbers
TEXTS = ("topic", "tags", "keys", "body", "bornHost")
NUMBERS = ("queueId", "bornTimestamp", "flag", "reconsumeTimes", "storeTimestamp")
FIELDS = TEXTS + NUMBERS
TOPIC, TAGS, KEYS, BODY, HOST = range(5)
QUEUE, BORN_TS, FLAG, RECONSUME, STORE_TS = range(5)
# a number's range comes from the caller (low, high: broker/spec.py's RANGES, in NUMBERS' order);
# a number of more than 18 digits makes the line slow

FAST, SLOW, BLANK = 0, 1, 2
# per byte inside a string: 0 plain text, 1 anything else (the closing quote, a backslash, a
# control character, non-ASCII)
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[:32] = 1
_CLASS[[34, 92]] = 1
_CLASS[127:] = 1


def field_names() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FIELDS as one byte buffer with each name's start and length (the kernel's key table)."""
    data = "".join(FIELDS).encode("ascii")
    lengths = np.array([len(f) for f in FIELDS], dtype=I64)
    return np.frombuffer(data, dtype=np.uint8), np.cumsum(lengths) - lengths, lengths


def words(buf: np.ndarray) -> np.ndarray:
    """buf's whole eight-byte words, as uint64 (the scan tests eight bytes at once)."""
    return buf[:len(buf) // 8 * 8].view(np.uint64)


@njit(cache=True, inline="always")
def _space(b):
    return b == 32 or b == 9 or b == 13


@njit(cache=True, inline="always")
def _special(x):
    """Whether a word (eight bytes) holds a byte of _CLASS 1: a quote or backslash (a zero byte
    once xored), a control character (below 0x20) or 127 and up (the top bit after adding 1).
    A borrow or carry can say yes for a plain word too (the byte loop then decides), never no
    for a word holding one."""
    quote = x ^ np.uint64(0x2222222222222222)
    backslash = x ^ np.uint64(0x5C5C5C5C5C5C5C5C)
    found = (quote - ONES) & ~quote
    found |= (backslash - ONES) & ~backslash
    found |= (x - np.uint64(0x2020202020202020)) & ~x
    found |= (x + ONES) | x
    return (found & HIGHS) != 0


@njit(cache=True)
def _scan_line(buf, words, p, end, names, name_off, name_len, low, high, i, present, text_off, text_len, numbers):
    """One line [p, end): FAST, SLOW or BLANK; a fast line's values into row i."""
    while p < end and _space(buf[p]):
        p += 1
    if p == end:
        return BLANK
    if buf[p] != 123:      # {
        return SLOW
    p += 1
    seen = 0
    while True:
        while p < end and _space(buf[p]):
            p += 1
        if p == end or buf[p] != 34:   # a key's opening quote
            return SLOW
        p += 1
        k = p
        while p < end and buf[p] != 34:
            p += 1
        if p == end:
            return SLOW
        field = -1
        for f in range(name_len.shape[0]):
            if name_len[f] == p - k:
                same = True
                for j in range(p - k):
                    if buf[k + j] != names[name_off[f] + j]:
                        same = False
                        break
                if same:
                    field = f
                    break
        if field < 0 or seen & (1 << field):
            return SLOW
        seen |= 1 << field
        p += 1
        while p < end and _space(buf[p]):
            p += 1
        if p == end or buf[p] != 58:   # :
            return SLOW
        p += 1
        while p < end and _space(buf[p]):
            p += 1
        if p == end:
            return SLOW
        if field < 5:       # text: printable ASCII, no escapes
            if buf[p] != 34:
                return SLOW
            p += 1
            s = p
            while p < end and p & 7 and _CLASS[buf[p]] == 0:
                p += 1
            if p < end and _CLASS[buf[p]] == 0:     # aligned: eight bytes at a time while none is special
                w = p >> 3
                while 8 * w + 8 <= end and not _special(words[w]):
                    w += 1
                p = 8 * w
                while p < end and _CLASS[buf[p]] == 0:
                    p += 1
            if p == end or buf[p] != 34:    # the end, an escape, a control or non-ASCII byte
                return SLOW
            text_off[i, field] = s
            text_len[i, field] = p - s
            p += 1
        else:
            negative = buf[p] == 45
            if negative:
                p += 1
            s = p
            value = 0
            while p < end and 48 <= buf[p] <= 57:
                value = value * 10 + (buf[p] - 48)
                p += 1
            digits = p - s
            if digits == 0 or digits > 18 or (digits > 1 and buf[s] == 48):
                return SLOW
            if p < end and (buf[p] == 46 or buf[p] == 101 or buf[p] == 69):   # . e E: not a whole number
                return SLOW
            if negative:
                value = -value
            n = field - 5
            if value < low[n] or value > high[n]:
                return SLOW
            numbers[i, n] = value
        while p < end and _space(buf[p]):
            p += 1
        if p == end:
            return SLOW
        if buf[p] == 44:     # ,
            p += 1
            continue
        if buf[p] != 125:    # }
            return SLOW
        p += 1
        break
    while p < end and _space(buf[p]):
        p += 1
    if p != end or not seen & 1:                 # trailing text, or no topic
        return SLOW
    if (seen & (1 << TAGS) and text_len[i, TAGS] == 0) or (seen & (1 << KEYS) and text_len[i, KEYS] == 0):
        return SLOW     # empty tags or keys: the reference path decides
    present[i] = seen
    return FAST


@njit(cache=True, nogil=True)
def scan_lines(buf, words, starts, ends, names, name_off, name_len, low, high, status, present, text_off, text_len,
               numbers):
    """Each line starts[i]..ends[i] of buf (no newline) into status[i] and its row.  words: buf's
    whole eight-byte words as uint64 (words(buf))."""
    for i in range(starts.shape[0]):
        for f in range(5):
            text_len[i, f] = -1
            numbers[i, f] = 0
        present[i] = 0
        status[i] = _scan_line(buf, words, starts[i], ends[i], names, name_off, name_len, low, high, i, present,
                               text_off, text_len, numbers)


@njit(cache=True)
def intern(buf, offs, lens, status, ids):
    """Number the distinct byte strings offs[i]..+lens[i] of the fast lines (ids[i], -1 when the
    line lacks the field); returns the line of each one's first occurrence, in id order."""
    n = offs.shape[0]
    size = 64
    while size < 2 * n:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)     # -> the first line with that string
    id_of = np.full(size, -1, dtype=np.int64)
    firsts = np.empty(n, dtype=np.int64)
    count = 0
    for i in range(n):
        ids[i] = -1
        if status[i] != 0 or lens[i] < 0:
            continue
        s, m = offs[i], lens[i]
        h = np.uint64(14695981039346656037)
        for j in range(m):
            h = (h ^ np.uint64(buf[s + j])) * np.uint64(1099511628211)
        slot = np.int64(h & np.uint64(size - 1))
        while True:
            first = table[slot]
            if first < 0:
                table[slot] = i
                id_of[slot] = count
                firsts[count] = i
                ids[i] = count
                count += 1
                break
            if lens[first] == m:
                fs = offs[first]
                same = True
                for j in range(m):
                    if buf[fs + j] != buf[s + j]:
                        same = False
                        break
                if same:
                    ids[i] = id_of[slot]
                    break
            slot = (slot + 1) & (size - 1)
    return firsts[:count].copy()


@njit(cache=True, nogil=True)
def build_columns(buf, rows, present, text_off, text_len, pieces, piece_start, literals):
    """The stored properties of rows (each the template of its shape: literal pieces and the
    TAGS and KEYS values), the consume queue's tags codes and the index keys' hashes.

    pieces: (kind, start, length) a piece; kind -1 a literal (in literals), 0 the tags, 1 the keys.
    A row's shape: 1 with tags, + 2 with keys.  Returns (props, props_off, props_len, tags_code,
    key_hash, key_owner): the index keys are topic#key for each non-empty space-separated key."""
    n = rows.shape[0]
    props_len = np.empty(n, dtype=np.int64)
    key_room = 0
    for r in range(n):
        i = rows[r]
        shape = ((present[i] >> TAGS) & 1) | (((present[i] >> KEYS) & 1) << 1)
        total = 0
        for k in range(piece_start[shape], piece_start[shape + 1]):
            kind = pieces[k, 0]
            total += pieces[k, 2] if kind < 0 else text_len[i, TAGS + kind]
        props_len[r] = total
        if present[i] & (1 << KEYS):
            key_room += (text_len[i, KEYS] + 1) // 2
    props_off = np.cumsum(props_len) - props_len
    props = np.empty(max(1, props_len.sum()), dtype=np.uint8)
    tags_code = np.zeros(n, dtype=np.int64)
    key_hash = np.empty(key_room, dtype=np.int64)
    key_owner = np.empty(key_room, dtype=np.int64)
    state = np.zeros(1, dtype=np.int64)
    keys = 0
    for r in range(n):
        i = rows[r]
        shape = ((present[i] >> TAGS) & 1) | (((present[i] >> KEYS) & 1) << 1)
        p = props_off[r]
        for k in range(piece_start[shape], piece_start[shape + 1]):
            kind = pieces[k, 0]
            if kind < 0:
                s, m = pieces[k, 1], pieces[k, 2]
                props[p:p + m] = literals[s:s + m]
            else:
                s, m = text_off[i, TAGS + kind], text_len[i, TAGS + kind]
                props[p:p + m] = buf[s:s + m]
            p += m
        if present[i] & (1 << TAGS):      # the text is printable ASCII: java_hash never finds it malformed
            s = text_off[i, TAGS]
            tags_code[r] = signed32(java_hash(buf, s, s + text_len[i, TAGS], 0, state))
        if present[i] & (1 << KEYS):
            s = text_off[i, TOPIC]
            prefix = key_prefix(java_hash(buf, s, s + text_len[i, TOPIC], 0, state))
            s, end = text_off[i, KEYS], text_off[i, KEYS] + text_len[i, KEYS]
            while s < end:
                e = key_end(buf, s, end)
                if e > s:
                    key_hash[keys] = index_hash(java_hash(buf, s, e, prefix, state))
                    key_owner[keys] = r
                    keys += 1
                s = e + 1
    return props, props_off, props_len, tags_code, key_hash[:keys].copy(), key_owner[:keys].copy()


aot.adopt(globals(), "specscan")   # the kernels built ahead of time, where they are (native/aot.py)
