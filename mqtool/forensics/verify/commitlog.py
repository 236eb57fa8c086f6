"""verify-crc's commitlog scope: each file (or part of one) walked, CRCs and queue offsets
checked, and the units and entries pointing into each stretch of records checked against them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mqtool.forensics import dledgerscan
from mqtool.forensics.verify import kernels
from mqtool.forensics.verify.findings import Finding, PointerFiles, Pointers, QueueRun, TaskResult
from mqtool.forensics.verify.index import check_entries_into
from mqtool.forensics.verify.queues import check_units_into
from mqtool.formats import multidispatch, sysflag
from mqtool.formats.commitlog import BODY_CRC_AT, Blank, Record, RecordError, decode_entry
from mqtool.formats.crc import body_crc
from mqtool.native import fastscan
from mqtool.storage import commitlog, dispatchrequest
from mqtool.storage.commitlog import EndOfData, Problem
from mqtool.storage.fsutil import shown_path
from mqtool.storage.mappedfile import MappedFile

# ------------------------------------------------------------------ commitlog

# a commitlog task checks the units and entries pointing into a stretch of its records once it has
# scanned this many bytes or records (each stretch costs a look at every file pointing into it;
# the records bound the memory)
SEGMENT_BYTES = 64 << 20
SEGMENT_RECORDS = 1 << 19


def commitlog_task(layout, path_text: str, file_size: int, is_last: bool, check_crc: bool, start: int,
                    stop: int | None, pointers: list[Pointers], delays: list[int], multi=None,
                    batch_topics=frozenset()) -> TaskResult:
    """Check [start, stop) of one commitlog file (a part, or the whole file): its entries, CRCs,
    offset fields and queue offset order; then the consume queue units and index entries that
    point into it, against the records as they were scanned and parsed, a stretch of
    SEGMENT_BYTES or SEGMENT_RECORDS at a time.  multi: the broker's multi-dispatch settings (the
    queue offsets its records give LMQ queues are checked too), or None.  batch_topics: the BatchCQ
    topics (a record of one that carries INNER_NUM moves its queue's offsets on by that many)."""
    result = TaskResult()
    ledger = None
    opened = PointerFiles()
    mf = MappedFile(Path(path_text), file_size, strict=False)   # this file only: a task per part of
    try:                                                        # each file must not list them all
        path = shown_path(mf.path, layout.root)
        end = mf.file_size if stop is None else stop
        cq_file_size = layout.consume_queue_file_size() if any(p.kind == "cq" for p in pointers) else 0
        chunks, segment = [], start    # the parsed chunks of the stretch from segment on
        if commitlog.is_dledger_file(mf):      # the entries as a ledger, in the same walk
            ledger = dledgerscan.LedgerChecker(layout)
        for entry in commitlog.walk_file(mf, start=start, stop=stop, check_crc=check_crc,
                                         is_last=is_last, display_path=path, scanner=fastscan,
                                         parse_props=bool(pointers), copies=True):
            if ledger is not None:
                ledger.add(entry, mf, fastscan)
            if isinstance(entry, fastscan.Chunk):
                _check_chunk(entry, mf, path, result, batch_topics)
                if multi is not None:
                    _multi_runs(entry, mf, path, multi, result)
                if pointers:
                    chunks.append(entry)
                    if entry.stop - segment >= SEGMENT_BYTES or sum(c.count for c in chunks) >= SEGMENT_RECORDS:
                        _check_pointers(layout, pointers, mf, segment, entry.stop, chunks, delays, cq_file_size,
                                        result, multi, opened)
                        chunks, segment = [], entry.stop
            elif isinstance(entry, Problem):
                result.findings.append(Finding("commitlog", entry.kind, path, entry.file_offset, entry.offset,
                                               entry.message, skipped=entry.skipped))
                result.skipped += entry.skipped
            elif isinstance(entry, Blank):
                result.blanks += 1
            elif isinstance(entry, EndOfData):
                result.data_end = entry.offset
        if pointers:
            _check_pointers(layout, pointers, mf, segment, end, chunks, delays, cq_file_size, result, multi, opened)
        chunks = entry = None   # no views of the mapping left: it can be closed
        result.bytes = end - start
        result.files = 1 if start == 0 else 0
        if ledger is not None:
            result.ledger = ledger.part
    finally:
        if ledger is not None:
            ledger.close()
        opened.close()
        mf.close()
    return result


def _check_pointers(layout, pointers, cl, start: int, stop: int, chunks, delays, cq_file_size, result,
                    multi, opened: PointerFiles) -> None:
    """The units and index entries pointing into [start, stop) of commitlog file cl, against the
    records scanned there (chunks, parsed).  Those that point elsewhere than at the start of
    one of them are checked by reading the commitlog there; its pages are let go after."""
    low, high = cl.file_from_offset + start, cl.file_from_offset + stop
    records = kernels.scanned(chunks)
    buf = np.frombuffer(cl.buf, dtype=np.uint8)
    delay_levels = np.array(delays or [0], dtype=np.int64)
    read = 0
    try:
        for pointer in pointers:
            if pointer.low >= high or pointer.high < low:
                continue
            if pointer.kind == "cq":
                read += check_units_into(layout, pointer, cq_file_size, cl, buf, records, low, high, delays,
                                          delay_levels, result, multi, opened)
            else:
                read += check_entries_into(layout, pointer, cl, buf, records, low, high, result, opened)
    finally:
        del buf
        opened.release()
        if read:
            cl.release_pages()


def _message_nums(chunk, mf, batch_topics) -> np.ndarray:
    """CommitLog.getMessageNum per row of the chunk: how far each record moves its queue's offsets
    on (1, or INNER_NUM; the records carrying INNER_NUM are found by a byte search, then decoded)."""
    c = chunk.columns
    nums = np.ones(chunk.count, dtype=np.int64)
    if not batch_topics:
        return nums
    for i in commitlog.rows_holding(mf, c["offset"], c["size"], dispatchrequest.INNER_NUM.encode() + b"\x01"):
        try:
            record = decode_entry(mf.buf, int(c["offset"][i]) - mf.file_from_offset, mf.file_size,
                                  mf.file_from_offset)
        except RecordError:
            continue
        if isinstance(record, Record):
            nums[i] = dispatchrequest.message_num(record.properties, record.topic in batch_topics)
    return nums


def _check_chunk(chunk, mf, path: str, result: TaskResult, batch_topics=frozenset()) -> None:
    c = chunk.columns
    base = mf.file_from_offset
    result.records += chunk.count
    for i in np.flatnonzero(~c["crc_ok"]).tolist():
        pos = int(c["offset"][i]) - base
        stored = int.from_bytes(mf.buf[pos + BODY_CRC_AT:pos + BODY_CRC_AT + 4], "big", signed=True)
        body_at = int(c["body_pos"][i])
        computed = body_crc(mf.buf[body_at:body_at + int(c["body_len"][i])])
        result.findings.append(Finding("commitlog", "crc-mismatch", path, pos, int(c["offset"][i]),
                                       "body CRC does not match the body", expected=stored, found=computed))
    for i in np.flatnonzero(c["physical"] != c["offset"]).tolist():
        result.findings.append(Finding("commitlog", "offset-mismatch", path, int(c["offset"][i]) - base,
                                       int(c["offset"][i]), "the physicalOffset field is not the record's offset",
                                       expected=int(c["offset"][i]), found=int(c["physical"][i])))
    skipped_tx = ~sysflag.is_dispatched_to_consume_queue(c["sys_flag"])
    for i in np.flatnonzero(skipped_tx & (c["queue_offset"] != 0)).tolist():
        result.findings.append(Finding("commitlog", "bad-queue-offset", path, int(c["offset"][i]) - base,
                                       int(c["offset"][i]), "a prepared or rollback record carries a queue offset",
                                       expected=0, found=int(c["queue_offset"][i])))
    if skipped_tx.all():
        return
    # queue offsets per queue, in commitlog order: each one the one before plus its message count
    runs, jumps, expected = _queue_runs(c, _message_nums(chunk, mf, batch_topics), ~skipped_tx)
    for i, want in zip(jumps.tolist(), expected.tolist()):
        result.findings.append(_order_finding(path, base, c, i, want, chunk))
    for first, last, next_offset in runs.tolist():
        key = (int(c["topic_hash"][first]), int(c["queue_id"][first]))
        run = result.runs.get(key)
        if run is None:
            result.runs[key] = QueueRun(chunk.topic(first), key[1], int(c["queue_offset"][first]),
                                        int(c["offset"][first]), int(c["queue_offset"][last]), int(c["offset"][last]),
                                        next_offset)
            continue
        if int(c["queue_offset"][first]) != run.next:
            result.findings.append(_order_finding(path, base, c, first, run.next, chunk))
        run.last, run.last_offset, run.next = int(c["queue_offset"][last]), int(c["offset"][last]), next_offset


def _queue_runs(c, nums, dispatched):
    """kernels.queue_runs over a chunk's columns, with room enough: (each queue's run as rows of
    (first row, last row, next queue offset), the rows whose queue offset breaks its queue's order,
    what they should have held)."""
    size, cap = 64, 1024
    while True:
        table = np.full(size, -1, dtype=np.int64)
        runs = np.empty((size // 2, 3), dtype=np.int64)
        jumps, expected = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
        n_runs, n_jumps = kernels.queue_runs(c["topic_hash"], c["queue_id"], c["queue_offset"], nums, dispatched,
                                             table, runs, jumps, expected)
        if n_runs < 0:
            size *= 8
        elif n_jumps > cap:
            cap = n_jumps
        else:
            return runs[:n_runs], jumps[:n_jumps], expected[:n_jumps]


def _multi_runs(chunk, mf, path: str, multi, result: TaskResult) -> None:
    """The queue offsets the chunk's multi-dispatched records give further queues (LMQ): each
    queue's go up one by one, and coverage checks its consume queue holds them.  Records
    carrying INNER_MULTI_DISPATCH are found by a byte search, then decoded one by one."""
    c = chunk.columns
    base = mf.file_from_offset
    starts = c["offset"] - base
    for i in commitlog.rows_holding(mf, c["offset"], c["size"], multidispatch.MARKER):
        if not sysflag.is_dispatched_to_consume_queue(int(c["sys_flag"][i])):
            continue
        try:
            record = decode_entry(mf.buf, int(starts[i]), mf.file_size, base)
        except RecordError:
            continue
        if not isinstance(record, Record):
            continue
        offset = int(c["offset"][i])
        for name, queue_id, queue_offset in multidispatch.targets(record.topic, record.queue_id, record.properties,
                                                                  multi):
            key = ("multi", name, queue_id)
            run = result.runs.get(key)
            if run is None:
                result.runs[key] = QueueRun(name, queue_id, queue_offset, offset, queue_offset, offset)
                continue
            if queue_offset != run.next:
                result.findings.append(Finding(
                    "commitlog", "queue-offset-order", path, offset - base, offset,
                    f"{multidispatch.INNER_MULTI_QUEUE_OFFSET} offsets of {name}/{queue_id} do not go up one by one",
                    expected=run.next, found=queue_offset))
            run.last, run.last_offset, run.next = queue_offset, offset, queue_offset + 1


def _order_finding(path, base, c, i, expected, chunk) -> Finding:
    offset = int(c["offset"][i])
    return Finding("commitlog", "queue-offset-order", path, offset - base, offset,
                   f"queue offsets of {chunk.topic(i)}/{int(c['queue_id'][i])} do not go up one by one",
                   expected=expected, found=int(c["queue_offset"][i]))


def merge_runs(tasks: list[TaskResult], files: list[tuple[str, int]]) -> tuple[dict, list[Finding]]:
    """Queue offsets must also continue from one commitlog file (or part) to the next.  files:
    each task's file, as its path and its first offset."""
    merged: dict = {}
    findings = []
    for result, (path, base) in zip(tasks, files):
        for key, run in result.runs.items():
            seen = merged.get(key)
            if seen is None:
                merged[key] = QueueRun(run.topic, run.queue_id, run.first, run.first_offset, run.last,
                                       run.last_offset, run.next)
                continue
            if run.first != seen.next:
                findings.append(Finding("commitlog", "queue-offset-order", path, run.first_offset - base,
                                        run.first_offset,
                                        f"queue offsets of {run.topic}/{run.queue_id} do not go up one by one",
                                        expected=seen.next, found=run.first))
            seen.last, seen.last_offset, seen.next = run.last, run.last_offset, run.next
    return merged, findings
