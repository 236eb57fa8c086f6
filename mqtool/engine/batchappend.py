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


@dataclass
class ColumnBatch:
    """A batch of plain messages whose every column is already a numpy array (`mqtool append`'s
    fast lines, mqtool/broker/specblock.py): no Python object per message at all.

    The texts are slices of the input block (body_buf) or of one properties buffer;
    topic_id and born_id number topic_names and born_hosts (each (text, IPv6 flag));
    own_store_ts says where store_ts is given (elsewhere the store's clock gives it).
    tags_code is the consume queue's, key_hash/key_owner the index keys (topic#key)
    and the message each belongs to.
    Its messages carry no transaction, delay, store host or prepared offset."""

    topic_names: list
    topic_id: np.ndarray
    queue_ids: np.ndarray
    body_buf: np.ndarray
    body_off: np.ndarray
    body_len: np.ndarray
    props_buf: np.ndarray
    props_off: np.ndarray
    props_len: np.ndarray
    born_hosts: list
    born_id: np.ndarray
    sys_flags: np.ndarray
    born_ts: np.ndarray
    flags: np.ndarray
    store_ts: np.ndarray
    own_store_ts: np.ndarray
    reconsume: np.ndarray
    tags_code: np.ndarray
    key_hash: np.ndarray
    key_owner: np.ndarray

    def __len__(self) -> int:
        return len(self.topic_id)

    def to_messages(self) -> list:
        """MessageInner objects for the reference path (the store turned the batch down)."""
        from mqtool.engine.message import MessageInner
        from mqtool.formats.properties import KEYS, TAGS, decode_properties

        out = []
        for i in range(len(self)):
            b, p = int(self.body_off[i]), int(self.props_off[i])
            text = bytes(self.props_buf[p:p + int(self.props_len[i])]).decode("utf-8")
            props = {k: v for k, v in decode_properties(text).items() if k in (TAGS, KEYS)}
            ts = int(self.store_ts[i]) if self.own_store_ts[i] else None
            out.append(MessageInner(
                topic=self.topic_names[self.topic_id[i]], queue_id=int(self.queue_ids[i]),
                body=bytes(self.body_buf[b:b + int(self.body_len[i])]), properties=props,
                properties_string=text, flag=int(self.flags[i]), sys_flag=int(self.sys_flags[i]),
                born_timestamp=int(self.born_ts[i]), born_host=self.born_hosts[self.born_id[i]][0],
                reconsume_times=int(self.reconsume[i]), store_timestamp=ts))
        return out


def append_columns(writer, batch: ColumnBatch):
    """append_batch for a ColumnBatch: None when the store would not take every message
    as it is (a topic it refuses, properties or a body too long), else (results, columns)."""
    n = len(batch)
    used = np.unique(batch.topic_id).tolist()
    if (not n or not _topics_plain(writer, [batch.topic_names[t] for t in used])
            or batch.props_len.max() > 8000 or batch.body_len.max() > writer.max_body):
        return None
    store_ts = np.where(batch.own_store_ts, batch.store_ts, writer.clock.now_ms())
    host_keys = list(batch.born_hosts)
    default = len(host_keys)
    host_keys.append((writer.store_host, False))
    cols = dict(body_buf=batch.body_buf, body_off=batch.body_off, body_len=batch.body_len, props_buf=batch.props_buf,
                props_off=batch.props_off, props_len=batch.props_len, queue_id=batch.queue_ids, flag=batch.flags,
                sys_flag=batch.sys_flags.copy(), born_ts=batch.born_ts, store_ts=store_ts, reconsume=batch.reconsume,
                prepared=np.zeros(n, dtype=I64))
    results, columns = _write(writer, cols, batch.topic_names, batch.topic_id, host_keys, batch.born_id,
                              np.full(n, default, dtype=I64))
    columns["batch"] = batch
    return results, columns


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

    n = len(batch)
    if not n or batch.delayed:
        return None
    topic_ids, topic_of = _table(batch.topics)
    texts = batch.properties
    if (not _topics_plain(writer, topic_ids) or None in texts or max(map(len, texts)) > 8000
            or batch.body_len.max() > writer.max_body):
        return None
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
    props_buf, props_len = _utf8_column(texts)
    now = writer.clock.now_ms()
    if batch.store_ts is None:
        store_ts = np.full(n, now, dtype=I64)
    else:
        store_ts = np.fromiter((now if t is None else t for t in batch.store_ts), dtype=I64, count=n)
    cols = dict(
        body_buf=np.frombuffer(batch.body_buf or b"\0", dtype=np.uint8), body_off=np.cumsum(batch.body_len)
        - batch.body_len, body_len=batch.body_len, props_buf=props_buf, props_off=np.cumsum(props_len) - props_len,
        props_len=props_len, queue_id=np.fromiter(batch.queue_ids, dtype=I64, count=n), flag=_column(batch.flags, n),
        sys_flag=flags, born_ts=np.fromiter(batch.born_ts, dtype=I64, count=n), store_ts=store_ts,
        reconsume=_column(batch.reconsume, n), prepared=_column(batch.prepared, n))
    results, columns = _write(writer, cols, list(topic_ids), np.array(topic_of, dtype=I64), list(host_ids),
                              np.array(born_ids, dtype=I64), np.array(store_ids, dtype=I64))
    columns["batch"] = batch
    return results, columns


