"""stats' work on a scanned chunk, compiled: its records grouped by topic and queue, in one call.

Per group: messages, bytes, first and last store time, a histogram of size
exponents, messages per hour, and 64-bit hashes of the KEYS pieces (distinct
keys are counted by them).  The properties are searched and the keys hashed a
word (8 bytes) at a time, the way memchr does: the per-byte walk was most of
stats' time.  `hash_text` is the same hash for one key, for the records the
kernels leave to the reference decoder.
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.primitives import find_byte, has_value, is_ascii, is_name, pair_at, word_at
from mqtool.native.columnar import put_text
from mqtool.native import aot
from mqtool.native.jit import njit, prefetch

U = np.uint64
I64 = np.int64
KEYS = (75, 69, 89, 83)
GROUPS_MIN = 16
AHEAD = 8


@njit(cache=True, inline="always")
def _absorb(h, w):
    h = (h ^ w) * U(0x9FB21C651E98DF25)
    return h ^ (h >> U(29))


@njit(cache=True)
def hash_bytes(data, lo, hi):
    """A 64-bit hash of data[lo:hi]: its length, then a word at a time (the last one zero-padded)
    through an invertible multiply-xorshift step, then splitmix64's finaliser to spread the bits."""
    h = U(0x243F6A8885A308D3) ^ (U(hi - lo) * U(0x9E3779B97F4A7C15))
    p = lo
    while hi - p >= 8:
        h = _absorb(h, word_at(data, p, 8))
        p += 8
    if p < hi:
        h = _absorb(h, word_at(data, p, hi - p))
    h ^= h >> U(30)
    h *= U(0xBF58476D1CE4E5B9)
    h ^= h >> U(27)
    h *= U(0x94D049BB133111EB)
    h ^= h >> U(31)
    return h


def hash_text(text: str) -> int:
    """The hash chunk_stats gives a key, for one text (its UTF-8)."""
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    return int(hash_bytes(data, 0, len(data)))


@njit(cache=True, inline="always")
def _keys_value(buf, p, end):
    """(lo, hi) of the value of the last KEYS pair in the properties buf[p:end], or (-1, -1), by
    the broker's rules (formats/primitives.pair_at)."""
    lo = hi = -1
    while p < end:
        s, e = pair_at(buf, p, end)
        if has_value(p, s, e) and is_name(buf, p, s, KEYS):
            lo, hi = s + 1, e
        p = e + 1
    return lo, hi


@njit(cache=True, inline="always")
def _exponent(size):
    """The smallest e with 2 ** e >= size (0 for sizes up to 1): the bit length of size - 1."""
    v = max(size - 1, 0)
    e = 0
    for shift in (32, 16, 8, 4, 2, 1):
        if v >> shift:
            v >>= shift
            e += shift
    return e + v


