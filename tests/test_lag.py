"""`mqtool lag`: consumer lag offline, on copies of the broker-written fixtures with offsets files
written in the broker's format (ConsumerOffsetManager: {"offsetTable":{"topic@group":{queueId:offset}}},
by fastjson), checked against the broker's own view of the queues (expected-read: queue lines, units,
messages)."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from conftest import FIXTURES, load_jsonl

from mqtool.formats import configjson

MULTIFILE = FIXTURES / "rocketmq-4.9.8" / "multifile"


def write_offsets(store: Path, table: dict, name: str = "consumerOffset.json", key: str = "offsetTable") -> None:
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / name).write_text(configjson.dumps({key: table}))


@pytest.fixture(scope="module")
def broker_view():
    """The broker's view of multifile: queue min/max, and each message's size and store time by queue offset."""
    queues, messages = {}, {}
    for line in load_jsonl(MULTIFILE / "expected-read.jsonl"):
        if line["type"] == "queue":
            queues[(line["topic"], line["queueId"])] = (line["minOffset"], line["maxOffset"])
        elif line["type"] == "message":
            messages[(line["topic"], line["queueId"], line["queueOffset"])] = (line["storeSize"],
                                                                               line["storeTimestamp"])
    return queues, messages


def expected_tail(messages, topic, queue_id, start, end):
    return (sum(messages[(topic, queue_id, o)][0] for o in range(start, end)),
            messages[(topic, queue_id, start)][1] if start < end else None)


def lines_of(result, kind="lag"):
    return {(l["group"], l["topic"], l["queueId"]): l for l in result.json_lines() if l["type"] == kind}


def test_lag_per_group_topic_and_queue_matches_the_brokers_queues(store_copy, run_cli, broker_view):
    queues, messages = broker_view
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@billing": {0: 10, 1: 369, 2: 311, 3: 0}, "AuditTopic@audit": {0: 100},
                          "PaymentTopic@pay": {0: 3}})
    result = run_cli("lag", store, "--json")
    assert result.code == 0, result.err
    got = lines_of(result)
    committed = {("billing", "OrderTopic", 0): 10, ("billing", "OrderTopic", 1): 369,
                 ("billing", "OrderTopic", 2): 311, ("billing", "OrderTopic", 3): 0, ("audit", "AuditTopic", 0): 100,
                 ("pay", "PaymentTopic", 0): 3, ("pay", "PaymentTopic", 1): None, ("pay", "PaymentTopic", 2): None}
    assert set(got) == set(committed)
    for (group, topic, queue_id), offset in committed.items():
        line = got[(group, topic, queue_id)]
        low, high = queues[(topic, queue_id)]
        start = low if offset is None else offset
        size, stored = expected_tail(messages, topic, queue_id, start, high)
        assert (line["minOffset"], line["maxOffset"], line["committedOffset"]) == (low, high, offset)
        assert (line["lagMessages"], line["lagBytes"], line["oldestUnconsumedTimestamp"]) == (high - start, size, stored)
        assert line["status"] == ("never-committed" if offset is None else "ok")
        assert line["queueType"] == "ConsumeQueue" and not line["outOfRange"]
    groups = {l["group"]: l for l in result.json_lines() if l["type"] == "group"}
    assert groups["pay"]["neverCommitted"] == 2 and groups["pay"]["queues"] == 3
    assert groups["billing"]["lagMessages"] == sum(got[("billing", "OrderTopic", q)]["lagMessages"] for q in range(4))
    summary = result.json_lines()[-1]
    assert summary["type"] == "summary" and summary["problems"] == [] and summary["outOfRange"] == 0


def test_offsets_out_of_range_say_what_the_broker_does_and_exit_1(store_copy, run_cli, broker_view):
    queues, messages = broker_view
    store = store_copy("multifile")
    high = queues[("OrderTopic", 2)][1]
    write_offsets(store, {"OrderTopic@billing": {0: 5, 2: high + 40}, "Vanished@billing": {0: 7, 1: 0},
                          "OrderTopic@late": {9: 3}})
    # a clean leaves the queue's min above 0: the first commitlog files go
    assert run_cli("clean", store, "--now", "--retention-hours", "0", "--max-files", "3",
                   "--delete-delay", "0").code == 0
    info = {(q["topic"], q["queueId"]): q for q in run_cli("info", store, "--json").json_lines()[0]["queues"]}
    low = info[("OrderTopic", 0)]["minOffset"]
    assert low > 5
    result = run_cli("lag", store, "--json")
    assert result.code == 1
    got = lines_of(result)
    below = got[("billing", "OrderTopic", 0)]
    size, stored = expected_tail(messages, "OrderTopic", 0, low, queues[("OrderTopic", 0)][1])
    assert (below["status"], below["skippedMessages"], below["outOfRange"]) == ("below-min", low - 5, True)
    assert (below["lagMessages"], below["lagBytes"], below["oldestUnconsumedTimestamp"]) == (
        queues[("OrderTopic", 0)][1] - low, size, stored)
    above = got[("billing", "OrderTopic", 2)]
    assert (above["status"], above["beyondMaxBy"], above["lagMessages"], above["maxOffset"]) == ("above-max", 40, 0, high)
    # offsets of queues the store does not hold are listed, not dropped (the broker sees min = max = 0)
    assert got[("billing", "Vanished", 0)]["status"] == "unknown-topic" and got[("billing", "Vanished", 0)]["outOfRange"]
    assert got[("billing", "Vanished", 1)]["status"] == "unknown-topic" and not got[("billing", "Vanished", 1)]["outOfRange"]
    assert got[("late", "OrderTopic", 9)]["status"] == "unknown-queue"
    assert {q for g, t, q in got if g == "late"} == {0, 1, 2, 3, 9}     # the topic's queues never committed too
    summary = result.json_lines()[-1]
    assert summary["outOfRange"] == 4 and summary["unknownQueues"] == 3     # late on queue 9 too
    assert len(summary["problems"]) == 4 and summary["problems"][0] in result.err
    text = run_cli("lag", store)
    assert text.code == 1 and "below-min" in text.out and "above-max" in text.out and "Vanished" in text.out
    assert "skips them" in text.err and "above the queue's max offset" in text.err
    for problem in summary["problems"]:      # each said once: no `problem:` line repeated as the error line
        assert text.err.count(problem) == 1, text.err


def test_group_and_topic_filters(store_copy, run_cli):
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@a": {0: 1}, "AuditTopic@a": {0: 1}, "OrderTopic@b": {0: 2}})
    only = lines_of(run_cli("lag", store, "--json", "--group", "a", "--topic", "OrderTopic"))
    assert {(g, t) for g, t, _ in only} == {("a", "OrderTopic")}


@pytest.mark.parametrize("name", ["multifile", "timer5", "batchcq5", "dledger1"])
def test_no_offsets_file_is_no_consumer_yet_not_damage(name, extracted, run_cli, tmp_path):
    """A broker nobody consumes from has no config/consumerOffset.json: lag says there are no
    offsets and exits 0; asked for a group, it has none to show: exit 1."""
    store = _extract(tmp_path, "rocketmq-5.3.3/batchcq5") if name == "batchcq5" else extracted(name)
    assert not (store / "config" / "consumerOffset.json").exists()
    result = run_cli("lag", store, "--json")
    assert result.code == 0, result.err
    summary = result.json_lines()[-1]
    assert summary["problems"] == [] and "no consumer offsets" in summary["notes"][0]
    table = run_cli("lag", store)
    assert table.code == 0 and "no consumer offsets" in table.err
    asked = run_cli("lag", store, "--group", "g")
    assert asked.code == 1 and "consumerOffset.json is missing" in asked.err


@pytest.mark.parametrize("case", ["damaged-with-bak", "damaged", "empty"])
def test_a_damaged_offsets_file_is_reported_with_exit_1(store_copy, run_cli, case):
    store = store_copy("multifile")
    config = store / "config"
    write_offsets(store, {"OrderTopic@g": {0: 3}})
    path = config / "consumerOffset.json"
    if case == "damaged-with-bak":
        shutil.copy(path, config / "consumerOffset.json.bak")
    path.write_text("" if case == "empty" else '{"offsetTable":{"OrderTopic@g":{0:')
    result = run_cli("lag", store, "--json")
    assert result.code == 1
    summary = result.json_lines()[-1]
    offsets_file = summary["offsetFiles"][0]
    got = lines_of(result)
    if case == "damaged-with-bak":       # read as a broker reads it: the .bak, and said
        assert offsets_file["read"] == "config/consumerOffset.json.bak" and "cannot be read" in offsets_file["note"]
        assert got[("g", "OrderTopic", 0)]["committedOffset"] == 3
    else:
        assert got == {}
        assert offsets_file["read"] is None
    expected = {"damaged": "cannot be read", "empty": "is empty",
                "damaged-with-bak": "read consumerOffset.json.bak"}[case]
    assert expected in summary["problems"][0] and expected in result.err


@pytest.mark.parametrize("content, says", [
    ('{"offsetTable":{"OrderTopic@g":{"0":"abc"}}}', 'offsetTable["OrderTopic@g"] holds "0": the string "abc"; '
                                                     "it should be {queueId: offset}, whole numbers"),
    ("[1, 2]", 'the file holds a list; it should be an object with an offsetTable: {"topic@group": '
               "{queueId: offset}}"),
    ('{"offsetTable":{"OrderTopic@g":[1]}}', 'offsetTable["OrderTopic@g"] is a list; it should be an object'),
])
def test_an_offsets_file_of_another_shape_says_what_it_should_hold(content, says, store_copy, run_cli):
    store = store_copy("multifile")
    (store / "config" / "consumerOffset.json").write_text(content)
    result = run_cli("lag", store)
    assert result.code == 1 and says in result.err, result.err
    for python in ("invalid literal", "object has no attribute", "Traceback", "int()"):
        assert python not in result.err


def test_a_negative_offset_is_no_deleted_message(store_copy, run_cli):
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@g": {0: -5}})
    result = run_cli("lag", store, "--json")
    assert result.code == 1
    line = lines_of(result)[("g", "OrderTopic", 0)]
    assert (line["status"], line["skippedMessages"], line["outOfRange"]) == ("negative", 0, True)
    assert line["lagMessages"] == line["maxOffset"] - line["minOffset"]
    problem = result.json_lines()[-1]["problems"][0]
    assert "offset -5 is negative" in problem and "deleted" not in problem


def test_delay_levels_are_the_schedulers_lag(store_copy, run_cli):
    store = store_copy("features")
    view = {(l["topic"], l["queueId"]): l for l in load_jsonl(FIXTURES / "rocketmq-4.9.8/features/expected-read.jsonl")
            if l["type"] == "queue"}
    write_offsets(store, {1: 0, 2: 1, 4: 0, 18: 5}, name="delayOffset.json")
    write_offsets(store, {"GlobalOrders@g": {0: 7, 1: 9, 2: 7, 3: 7, 15: 1}})
    result = run_cli("lag", store, "--json")
    assert result.code == 1      # level 18's offset 5 is past its queue's end
    delays = {l["level"]: l for l in result.json_lines() if l["type"] == "delay"}
    assert set(delays) == {1, 2, 4, 18}
    for level, line in delays.items():
        high = view[("SCHEDULE_TOPIC_XXXX", level - 1)]["maxOffset"]
        assert (line["topic"], line["queueId"], line["maxOffset"]) == ("SCHEDULE_TOPIC_XXXX", level - 1, high)
    assert delays[1]["lagMessages"] == view[("SCHEDULE_TOPIC_XXXX", 0)]["maxOffset"] == 1
    assert delays[1]["delayMs"] == 1000 and delays[18]["delayMs"] == 7200000
    assert delays[2]["lagMessages"] == 0
    assert delays[18]["status"] == "above-max" and delays[18]["beyondMaxBy"] == 5 - view[("SCHEDULE_TOPIC_XXXX", 17)]["maxOffset"]
    assert result.json_lines()[-1]["delayLagMessages"] == 2


def _extract(tmp_path: Path, fixture: str) -> Path:
    with tarfile.open(FIXTURES / fixture / "store.tar.gz") as tar:
        tar.extractall(tmp_path, filter="tar")
    return tmp_path / "store"


def test_batch_queues_count_messages_as_the_broker_does(tmp_path, run_cli):
    store = _extract(tmp_path, "rocketmq-5.3.3/batchcq5")
    queues, units = {}, []
    with gzip.open(FIXTURES / "rocketmq-5.3.3/batchcq5/expected-read.jsonl.gz", "rt") as fh:
        for raw in fh:
            line = json.loads(raw)
            if line["type"] == "queue":
                queues[(line["topic"], line["queueId"])] = line
            elif line["type"] == "bcq_unit":
                units.append(line)
    write_offsets(store, {"BatchTopic5@g": {0: 7, 1: 165, 2: 100}})
    result = run_cli("lag", store, "--json")
    assert result.code == 0, result.err
    got = lines_of(result)
    for queue_id, committed in ((0, 7), (1, 165), (2, 100)):
        line, queue = got[("g", "BatchTopic5", queue_id)], queues[("BatchTopic5", queue_id)]
        assert queue["cqType"] == "BatchCQ" and line["queueType"] == "BatchCQ"
        assert (line["minOffset"], line["maxOffset"]) == (queue["minOffset"], queue["maxOffset"])
        assert line["lagMessages"] == queue["maxOffset"] - committed
        rest = [u for u in units if u["queueId"] == queue_id and u["msgBaseOffset"] + u["batchSize"] > committed]
        assert line["lagBytes"] == sum(u["size"] for u in rest)
        assert line["oldestUnconsumedTimestamp"] == (rest[0]["storeTime"] if rest else None)
    # offset 7 is inside an inner batch: the consumer fetches that batch's record again
    inside = [u for u in units if u["queueId"] == 0 and u["msgBaseOffset"] < 7 < u["msgBaseOffset"] + u["batchSize"]]
    assert inside


def test_lmq_offsets_come_from_lmqConsumerOffset_json(tmp_path, run_cli):
    store = _extract(tmp_path, "rocketmq-5.3.3/lmq5")
    info = run_cli("info", store, "--json").json_lines()[0]
    lmq = next(q for q in info["queues"] if q["topic"].startswith("%LMQ%"))
    write_offsets(store, {f"{lmq['topic']}@mqtt": 1}, name="lmqConsumerOffset.json", key="lmqOffsetTable")
    result = run_cli("lag", store, "--json", "--set", "enableLmq=true")
    assert result.code == 0, result.err
    line = lines_of(result)[("mqtt", lmq["topic"], lmq["queueId"])]
    assert (line["committedOffset"], line["maxOffset"]) == (1, lmq["maxOffset"])
    assert line["lagMessages"] == lmq["maxOffset"] - 1
    assert result.json_lines()[-1]["offsetFiles"][0]["file"] == "config/lmqConsumerOffset.json"


def test_lag_changes_nothing(store_copy, run_cli):
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@g": {0: 3}})
    before = {p: (p.stat().st_mtime_ns, p.stat().st_atime_ns) for p in store.rglob("*") if p.is_file()}
    assert run_cli("lag", store).code == 0
    after = {p: (p.stat().st_mtime_ns, p.stat().st_atime_ns) for p in store.rglob("*") if p.is_file()}
    assert before == after


def test_the_consume_queue_unit_dtype_reads_what_the_schema_builds():
    import numpy as np

    from mqtool.formats import consumequeue

    units = [{"commitLogOffset": 0, "size": 1, "tagsCode": -1},
             {"commitLogOffset": (1 << 63) - 1, "size": -(1 << 31), "tagsCode": 1 << 40}]
    data = b"".join(consumequeue.UNIT.build(u) for u in units)
    got = np.frombuffer(data, dtype=consumequeue.unit_dtype())
    assert got.dtype.itemsize == consumequeue.UNIT_SIZE
    assert [{k: int(row[k]) for k in got.dtype.names} for row in got] == units
