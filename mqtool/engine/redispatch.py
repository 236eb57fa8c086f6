"""Dispatching a stretch of the commitlog again, in bulk: recovery and rebuild-cq.

The store dispatches each record as it appends it (mqtool/engine/dispatch.py).  When
a whole stretch has to be dispatched again -- after a crash, or to rebuild
consume queues and the index from nothing -- the records come from the
compiled walk (commitlog.walk with scanner=fastscan) as columns, and the units
and keys of a chunk are written per queue and per index file in bulk, with
the same skip rules as one at a time (a unit whose record is already in its
queue, a key of a record the index already covers).  What each record
becomes is the dispatch rule's vectorised form (engine/dispatchrule.py);
records whose topic or keys the kernels could not read exactly (malformed
UTF-8) go through its scalar form, record by record.

A topic read from the commitlog only becomes a directory when it is a valid
topic name; other records are reported, never dispatched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mqtool.engine import dispatchrule
from mqtool.formats import multidispatch
from mqtool.native import fastscan
from mqtool.storage import commitlog
from mqtool.storage.commitlog import Problem
from mqtool.storage.dispatchrequest import from_record


@dataclass
class Redispatched:
    records: int = 0
    units: int = 0
    keys: int = 0
    unsafe_topics: dict = field(default_factory=dict)    # topic text -> records refused
    problems: list = field(default_factory=list)         # damage met on the way (commitlog.Problem)
    end: int = 0                                          # where the dispatched stretch ends


def redispatch(queue, dispatcher, start: int, end: int | None, delay_levels: list[int], *, queues: bool = True,
               index: bool = True, topic_filter=None, on_progress=None, check_crc: bool = False,
               stop_at_damage: bool = False, entries=None) -> Redispatched:
    """Dispatch the records in [start, end) again into the consume queues and/or the index.

    check_crc: records failing their body CRC are not dispatched (a recovery whose walk has
    checked them already leaves it off, as a broker's reput does).  stop_at_damage: end at the
    first damaged entry or failing CRC instead of going on after it (rebuild-cq: what a broker's
    recovery would keep).  entries: the walk's entries when someone else walks (scan_parts on
    an engine); by default the commitlog is walked here, one chunk ahead on a second thread."""
    done = Redispatched(end=start)
    if entries is None:
        entries = _read_ahead(commitlog.walk(queue, start=start, end=end, check_crc=check_crc, aligned=True,
                                             scanner=fastscan, resync_after_damage=not stop_at_damage,
                                             parse_props=True))
    for entry in entries:
        if isinstance(entry, Problem):
            done.problems.append(entry)
            if stop_at_damage:
                break
            continue
        if not isinstance(entry, fastscan.Chunk) or not entry.count:
            continue
        if stop_at_damage and not entry.columns["crc_ok"].all():
            bad = int(np.flatnonzero(~entry.columns["crc_ok"])[0])
            offset = int(entry.columns["offset"][bad])
            base = queue.find_by_offset(offset).file_from_offset
            done.problems.append(Problem("crc-mismatch", entry.path, offset - base, offset,
                                         "body CRC does not match the body"))
            entry = entry.take(np.arange(entry.count) < bad)
            if entry.count:
                _dispatch_chunk(entry, queue, dispatcher, delay_levels, done, queues, index, topic_filter)
            done.end = offset
            break
        _dispatch_chunk(entry, queue, dispatcher, delay_levels, done, queues, index, topic_filter)
        done.end = int(entry.columns["offset"][-1] + entry.columns["size"][-1])
        if on_progress is not None:
            on_progress(int(entry.columns["size"].sum()))
    return done


# The columns a dispatch needs from a chunk that travelled without its buf.
DISPATCH_COLUMNS = ("offset", "size", "queue_id", "queue_offset", "sys_flag", "store_ts", "crc_ok", "topic_hash")


def part_tasks(queue, start: int, check_crc: bool, stop_at_damage: bool,
               part_bytes: int = fastscan.PART_BYTES) -> list[tuple]:
    """The commitlog from `start` (a record boundary) as parts an engine scans on its own:
    (file index, first byte, stop byte or None, is the last data file, check_crc, stop_at_damage)."""
    last_data = commitlog.last_data_file(queue)
    tasks = []
    for i, mf in enumerate(queue.files):
        if mf.file_from_offset + mf.file_size <= start:
            continue
        first = max(0, start - mf.file_from_offset)
        edges = [first] + [p for p in fastscan.split_points(mf, part_bytes, commitlog.is_dledger_file(mf)) if p > first] + [None]
        for a, b in zip(edges, edges[1:]):
            tasks.append((i, a, b, i >= last_data, check_crc, stop_at_damage))
    return tasks


def scan_part(layout, task) -> list:
    """One part of the commitlog, walked and parsed where an engine runs it (a Spark executor):
    its chunks without their buf (fastscan.Chunk.detached) and the Problem it stopped at."""
    index, first, stop, is_last, check_crc, stop_at_damage = task
    queue = commitlog.open_queue(layout)
    try:
        mf = queue.files[index]
        out = []
        for entry in commitlog.walk_file(mf, start=first, stop=stop, check_crc=check_crc, is_last=is_last,
                                         scanner=fastscan, resync_after_damage=not stop_at_damage,
                                         parse_props=True):
            if isinstance(entry, Problem):
                out.append(entry)
                if stop_at_damage:
                    break
            elif isinstance(entry, fastscan.Chunk) and entry.count:
                out.append(entry.detached(keep=DISPATCH_COLUMNS))
        return out
    finally:
        queue.close()


def scanned_on(engine, layout, tasks):
    """The entries of every part, in commitlog order, as the engine delivers them."""
    import functools

    for entries in engine.imap(functools.partial(scan_part, layout), tasks):
        yield from entries


def _read_ahead(entries):
    """The walk (and the parsing of each chunk) on a second thread, one chunk ahead of the
    dispatching: the compiled kernels release the GIL, so reading and writing overlap."""
    import queue as queue_module
    import threading

    ahead: queue_module.Queue = queue_module.Queue(maxsize=2)
    done = object()
    stop = threading.Event()

    def produce() -> None:
        try:
            for entry in entries:
                if isinstance(entry, fastscan.Chunk) and entry.parsed is None:
                    entry.parsed = fastscan.parse(entry.buf, entry)
                while not stop.is_set():
                    try:
                        ahead.put(entry, timeout=0.1)
                        break
                    except queue_module.Full:
                        continue
                if stop.is_set():
                    return
        except BaseException as exc:     # handed to the consumer, raised there
            ahead.put(exc)
            return
        ahead.put(done)

    thread = threading.Thread(target=produce, name="redispatch-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            entry = ahead.get()
            if entry is done:
                return
            if isinstance(entry, BaseException):
                raise entry
            yield entry
    finally:
        stop.set()
        thread.join()


def _dispatch_chunk(chunk, queue, dispatcher, delay_levels, done, queues, index, topic_filter) -> None:
    c = chunk.columns
    parsed = getattr(chunk, "parsed", None)
    if parsed is None or len(parsed["tags_hash"]) != chunk.count:
        parsed = fastscan.parse(chunk.buf, chunk)
    decided = dispatchrule.decide_chunk(chunk, parsed, delay_levels,
                                        lambda i: _request_at(queue, c, i, delay_levels), topic_filter)
    names, which = decided.names, decided.which
    if decided.refused.any():     # counted per topic at once: a refused topic is usually many records
        refused_topics, counts = np.unique(which[decided.refused], return_counts=True)
        for topic, count in zip(refused_topics.tolist(), counts.tolist()):
            dispatcher.refuse(names[topic], count)
    done.records += int(decided.wanted.sum())
    if queues and dispatchrule.chunk_by_record(decided, chunk, queue, dispatcher.batch_topics,
                                               dispatcher.ext_dir is not None, dispatcher.multi_dispatch):
        _dispatch_in_order(np.flatnonzero(decided.accepted), chunk, queue, dispatcher, delay_levels, done, index,
                           topic_filter, queues)
        _take_refused(dispatcher, done)
        return
    # every queue and the index get their entries in commitlog order: runs of records the
    # vectorised form decided by the kernels, the exact ones (and short runs between them) record
    # by record, in turn
    one_by_one = []
    edges = [-1, *np.flatnonzero(decided.exact).tolist(), chunk.count]
    for before, after in zip(edges, edges[1:]):
        if after - before - 1 >= FAST_RUN:
            _dispatch_in_order(np.array(one_by_one, dtype=np.int64), chunk, queue, dispatcher, delay_levels, done,
                               index, topic_filter, queues)
            one_by_one = []
            run = np.zeros(chunk.count, dtype=bool)
            run[before + 1:after] = True
            _dispatch_fast(chunk, dispatcher, decided, run, parsed, done, queues, index)
        else:
            one_by_one.extend(i for i in range(before + 1, after) if decided.accepted[i])
        if after < chunk.count and decided.wanted[after]:
            one_by_one.append(after)
    _dispatch_in_order(np.array(one_by_one, dtype=np.int64), chunk, queue, dispatcher, delay_levels, done, index,
                       topic_filter, queues)
    _take_refused(dispatcher, done)


FAST_RUN = 64   # fast records in a row worth a kernel call of their own


def _dispatch_fast(chunk, dispatcher, decided, run, parsed, done, queues, index) -> None:
    """The records of `run`, as the vectorised form decided them: units queue by queue, index
    entries in order."""
    c = chunk.columns
    if queues:
        _write_units(chunk, dispatcher, decided.unit & run, decided, done)
    if index and dispatcher.message_index_enable and dispatcher.index is not None:
        keys = (decided.indexed & run)[parsed["key_record"]]
        rec = parsed["key_record"][keys]
        if len(rec):
            dispatcher.index.insert_arrays(parsed["key_hash"][keys], c["offset"][rec], c["store_ts"][rec])
            done.keys += len(rec)


def _requests(queue, c, rows, delay_levels):
    """The DispatchRequests of the chunk's records at rows, decoded one by one from the commitlog."""
    for i in rows.tolist():
        request = _request_at(queue, c, i, delay_levels)
        if request is not None:
            yield request


