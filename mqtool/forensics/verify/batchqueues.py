"""verify-crc's checks of batch consume queues (5.x BatchCQ topics; part of the cq scope).

Each unit must name a valid record of its topic and queue (size, store time), carry the
msgBaseOffset and batchSize the broker dispatches for it (an inner batch's INNER_BASE and
INNER_NUM; the record's queue offset and 1 for a single message or a 4.x-style batch), continue the queue (msgBaseOffset is the
previous unit's plus its batchSize), and hold compactedOffset = INVALID_POS as the broker writes
it.  The commitlog's records of a batch topic are covered by its batch queue, not by a consume
queue (`covered` tells the cq scope's coverage check).  Records are decoded one by one: batch
queues hold one unit per batch, few next to a commitlog's records.
"""

from __future__ import annotations

from mqtool.forensics.verify.findings import Finding
from mqtool.formats import batchconsumequeue as fmt
from mqtool.storage import batchqueue, commitlog, dispatchrequest


def check(layout, runs, emit, display) -> set:
    """Emit the findings of every batch queue, and of records a batch queue lacks (runs: what the
    commitlog holds per queue); the (topic, queueId) pairs that are batch queues."""
    found = batchqueue.queues(layout)
    if not found:
        return set()
    queue = commitlog.open_queue(layout)
    try:
        for topic, queue_id, directory in found:
            end = _check_queue(queue, topic, queue_id, directory, emit, display)
            run = next((r for r in runs.values() if (r.topic, r.queue_id) == (topic, queue_id)), None)
            if run is not None and (end is None or end < run.next):     # offsets in messages
                emit(Finding("cq", "cq-behind", f"batchconsumequeue/{topic}/{queue_id}", None, run.last_offset,
                             f"the batch queue ends at {end} but the commitlog holds queue offsets up to "
                             f"{run.next - 1}", expected=run.next, found=end))
    finally:
        queue.close()
    return {(topic, queue_id) for topic, queue_id, _ in found}


def _check_queue(queue, topic, queue_id, directory, emit, display) -> int | None:
    """The queue's findings; the queue offset after its last unit."""
    expected_base = None
    for info, units in batchqueue.queue_units(directory):
        shown = display(info.path)
        for n, unit in enumerate(units.tolist()):
            offset, size, _tags, store_time, base, batch, compacted, _reserved = unit
            at = n * fmt.UNIT_SIZE

            def problem(kind, message, expected=None, found=None):
                emit(Finding("cq", kind, shown, at, offset, message, expected, found))

            if expected_base is not None and base != expected_base:
                problem("batch-unit-gap", f"unit {n}: msgBaseOffset does not continue the queue",
                        expected_base, base)
            expected_base = base + batch
            if compacted != fmt.INVALID_POS:
                problem("batch-unit-compacted", f"unit {n}: compactedOffset is not INVALID_POS (-1)",
                        fmt.INVALID_POS, compacted)
            record = commitlog.record_at(queue, offset)
            if isinstance(record, str):
                problem("unit-not-a-record", f"unit {n}: no valid record starts at commitlog offset {offset}")
                continue
            batch_fields = dispatchrequest.batch_fields(record.properties, record.queue_offset)
            checks = [("unit-size-mismatch", "the unit's size is not the record's size", record.total_size, size),
                      ("unit-wrong-topic", "the record belongs to another topic", topic, record.topic),
                      ("unit-wrong-queue", "the record belongs to another queue", queue_id, record.queue_id),
                      ("unit-wrong-queue-offset", "the record's queue offset is not msgBaseOffset",
                       record.queue_offset, base),
                      ("batch-unit-store-time", "storeTime is not the record's", record.store_timestamp, store_time),
                      ("batch-unit-base", "msgBaseOffset is not the record's (INNER_BASE, else its queue offset)",
                       batch_fields["msg_base_offset"], base),
                      ("batch-unit-size", "batchSize is not the record's (INNER_NUM, else 1)",
                       batch_fields["batch_size"], batch)]
            for kind, message, want, got in checks:
                if want != got:
                    problem(kind, f"unit {n}: {message}", want, got)
    return expected_base