def _topics_plain(writer, topic_names) -> bool:
    """Is every topic one the store takes without a word (a valid name, not too long)?"""
    from mqtool.storage import topics

    longest = topics.LONGEST_DIRECTORY_NAME if writer.five else topics.TOPIC_MAX_LENGTH
    return all(topics.topic_problem(t, longest) is None for t in topic_names)


def _write(writer, cols: dict, topic_names: list, topic_id, host_keys: list, born, store):
    """Write the records of a batch's columns (cols: write_records' message columns) and
    update the queue offset counters.  topic_names/host_keys: the distinct topics and
    (host, IPv6 flag) pairs, which topic_id, born and store number.  Returns (results, columns)."""
    from mqtool.formats import sysflag
    from mqtool.formats.commitlog import BLANK, MAGIC_V1, MAGIC_V2
    from mqtool.formats.hosts import java_host
    from mqtool.native.appendkernels import write_records  # loads numba: only when a batch is appended

    n = len(topic_id)
    hosts = [java_host(text, v6) for text, v6 in host_keys]
    host_buf = np.frombuffer(b"".join(h[0] for h in hosts), dtype=np.uint8)
    host_len = np.array([len(h[0]) for h in hosts], dtype=I64)
    host_off = np.cumsum(host_len) - host_len
    host_port = np.array([h[1] for h in hosts], dtype=I64)
    host_v6 = np.array([h[2] for h in hosts], dtype=bool)
    flags = cols["sys_flag"]
    flags |= np.where(host_v6[born], sysflag.BORNHOST_V6, 0)
    flags |= np.where(host_v6[store], sysflag.STOREHOST_V6, 0)
    # topics and the queue offset counters
    topic_bytes = [t.encode("utf-8") for t in topic_names]
    topic_len = np.array([len(t) for t in topic_bytes], dtype=I64)
    topic_off = np.cumsum(topic_len) - topic_len
    topic_buf = np.frombuffer(b"".join(topic_bytes), dtype=np.uint8)
    v2 = np.array([writer.five and writer.config.autoMessageVersionOnTopicLen and len(t) > 127
                   for t in topic_names], dtype=bool)
    magic = np.where(v2[topic_id], MAGIC_V2, MAGIC_V1).astype(I64)
    slot_ids, slot_of = _table(zip(topic_id.tolist(), cols["queue_id"].tolist()))
    table = writer.topic_queue_table
    slot_ids = [(topic_names[t], q) for t, q in slot_ids]
    counters = np.array([table.get(k, 0) for k in slot_ids], dtype=I64)
    slot = np.array(slot_of, dtype=I64)
    counts = sysflag.is_dispatched_to_consume_queue(flags)
    lengths = (_FIXED + host_len[born] + host_len[store] + cols["body_len"] + topic_len[topic_id] + cols["props_len"]
               + np.where(v2[topic_id], 2, 1))
    wrote = np.empty(n, dtype=I64)
    queue_offsets = np.empty(n, dtype=I64)
    store_ts = cols["store_ts"]

    queue = writer.queue
    first = 0
    ends = np.cumsum(lengths)
    while first < n:
        left = int(ends[-1] - (ends[first - 1] if first else 0))    # the bytes of the records still to write
        mf = queue.get_last_mapped_file(0)
        queue.make_room(mf, left)
        # pwritten from a buffer of their own, or written in place (MappedFile.appends_by_pwrite)
        direct = mf.appends_by_pwrite(batch=True)
        origin = mf.wrote_position if direct else 0
        target = None if direct else mf.write_buffer if mf.write_buffer is not None else mf.buf
        out = np.empty(min(left, mf.file_size - origin), dtype=np.uint8) if direct else np.frombuffer(
            target, dtype=np.uint8)
        nxt, pos = write_records(out, origin, mf.wrote_position, mf.file_size, mf.file_from_offset, first, n,
                                 lengths, magic, cols["body_buf"], cols["body_off"], cols["body_len"],
                                 cols["props_buf"], cols["props_off"], cols["props_len"], topic_buf, topic_off,
                                 topic_len, topic_id, host_buf, host_off, host_len, host_port, born, store,
                                 cols["queue_id"], cols["flag"], flags, cols["born_ts"], store_ts,
                                 cols["reconsume"], cols["prepared"], slot, counters, counts, wrote, queue_offsets)
        if direct:
            mf.pwrite(out[:pos - origin], origin)
        del out
        if nxt > first:
            mf.store_timestamp = int(store_ts[nxt - 1])
        mf.wrote_position = pos
        if nxt < n:   # the next record does not fit: close the file with a BLANK record
            blank = BLANK.build({"totalSize": mf.file_size - pos})   # only its 8 header bytes
            if direct:
                mf.pwrite(blank, pos)
            else:
                target[pos:pos + len(blank)] = blank
            mf.wrote_position = mf.file_size
        if not direct and mf.write_buffer is None:
            mf.drop_written_pages()   # written through the mapping: keep the resident set flat
        first = nxt
    for key, value in zip(slot_ids, counters.tolist()):
        table[key] = value
    results = BatchResults(topic_names, topic_id, cols["queue_id"], wrote, lengths, queue_offsets, store_ts, store,
                           hosts)
    columns = {"wrote": wrote, "lengths": lengths, "queue_offsets": queue_offsets, "store_ts": store_ts,
               "slot": slot, "slot_ids": slot_ids, "counts": counts, "flags": flags}
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
    result objects would cost more than appending the messages).  The columns (numpy
    arrays) are public for callers that report every put without making the objects:
    topic_id numbers topic_names, store_id numbers hosts ((address, port, IPv6))."""

    def __init__(self, topic_names, topic_id, queue_ids, wrote, lengths, queue_offsets, store_ts, store_id, hosts):
        self.topic_names, self.topic_id, self.queue_ids = topic_names, topic_id, queue_ids
        self.wrote, self.lengths, self.queue_offsets, self.store_ts = wrote, lengths, queue_offsets, store_ts
        self.store_id, self.hosts = store_id, hosts

    def __len__(self) -> int:
        return len(self.topic_id)

    def __getitem__(self, index):
        from mqtool.engine.message import PUT_OK, PutResult

        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        address, port, _ = self.hosts[self.store_id[index]]
        return PutResult(PUT_OK, int(self.wrote[index]), int(self.lengths[index]), address,
                         int(self.queue_offsets[index]), int(self.store_ts[index]),
                         self.topic_names[self.topic_id[index]], int(self.queue_ids[index]), None, port)

    def end_offset(self) -> int:
        """Where the last record of the batch ends."""
        return int(self.wrote[-1] + self.lengths[-1]) if len(self) else 0

    def json_lines(self, numbers) -> np.ndarray:
        """append --json's put lines (as PutResult.to_json gives them) of the input lines
        numbered, rendered by compiled code (at hundreds of thousands of puts a second, objects
        per put would cost more than the puts)."""
        import json

        from mqtool.formats.msgid import encode_offset_msgid
        from mqtool.native import putlines

        prefixes = [encode_offset_msgid(address, port, 0)[:-16].encode("ascii") for address, port, _ in self.hosts]
        topics = [json.dumps(t, ensure_ascii=False).encode("utf-8") for t in self.topic_names]
        prefix_buf, prefix_off = _joined(prefixes)
        topic_buf, topic_off = _joined(topics)
        parts, part_off = putlines.parts()
        room = len(self) * (int(part_off[-1]) + max(map(len, prefixes)) + 16 + 6 * 20 + max(map(len, topics)))
        out = np.empty(room, dtype=np.uint8)
        size = putlines.render_puts(np.asarray(numbers, dtype=np.int64), np.asarray(self.store_id, dtype=np.int64),
                                    prefix_buf, prefix_off, self.wrote, self.lengths, self.queue_offsets,
                                    self.store_ts, self.topic_id, topic_buf, topic_off,
                                    np.asarray(self.queue_ids, dtype=np.int64), parts, part_off, out)
        return out[:size]


def _joined(items: list) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings one after the other, and where each starts (n + 1 offsets)."""
    lengths = np.array([len(b) for b in items], dtype=np.int64)
    return (np.frombuffer(b"".join(items) or b"\0", dtype=np.uint8),
            np.concatenate(([0], np.cumsum(lengths))).astype(np.int64))


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
        if isinstance(batch, ColumnBatch):
            tags = batch.tags_code[to_queue]
        elif len(to_queue) == len(batch):
            tags = np.fromiter((codes[t] if t in codes else codes.setdefault(t, tags_code(t)) for t in batch.tags),
                               dtype=I64, count=len(to_queue))
        else:
            tags = np.array([tags_code(batch.tags[i]) for i in to_queue.tolist()], dtype=I64)
        slots = columns["slot"][to_queue]
        order = np.argsort(slots, kind="stable")
        ordered, ordered_slots = to_queue[order], slots[order]
        ordered_tags = tags[order]
        cuts = np.flatnonzero(np.diff(ordered_slots)) + 1
        for group, group_tags in zip(np.split(ordered, cuts), np.split(ordered_tags, cuts)):
            topic, queue_id = columns["slot_ids"][int(columns["slot"][group[0]])]
            dispatcher.queue(topic, queue_id).put_arrays(wrote[group], lengths[group], group_tags,
                                                         columns["queue_offsets"][group])
        dispatcher.note_dispatched(int(store_ts[to_queue[-1]]))
    if not (dispatcher.message_index_enable and dispatcher.index is not None):
        return
    flags = columns["flags"]
    if isinstance(batch, ColumnBatch):   # no transactions among its messages: every key goes in
        if len(batch.key_hash):
            dispatcher.index.insert_arrays(batch.key_hash, wrote[batch.key_owner], store_ts[batch.key_owner])
        return
    keys, owners = [], []
    rolled_back = set(np.flatnonzero(~sysflag.is_indexed(flags)).tolist())
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