def _request_at(queue, c, i: int, delay_levels):
    """The DispatchRequest of the chunk's record at row i, decoded from the commitlog (None: no record)."""
    record = commitlog.record_at(queue, int(c["offset"][i]))
    return None if isinstance(record, str) else from_record(record, delay_levels)


def _dispatch_in_order(rows, chunk, queue, dispatcher, delay_levels, done, index, topic_filter,
                       queues: bool = True) -> None:
    """A chunk with multi-dispatched records (or any chunk, with consume queue extensions or batch
    topics), record by record: every queue's units in commitlog order, as a broker's reput puts
    them (topic_filter: only queues of the topics asked for)."""
    for request in _requests(queue, chunk.columns, rows, delay_levels):
        own = topic_filter is None or topic_filter(request.topic)
        if request.multi is not None and topic_filter is not None:
            request.multi = _only_wanted(request.multi, topic_filter)
        done.units += dispatcher.dispatch(request, own=own, units=queues, keys=index)


def _take_refused(dispatcher, done) -> None:
    """The records (and multi-dispatch queue names) the dispatcher refused, into the report."""
    for name, count in dispatcher.unsafe_names.items():
        done.unsafe_topics[name] = done.unsafe_topics.get(name, 0) + count
    dispatcher.unsafe_names.clear()


