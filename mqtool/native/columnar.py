"""Records of a scanned chunk as columns: every field of a commitlog row, compiled.

fastscan finds the records of a file (offsets, sizes, where the body, topic and
properties lie); `decode` turns a range of them into numpy arrays shaped as
Arrow lays out its columns: fixed-width fields as plain arrays, text as one
data buffer with int32 offsets (bornHost, storeHost and msgId formatted here,
topic, properties and the tags/keys/uniqKey values decoded from UTF-8 with
Python's "replace" rules, so the text is what `bytes.decode("utf-8", "replace")`
gives), and the properties as a map (entry offsets, then key and value text)
parsed by the broker's rules (MessageDecoder.string2messageProperties: pairs
split on 0x02, name and value on the first 0x01, empty names or values
skipped, a later duplicate's value wins in the first one's place).  The layout
is formats/commitlog.py's; tests/test_columnar.py checks every column against
the reference walker on every fixture.
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.primitives import (
    delay_level,
    has_value,
    i32,
    i64,
    is_ascii,
    is_name,
    java_hash,
    pair_at,
    signed32,
    utf8_continuation,
)
from mqtool.formats import commitlog
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.native import aot
from mqtool.native.jit import crc32, njit, prefetch

REPLACEMENT = (0xEF, 0xBF, 0xBD)   # U+FFFD in UTF-8
_HEX_UPPER = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_HEX_LOWER = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
U = np.uint64
AHEAD = 4          # records decode prefetches ahead of the one it decodes
# the record's layout (formats/commitlog.py derives it from the schema), as numba's constants
BODY_CRC_AT = commitlog.BODY_CRC_AT
FLAG_AT = commitlog.FLAG_AT
BORN_TIMESTAMP_AT = commitlog.BORN_TIMESTAMP_AT
BORN_HOST_AT = commitlog.BORN_HOST_AT
HOST_V4 = commitlog.HOST_V4_SIZE              # a host: its address (4 or 16 bytes), then its port
HOST_V6 = commitlog.HOST_V6_SIZE
PORT_SIZE = commitlog.HOST_PORT_SIZE
STORE_HOST_AFTER = commitlog.STORE_HOST_AFTER_BORN_HOST
RECONSUME_TIMES_IN_TAIL = commitlog.RECONSUME_TIMES_IN_TAIL
PREPARED_OFFSET_IN_TAIL = commitlog.PREPARED_OFFSET_IN_TAIL


@njit(cache=True, inline="always")
def _copy_value(src, lo, hi, out, q):
    for k in range(hi - lo):
        out[U(q + k)] = src[U(lo + k)]
    return q + hi - lo


@njit(cache=True)
def utf8_sequence(src, p, end):
    """(length, valid) of the UTF-8 sequence at src[p]: a valid character of `length` bytes,
    or an invalid maximal subpart of `length` bytes that Python's decoder turns into one
    U+FFFD (CPython's rules: a bad start byte alone, else the valid prefix of a sequence)."""
    b = np.int64(src[p])
    if b < 0x80:
        return 1, True
    if b < 0xC2 or b > 0xF4:
        return 1, False
    if b < 0xE0:
        need = 2
        lo, hi = 0x80, 0xBF
    elif b < 0xF0:
        need = 3
        lo = 0xA0 if b == 0xE0 else 0x80
        hi = 0x9F if b == 0xED else 0xBF
    else:
        need = 4
        lo = 0x90 if b == 0xF0 else 0x80
        hi = 0x8F if b == 0xF4 else 0xBF
    if p + 1 >= end or not lo <= np.int64(src[p + 1]) <= hi:
        return 1, False
    for k in range(2, need):
        if p + k >= end or not utf8_continuation(src[p + k]):
            return k, False
    return need, True


@njit(cache=True, inline="always")
def put_text(src, p, end, out, q):
    """Copy src[p:end] to out[q:] as Python decodes it with "replace"; returns the new q.
    out needs room for 3 bytes per source byte.  (Indexes are unsigned in the hot loops: numba
    then drops its negative-index check, and the copies vectorise.)"""
    while p < end:
        s = p
        while p < end and src[U(p)] < 0x80:      # a run of ASCII
            p += 1
        q = _copy_value(src, s, p, out, q)
        if p >= end:
            break
        p, q = put_sequence(src, p, end, out, q)
    return q


@njit(cache=True, inline="always")
def put_sequence(src, p, end, out, q):
    """The UTF-8 sequence at src[p] (not ASCII) as Python decodes it with "replace": a valid
    character copied, an invalid one as U+FFFD; returns the new (p, q)."""
    n, ok = utf8_sequence(src, p, end)
    if ok:
        q = _copy_value(src, p, p + n, out, q)
    else:
        out[U(q)] = 0xEF
        out[U(q + 1)] = 0xBF
        out[U(q + 2)] = 0xBD
        q += 3
    return p + n, q


@njit(cache=True, inline="always")
def put_uint(value, out, q):
    """The decimal digits of a non-negative integer; returns the new q."""
    if value == 0:
        out[q] = 48
        return q + 1
    n = 0
    v = value
    while v > 0:
        n += 1
        v //= 10
    v = value
    for k in range(n - 1, -1, -1):
        out[q + k] = 48 + v % 10
        v //= 10
    return q + n


@njit(cache=True, inline="always")
def put_int(value, out, q):
    """A signed decimal integer (an int64; the lowest value is never a field here)."""
    if value < 0:
        out[q] = 45
        return put_uint(-value, out, q + 1)
    return put_uint(value, out, q)


@njit(cache=True, inline="always")
def put_host(buf, p, v6, out, q):
    """Java's InetSocketAddress text of the address at buf[p] (4 or 16 bytes) and its port:
    `1.2.3.4:5`, an IPv4-mapped IPv6 address as IPv4, else `[a:b:c:d:e:f:g:h]:port`."""
    width = (HOST_V6 if v6 else HOST_V4) - PORT_SIZE
    port = i32(buf, p + width)
    mapped = False
    if v6:
        mapped = True
        for k in range(10):
            if buf[p + k] != 0:
                mapped = False
        if buf[p + 10] != 0xFF or buf[p + 11] != 0xFF:
            mapped = False
    if not v6 or mapped:
        a = p + 12 if mapped else p
        for k in range(4):
            if k:
                out[q] = 46
                q += 1
            q = put_uint(np.int64(buf[a + k]), out, q)
    else:
        out[q] = 91
        q += 1
        for g in range(8):
            if g:
                out[q] = 58
                q += 1
            v = (np.int64(buf[p + 2 * g]) << 8) | np.int64(buf[p + 2 * g + 1])
            started = False
            for shift in (12, 8, 4, 0):
                d = (v >> shift) & 0xF
                if d or started or shift == 0:
                    out[q] = _HEX_LOWER[d]
                    q += 1
                    started = True
        out[q] = 93
        q += 1
    out[q] = 58
    return put_int(port, out, q + 1)


@njit(cache=True, inline="always")
def _put_hex_bytes(buf, p, n, out, q):
    for k in range(n):
        b = np.int64(buf[U(p + k)])
        out[U(q)] = _HEX_UPPER[b >> 4]
        out[U(q + 1)] = _HEX_UPPER[b & 0xF]
        q += 2
    return q


@njit(cache=True, inline="always")
def put_msgid(buf, store_host_pos, v6, offset, out, q):
    """MessageDecoder.createMessageId: the store host's address and port bytes, then the
    commitlog offset (8 bytes), as upper-case hex."""
    q = _put_hex_bytes(buf, store_host_pos, HOST_V6 if v6 else HOST_V4, out, q)
    for shift in range(60, -4, -4):
        out[U(q)] = _HEX_UPPER[(offset >> shift) & 0xF]
        q += 1
    return q


@njit(cache=True, inline="always")
def _same(a, alo, ahi, b, blo, bhi):
    if ahi - alo != bhi - blo:
        return False
    for k in range(ahi - alo):
        if a[U(alo + k)] != b[U(blo + k)]:
            return False
    return True


@njit(cache=True, inline="always")
def _put(src, lo, hi, plain, out, q):
    """src[lo:hi] to out[q:]: copied when it is plain ASCII, else decoded as put_text does."""
    if plain:
        return _copy_value(src, lo, hi, out, q)
    return put_text(src, lo, hi, out, q)


@njit(cache=True, nogil=True, _nrt=False)
def decode(buf, base, offset, sys_flag, body_pos, body_len, topic_pos, topic_len, props_pos, props_len,
           crc_known, with_body, tags_name, keys_name, uniq_name, delay_name,
           stored_crc, computed_crc, flag, born_ts, reconsume, prepared, tags_hash, delay,
           topic_off, topic_data, props_off, props_data, map_off, key_off, key_data, val_off, val_data,
           tags_off, tags_data, tags_ok, keys_off, keys_data, keys_ok, uniq_off, uniq_data, uniq_ok,
           born_off, born_data, store_off, store_data, msgid_off, msgid_data, body_off, body_data,
           value_lo, value_hi, value_plain, state):
    """Every column of the records given (arrays of fastscan's columns, already cut to the
    records wanted), into the arrays decode_columns allocates.  crc_known: records whose stored
    body CRC the scan found right (their CRC is not computed again).  Returns how much of each
    buffer was used (_USED names them), or all -1 when malformed UTF-8 needs more text room
    than was given (decode_columns then gives 3 bytes a source byte).

    No reference counting (_nrt=False): numba increfs and decrefs an array at every call of a
    helper that takes it, two atomic operations each, which cost more than the decoding itself.
    The properties are walked a pair at a time (formats/primitives.pair_at): a pair in plain ASCII, the usual
    case, is copied as it is, other text is decoded."""
    n = len(offset)
    addr = buf.ctypes.data
    tq = pq = kq = vq = bq = sq = mq = dq = 0
    prev_born = prev_store = 0
    prev_born_v6 = prev_store_v6 = False
    entries = 0
    gq = yq = uq = 0
    for i in range(n):
        plen = props_len[i]
        if (tq + 3 * topic_len[i] > len(topic_data) or pq + 3 * plen > len(props_data)
                or kq + 3 * plen > len(key_data) or vq + 3 * plen > len(val_data)):
            return -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1
        if i + AHEAD < n:
            # the record AHEAD on: its header and its topic and properties (past the body), so
            # that they are in the cache when the loop gets there (each is a miss otherwise)
            ahead = offset[i + AHEAD] - base
            prefetch(addr + ahead)
            prefetch(addr + ahead + 63)
            prefetch(addr + topic_pos[i + AHEAD])
            prefetch(addr + props_pos[i + AHEAD] + props_len[i + AHEAD] - 1)
        pos = offset[i] - base
        sf = sys_flag[i]
        born_v6 = (sf & BORNHOST_V6) != 0
        store_v6 = (sf & STOREHOST_V6) != 0
        stored_crc[i] = i32(buf, pos + BODY_CRC_AT)
        blen = body_len[i]
        if crc_known[i]:
            computed_crc[i] = stored_crc[i]
        else:
            computed_crc[i] = (crc32(0, addr + body_pos[i], blen) & 0x7FFFFFFF) if blen > 0 else 0
        flag[i] = i32(buf, pos + FLAG_AT)
        born_ts[i] = i64(buf, pos + BORN_TIMESTAMP_AT)
        born_at = pos + BORN_HOST_AT
        born_size = HOST_V6 if born_v6 else HOST_V4
        store_at = born_at + born_size + STORE_HOST_AFTER
        store_size = HOST_V6 if store_v6 else HOST_V4
        tail = store_at + store_size
        reconsume[i] = i32(buf, tail + RECONSUME_TIMES_IN_TAIL)
        prepared[i] = i64(buf, tail + PREPARED_OFFSET_IN_TAIL)
        tags_hash[i] = 0
        delay[i] = 0
        tags_ok[i] = keys_ok[i] = uniq_ok[i] = False
        topic_off[i] = tq
        tq = put_text(buf, topic_pos[i], topic_pos[i] + topic_len[i], topic_data, tq)
        born_off[i] = bq
        if i and born_v6 == prev_born_v6 and _same(buf, born_at, born_at + born_size, buf,
                                                   prev_born, prev_born + born_size):
            bq = _copy_value(born_data, born_off[i - 1], born_off[i], born_data, bq)   # the same host again
        else:
            bq = put_host(buf, born_at, born_v6, born_data, bq)
        prev_born, prev_born_v6 = born_at, born_v6
        store_off[i] = sq
        if i and store_v6 == prev_store_v6 and _same(buf, store_at, store_at + store_size, buf,
                                                     prev_store, prev_store + store_size):
            sq = _copy_value(store_data, store_off[i - 1], store_off[i], store_data, sq)
        else:
            sq = put_host(buf, store_at, store_v6, store_data, sq)
        prev_store, prev_store_v6 = store_at, store_v6
        msgid_off[i] = mq
        mq = put_msgid(buf, store_at, store_v6, offset[i], msgid_data, mq)
        if with_body:
            body_off[i] = dq
            dq = _copy_value(buf, body_pos[i], body_pos[i] + blen, body_data, dq)
        # the properties: the map's entries, a pair at a time, then the whole string
        p = props_pos[i]
        end = p + plen
        all_plain = True
        map_off[i] = entries
        first = entries
        while p < end:
            s, e = pair_at(buf, p, end)
            plain = is_ascii(buf, p, e)
            all_plain = all_plain and plain
            if has_value(p, s, e):
                key_off[entries] = kq
                kq = _put(buf, p, s, plain, key_data, kq)
                slot = entries - first
                for j in range(first, entries):
                    if _same(key_data, key_off[j], key_off[j + 1] if j + 1 < entries else key_off[entries],
                             key_data, key_off[entries], kq):
                        slot = j - first
                        break
                if slot == entries - first:
                    entries += 1
                else:
                    kq = key_off[entries]      # a duplicate name: the earlier entry takes this value
                value_lo[slot] = s + 1
                value_hi[slot] = e
                value_plain[slot] = plain
            p = e + 1
        key_off[entries] = kq
        props_off[i] = pq
        pq = _put(buf, props_pos[i], end, all_plain, props_data, pq)
        tags_off[i] = gq
        keys_off[i] = yq
        uniq_off[i] = uq
        for j in range(first, entries):
            val_off[j] = vq
            start = vq
            vq = _put(buf, value_lo[j - first], value_hi[j - first], value_plain[j - first], val_data, vq)
            k0, k1 = key_off[j], key_off[j + 1]
            if is_name(key_data, k0, k1, tags_name):
                tags_ok[i] = True
                gq = _copy_value(val_data, start, vq, tags_data, tags_off[i])
                # tagsCode: the Java hashCode of TAGS (decoded, so its UTF-16 units are exact)
                tags_hash[i] = signed32(java_hash(val_data, start, vq, 0, state))
            elif is_name(key_data, k0, k1, keys_name):
                keys_ok[i] = True
                yq = _copy_value(val_data, start, vq, keys_data, keys_off[i])
            elif is_name(key_data, k0, k1, uniq_name):
                uniq_ok[i] = True
                uq = _copy_value(val_data, start, vq, uniq_data, uniq_off[i])
            elif is_name(key_data, k0, k1, delay_name):
                delay[i] = delay_level(val_data, start, vq)
    for arr, last in ((topic_off, tq), (props_off, pq), (born_off, bq), (store_off, sq), (msgid_off, mq),
                      (map_off, entries), (tags_off, gq), (keys_off, yq), (uniq_off, uq)):
        arr[n] = last
    key_off[entries] = kq
    val_off[entries] = vq
    body_off[n if with_body else 0] = dq
    return tq, pq, entries, kq, vq, gq, yq, uq, bq, sq, mq, dq


NUMBERS = (("stored_crc", np.int32), ("computed_crc", np.int32), ("flag", np.int32), ("born_ts", np.int64),
           ("reconsume", np.int32), ("prepared", np.int64), ("tags_hash", np.int64), ("delay", np.int64))
NAMED = ("tags", "keys", "uniqKey")    # the TAGS, KEYS and UNIQ_KEY values, as columns
_NAMES = tuple(np.frombuffer(name, dtype=np.uint8) for name in (b"TAGS", b"KEYS", b"UNIQ_KEY", b"DELAY"))
# decode's output arrays after the numbers, in its order: (name, kind); kind "rows" is n + 1
# int32 offsets, "entries" offsets of map entries, "ok" n booleans, else a text buffer's room
_BUFFERS = (("topic_off", "rows"), ("topic_data", "topic"), ("props_off", "rows"), ("props_data", "text"),
            ("map_off", "rows"), ("key_off", "entries"), ("key_data", "text"), ("val_off", "entries"),
            ("val_data", "text"), ("tags_off", "rows"), ("tags_data", "text"), ("tags_ok", "ok"),
            ("keys_off", "rows"), ("keys_data", "text"), ("keys_ok", "ok"), ("uniqKey_off", "rows"),
            ("uniqKey_data", "text"), ("uniqKey_ok", "ok"), ("born_off", "rows"), ("born_data", "host"),
            ("store_off", "rows"), ("store_data", "host"), ("msgid_off", "rows"), ("msgid_data", "msgid"),
            ("body_off", "body_rows"), ("body_data", "body"))
# what each of decode's returned counts measures: the used part of these arrays
_USED = (("topic_data",), ("props_data",), ("key_off", "val_off"), ("key_data",), ("val_data",), ("tags_data",),
         ("keys_data",), ("uniqKey_data",), ("born_data",), ("store_data",), ("msgid_data",), ("body_data",))
HOST_ROOM = 64     # the longest host text: `[` 39 hex and colons `]:` and a port of 11 characters
MSGID_ROOM = 56    # an IPv6 store host: 28 bytes as hex


def _allocate(c: dict, with_body: bool, worst_case: bool) -> dict:
    """decode's output arrays for fastscan columns c.  Text buffers have room for every record's
    text when it is valid UTF-8 (its own size, plus the worst case of one record); with
    worst_case, 3 bytes a source byte, which malformed bytes (each one U+FFFD) can take."""
    n = len(c["offset"])
    props, topics = c["props_len"], c["topic_len"]

    def room(lengths):
        total = int(lengths.sum())
        return 3 * total + 64 if worst_case else total + 2 * int(lengths.max(initial=0)) + 64

    sizes = {"rows": n + 1, "entries": int(props.sum()) // 2 + n + 1, "ok": n, "topic": room(topics),
             "text": room(props), "host": HOST_ROOM * n, "msgid": MSGID_ROOM * n,
             "body_rows": n + 1 if with_body else 1, "body": int(c["body_len"].sum()) if with_body else 0}
    dtypes = {"rows": np.int32, "entries": np.int32, "ok": np.bool_, "body_rows": np.int32}
    out = {name: np.empty(n, dtype) for name, dtype in NUMBERS}
    out.update((name, np.empty(sizes[kind], dtypes.get(kind, np.uint8))) for name, kind in _BUFFERS)
    return out


def decode_columns(buf, base: int, scanned: dict, with_body: bool = False, crc_known=None) -> dict:
    """decode() for fastscan columns (already cut to the records wanted), as a dict of arrays
    (those NUMBERS and _BUFFERS name).  crc_known: the scan's crc_ok column when it checked CRCs."""
    c = scanned
    if crc_known is None:
        crc_known = np.zeros(len(c["offset"]), dtype=np.bool_)
    pairs = int(c["props_len"].max(initial=0)) // 2 + 2     # a record's entries at most
    scratch = (np.empty(pairs, np.int64), np.empty(pairs, np.int64), np.empty(pairs, np.bool_),
               np.zeros(1, np.int64))
    for worst_case in (False, True):
        out = _allocate(c, with_body, worst_case)
        used = decode(buf, base, c["offset"], c["sys_flag"], c["body_pos"], c["body_len"], c["topic_pos"],
                      c["topic_len"], c["props_pos"], c["props_len"], crc_known, with_body, *_NAMES,
                      *out.values(), *scratch)
        if used[0] >= 0:
            break
    for names, count in zip(_USED, used):
        for name in names:
            out[name] = out[name][:count + 1 if name.endswith("_off") else count]
    return out


def warm_up() -> None:
    """Load decode from the compile cache now, with the argument types of the real calls (a
    read-only buf, as over a file mapping), so that its loading is timed as start-up."""
    empty = {name: np.empty(0, dtype=np.int64) for name in ("offset", "sys_flag", "body_pos", "body_len",
                                                           "topic_pos", "topic_len", "props_pos", "props_len")}
    decode_columns(np.frombuffer(bytes(64), dtype=np.uint8), 0, empty, False, np.zeros(0, dtype=np.bool_))


aot.adopt(globals(), "columnar")   # the kernels built ahead of time, where they are (native/aot.py)
