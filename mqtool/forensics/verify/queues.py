"""verify-crc's cq scope: each consume queue's units read and checked against the records
they point at.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mqtool.forensics.verify import kernels
from mqtool.forensics.verify.findings import (
    UNIT_PROBLEMS,
    Finding,
    PointerFiles,
    Pointers,
    TaskResult,
)
from mqtool.formats import consumequeueext, multidispatch
from mqtool.formats.commitlog import Record, RecordError, decode_entry
from mqtool.formats.consumequeue import (
    COMMIT_LOG_OFFSET_AT,
    UNIT_SIZE,
    UNIT_STRUCT,
    is_pre_blank,
    is_valid_unit,
    unit_dtype,
)
from mqtool.native import fastscan
from mqtool.storage.consumequeue import ConsumeQueue
from mqtool.storage.consumequeueext import ExtQueue
from mqtool.formats.topicnames import SCHEDULE_TOPIC
from mqtool.storage.dispatchrequest import from_record
from mqtool.storage.fsutil import relative_paths, shown_path
from mqtool.storage.mappedfile import MappedFile

# ------------------------------------------------------------- consume queues

def read_units(mf):
    """A consume queue file's units as int64 columns, with the masks that classify them as
    kernels.unit_summary does (for the rare file whose units do not go up, and the units pointing
    outside the commitlog).  The columns stop at the file's last data: the units past it lie in
    a hole (all zeros, not written), which a broker's pre-allocated queue file mostly is."""
    count = min(-(-mf.data_end // UNIT_SIZE), mf.file_size // UNIT_SIZE)
    units = np.frombuffer(mf.buf, dtype=unit_dtype(), count=count)
    offsets = units["commitLogOffset"].astype(np.int64)
    sizes = units["size"].astype(np.int64)
    tags = units["tagsCode"].astype(np.int64)
    pre_blank = is_pre_blank(offsets, sizes, tags)
    valid = is_valid_unit(offsets, sizes) & ~pre_blank
    return offsets, sizes, tags, pre_blank, valid


def cq_task(layout, topic: str, queue_id: int, directory: str) -> TaskResult:
    """Check one consume queue on its own: invalid units, holes, pre-blank units where they may
    be; and say which commitlog offsets each of its files points at."""
    result = TaskResult()
    display = relative_paths(layout.root)
    cq = ConsumeQueue(topic, queue_id, Path(directory), layout.consume_queue_file_size())
    try:
        for problem in cq.files.problems:
            result.findings.append(Finding("cq", problem.kind, display(problem.path), None, None, problem.message))
        expected_next = None
        for mf in cq.files:
            path = display(mf.path)
            count = mf.file_size // UNIT_SIZE
            result.bytes += mf.file_size
            result.files += 1
            raw = np.frombuffer(mf.buf, dtype=np.uint8)
            try:
                summary, bad_rows, holes = _summary(raw, min(-(-mf.data_end // UNIT_SIZE), count),
                                                    mf is cq.files.files[0])
            finally:
                del raw
            valid_units, last_written, first, last, low, high, in_order = summary[:7]
            logical0 = mf.file_from_offset // UNIT_SIZE
            for i in bad_rows.tolist():
                offset, size, tags = UNIT_STRUCT.unpack_from(mf.buf, i * UNIT_SIZE)
                result.findings.append(Finding("cq", "invalid-unit", path, i * UNIT_SIZE, offset,
                                               f"unit {logical0 + i} is not a valid unit", found=[offset, size, tags]))
            for i in holes.tolist():
                result.findings.append(Finding("cq", "cq-hole", path, i * UNIT_SIZE, None,
                                               f"unit {logical0 + i} is empty but later units are written"))
            if last_written >= 0 and expected_next is not None and logical0 > expected_next:
                result.findings.append(Finding("cq", "cq-hole", path, 0, None,
                                               f"units {expected_next}..{logical0 - 1} are missing (no file)"))
            if last_written >= 0:
                expected_next = logical0 + last_written + 1
            result.units += valid_units
            if valid_units:
                result.pointers.append(Pointers("cq", str(mf.path), int(low), int(high), topic=topic,
                                                queue_id=queue_id, logical0=logical0, first=first, last=last,
                                                sorted=bool(in_order)))
        result.queue_max[(topic, queue_id)] = expected_next if expected_next is not None else cq.min_offset()
        result.queue_min[(topic, queue_id)] = cq.min_offset()
    finally:
        cq.close()
    return result


def _summary(raw, count: int, first_file: bool):
    """kernels.unit_summary of a queue file's first count units, with room for every bad row and
    hole (a badly damaged file is read again with more): (its summary, bad rows, holes)."""
    cap = 1024
    while True:
        bad_rows, holes = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
        summary = kernels.unit_summary(raw, count, first_file, bad_rows, holes)
        n_bad, n_holes = summary[7:]
        if max(n_bad, n_holes) <= cap:
            return summary, bad_rows[:n_bad], holes[:n_holes]
        cap = max(n_bad, n_holes)


def check_units_into(layout, pointer: Pointers, file_size: int, cl, buf, records, low: int, high: int, delays,
                      delay_levels, result, multi, opened: PointerFiles) -> int:
    """The units of one consume queue file that point into [low, high) of commitlog file cl
    (buf), whose records there are `records` (kernels.scanned).  Returns how many of them
    were checked by reading the commitlog.  multi: the broker's multi-dispatch settings; a unit
    of another topic's record that names this queue at this offset is one it put there (LMQ).
    opened: the commitlog task's open files (the queue file is mapped once a task)."""
    mf = opened.get(pointer.path, lambda: MappedFile(pointer.path, file_size, strict=False))
    schedule = pointer.topic == SCHEDULE_TOPIC
    raw = np.frombuffer(mf.buf, dtype=np.uint8)
    try:
        if pointer.sorted:   # a binary search finds the units pointing here
            a = fastscan.lower_bound(raw, COMMIT_LOG_OFFSET_AT, UNIT_SIZE, pointer.first, pointer.last, low)
            b = fastscan.lower_bound(raw, COMMIT_LOG_OFFSET_AT, UNIT_SIZE, a, pointer.last, high)
            rows = np.zeros(0, dtype=np.int64)
            if a == b:
                return 0
            opened.reading(pointer.path, a * UNIT_SIZE, b * UNIT_SIZE)
        else:
            opened.reading(pointer.path)
            offsets, _, _, _, valid = read_units(mf)
            a = b = 0
            rows = np.flatnonzero(valid & (offsets >= low) & (offsets < high))
            if not len(rows):
                return 0
        found, read = kernels.check_units_scanned(records, buf, cl.file_from_offset, cl.file_size, raw, a, b, rows,
                                                   pointer.logical0, pointer.topic, pointer.queue_id, schedule,
                                                   delay_levels)
        bad = np.flatnonzero(found)
        if len(bad):
            rows = rows[bad] if len(rows) else a + bad
            _unit_findings(layout, pointer, mf, cl, rows, found[bad], delays, multi, result)
        return read
    finally:
        del raw


def _unit_findings(layout, pointer, mf, cl, rows, codes, delays, multi, result) -> None:
    """Findings for the units at rows of queue file mf whose check gave codes (not UNIT_OK)."""
    path = shown_path(mf.path, layout.root)
    ext_queue = None
    for i, code in zip(rows.tolist(), codes.tolist()):
        offset, size, tags = UNIT_STRUCT.unpack_from(mf.buf, i * UNIT_SIZE)
        if code == kernels.UNIT_WRONG_TAGS_CODE and consumequeueext.is_ext_addr(tags):
            if ext_queue is None:
                ext_queue = ExtQueue(layout.consume_queue_ext_dir(pointer.topic, pointer.queue_id),
                                     layout.consume_queue_ext_file_size())
            finding = _ext_finding(ext_queue, cl, path, i, pointer.logical0 + i, offset, tags, delays)
        else:
            finding = _unit_finding(code, cl, path, i, pointer.logical0 + i, offset, size, tags, pointer.topic,
                                    pointer.queue_id, delays, multi)
        if finding is not None:
            result.findings.append(finding)
    if ext_queue is not None:
        ext_queue.close()


def _ext_finding(ext_queue, cl, path, i, logical, offset, address, delays) -> Finding | None:
    """A unit whose tags field is an ext address (enableConsumeQueueExt): the ext unit there must
    hold the record's tags code and store time."""
    unit = ext_queue.get(address)
    where = f"{ext_queue.directory.parent.parent.name}/{ext_queue.directory.parent.name}/{ext_queue.directory.name}"
    if unit is None:
        return Finding("cq", "ext-unit-missing", path, i * UNIT_SIZE, int(offset),
                       f"unit {logical}: no consume queue extension unit at address {address} "
                       f"(offset {consumequeueext.undecorate(address)} of {where})", found=address)
    record = decode_entry(cl.buf, int(offset) - cl.file_from_offset, cl.file_size, cl.file_from_offset)
    expected = (from_record(record, delays).tags_code, record.store_timestamp)
    if (unit.tags_code, unit.store_time) != expected or unit.size != consumequeueext.MIN_UNIT_SIZE + len(unit.bitmap):
        return Finding("cq", "ext-unit-wrong", path, i * UNIT_SIZE, int(offset),
                       f"unit {logical}: the extension unit at offset {consumequeueext.undecorate(address)} of "
                       f"{where} does not hold the record's tags code and store time",
                       expected=list(expected), found=[unit.tags_code, unit.store_time])
    return None


_ELSEWHERE = (kernels.UNIT_IRREGULAR, kernels.UNIT_WRONG_TOPIC, kernels.UNIT_WRONG_QUEUE,
              kernels.UNIT_WRONG_QUEUE_OFFSET)


def _multi_dispatched(cl, path, i, logical, offset, tags, topic, queue_id, delays, multi):
    """A unit of a record of another topic or queue (the kernels say which): None when the
    record's INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET put it here with its tags code, a
    Finding when they name this queue at another offset or the tags code differs, False when
    they do not name this queue."""
    try:
        record = decode_entry(cl.buf, offset - cl.file_from_offset, cl.file_size, cl.file_from_offset)
    except RecordError:
        return False
    if not isinstance(record, Record):
        return False
    properties = record.properties
    if multidispatch.INNER_MULTI_DISPATCH not in properties:
        return False
    named = [q for name, qid, q in multidispatch.targets(record.topic, record.queue_id, properties, multi)
             if (name, qid) == (topic, queue_id)]
    if not named:
        return False
    if logical not in named:
        return Finding("cq", "unit-wrong-queue-offset", path, i * UNIT_SIZE, offset,
                       f"unit {logical}: the record's {multidispatch.INNER_MULTI_QUEUE_OFFSET} for this queue is "
                       "not the unit's", expected=logical, found=named[0])
    expected = from_record(record, delays, properties).tags_code
    if expected == tags:
        return None
    return Finding("cq", "unit-wrong-tags-code", path, i * UNIT_SIZE, offset,
                   f"unit {logical}: the unit's tags code is not the record's", expected=expected, found=tags)


def _unit_finding(code, cl, path, i, logical, offset, size, tags, topic, queue_id, delays,
                  multi=None) -> Finding | None:
    offset, size, tags = int(offset), int(size), int(tags)
    if multi is not None and code in _ELSEWHERE:
        found = _multi_dispatched(cl, path, i, logical, offset, tags, topic, queue_id, delays, multi)
        if found is not False:
            return found
    if code == kernels.UNIT_IRREGULAR:   # decode in Python, as the broker's Java strings do
        try:
            record = decode_entry(cl.buf, offset - cl.file_from_offset, cl.file_size, cl.file_from_offset)
        except RecordError:
            return Finding("cq", "unit-not-a-record", path, i * UNIT_SIZE, offset,
                           "no valid record starts at the unit's commitlog offset")
        if record.topic != topic:
            return Finding("cq", "unit-wrong-topic", path, i * UNIT_SIZE, offset,
                           "the record belongs to another topic", expected=topic, found=record.topic)
        expected_tags = from_record(record, delays).tags_code
        if expected_tags != tags:
            return Finding("cq", "unit-wrong-tags-code", path, i * UNIT_SIZE, offset,
                           "the unit's tags code is not the record's", expected=expected_tags, found=tags)
        return None
    kind, message = UNIT_PROBLEMS[code]
    expected = found = None
    if code in (kernels.UNIT_SIZE_MISMATCH, kernels.UNIT_WRONG_QUEUE, kernels.UNIT_WRONG_QUEUE_OFFSET,
                kernels.UNIT_WRONG_TOPIC, kernels.UNIT_WRONG_TAGS_CODE):
        try:
            record = decode_entry(cl.buf, offset - cl.file_from_offset, cl.file_size, cl.file_from_offset)
        except RecordError:
            record = None
        if record is not None:
            expected, found = {
                kernels.UNIT_SIZE_MISMATCH: (record.total_size, size),
                kernels.UNIT_WRONG_QUEUE: (queue_id, record.queue_id),
                kernels.UNIT_WRONG_QUEUE_OFFSET: (logical, record.queue_offset),
                kernels.UNIT_WRONG_TOPIC: (topic, record.topic),
                kernels.UNIT_WRONG_TAGS_CODE: (from_record(record, delays).tags_code, tags),
            }[code]
    return Finding("cq", kind, path, i * UNIT_SIZE, offset, f"unit {logical}: {message}", expected=expected,
                   found=found)
