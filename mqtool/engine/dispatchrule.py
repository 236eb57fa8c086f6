"""The dispatch rule: what a commitlog record becomes in the consume queues and the index.

One rule in two forms, side by side:

- decide(request): one record (a DispatchRequest), as the store dispatches after each append
  and as a bulk dispatch handles the records it leaves to the exact path (engine/dispatch.py);
- decide_chunk(chunk, parsed, ...): the numpy columns of a chunk of scanned records, as
  recovery and rebuild-cq dispatch a stretch of the commitlog again (engine/redispatch.py).

Both decide per record whether it is refused (its topic cannot be a directory: counted, never
dispatched), whether it gets a unit in its own consume queue (not prepared or rollback, a queue
id that can be a directory), its tags code (the delivery time of a delayed message) and whether
its keys are indexed (all but rollback).  The facts they share are written once, as functions
that take one value or a column alike (formats/sysflag.py, storage/dispatchrequest.py, and
queue_directory / refused below).  Batch topics, consume queue extensions and multi-dispatched
(LMQ) records are dispatched record by record, by the scalar form (by_record, and
chunk_by_record for a chunk).  tests/test_dispatchrule.py checks that the two forms decide the
same for every record of every broker-written fixture.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from mqtool.formats import multidispatch, sysflag
from mqtool.storage import commitlog, dispatchrequest, topics
from mqtool.storage.dispatchrequest import DispatchRequest


@functools.lru_cache(maxsize=4096)     # few distinct topics, each checked once
def refused(topic: str) -> bool:
    """A record whose topic cannot be a directory name is counted, never dispatched."""
    return not topics.is_safe_directory_name(topic)


def queue_directory(queue_id):
    """Can this queue id (an int or a column) be a queue's directory?  (Not a negative one.)"""
    return queue_id >= 0


@dataclass(frozen=True, slots=True)
class Decision:
    """What the rule decides for one record."""

    refused: bool       # its topic cannot be a directory
    unit: bool          # a unit in its own consume queue
    tags_code: int      # that unit's tags code
    indexed: bool       # its keys go into the index


def decide(request: DispatchRequest) -> Decision:
    """The scalar form: one record's decision."""
    if refused(request.topic):
        return Decision(refused=True, unit=False, tags_code=request.tags_code, indexed=False)
    return Decision(refused=False,
                    unit=bool(request.goes_to_consume_queue and queue_directory(request.queue_id)),
                    tags_code=request.tags_code, indexed=bool(request.is_indexed))


def by_record(request: DispatchRequest, batch_topics, ext: bool, multi_dispatch) -> bool:
    """Must this record be dispatched by the scalar form: a unit in a batch consume queue, an
    extension unit (ext: enableConsumeQueueExt), or units in further queues (multi_dispatch:
    enableMultiDispatch's settings, or None)?"""
    return request.topic in batch_topics or ext or multi_dispatch is not None and request.multi is not None


def chunk_by_record(decided: "ChunkDecisions", chunk, queue, batch_topics, ext: bool, multi_dispatch) -> bool:
    """by_record for a chunk: does a record of it need the scalar form?  Then the whole chunk
    goes record by record, so that every queue gets its units in commitlog order.
    (INNER_MULTI_DISPATCH is found by a byte search of the chunk's stretch of the commitlog: a
    record whose body holds it sends its chunk that way too, which costs time, never a wrong
    unit.)"""
    if ext or any(name in batch_topics for name in decided.names):
        return True
    if multi_dispatch is None:
        return False
    c = chunk.columns
    mf = queue.find_by_offset(int(c["offset"][0]))
    return mf is not None and bool(commitlog.rows_holding(mf, c["offset"], c["size"], multidispatch.MARKER,
                                                          first_only=True))


@dataclass
class ChunkDecisions:
    """The vectorised form's decisions for a chunk's rows (numpy columns, one value a row)."""

    names: list            # the chunk's distinct topics
    which: np.ndarray      # each row's topic, as an index into names
    refused: np.ndarray    # passes its CRC, but its topic cannot be a directory
    accepted: np.ndarray   # passes its CRC and is not refused: dispatched, by one form or the other
    wanted: np.ndarray     # accepted and of a topic asked for (topic_filter)
    exact: np.ndarray      # wanted, but the kernels could not read it exactly: the scalar form decides
    unit: np.ndarray       # wanted, with a unit in its own consume queue
    tags_code: np.ndarray
    indexed: np.ndarray    # wanted, with its keys indexed (the keys: parsed key_record / key_hash)


def decide_chunk(chunk, parsed: dict, delay_levels: list[int], request_at, topic_filter=None) -> ChunkDecisions:
    """The vectorised form: the decisions for every row of a scanned chunk (parsed: its
    fastscan.parse columns; request_at(row): the row's DispatchRequest decoded from the
    commitlog, or None, asked for the few delayed messages whose DELAY the kernels cannot read).
    A record failing its CRC is where recovery cuts: never dispatched."""
    from mqtool.native import fastscan    # here: the store (and every command) starts without numba

    c = chunk.columns
    good = c["crc_ok"]
    # topic names, once per distinct topic: which may become directories, which are wanted
    _, first, which = np.unique(c["topic_hash"], return_index=True, return_inverse=True)
    names = [chunk.topic(int(i)) for i in first]
    per_name = np.array([refused(t) for t in names], dtype=bool)[which]
    accepted = good & ~per_name
    wanted = accepted.copy()
    if topic_filter is not None:
        wanted &= np.array([bool(topic_filter(t)) for t in names], dtype=bool)[which]
    # malformed UTF-8: decoded again in Python, record by record, in commitlog order
    exact = wanted & ((parsed["flags"] & fastscan.UTF8_IRREGULAR) != 0)
    rewritten = np.array([dispatchrequest.rewrites_tags_code(t) for t in names], dtype=bool)[which]
    tags, ask = dispatchrequest.tags_codes(parsed["tags_hash"], parsed["delay_level"], rewritten, c["store_ts"],
                                           delay_levels)
    for i in np.flatnonzero(ask & wanted & ~exact).tolist():
        request = request_at(i)
        if request is None:
            exact[i] = True         # (cannot happen for a record the scan found; kept exact anyway)
        else:
            tags[i] = request.tags_code
    return ChunkDecisions(
        names=names, which=which, refused=good & per_name, accepted=accepted, wanted=wanted, exact=exact,
        unit=wanted & sysflag.is_dispatched_to_consume_queue(c["sys_flag"]) & queue_directory(c["queue_id"]),
        tags_code=tags, indexed=wanted & sysflag.is_indexed(c["sys_flag"]))
