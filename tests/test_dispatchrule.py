"""The dispatch rule's two forms (mqtool/engine/dispatchrule.py) decide the same for every record
of every broker-written store: the scalar form from the reference walker's records, the
vectorised form from the compiled walk's columns, as recovery and rebuild-cq use them."""

from __future__ import annotations

import pytest

from mqtool.engine.dispatchrule import by_record, chunk_by_record, decide, decide_chunk
from mqtool.formats.commitlog import Record
from mqtool.formats.index import index_key
from mqtool.formats.javastr import index_key_hash
from mqtool.native import fastscan
from mqtool.storage import batchqueue, census, commitlog, consumequeueext
from mqtool.storage.dispatchrequest import SCHEDULE_TOPIC, from_record
from mqtool.storage.settings import open_layout

from conftest import ALL_FIXTURES, FEATURE_FIXTURES

STORES = [*ALL_FIXTURES, *FEATURE_FIXTURES]


def scalar(queue, delays, settings) -> tuple[dict, set]:
    """offset -> the scalar form's decision (and the unit's place, and the index hashes); and the
    offsets of the records that must be dispatched record by record (batch, ext, LMQ units)."""
    out, by_one = {}, set()
    for entry in commitlog.walk(queue):
        if isinstance(entry, Record) and entry.crc_ok():
            req = from_record(entry, delays)
            d = decide(req)
            keys = [index_key_hash(index_key(req.topic, k)) for k in req.index_keys()] if d.indexed else []
            out[req.commitlog_offset] = (req.topic, req.queue_id, req.queue_offset, req.size,
                                         d.refused, d.unit, d.tags_code, d.indexed, keys)
            if by_record(req, *settings):
                by_one.add(req.commitlog_offset)
    return out, by_one


def vectorised(queue, delays, settings) -> tuple[dict, set, set]:
    """offset -> the vectorised form's decision, for the rows it decides; the offsets it leaves
    to the scalar form; and the offsets of the chunks it sends record by record."""
    out, exact, by_one = {}, set(), set()

    def request_at(c, i):
        record = commitlog.record_at(queue, int(c["offset"][i]))
        return None if isinstance(record, str) else from_record(record, delays)

    for entry in commitlog.walk(queue, scanner=fastscan, parse_props=True):
        if not isinstance(entry, fastscan.Chunk) or not entry.count:
            continue
        c = entry.columns
        parsed = entry.parsed if entry.parsed is not None else fastscan.parse(entry.buf, entry)
        d = decide_chunk(entry, parsed, delays, lambda i: request_at(c, i))
        if chunk_by_record(d, entry, queue, *settings):
            by_one.update(int(o) for o in c["offset"])
        keys_of: dict = {}
        for row, h in zip(parsed["key_record"].tolist(), parsed["key_hash"].tolist()):
            if d.indexed[row]:
                keys_of.setdefault(row, []).append(h)
        for i in range(entry.count):
            if not c["crc_ok"][i]:
                continue
            offset = int(c["offset"][i])
            if d.exact[i]:
                exact.add(offset)
                continue
            out[offset] = (d.names[d.which[i]], int(c["queue_id"][i]), int(c["queue_offset"][i]), int(c["size"][i]),
                           bool(d.refused[i]), bool(d.unit[i]), int(d.tags_code[i]), bool(d.indexed[i]),
                           keys_of.get(i, []))
    return out, exact, by_one


def decisions(extracted, name):
    """Both forms' decisions, with the store's own settings (batch topics, ext, multi-dispatch)."""
    layout = open_layout(str(extracted(name)), None, ())
    delays = layout.config.delay_levels_ms()
    settings = (batchqueue.topic_names(layout), consumequeueext.in_use(layout, "the test"),
                census.multi_dispatch(layout))
    queue = commitlog.open_queue(layout)
    try:
        (one, one_by_one), (many, exact, many_by_one) = scalar(queue, delays, settings), vectorised(queue, delays,
                                                                                                  settings)
        return one, many, exact, one_by_one, many_by_one
    finally:
        queue.close()


@pytest.mark.parametrize("name", STORES)
def test_both_forms_decide_the_same_for_every_record(name, extracted):
    one, many, exact, one_by_one, many_by_one = decisions(extracted, name)
    assert one, name
    assert sorted([*many, *exact]) == sorted(one)     # every record decided, by one form or the other
    assert len(exact) <= len(one) // 10               # the vectorised form decides nearly all
    for offset, decided in many.items():
        assert decided == one[offset], offset
    # a batch, ext or LMQ record is never dispatched by the kernels: its chunk goes record by record
    assert one_by_one <= many_by_one
    if name in ("batchcq5", "lmq5", "cqext5"):
        assert one_by_one, name


def test_the_fixtures_exercise_every_decision(extracted):
    """Transactions (prepared: no unit; rollback: neither unit nor keys) and delayed messages
    (the delivery time as tags code) are among the records compared above."""
    one, many, *_ = decisions(extracted, "features")
    compared = [one[offset] for offset in many]
    assert any(not unit and indexed for *_, unit, _, indexed, _ in compared)          # prepared
    assert any(not unit and not indexed for *_, unit, _, indexed, _ in compared)      # rollback
    delayed = [d for d in compared if d[0] == SCHEDULE_TOPIC]
    assert delayed and all(d[6] > 10**12 for d in delayed)     # a time in ms, not a tags hash
    assert sum(1 for d in compared if d[8]) > len(compared) // 2
