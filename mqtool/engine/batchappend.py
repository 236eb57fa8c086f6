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
from dataclasses import dataclass

import numpy as np

I64 = np.int64


# record_length() without the two host addresses, the body, the topic (and its length field) and the
# properties: totalSize .. bornTimestamp (48), two ports (8), storeTimestamp (8), reconsumeTimes,
# preparedTransactionOffset, bodyLength (16), propertiesLength (2)
_FIXED = 48 + 8 + 8 + 16 + 2


def _table(values) -> tuple[dict, list]:
    ids: dict = {}
    order = [ids.setdefault(v, len(ids)) for v in values]
    return ids, order


@dataclass
class PlainBatch:
    """A batch of messages as columns, one entry a message (what append_batch writes).

    The store's put_many makes one from MessageInner objects (of_messages); `mqtool append`
    makes one straight from JSON lines (mqtool/broker/specbatch.py), so that no per-message
    object is built.  tags, keys and uniq are the map's TAGS, KEYS and UNIQ_KEY values (for
    the consume queue's tags code and the index).  A column left None means every message
    has the default: no store host of its own, store time "now", 0 for the numbers."""

    topics: list
    queue_ids: list
    body_buf: bytes              # the bodies, one after the other
    body_len: np.ndarray         # int64, one a message
    properties: list             # the stored properties strings
    tags: list
    keys: list
    uniq: list
    born_hosts: list
    sys_flags: list
    born_ts: list
    flags: list | None = None
    store_hosts: list | None = None
    store_ts: list | None = None
    reconsume: list | None = None
    prepared: list | None = None
    delayed: bool = False        # a message has DELAY: the store rewrites it (not plain)

    def __len__(self) -> int:
        return len(self.topics)

    @classmethod
    def of_messages(cls, msgs: list) -> "PlainBatch | None":
        """The columns of MessageInner objects (None when a body is not bytes)."""
        from mqtool.formats.properties import DELAY, KEYS, TAGS, UNIQ_KEY

        bodies = [m.body for m in msgs]
        if any(type(b) is not bytes for b in bodies):
            return None
        maps = [m.properties for m in msgs]
        return cls(
            topics=[m.topic for m in msgs], queue_ids=[m.queue_id for m in msgs],
            body_buf=b"".join(bodies), body_len=np.fromiter(map(len, bodies), dtype=I64, count=len(bodies)),
            properties=[m.properties_string for m in msgs], tags=[p.get(TAGS) for p in maps],
            keys=[p.get(KEYS) for p in maps], uniq=[p.get(UNIQ_KEY) for p in maps],
            born_hosts=[m.born_host for m in msgs], sys_flags=[m.sys_flag for m in msgs],
            born_ts=[m.born_timestamp for m in msgs], flags=[m.flag for m in msgs],
            store_hosts=[m.store_host for m in msgs], store_ts=[m.store_timestamp for m in msgs],
            reconsume=[m.reconsume_times for m in msgs], prepared=[m.prepared_transaction_offset for m in msgs],
            delayed=any(DELAY in p for p in maps))

    def to_messages(self) -> list:
        """MessageInner objects for the reference path (a batch the compiled path refused:
        a put the store turns down is reported by the reference path's checks)."""
        from mqtool.engine.message import MessageInner
        from mqtool.formats.properties import KEYS, TAGS, UNIQ_KEY

        n = len(self)
        ends = np.cumsum(self.body_len).tolist()
        starts = [0] + ends[:-1]
        none, zeros = [None] * n, [0] * n
        out = []
        for i, (topic, queue_id, text, tags, keys, uniq, born, sys_flag, born_ts, flag, store_host, store_ts,
                reconsume, prepared) in enumerate(zip(
                    self.topics, self.queue_ids, self.properties, self.tags, self.keys, self.uniq,
                    self.born_hosts, self.sys_flags, self.born_ts, self.flags or zeros, self.store_hosts or none,
                    self.store_ts or none, self.reconsume or zeros, self.prepared or zeros)):
            props = {name: value for name, value in ((TAGS, tags), (KEYS, keys), (UNIQ_KEY, uniq))
                     if value is not None}
            out.append(MessageInner(
                topic=topic, queue_id=queue_id, body=self.body_buf[starts[i]:ends[i]], properties=props,
                properties_string=text, flag=flag, sys_flag=sys_flag, born_timestamp=born_ts, born_host=born,
                store_host=store_host, reconsume_times=reconsume, prepared_transaction_offset=prepared,
                store_timestamp=store_ts))
        return out


