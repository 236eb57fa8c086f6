"""The append path for large batches, compiled: records, consume-queue units, index entries.

CommitLogWriter/Dispatcher are the reference: readable, one message at a
time.  For a large put_many the same bytes are produced here, with the
per-message work moved out of Python: the batch is turned into columns
(lists, then numpy arrays) and numba kernels write the records straight into
the mapped file (body CRC by ISA-L), and the index entries into the index
file (the kernels are mqtool/native/appendkernels.py).  tests/test_fastappend.py checks that both paths write identical files.

Only plain messages take this path (a valid topic, no delay level, sizes well
inside the limits); anything else in a batch goes through the reference path,
in order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mqtool.native.appendkernels import write_records

I64 = np.int64


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
    from mqtool.formats import sysflag
    from mqtool.formats.commitlog import BLANK_MAGIC, MAGIC_V1, MAGIC_V2
    from mqtool.formats.hosts import java_host
    from mqtool.formats.properties import DELAY
    from mqtool.storage import topics

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
        from mqtool.engine.message import PUT_OK, PutResult

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