def _only_wanted(properties: dict, topic_filter) -> dict:
    """The properties with only the multi-dispatch queues topic_filter wants."""
    names = multidispatch.java_split(properties.get(multidispatch.INNER_MULTI_DISPATCH, ""))
    offsets = multidispatch.java_split(properties.get(multidispatch.INNER_MULTI_QUEUE_OFFSET, ""))
    if len(names) != len(offsets):
        return properties
    kept = [(n, o) for n, o in zip(names, offsets) if topic_filter(n)]
    return {**properties, multidispatch.INNER_MULTI_DISPATCH: ",".join(n for n, _ in kept) or " ",
            multidispatch.INNER_MULTI_QUEUE_OFFSET: ",".join(o for _, o in kept) or " "}


def _write_units(chunk, dispatcher, mask, decided, done) -> None:
    """The units of a chunk, queue by queue, each queue's in commitlog order."""
    c = chunk.columns
    rows = np.flatnonzero(mask)
    if not len(rows):
        return
    which = decided.which
    order = rows[np.lexsort((rows, c["queue_id"][rows], which[rows]))]
    topic_ids, queue_ids = which[order], c["queue_id"][order]
    cuts = np.flatnonzero((topic_ids[1:] != topic_ids[:-1]) | (queue_ids[1:] != queue_ids[:-1])) + 1
    for group in np.split(order, cuts):
        cq = dispatcher.queue(decided.names[which[group[0]]], int(c["queue_id"][group[0]]))
        cq.put_arrays(c["offset"][group], c["size"][group], decided.tags_code[group], c["queue_offset"][group])
        done.units += len(group)
    dispatcher.note_dispatched(int(c["store_ts"][rows[-1]]))
