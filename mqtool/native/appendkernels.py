"""The compiled append kernels: records written straight into a mapped commitlog file (body
CRC by ISA-L), and index entries into an index file.

mqtool/engine/batchappend.py turns a batch into the columns these take, and is the only caller;
tests/test_fastappend.py checks that the compiled path writes the same files as the reference
path (CommitLogWriter, Dispatcher).
"""

from __future__ import annotations

import numpy as np

from mqtool.formats import commitlog, index
# an index file's layout, derived from its schema (numba's constants)
from mqtool.formats.index import ENTRY_SIZE, KEY_HASH_AT, PHY_OFFSET_AT, PREV_INDEX_AT, SLOT_SIZE, TIME_DIFF_AT
from mqtool.formats.index import HEADER_SIZE as INDEX_HEADER
from mqtool.formats.commitlog import MAGIC_V2
from mqtool.formats.primitives import i32, put32, put64
from mqtool.native import aot
from mqtool.native.jit import crc32, njit

I64 = np.int64
# the layouts (formats/commitlog.py and formats/index.py derive them from the schemas), as numba's
# constants
MAGIC_AT = commitlog.MAGIC_AT
BODY_CRC_AT = commitlog.BODY_CRC_AT
QUEUE_ID_AT = commitlog.QUEUE_ID_AT
FLAG_AT = commitlog.FLAG_AT
QUEUE_OFFSET_AT = commitlog.QUEUE_OFFSET_AT
PHYSICAL_OFFSET_AT = commitlog.PHYSICAL_OFFSET_AT
SYS_FLAG_AT = commitlog.SYS_FLAG_AT
BORN_TIMESTAMP_AT = commitlog.BORN_TIMESTAMP_AT
BORN_HOST_AT = commitlog.BORN_HOST_AT
STORE_HOST_AFTER = commitlog.STORE_HOST_AFTER_BORN_HOST     # storeTimestamp lies between
RECONSUME_TIMES_IN_TAIL = commitlog.RECONSUME_TIMES_IN_TAIL
PREPARED_OFFSET_IN_TAIL = commitlog.PREPARED_OFFSET_IN_TAIL
BODY_LENGTH_IN_TAIL = commitlog.BODY_LENGTH_IN_TAIL
BODY_IN_TAIL = commitlog.BODY_IN_TAIL
PORT_SIZE = commitlog.HOST_PORT_SIZE
TOPIC_LENGTH_V1 = commitlog.TOPIC_LENGTH_SIZE_V1
TOPIC_LENGTH_V2 = commitlog.TOPIC_LENGTH_SIZE_V2
PROPERTIES_LENGTH = commitlog.PROPERTIES_LENGTH_SIZE
END_FILE_MIN_BLANK = commitlog.END_FILE_MIN_BLANK_LENGTH   # a record needs this much room after it
# insert_keys' header array holds the index header's fields in their order
BEGIN_TIMESTAMP, END_TIMESTAMP, BEGIN_PHY_OFFSET, END_PHY_OFFSET, HASH_SLOT_COUNT, INDEX_COUNT = (
    index.HEADER_NAMES.index(name) for name in ("beginTimestamp", "endTimestamp", "beginPhyOffset",
                                                "endPhyOffset", "hashSlotCount", "indexCount"))


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
        if length + END_FILE_MIN_BLANK > limit - pos:
            break
        s = slot[i]
        qoff = counters[s] if counts[i] else 0
        p = pos - origin
        put32(out, p, length)
        put32(out, p + MAGIC_AT, magic[i])
        blen = body_len[i]
        crc = 0
        if blen > 0:
            crc = crc32(0, body_addr + body_off[i], blen) & 0x7FFFFFFF
        put32(out, p + BODY_CRC_AT, crc)
        put32(out, p + QUEUE_ID_AT, queue_id[i])
        put32(out, p + FLAG_AT, flag[i])
        put64(out, p + QUEUE_OFFSET_AT, qoff)
        put64(out, p + PHYSICAL_OFFSET_AT, base + pos)
        put32(out, p + SYS_FLAG_AT, sys_flag[i])
        put64(out, p + BORN_TIMESTAMP_AT, born_ts[i])
        p += BORN_HOST_AT
        h = born_host[i]
        _copy(out, p, host_buf, host_off[h], host_len[h])
        p += host_len[h]
        put32(out, p, host_port[h])
        p += PORT_SIZE
        put64(out, p, store_ts[i])
        p += STORE_HOST_AFTER
        h = store_host[i]
        _copy(out, p, host_buf, host_off[h], host_len[h])
        p += host_len[h]
        put32(out, p, host_port[h])
        p += PORT_SIZE
        put32(out, p + RECONSUME_TIMES_IN_TAIL, reconsume[i])
        put64(out, p + PREPARED_OFFSET_IN_TAIL, prepared[i])
        put32(out, p + BODY_LENGTH_IN_TAIL, blen)
        p += BODY_IN_TAIL
        _copy(out, p, body_buf, body_off[i], blen)
        p += blen
        t = topic_id[i]
        tlen = topic_len[t]
        if magic[i] == MAGIC_V2:
            out[p] = (tlen >> 8) & 0xFF
            out[p + 1] = tlen & 0xFF
            p += TOPIC_LENGTH_V2
        else:
            out[p] = tlen
            p += TOPIC_LENGTH_V1
        _copy(out, p, topic_buf, topic_off[t], tlen)
        p += tlen
        plen = props_len[i]
        out[p] = (plen >> 8) & 0xFF
        out[p + 1] = plen & 0xFF
        p += PROPERTIES_LENGTH
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
    entries = INDEX_HEADER + slot_num * SLOT_SIZE
    i = first
    while i < n:
        count = header[INDEX_COUNT]
        if count >= index_num:
            break
        key_hash = hashes[i]
        slot_pos = INDEX_HEADER + (key_hash % slot_num) * SLOT_SIZE
        slot_value = i32(buf, slot_pos)
        if slot_value <= 0 or slot_value > count:
            slot_value = 0
        diff = 0
        if header[BEGIN_TIMESTAMP] > 0:
            diff = (ts[i] - header[BEGIN_TIMESTAMP]) // 1000
            if diff > 0x7FFFFFFF:
                diff = 0x7FFFFFFF
            elif diff < 0:
                diff = 0
        p = entries + count * ENTRY_SIZE
        put32(buf, p + KEY_HASH_AT, key_hash)
        put64(buf, p + PHY_OFFSET_AT, phy[i])
        put32(buf, p + TIME_DIFF_AT, diff)
        put32(buf, p + PREV_INDEX_AT, slot_value)
        put32(buf, slot_pos, count)
        if count <= 1:
            header[BEGIN_PHY_OFFSET] = phy[i]
            header[BEGIN_TIMESTAMP] = ts[i]
        if slot_value == 0:
            header[HASH_SLOT_COUNT] += 1
        header[INDEX_COUNT] = count + 1
        header[END_PHY_OFFSET] = phy[i]
        header[END_TIMESTAMP] = ts[i]
        i += 1
    return i


def warm_up_index() -> None:
    """Load insert_keys from the compile cache now (with the argument types of the real calls:
    a writable file mapping, int64 columns), so that a timed run does not pay for it."""
    none = np.zeros(0, dtype=I64)
    insert_keys(np.frombuffer(bytearray(64), dtype=np.uint8), 1, 1, np.zeros(6, dtype=I64), 0, 0, none, none, none)


aot.adopt(globals(), "append")   # the kernels built ahead of time, where they are (native/aot.py)
