"""The compiled append kernels: records written straight into a mapped commitlog file (body
CRC by ISA-L), and index entries into an index file.

mqtool/engine/batchappend.py turns a batch into the columns these take, and is the only caller;
tests/test_fastappend.py checks that the compiled path writes the same files as the reference
path (CommitLogWriter, Dispatcher).
"""

from __future__ import annotations

import numpy as np

from mqtool.formats.commitlog import MAGIC_V2
from mqtool.formats.primitives import i32, put32, put64
from mqtool.native import aot
from mqtool.native.jit import crc32, njit

I64 = np.int64


@njit(cache=True, inline="always")
def _copy(out, p, src, start, length):
    out[p:p + length] = src[start:start + length]


@njit(cache=True, nogil=True)
def write_records(out, origin, pos, limit, base, first, n, lengths, magic, body_buf, body_off, body_len,
                  props_buf, props_off, props_len, topic_buf, topic_off, topic_len, topic_id,
                  host_buf, host_off, host_len, host_port, born_host, store_host,
                  queue_id, flag, sys_flag, born_ts, store_ts, reconsume, prepared,
                  slot, counters, counts, wrote, queue_offsets):
    """Write records first.. from file position pos, while record + 8 bytes fit below limit,
    into out: the file's bytes from position origin on (the mapped file, or a buffer to pwrite).
    Returns (next message, next position)."""
    body_addr = body_buf.ctypes.data
    i = first
    while i < n:
        length = lengths[i]
        if length + 8 > limit - pos:
            break
        s = slot[i]
        qoff = counters[s] if counts[i] else 0
        p = pos - origin
        put32(out, p, length)
        put32(out, p + 4, magic[i])
        blen = body_len[i]
        crc = 0
        if blen > 0:
            crc = crc32(0, body_addr + body_off[i], blen) & 0x7FFFFFFF
        put32(out, p + 8, crc)
        put32(out, p + 12, queue_id[i])
        put32(out, p + 16, flag[i])
        put64(out, p + 20, qoff)
        put64(out, p + 28, base + pos)
        put32(out, p + 36, sys_flag[i])
        put64(out, p + 40, born_ts[i])
        p += 48
        h = born_host[i]
        _copy(out, p, host_buf, host_off[h], host_len[h])
        p += host_len[h]
        put32(out, p, host_port[h])
        p += 4
        put64(out, p, store_ts[i])
        p += 8
        h = store_host[i]
        _copy(out, p, host_buf, host_off[h], host_len[h])
        p += host_len[h]
        put32(out, p, host_port[h])
        p += 4
        put32(out, p, reconsume[i])
        put64(out, p + 4, prepared[i])
        put32(out, p + 12, blen)
        p += 16
        _copy(out, p, body_buf, body_off[i], blen)
        p += blen
        t = topic_id[i]
        tlen = topic_len[t]
        if magic[i] == MAGIC_V2:
            out[p] = (tlen >> 8) & 0xFF
            out[p + 1] = tlen & 0xFF
            p += 2
        else:
            out[p] = tlen
            p += 1
        _copy(out, p, topic_buf, topic_off[t], tlen)
        p += tlen
        plen = props_len[i]
        out[p] = (plen >> 8) & 0xFF
        out[p + 1] = plen & 0xFF
        p += 2
        _copy(out, p, props_buf, props_off[i], plen)
        wrote[i] = base + pos
        queue_offsets[i] = qoff
        if counts[i]:
            counters[s] = qoff + 1
        pos += length
        i += 1
    return i, pos


@njit(cache=True, nogil=True)
def insert_keys(buf, slot_num, index_num, header, first, n, hashes, phy, ts):
    """IndexFile.putKey for keys first..; header holds [beginTimestamp, endTimestamp,
    beginPhyOffset, endPhyOffset, hashSlotCount, indexCount] and is updated.  Returns the
    next key to insert (< n when the file filled up)."""
    entries = 40 + slot_num * 4
    i = first
    while i < n:
        count = header[5]
        if count >= index_num:
            break
        key_hash = hashes[i]
        slot_pos = 40 + (key_hash % slot_num) * 4
        slot_value = i32(buf, slot_pos)
        if slot_value <= 0 or slot_value > count:
            slot_value = 0
        diff = 0
        if header[0] > 0:
            diff = (ts[i] - header[0]) // 1000
            if diff > 0x7FFFFFFF:
                diff = 0x7FFFFFFF
            elif diff < 0:
                diff = 0
        p = entries + count * 20
        put32(buf, p, key_hash)
        put64(buf, p + 4, phy[i])
        put32(buf, p + 12, diff)
        put32(buf, p + 16, slot_value)
        put32(buf, slot_pos, count)
        if count <= 1:
            header[2] = phy[i]
            header[0] = ts[i]
        if slot_value == 0:
            header[4] += 1
        header[5] = count + 1
        header[3] = phy[i]
        header[1] = ts[i]
        i += 1
    return i


def warm_up_index() -> None:
    """Load insert_keys from the compile cache now (with the argument types of the real calls:
    a writable file mapping, int64 columns), so that a timed run does not pay for it."""
    none = np.zeros(0, dtype=I64)
    insert_keys(np.frombuffer(bytearray(64), dtype=np.uint8), 1, 1, np.zeros(6, dtype=I64), 0, 0, none, none, none)


aot.adopt(globals(), "append")   # the kernels built ahead of time, where they are (native/aot.py)