@njit(cache=True, nogil=True)
def chunk_stats(buf, good, topic_hash, queue_id, size, store_ts, props_pos, props_len, hour_ms):
    """The records where good is true, grouped by (topic hash, queue id) in order of first
    appearance.  Per group: its topic hash, queue id and first record, messages, bytes, first
    and last store time, a histogram of size exponents (64 slots: _exponent); per (group,
    hour) the messages; and the hashes of the KEYS pieces (split on single spaces, empty
    pieces dropped, as the index splits them; each hashed as the UTF-8 of its decoded text),
    group by group (key_off: where each group's keys start).  In passes of one job each: groups
    and where each record's KEYS value lies, the sums, the key hashes, then their order."""
    n = len(size)
    cap = GROUPS_MIN
    while cap < 2 * n:
        cap *= 2
    slots = np.full(cap, -1, I64)
    group = np.empty(n, I64)
    g_th = np.empty(n, I64)
    g_q = np.empty(n, I64)
    g_row = np.empty(n, I64)
    keys_lo = np.empty(n, I64)
    keys_hi = np.empty(n, I64)
    g = 0
    most = 0
    pieces = 0
    addr = np.int64(buf.ctypes.data)
    for i in range(n):
        if i + AHEAD < n:                        # the properties of a record ahead: the walk
            prefetch(addr + props_pos[i + AHEAD])   # waits on memory at each record otherwise
            prefetch(addr + props_pos[i + AHEAD] + props_len[i + AHEAD] - 1)
        group[i] = -1
        if not good[i]:
            continue
        th, q = topic_hash[i], queue_id[i]
        s = ((U(th) ^ (U(q) * U(0x9E3779B97F4A7C15))) * U(0xBF58476D1CE4E5B9)) >> U(32)
        while True:
            s &= U(cap - 1)
            k = slots[s]
            if k < 0:
                k = g
                slots[s] = k
                g_th[k], g_q[k], g_row[k] = th, q, i
                g += 1
                break
            if g_th[k] == th and g_q[k] == q:
                break
            s += U(1)
        group[i] = k
        lo, hi = _keys_value(buf, props_pos[i], props_pos[i] + props_len[i])
        keys_lo[i], keys_hi[i] = lo, hi
        if lo >= 0:
            pieces += (hi - lo + 1) // 2        # pieces are a byte and a space at least
            most = max(most, hi - lo)
    messages = np.zeros(g, I64)
    total = np.zeros(g, I64)
    first = np.full(g, np.iinfo(I64).max, I64)
    last = np.full(g, np.iinfo(I64).min, I64)
    hist = np.zeros((g, 64), I64)
    last_hour = np.full(g, np.iinfo(I64).min, I64)
    last_slot = np.zeros(g, I64)
    hour_g = np.empty(n, I64)
    hour_h = np.empty(n, I64)
    hour_n = np.zeros(n, I64)
    hour_b = np.zeros(n, I64)
    hours = 0
    zero = I64(0)
    hour_slot = {(zero, zero): zero}     # typed by its first entry, then emptied
    hour_slot.clear()
    for i in range(n):
        k = group[i]
        if k < 0:
            continue
        messages[k] += 1
        total[k] += size[i]
        t = store_ts[i]
        first[k] = min(first[k], t)
        last[k] = max(last[k], t)
        hist[k, _exponent(size[i])] += 1
        hour = t // hour_ms
        if hour != last_hour[k]:       # records come in time order, mostly: a new hour is rare
            at = hour_slot.get((k, hour), I64(-1))
            if at < 0:
                at = hours
                hour_g[at], hour_h[at] = k, hour
                hour_slot[(k, hour)] = at
                hours += 1
            last_hour[k], last_slot[k] = hour, at
        hour_n[last_slot[k]] += 1
        hour_b[last_slot[k]] += size[i]
    key_group = np.empty(pieces, I64)
    key_hash = np.empty(pieces, U)
    keys = 0
    scratch = np.empty(3 * most + 8, np.uint8)
    for i in range(n):
        lo, hi = keys_lo[i], keys_hi[i]
        if group[i] < 0 or lo < 0:
            continue
        plain = is_ascii(buf, lo, hi)
        a = lo
        while a <= hi:
            b = find_byte(buf, a, hi, 32)
            if b > a:
                key_group[keys] = group[i]
                if plain:
                    key_hash[keys] = hash_bytes(buf, a, b)
                else:
                    key_hash[keys] = hash_bytes(scratch, 0, put_text(buf, a, b, scratch, 0))
                keys += 1
            a = b + 1
    key_off = np.zeros(g + 1, I64)      # the keys group by group (a counting sort)
    for j in range(keys):
        key_off[key_group[j] + 1] += 1
    for k in range(g):
        key_off[k + 1] += key_off[k]
    placed = key_off[:g].copy()
    by_group = np.empty(keys, U)
    for j in range(keys):
        k = key_group[j]
        by_group[placed[k]] = key_hash[j]
        placed[k] += 1
    return (g_th[:g], g_q[:g], g_row[:g], messages, total, first, last, hist,
            hour_g[:hours], hour_h[:hours], hour_n[:hours], hour_b[:hours], key_off, by_group)


def stats_of(chunk, good, hour_ms: int):
    """chunk_stats for a fastscan chunk's columns."""
    c = chunk.columns
    return chunk_stats(chunk.buf, good, c["topic_hash"], c["queue_id"], c["size"], c["store_ts"], c["props_pos"],
                       c["props_len"], hour_ms)


def warm_up() -> None:
    """Load the scan's and these kernels from the compile cache now, with the real calls' argument
    types (a file mapping is a read-only array), so their loading is not counted as stats' work
    and forked workers inherit them."""
    from mqtool.native import fastscan

    fastscan.warm_up()
    buf = np.frombuffer(bytes(64), dtype=np.uint8)
    column = np.zeros(1, dtype=I64)
    chunk_stats(buf, np.ones(1, dtype=np.bool_), column, column, column + 100, column, column, column, 3_600_000)


aot.adopt(globals(), "chunkstats")   # the kernels built ahead of time, where they are (native/aot.py)