def _column(values, n: int, default=0) -> np.ndarray:
    if values is None:
        return np.full(n, default, dtype=I64)
    return np.fromiter(values, dtype=I64, count=n)


def append_batch(writer, batch: PlainBatch):
    """Append a batch like CommitLogWriter.append_many, if every message is plain.

    Plain: a valid topic, no delay level (the store would rewrite it), properties
    and body well inside the limits, so no put can be refused.  Returns None for
    any other batch (the caller takes the reference path), else (results,
    columns); columns feed dispatch_columns().  The caller holds writer.lock.
    """
    from mqtool.formats import sysflag
    from mqtool.formats.commitlog import BLANK_MAGIC, MAGIC_V1, MAGIC_V2
    from mqtool.formats.hosts import java_host
    from mqtool.native.appendkernels import write_records  # loads numba: only when a batch is appended
    from mqtool.storage import topics

    n = len(batch)
    if not n or batch.delayed:
        return None
    longest_topic = topics.LONGEST_DIRECTORY_NAME if writer.five else topics.TOPIC_MAX_LENGTH
    topic_ids, topic_of = _table(batch.topics)
    if any(topics.topic_problem(t, longest_topic) is not None for t in topic_ids):
        return None
    texts = batch.properties
    if None in texts or max(map(len, texts)) > 8000:
        return None
    body_len = batch.body_len
    if body_len.max() > writer.max_body:
        return None
    now = writer.clock.now_ms()
    flags = np.fromiter(batch.sys_flags, dtype=I64, count=n)
    # hosts: a small table of the distinct ones (text, and whether the sysFlag already says IPv6)
    v6_bits = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6
    default_host = writer.store_host
    store_hosts = batch.store_hosts or [None] * n
    if (flags & v6_bits).any():
        flag_list = flags.tolist()
        born_keys = [(h, bool(f & sysflag.BORNHOST_V6)) for h, f in zip(batch.born_hosts, flag_list)]
        store_keys = [(h or default_host, bool(f & sysflag.STOREHOST_V6)) for h, f in zip(store_hosts, flag_list)]
    else:
        born_keys = [(h, False) for h in batch.born_hosts]
        store_keys = [(h or default_host, False) for h in store_hosts]
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
    slot_ids, slot_of = _table(zip(batch.topics, batch.queue_ids))
    table = writer.topic_queue_table
    counters = np.array([table.get(k, 0) for k in slot_ids], dtype=I64)
    slot = np.array(slot_of, dtype=I64)
    tx = flags & sysflag.TRANSACTION_MASK
    counts = (tx == sysflag.TRANSACTION_NOT_TYPE) | (tx == sysflag.TRANSACTION_COMMIT)
    # bodies and properties as one buffer each
    body_off = np.cumsum(body_len) - body_len
    body_buf = np.frombuffer(batch.body_buf or b"\0", dtype=np.uint8)
    props_buf, props_len = _utf8_column(texts)
    props_off = np.cumsum(props_len) - props_len
    queue_id = np.fromiter(batch.queue_ids, dtype=I64, count=n)
    flag = _column(batch.flags, n)
    born_ts = np.fromiter(batch.born_ts, dtype=I64, count=n)
    if batch.store_ts is None:
        store_ts = np.full(n, now, dtype=I64)
    else:
        store_ts = np.fromiter((now if t is None else t for t in batch.store_ts), dtype=I64, count=n)
    reconsume = _column(batch.reconsume, n)
    prepared = _column(batch.prepared, n)
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
        if mf.write_buffer is None:
            mf.drop_written_pages()   # written through the mapping: keep the resident set flat
        first = nxt
    for key, value in zip(slot_ids, counters.tolist()):
        table[key] = value
    wrote_list, qoff_list, ts_list = wrote.tolist(), queue_offsets.tolist(), store_ts.tolist()
    len_list = lengths.tolist()
    results = BatchResults(batch, wrote_list, len_list, qoff_list, ts_list, store_ids, hosts)
    columns = {"batch": batch, "wrote": wrote, "lengths": lengths, "queue_offsets": queue_offsets,
               "store_ts": store_ts, "slot": slot, "slot_ids": list(slot_ids), "counts": counts, "flags": flags}
    return results, columns


