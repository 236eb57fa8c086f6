"""Dispatching a stretch of the commitlog again, in bulk: recovery and rebuild-cq.

The store dispatches each record as it appends it (mqtool/dispatch.py).  When
a whole stretch has to be dispatched again -- after a crash, or to rebuild
consume queues and the index from nothing -- the records come from the
compiled walk (commitlog.walk with chunked=True) as columns, and the units
and keys of a chunk are written per queue and per index file in bulk, with
the same skip rules as one at a time (a unit whose record is already in its
queue, a key of a record the index already covers).  Records whose topic or
keys the kernels could not read exactly (malformed UTF-8) and delayed
messages go through the reference path, record by record.

A topic read from the commitlog only becomes a directory when it is a valid
topic name; other records are reported, never dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mqtool import commitlog, fastscan, topics
from mqtool.commitlog import Problem
from mqtool.dispatchrequest import SCHEDULE_TOPIC, from_record
from mqtool.formats.commitlog import Record, RecordError, decode_entry

PREPARED, ROLLBACK = 4, 12


@dataclass
class Redispatched:
    records: int = 0
    units: int = 0
    keys: int = 0
    unsafe_topics: dict = field(default_factory=dict)    # topic text -> records refused
    problems: list = field(default_factory=list)         # damage met on the way (commitlog.Problem)


def redispatch(queue, dispatcher, start: int, end: int, delay_levels: list[int], *, queues: bool = True,
               index: bool = True, topic_filter=None, on_progress=None) -> Redispatched:
    """Dispatch the records in [start, end) again into the consume queues and/or the index."""
    done = Redispatched()
    delays = np.array(delay_levels or [0], dtype=np.int64)
    for entry in commitlog.walk(queue, start=start, end=end, check_crc=True, aligned=True, chunked=True):
        if isinstance(entry, Problem):
            done.problems.append(entry)
            continue
        if not isinstance(entry, fastscan.Chunk):
            continue
        _dispatch_chunk(entry, queue, dispatcher, delays, delay_levels, done, queues, index, topic_filter)
        if on_progress is not None:
            on_progress(int(entry.columns["size"].sum()))
    return done


def _dispatch_chunk(chunk, queue, dispatcher, delays, delay_levels, done, queues, index, topic_filter) -> None:
    c = chunk.columns
    good = c["crc_ok"]          # a record failing its CRC is where recovery cuts; never dispatched
    parsed = fastscan.parse(chunk.buf, chunk)
    n = chunk.count
    # topic names, once per distinct topic
    names = {}
    for h in np.unique(c["topic_hash"]).tolist():
        i = int(np.flatnonzero(c["topic_hash"] == h)[0])
        names[h] = chunk.topic(i)
    topic_of = np.array([names[h] for h in c["topic_hash"].tolist()], dtype=object) if n else np.array([])
    safe = np.array([topics.is_safe_directory_name(names[h]) for h in c["topic_hash"].tolist()], dtype=bool)
    wanted = good & safe
    if topic_filter is not None:
        wanted &= np.array([topic_filter(t) for t in topic_of], dtype=bool)
    for i in np.flatnonzero(good & ~safe).tolist():
        done.unsafe_topics[topic_of[i]] = done.unsafe_topics.get(topic_of[i], 0) + 1
    # exact but slow: malformed UTF-8, and delay levels the kernels cannot turn into tags codes
    slow = wanted & (((parsed["flags"] & fastscan.UTF8_IRREGULAR) != 0)
                     | ((parsed["flags"] & fastscan.HAS_DELAY) != 0) & (topic_of == SCHEDULE_TOPIC))
    fast = wanted & ~slow
    done.records += int(wanted.sum())
    tx = c["sys_flag"] & 0xC
    to_queue = fast & (tx != PREPARED) & (tx != ROLLBACK)
    if queues:
        _write_units(chunk, dispatcher, to_queue, topic_of, parsed["tags_hash"], done)
    if index and dispatcher.message_index_enable and dispatcher.index is not None:
        keys = fast[parsed["key_record"]]
        rec = parsed["key_record"][keys]
        if len(rec):
            dispatcher.index.insert_arrays(parsed["key_hash"][keys], c["offset"][rec], c["store_ts"][rec])
            done.keys += len(rec)
    for i in np.flatnonzero(slow).tolist():
        mf = queue.find_by_offset(int(c["offset"][i]))
        try:
            record = decode_entry(mf.buf, int(c["offset"][i]) - mf.file_from_offset, mf.file_size,
                                  mf.file_from_offset)
        except RecordError:
            continue
        if not isinstance(record, Record):
            continue
        request = from_record(record, delay_levels)
        if queues and request.goes_to_consume_queue:
            dispatcher.queue(request.topic, request.queue_id).put(
                request.commitlog_offset, request.size, request.tags_code, request.queue_offset)
            done.units += 1
        if index and dispatcher.message_index_enable and dispatcher.index is not None:
            dispatcher.index.build_index(request)


def _write_units(chunk, dispatcher, mask, topic_of, tags, done) -> None:
    c = chunk.columns
    rows = np.flatnonzero(mask)
    if not len(rows):
        return
    keys = [(topic_of[i], int(c["queue_id"][i])) for i in rows.tolist()]
    groups: dict = {}
    for i, key in zip(rows.tolist(), keys):
        groups.setdefault(key, []).append(i)
    for (topic, queue_id), members in groups.items():
        if queue_id < 0:
            continue
        idx = np.array(members, dtype=np.int64)
        dispatcher.queue(topic, queue_id).put_arrays(c["offset"][idx], c["size"][idx], tags[idx],
                                                     c["queue_offset"][idx])
        done.units += len(idx)
    if dispatcher.checkpoint is not None:
        dispatcher.checkpoint.logics_msg_timestamp = int(c["store_ts"][rows[-1]])
