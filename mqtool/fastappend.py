"""The append path for large batches, compiled: records, consume-queue units, index entries.

CommitLogWriter/Dispatcher are the reference: readable, one message at a
time.  For a large put_many the same bytes are produced here, with the
per-message work moved out of Python: the batch is turned into columns
(lists, then numpy arrays) and numba kernels write the records straight into
the mapped file (body CRC by ISA-L), and the index entries into the index
file.  tests/test_fastappend.py checks that both paths write identical files.

Only plain messages take this path (a valid topic, no delay level, sizes well
inside the limits); anything else in a batch goes through the reference path,
in order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mqtool.native import crc32, njit

I64 = np.int64


# ------------------------------------------------------------------ kernels

@njit(cache=True, inline="always")
def _put32(out, p, v):
    out[p] = (v >> 24) & 0xFF
    out[p + 1] = (v >> 16) & 0xFF
    out[p + 2] = (v >> 8) & 0xFF
    out[p + 3] = v & 0xFF


@njit(cache=True, inline="always")
def _put64(out, p, v):
    _put32(out, p, (v >> 32) & 0xFFFFFFFF)
    _put32(out, p + 4, v & 0xFFFFFFFF)


@njit(cache=True, inline="always")
def _get32(buf, p):
    v = (np.int64(buf[p]) << 24) | (np.int64(buf[p + 1]) << 16) | (np.int64(buf[p + 2]) << 8) | np.int64(buf[p + 3])
    if v >= 0x80000000:
        v -= 0x100000000
    return v


@njit(cache=True, inline="always")
def _copy(out, p, src, start, length):
    out[p:p + length] = src[start:start + length]


@njit(cache=True, nogil=True)
def write_records(out, pos, limit, base, first, n, lengths, magic, body_buf, body_off, body_len,
                  props_buf, props_off, props_len, topic_buf, topic_off, topic_len, topic_id,
                  host_buf, host_off, host_len, host_port, born_host, store_host,
                  queue_id, flag, sys_flag, born_ts, store_ts, reconsume, prepared,
                  slot, counters, counts, wrote, queue_offsets):
    """Write records first.. into out (a file's bytes) from pos, while record + 8 bytes fit
    below limit.  Returns (next message, next position)."""
    body_addr = body_buf.ctypes.data
    i = first
    while i < n:
        length = lengths[i]
        if length + 8 > limit - pos:
            break
        s = slot[i]
        qoff = counters[s] if counts[i] else 0
        p = pos
        _put32(out, p, length)
        _put32(out, p + 4, magic[i])
        blen = body_len[i]
        crc = 0
        if blen > 0:
            crc = crc32(0, body_addr + body_off[i], blen) & 0x7FFFFFFF
        _put32(out, p + 8, crc)
        _put32(out, p + 12, queue_id[i])
        _put32(out, p + 16, flag[i])
        _put64(out, p + 20, qoff)
        _put64(out, p + 28, base + pos)
        _put32(out, p + 36, sys_flag[i])
        _put64(out, p + 40, born_ts[i])
        p += 48
        h = born_host[i]
        _copy(out, p, host_buf, host_off[h], host_len[h])
        p += host_len[h]
        _put32(out, p, host_port[h])
        p += 4
        _put64(out, p, store_ts[i])
        p += 8
        h = store_host[i]
        _copy(out, p, host_buf, host_off[h], host_len[h])
        p += host_len[h]
        _put32(out, p, host_port[h])
        p += 4
        _put32(out, p, reconsume[i])
        _put64(out, p + 4, prepared[i])
        _put32(out, p + 12, blen)
        p += 16
        _copy(out, p, body_buf, body_off[i], blen)
        p += blen
        t = topic_id[i]
        tlen = topic_len[t]
        if magic[i] == 0xDAA320AB:
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
        slot_value = _get32(buf, slot_pos)
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
        _put32(buf, p, key_hash)
        _put64(buf, p + 4, phy[i])
        _put32(buf, p + 12, diff)
        _put32(buf, p + 16, slot_value)
        _put32(buf, slot_pos, count)
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


# ------------------------------------------------------------- orchestration

_UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")])
# record_length() without the two host addresses, the body, the topic (and its length field) and the
# properties: totalSize .. bornTimestamp (48), two ports (8), storeTimestamp (8), reconsumeTimes,
# preparedTransactionOffset, bodyLength (16), propertiesLength (2)
_FIXED = 48 + 8 + 8 + 16 + 2


def _table(values: list) -> tuple[dict, list]:
    ids: dict = {}
    order = [ids.setdefault(v, len(ids)) for v in values]
    return ids, order


def append_plain(writer, msgs: list):
    """Append a batch like CommitLogWriter.append_many, if every message is plain.

    Plain: a valid topic, no delay level (the store would rewrite it), properties
    and body well inside the limits, so no put can be refused.  Returns None for
    any other batch (the caller takes the reference path), else (results,
    columns); columns feed dispatch_columns().  The caller holds writer.lock.
    """
    from mqtool import topics
    from mqtool.formats import sysflag
    from mqtool.formats.commitlog import BLANK_MAGIC, MAGIC_V1, MAGIC_V2
    from mqtool.formats.hosts import java_host
    from mqtool.formats.properties import DELAY

    n = len(msgs)
    longest_topic = topics.LONGEST_DIRECTORY_NAME if writer.five else topics.TOPIC_MAX_LENGTH
    topic_ids, topic_of = _table([m.topic for m in msgs])
    if any(topics.topic_problem(t, longest_topic) is not None for t in topic_ids):
        return None
    if any(DELAY in m.properties for m in msgs):
        return None
    texts = [m.properties_string for m in msgs]
    if None in texts or max(map(len, texts)) > 8000:
        return None
    bodies = [m.body for m in msgs]
    if any(type(b) is not bytes for b in bodies):
        return None
    body_len = np.fromiter(map(len, bodies), dtype=I64, count=n)
    if body_len.max() > writer.max_body:
        return None
    now = writer.clock.now_ms()
    flags = np.array([m.sys_flag for m in msgs], dtype=I64)
    # hosts: a small table of the distinct ones (text, and whether the sysFlag already says IPv6)
    v6_bits = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6
    default_host = writer.store_host
    if (flags & v6_bits).any():
        born_keys = [(m.born_host, bool(f & sysflag.BORNHOST_V6)) for m, f in zip(msgs, flags.tolist())]
        store_keys = [(m.store_host or default_host, bool(f & sysflag.STOREHOST_V6))
                      for m, f in zip(msgs, flags.tolist())]
    else:
        born_keys = [(m.born_host, False) for m in msgs]
        store_keys = [(m.store_host or default_host, False) for m in msgs]
    host_ids, born_ids = _table(born_keys)
    store_ids = [host_ids.setdefault(k, len(host_ids)) for k in store_keys]
    hosts = [java_host(text, v6) for text, v6 in host_ids]
    host_buf = np.frombuffer(b"".join(h[0] for h in hosts), dtype=np.uint8)
    host_len = np.array([len(h[0]) for h in hosts], dtype=I64)
    host_off = np.cumsum(host_len) - host_len
    host_port = np.array([h[1] for h in hosts], dtype=I64)
    host_v6 = np.array([h[2] for h in hosts], dtype=bool)
    born = np.array(born_ids, dtype=I64)
    store = np.array(store_ids, dtype=I64)
    flags |= np.where(host_v6[born], sysflag.BORNHOST_V6, 0)
    flags |= np.where(host_v6[store], sysflag.STOREHOST_V6, 0)
    # topics and the queue offset counters
    topic_bytes = [t.encode("utf-8") for t in topic_ids]
    topic_len = np.array([len(t) for t in topic_bytes], dtype=I64)
    topic_off = np.cumsum(topic_len) - topic_len
    topic_buf = np.frombuffer(b"".join(topic_bytes), dtype=np.uint8)
    topic_id = np.array(topic_of, dtype=I64)
    v2 = np.array([writer.five and writer.config.autoMessageVersionOnTopicLen and len(t) > 127
                   for t in topic_ids], dtype=bool)
    magic = np.where(v2[topic_id], MAGIC_V2, MAGIC_V1).astype(I64)
    slot_ids, slot_of = _table([(m.topic, m.queue_id) for m in msgs])
    table = writer.topic_queue_table
    counters = np.array([table.get(k, 0) for k in slot_ids], dtype=I64)
    slot = np.array(slot_of, dtype=I64)
    tx = flags & sysflag.TRANSACTION_MASK
    counts = (tx == sysflag.TRANSACTION_NOT_TYPE) | (tx == sysflag.TRANSACTION_COMMIT)
    # bodies and properties as one buffer each
    body_off = np.cumsum(body_len) - body_len
    body_buf = np.frombuffer(b"".join(bodies) or b"\0", dtype=np.uint8)
    props = [t.encode("utf-8", "surrogatepass") for t in texts]
    props_len = np.fromiter(map(len, props), dtype=I64, count=n)
    props_off = np.cumsum(props_len) - props_len
    props_buf = np.frombuffer(b"".join(props) or b"\0", dtype=np.uint8)
    queue_id = np.array([m.queue_id for m in msgs], dtype=I64)
    flag = np.array([m.flag for m in msgs], dtype=I64)
    born_ts = np.array([m.born_timestamp for m in msgs], dtype=I64)
    store_ts = np.array([now if m.store_timestamp is None else m.store_timestamp for m in msgs], dtype=I64)
    reconsume = np.array([m.reconsume_times for m in msgs], dtype=I64)
    prepared = np.array([m.prepared_transaction_offset for m in msgs], dtype=I64)
    lengths = (_FIXED + host_len[born] + host_len[store] + body_len + topic_len[topic_id] + props_len
               + np.where(v2[topic_id], 2, 1))
    wrote = np.empty(n, dtype=I64)
    queue_offsets = np.empty(n, dtype=I64)

    queue = writer.queue
    first = 0
    total = int(lengths.sum())
    while first < n:
        mf = queue.get_last_mapped_file(0)
        queue.make_room(mf, total)
        target = mf.write_buffer if mf.write_buffer is not None else mf.buf
        out = np.frombuffer(target, dtype=np.uint8)
        nxt, pos = write_records(out, mf.wrote_position, mf.file_size, mf.file_from_offset, first, n,
                                 lengths, magic, body_buf, body_off, body_len, props_buf, props_off,
                                 props_len, topic_buf, topic_off, topic_len, topic_id, host_buf, host_off,
                                 host_len, host_port, born, store, queue_id, flag, flags, born_ts,
                                 store_ts, reconsume, prepared, slot, counters, counts, wrote, queue_offsets)
        del out
        if nxt > first:
            mf.store_timestamp = int(store_ts[nxt - 1])
        mf.wrote_position = pos
        if nxt < n:   # the next record does not fit: close the file with a BLANK record
            left = mf.file_size - pos
            target[pos:pos + 8] = left.to_bytes(4, "big", signed=True) + BLANK_MAGIC.to_bytes(4, "big")
            mf.wrote_position = mf.file_size
        first = nxt
    for key, value in zip(slot_ids, counters.tolist()):
        table[key] = value
    wrote_list, qoff_list, ts_list = wrote.tolist(), queue_offsets.tolist(), store_ts.tolist()
    len_list = lengths.tolist()
    results = BatchResults(msgs, wrote_list, len_list, qoff_list, ts_list, store_ids, hosts)
    columns = {"msgs": msgs, "wrote": wrote, "lengths": lengths, "queue_offsets": queue_offsets,
               "store_ts": store_ts, "slot": slot, "slot_ids": list(slot_ids), "counts": counts, "flags": flags}
    return results, columns


class BatchResults(Sequence):
    """The PutResults of a compiled batch, made only when looked at (making 10^5
    result objects would cost more than appending the messages)."""

    def __init__(self, msgs, wrote, lengths, queue_offsets, store_ts, store_ids, hosts):
        self._columns = (msgs, wrote, lengths, queue_offsets, store_ts, store_ids)
        self._hosts = hosts

    def __len__(self) -> int:
        return len(self._columns[0])

    def __getitem__(self, index):
        from mqtool.message import PUT_OK, PutResult

        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        msgs, wrote, lengths, queue_offsets, store_ts, store_ids = self._columns
        address, port, _ = self._hosts[store_ids[index]]
        m = msgs[index]
        return PutResult(PUT_OK, wrote[index], lengths[index], address, queue_offsets[index], store_ts[index],
                         m.topic, m.queue_id, None, port)

    def end_offset(self) -> int:
        """Where the last record of the batch ends."""
        return self._columns[1][-1] + self._columns[2][-1] if len(self) else 0


def dispatch_columns(dispatcher, columns) -> None:
    """Dispatcher.dispatch_many for a batch appended by append_plain."""
    from mqtool.formats import sysflag
    from mqtool.formats.javastr import index_key_hashes, tags_code
    from mqtool.formats.properties import KEYS, TAGS, UNIQ_KEY, split_keys

    msgs = columns["msgs"]
    wrote, lengths, store_ts = columns["wrote"], columns["lengths"], columns["store_ts"]
    counts = columns["counts"]
    to_queue = np.flatnonzero(counts)
    if len(to_queue):
        tags = np.array([tags_code(msgs[i].properties.get(TAGS)) for i in to_queue.tolist()], dtype=I64)
        slots = columns["slot"][to_queue]
        order = np.argsort(slots, kind="stable")
        ordered, ordered_slots = to_queue[order], slots[order]
        ordered_tags = tags[order]
        cuts = np.flatnonzero(np.diff(ordered_slots)) + 1
        for group, group_tags in zip(np.split(ordered, cuts), np.split(ordered_tags, cuts)):
            topic, queue_id = columns["slot_ids"][int(columns["slot"][group[0]])]
            dispatcher.queue(topic, queue_id).put_arrays(wrote[group], lengths[group], group_tags,
                                                         columns["queue_offsets"][group])
        if dispatcher.checkpoint is not None:
            dispatcher.checkpoint.logics_msg_timestamp = int(store_ts[to_queue[-1]])
    if not (dispatcher.message_index_enable and dispatcher.index is not None):
        return
    flags = columns["flags"]
    keys, owners = [], []
    rollback = sysflag.TRANSACTION_ROLLBACK
    for i, m in enumerate(msgs):
        if flags[i] & sysflag.TRANSACTION_MASK == rollback:
            continue
        props = m.properties
        prefix = m.topic + "#"
        uniq = props.get(UNIQ_KEY)
        if uniq:
            keys.append(prefix + uniq)
            owners.append(i)
        text = props.get(KEYS)
        if text and " " not in text:   # the common case: one key
            keys.append(prefix + text)
            owners.append(i)
        elif text:
            for key in split_keys(text):
                keys.append(prefix + key)
                owners.append(i)
    if keys:
        who = np.array(owners, dtype=I64)
        hashes = np.array(index_key_hashes(keys), dtype=I64)
        dispatcher.index.insert_arrays(hashes, wrote[who], store_ts[who])


def put_unit_arrays(cq, offsets, sizes, tags, queue_offsets) -> None:
    """ConsumeQueue.put for consecutive units: the first through the reference path (it
    creates files, fills pre-blanks, skips what was dispatched before), the rest written
    as whole slices when they continue exactly at the write position."""
    from mqtool.formats.consumequeue import UNIT_SIZE

    fresh = offsets + sizes > cq.max_physic_offset    # units already in the queue are skipped
    if not fresh.all():
        offsets, sizes, tags, queue_offsets = offsets[fresh], sizes[fresh], tags[fresh], queue_offsets[fresh]
    n = len(offsets)
    if not n or not cq.put(int(offsets[0]), int(sizes[0]), int(tags[0]), int(queue_offsets[0])):
        return
    i = 1
    files = cq.files
    while i < n:
        mf = files.get_last_mapped_file(int(queue_offsets[i]) * UNIT_SIZE)
        at = (mf.file_from_offset + mf.wrote_position) // UNIT_SIZE
        room = (mf.file_size - mf.wrote_position) // UNIT_SIZE
        run = min(room, n - i)
        if at != queue_offsets[i] or queue_offsets[i + run - 1] - queue_offsets[i] != run - 1 or run <= 0:
            cq.put(int(offsets[i]), int(sizes[i]), int(tags[i]), int(queue_offsets[i]))
            i += 1
            continue
        units = np.empty(run, dtype=_UNIT_DTYPE)
        units["offset"], units["size"], units["tags"] = offsets[i:i + run], sizes[i:i + run], tags[i:i + run]
        mf.append(units.tobytes())
        cq.max_physic_offset = int(offsets[i + run - 1] + sizes[i + run - 1])
        i += run


def warm_up_index() -> None:
    """Load insert_keys from the compile cache now (with the argument types of the real calls:
    a writable file mapping, int64 columns), so that a timed run does not pay for it."""
    none = np.zeros(0, dtype=I64)
    insert_keys(np.frombuffer(bytearray(64), dtype=np.uint8), 1, 1, np.zeros(6, dtype=I64), 0, 0, none, none, none)