def _utf8_column(texts: list) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 bytes of strings, one after the other, and each one's length."""
    joined = "".join(texts)
    if joined.isascii():
        lengths = np.fromiter(map(len, texts), dtype=I64, count=len(texts))
        data = joined.encode("ascii")
    else:
        encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
        lengths = np.fromiter(map(len, encoded), dtype=I64, count=len(texts))
        data = b"".join(encoded)
    return np.frombuffer(data or b"\0", dtype=np.uint8), lengths


class BatchResults(Sequence):
    """The PutResults of a compiled batch, made only when looked at (making 10^5
    result objects would cost more than appending the messages).  The columns are
    public for callers that report every put without making the objects."""

    def __init__(self, batch, wrote, lengths, queue_offsets, store_ts, store_ids, hosts):
        self.topics, self.queue_ids = batch.topics, batch.queue_ids
        self.wrote, self.lengths, self.queue_offsets, self.store_ts = wrote, lengths, queue_offsets, store_ts
        self.store_ids, self.hosts = store_ids, hosts

    def __len__(self) -> int:
        return len(self.topics)

    def __getitem__(self, index):
        from mqtool.engine.message import PUT_OK, PutResult

        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        address, port, _ = self.hosts[self.store_ids[index]]
        return PutResult(PUT_OK, self.wrote[index], self.lengths[index], address, self.queue_offsets[index],
                         self.store_ts[index], self.topics[index], self.queue_ids[index], None, port)

    def end_offset(self) -> int:
        """Where the last record of the batch ends."""
        return self.wrote[-1] + self.lengths[-1] if len(self) else 0


def dispatch_columns(dispatcher, columns) -> None:
    """Dispatcher.dispatch_many for a batch appended by append_batch."""
    from mqtool.formats import sysflag
    from mqtool.formats.javastr import index_key_hashes, tags_code
    from mqtool.formats.properties import split_keys

    batch = columns["batch"]
    wrote, lengths, store_ts = columns["wrote"], columns["lengths"], columns["store_ts"]
    counts = columns["counts"]
    to_queue = np.flatnonzero(counts)
    if len(to_queue):
        codes: dict = {}   # tags repeat: each distinct one hashed once
        all_tags = batch.tags
        if len(to_queue) == len(batch):
            tags = np.fromiter((codes[t] if t in codes else codes.setdefault(t, tags_code(t)) for t in all_tags),
                               dtype=I64, count=len(to_queue))
        else:
            tags = np.array([tags_code(all_tags[i]) for i in to_queue.tolist()], dtype=I64)
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
    rolled_back = set(np.flatnonzero((flags & sysflag.TRANSACTION_MASK) == sysflag.TRANSACTION_ROLLBACK).tolist())
    for i, (topic, uniq, text) in enumerate(zip(batch.topics, batch.uniq, batch.keys)):
        if rolled_back and i in rolled_back:
            continue
        if uniq:
            keys.append(topic + "#" + uniq)
            owners.append(i)
        if text and " " not in text:   # the common case: one key
            keys.append(topic + "#" + text)
            owners.append(i)
        elif text:
            for key in split_keys(text):
                keys.append(topic + "#" + key)
                owners.append(i)
    if keys:
        who = np.array(owners, dtype=I64)
        hashes = np.array(index_key_hashes(keys), dtype=I64)
        dispatcher.index.insert_arrays(hashes, wrote[who], store_ts[who])
