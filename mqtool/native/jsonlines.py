"""JSON lines rendered from row columns, compiled: one bytes buffer for a block of rows.

A line is a list of fields, each a kind (below), a column and a key: the key
bytes (`,"topic":` without the comma) lie in one `keys` buffer, so the kernel
only copies bytes and formats values.  Strings are escaped as Python's json
module escapes them with ensure_ascii=False (`"` and `\\` backslashed, \\b \\f \\n
\\r \\t by name, other control characters as \\u00xx, everything else as it
is), so a line is byte for byte what json.JSONEncoder(ensure_ascii=False,
separators=(",", ":")) makes of the same dict; text that is not valid UTF-8
is decoded as `bytes.decode("utf-8", "replace")` decodes it on the way.
tests/test_jsonlines.py compares the kernel with the json module.

Kinds: INT and BOOL (a row of the `ints` matrix), TEXT (a text column: null,
or left out when skip_null, where its valid array is false), MAP (the
properties map), BODY_BASE64 / BODY_HEX / BODY_TEXT (a text column of raw
bytes, shown as mqtool shows bodies), RAW (a text column of ready JSON
fragments, `"key":value`, left out where empty; the key bytes are the
fragment used then, itself left out when empty) and CONST (the key bytes are
the whole field).
"""

from __future__ import annotations

import numpy as np

from mqtool.native.columnar import put_sequence
from mqtool.native import aot
from mqtool.native.jit import njit

INT, BOOL, TEXT, MAP, BODY_BASE64, BODY_HEX, BODY_TEXT, RAW, CONST = range(9)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)
_INT64_MIN = np.frombuffer(b"-9223372036854775808", dtype=np.uint8)
_NULL = np.frombuffer(b"null", dtype=np.uint8)
_TRUE = np.frombuffer(b"true", dtype=np.uint8)
_FALSE = np.frombuffer(b"false", dtype=np.uint8)
U = np.uint64
_POWERS = np.array([10 ** k for k in range(19)], dtype=np.int64)
_PAIRS = np.frombuffer("".join(f"{k:02d}" for k in range(100)).encode(), dtype=np.uint8)
# per byte: 0 stays as it is, 1 is escaped, 2 starts a UTF-8 sequence
_CLASS = np.zeros(256, dtype=np.uint8)
_CLASS[:32] = 1
_CLASS[[34, 92]] = 1
_CLASS[128:] = 2
_ESCAPE = np.zeros(256, dtype=np.uint8)     # the letter of a short escape (\n, ...); 0: \u00xx
for _char, _letter in ((34, 34), (92, 92), (10, 110), (13, 114), (9, 116), (8, 98), (12, 102)):
    _ESCAPE[_char] = _letter


@njit(cache=True, inline="always")
def _copy(src, lo, hi, out, q):
    """src[lo:hi] to out[q:]; returns the new q.  (Indexes are unsigned in the hot loops: numba
    then drops its negative-index check, and the copies vectorise.)"""
    for k in range(hi - lo):
        out[U(q + k)] = src[U(lo + k)]
    return q + hi - lo


@njit(cache=True, inline="always")
def put_int64(value, out, q):
    """A signed decimal integer, any int64."""
    if value == np.iinfo(np.int64).min:
        return _copy(_INT64_MIN, 0, len(_INT64_MIN), out, q)
    if value < 0:
        out[U(q)] = 45
        q += 1
        value = -value
    n = 1
    while n < 19 and value >= _POWERS[n]:
        n += 1
    k = q + n
    while value >= 100:               # two digits at a time, from the right
        d = 2 * (value % 100)
        value //= 100
        out[U(k - 1)] = _PAIRS[d + 1]
        out[U(k - 2)] = _PAIRS[d]
        k -= 2
    if value >= 10:
        out[U(k - 1)] = _PAIRS[2 * value + 1]
        out[U(k - 2)] = _PAIRS[2 * value]
    else:
        out[U(k - 1)] = 48 + value
    return q + n


@njit(cache=True, inline="always")
def put_json_string(src, p, end, out, q):
    """src[p:end] as a JSON string (quotes included), decoded with "replace" and escaped as
    Python's json module escapes it.  out needs room for 6 bytes per source byte, plus 2."""
    out[U(q)] = 34
    q += 1
    while p < end:
        s = p
        while p < end and _CLASS[src[U(p)]] == 0:     # a run of bytes that stay as they are
            p += 1
        q = _copy(src, s, p, out, q)
        if p >= end:
            break
        b = src[U(p)]
        if _CLASS[b] == 1:
            p += 1
            out[U(q)] = 92
            letter = _ESCAPE[b]
            if letter:
                out[U(q + 1)] = letter
                q += 2
            else:
                out[U(q + 1)] = 117
                out[U(q + 2)] = 48
                out[U(q + 3)] = 48
                q = _hex_byte(np.int64(b), out, q + 4)
            continue
        p, q = put_sequence(src, p, end, out, q)
    out[U(q)] = 34
    return q + 1


@njit(cache=True)
def put_base64(src, p, end, out, q):
    """src[p:end] in base64 (standard alphabet, padded), unquoted."""
    while p < end:
        left = min(end - p, 3)        # bytes in this group of three
        v = np.int64(src[U(p)]) << 16
        if left > 1:
            v |= np.int64(src[U(p + 1)]) << 8
        if left > 2:
            v |= np.int64(src[U(p + 2)])
        out[U(q)] = _B64[v >> 18]
        out[U(q + 1)] = _B64[(v >> 12) & 63]
        out[U(q + 2)] = _B64[(v >> 6) & 63] if left > 1 else 61
        out[U(q + 3)] = _B64[v & 63] if left > 2 else 61
        q += 4
        p += 3
    return q


@njit(cache=True, inline="always")
def _hex_byte(b, out, q):
    out[U(q)] = _HEX[b >> 4]
    out[U(q + 1)] = _HEX[b & 0xF]
    return q + 2


@njit(cache=True)
def put_hex(src, p, end, out, q):
    """src[p:end] as lower-case hex digits (bytes.hex()), unquoted."""
    for k in range(p, end):
        q = _hex_byte(np.int64(src[U(k)]), out, q)
    return q


@njit(cache=True, nogil=True)
def render(rows, kinds, cols, key_off, keys, skip_null, ints, text_off, text_data, text_valid,
           map_entries, map_koff, map_kdata, map_voff, map_vdata, out):
    """The JSON lines of `rows` (row numbers, in the order wanted), one object a line, written
    into out (room for the worst case: every text byte escaped); returns the length.  Field f is kinds[f] over column
    cols[f] with the key keys[key_off[f]:key_off[f + 1]]; INT and BOOL columns are rows of
    ints, text columns rows of text_off (offsets into text_data, n + 1 each) and text_valid."""
    q = 0
    for r in rows:
        out[U(q)] = 123
        q += 1
        first = True
        for f in range(len(kinds)):
            kind = kinds[f]
            c = cols[f]
            k0, k1 = key_off[f], key_off[f + 1]
            lo = hi = 0
            if kind == RAW:
                lo, hi = text_off[c, r], text_off[c, r + 1]
                if hi == lo and k1 == k0:
                    continue
            null = kind == TEXT and not text_valid[c, r]
            if null and skip_null:
                continue
            if not first:
                out[U(q)] = 44
                q += 1
            first = False
            if kind == RAW:           # the row's fragment, else the default one
                q = _copy(text_data, lo, hi, out, q) if hi > lo else _copy(keys, k0, k1, out, q)
                continue
            q = _copy(keys, k0, k1, out, q)
            if null:
                q = _copy(_NULL, 0, 4, out, q)
            elif kind == INT:
                q = put_int64(ints[c, r], out, q)
            elif kind == TEXT or kind == BODY_TEXT:
                q = put_json_string(text_data, text_off[c, r], text_off[c, r + 1], out, q)
            elif kind == BOOL:
                if ints[c, r]:
                    q = _copy(_TRUE, 0, 4, out, q)
                else:
                    q = _copy(_FALSE, 0, 5, out, q)
            elif kind == MAP:
                out[U(q)] = 123
                q += 1
                for e in range(map_entries[r], map_entries[r + 1]):
                    if e > map_entries[r]:
                        out[U(q)] = 44
                        q += 1
                    q = put_json_string(map_kdata, map_koff[e], map_koff[e + 1], out, q)
                    out[U(q)] = 58
                    q += 1
                    q = put_json_string(map_vdata, map_voff[e], map_voff[e + 1], out, q)
                out[U(q)] = 125
                q += 1
            elif kind == BODY_BASE64 or kind == BODY_HEX:
                out[U(q)] = 34
                if kind == BODY_BASE64:
                    q = put_base64(text_data, text_off[c, r], text_off[c, r + 1], out, q + 1)
                else:
                    q = put_hex(text_data, text_off[c, r], text_off[c, r + 1], out, q + 1)
                out[U(q)] = 34
                q += 1
            # CONST: the key bytes were the field
        out[U(q)] = 125
        out[U(q + 1)] = 10
        q += 2
    return q


aot.adopt(globals(), "jsonlines")   # the kernels built ahead of time, where they are (native/aot.py)
