"""The 5.3.3 stores written with features switched on (../shared/fixtures/rocketmq-5.3.3: batchcq5,
lmq5, cqext5): what a real 5.3.3 broker reports for them (expected-read's `queue`, `bcq_unit`,
`cq_unit` and `message` lines) is what mqtool reports, and a broker that loads them with nothing
to mend is matched by verify-crc and recover exiting 0.

batchcq5 (README/NOTES there): BatchTopic5 is a BatchCQ topic holding inner batches (one record of
INNER_NUM messages, queue offsets jumping by INNER_NUM), 4.x-style batches (one record per message)
and single messages; 5.3.3 writes the units of the latter two with msgBaseOffset = the record's
queue offset and batchSize 1.
"""

from __future__ import annotations

import functools
import hashlib

import pytest

from conftest import expected_read as _expected_read

# the settings of each fixture's broker.conf that mqtool reads (the stores carry no broker.conf)
SETTINGS = {
    "batchcq5": [],
    "lmq5": ["--set", "enableLmq=true", "--set", "enableMultiDispatch=true"],
    "cqext5": ["--set", "enableConsumeQueueExt=true", "--set", "mappedFileSizeConsumeQueueExt=1024"],
}
BATCH = "BatchTopic5"


@functools.lru_cache(maxsize=None)
def _read(name) -> tuple:
    return tuple(_expected_read(name))


def expected_read(name) -> list[dict]:
    return list(_read(name))


def queue_lines(name) -> dict:
    return {(l["topic"], l["queueId"]): l for l in expected_read(name) if l["type"] == "queue"}


def bcq_units(name="batchcq5") -> list[dict]:
    return [l for l in expected_read(name) if l["type"] == "bcq_unit"]


def queue_files(store) -> dict:
    return {str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
            for sub in ("consumequeue", "batchconsumequeue") for p in sorted((store / sub).rglob("*"))
            if p.is_file()}


# ------------------------------------------------------------------ every queue, as the broker has it

@pytest.mark.parametrize("name", list(SETTINGS))
def test_info_lists_every_queue_with_the_brokers_offsets(name, extracted, run_cli):
    """Batch queues too, their offsets in messages (BatchTopic5: max 295, 165, 120)."""
    result = run_cli("info", "--json", extracted(name), *SETTINGS[name])
    assert result.code == 0, result.err
    info = result.json_lines()[0]
    mine = {(q["topic"], q["queueId"]): (q["minOffset"], q["maxOffset"], q["cqType"]) for q in info["queues"]}
    theirs = {k: (l["minOffset"], l["maxOffset"], l.get("cqType", "SimpleCQ")) for k, l in queue_lines(name).items()}
    assert mine == theirs
    if name == "batchcq5":
        assert {k[1]: v[1] for k, v in mine.items() if k[0] == BATCH} == {0: 295, 1: 165, 2: 120}
        assert info["consumequeue"]["queues"] == 4                  # PlainTopic5's: the consume queues only
        assert info["batchconsumequeue"] == {"files": 4, "queues": 3, "topics": 1}
        text = run_cli("info", extracted(name))
        assert "BatchCQ" in text.out and "295" in text.out


@pytest.mark.parametrize("name", list(SETTINGS))
def test_verify_crc_agrees_with_the_broker(name, extracted, run_cli):
    """batchcq5 gave 434 problems: units of single messages and 4.x-style batches taken for
    damage, and queue offsets that jump by INNER_NUM taken for disorder."""
    result = run_cli("verify-crc", "--json", extracted(name), *SETTINGS[name])
    problems = [l for l in result.json_lines() if l["type"] == "problem"]
    assert result.code == 0 and problems == [], problems[:5]


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("crashed", [False, True], ids=["clean", "abort-file"])
def test_recover_has_nothing_to_mend(name, crashed, store_copy, run_cli):
    """A broker loads these stores with nothing to mend; after a crash (an abort file) its
    recovery dispatches the commitlog again into the very same queue files."""
    store = store_copy(name)
    before = queue_files(store)
    if crashed:
        (store / "abort").write_bytes(b"")
    result = run_cli("recover", "--json", store, *SETTINGS[name])
    assert result.code == 0, result.err
    assert "salvage" not in result.err
    assert queue_files(store) == before
    assert run_cli("verify-crc", store, *SETTINGS[name]).code == 0


# ------------------------------------------------------------------ batchcq5: the units

def test_dump_shows_every_batch_unit_the_broker_wrote(extracted, run_cli):
    result = run_cli("dump", extracted("batchcq5"), "batchconsumequeue", "--json")
    assert result.code == 0, result.err
    mine = [(u["topic"], u["queueId"], u["file"].rsplit("/", 1)[1], u["logicalOffset"], u["commitLogOffset"], u["size"],
             u["tagsCode"], u["storeTimestamp"], u["msgBaseOffset"], u["batchSize"], u["compactedOffset"],
             u["reserved"]) for u in result.json_lines() if u["type"] == "batch_unit"]
    theirs = [(u["topic"], u["queueId"], u["file"], u["position"], u["commitLogOffset"], u["size"], u["tagsCode"],
               u["storeTime"], u["msgBaseOffset"], u["batchSize"], u["compactedOffset"], u["reserved"])
              for u in bcq_units()]
    assert len(theirs) == 240 and mine == theirs


@pytest.mark.parametrize("how", ["rebuild-cq", "recover"])
def test_batch_queues_are_rebuilt_as_the_broker_wrote_them(how, store_copy, run_cli):
    """Dispatch writes a unit for every record of a batch topic: rebuild-cq from scratch, and
    recover after a crash redispatching into a queue that lost its later units, give the
    broker's files byte for byte."""
    store = store_copy("batchcq5")
    before = queue_files(store)
    batch_dir = store / "batchconsumequeue" / BATCH
    if how == "rebuild-cq":
        for path in batch_dir.glob("*/0*"):
            path.unlink()
        result = run_cli("rebuild-cq", store, "--set", "mapperFileSizeBatchConsumeQueue=4600")
    else:
        path = batch_dir / "0" / "00000000000000000000"
        data = bytearray(path.read_bytes())
        data[46 * 10:] = bytes(len(data) - 46 * 10)          # units 10.. never written
        path.write_bytes(bytes(data))
        (store / "abort").write_bytes(b"")
        result = run_cli("recover", store)
    assert result.code == 0, result.err
    assert queue_files(store) == before


def test_verify_still_finds_a_batch_unit_that_lies(store_copy, run_cli):
    """A single message's unit claiming two messages is damage (the broker writes batchSize 1)."""
    store = store_copy("batchcq5")
    unit = next(u for u in bcq_units() if u["batchSize"] == 1 and u["queueId"] == 2)
    path = store / "batchconsumequeue" / BATCH / "2" / unit["file"]
    data = bytearray(path.read_bytes())
    data[unit["position"] + 36:unit["position"] + 38] = (2).to_bytes(2, "big")
    path.write_bytes(bytes(data))
    result = run_cli("verify-crc", "--json", store)
    kinds = {l["kind"] for l in result.json_lines() if l["type"] == "problem"}
    assert result.code == 1 and "batch-unit-size" in kinds, kinds


# ------------------------------------------------------------------ batchcq5: get, stats, lookups

def test_get_reads_a_batch_queue_by_its_offsets_in_messages(extracted, run_cli):
    """getMessage on a batch queue: the unit holding a queue offset gives its whole record (an
    inner batch once), the next offset is past its batch; the broker's message lines, one per unit."""
    store = extracted("batchcq5")
    messages = {(l["queueId"], l["commitLogOffset"]): l for l in expected_read("batchcq5")
                if l["type"] == "message" and l["topic"] == BATCH}
    for unit in bcq_units():
        theirs = messages[(unit["queueId"], unit["commitLogOffset"])]
        last = unit["msgBaseOffset"] + unit["batchSize"] - 1            # any offset inside the batch
        result = run_cli("get", store, "--topic", BATCH, "--queue", unit["queueId"], "--offset", last, "--json",
                         "--no-body")
        assert result.code == 0, result.err
        found = [l for l in result.json_lines() if l["type"] == "message"]
        summary = result.json_lines()[-1]
        assert [(m["commitLogOffset"], m["queueOffset"], m["storeSize"]) for m in found] == [
            (theirs["commitLogOffset"], theirs["queueOffset"], theirs["storeSize"])]
        assert summary["nextOffset"] == last + 1
        assert summary["maxOffset"] == queue_lines("batchcq5")[(BATCH, unit["queueId"])]["maxOffset"]
    whole = run_cli("get", store, "--topic", BATCH, "--queue", 0, "--offset", 0, "--count", 295, "--json",
                    "--no-body").json_lines()
    assert len([l for l in whole if l["type"] == "message"]) == len([u for u in bcq_units() if u["queueId"] == 0])
    over = run_cli("get", store, "--topic", BATCH, "--queue", 0, "--offset", 295, "--json").json_lines()[-1]
    assert over["status"] == "OFFSET_OVERFLOW_ONE"
    missing = run_cli("get", store, "--topic", BATCH, "--queue", 3, "--offset", 0)
    assert missing.code == 2 and "has queues 0, 1, 2" in missing.err, missing.err


def test_stats_lists_the_batch_queues(extracted, run_cli):
    result = run_cli("stats", "--json", extracted("batchcq5"))
    assert result.code == 0, result.err
    mine = {(l["topic"], l["queueId"]): (l["minOffset"], l["maxOffset"], l["messages"])
            for l in result.json_lines() if l["type"] == "batch_queue"}
    theirs = {k: (l["minOffset"], l["maxOffset"], l["maxOffset"] - l["minOffset"])
              for k, l in queue_lines("batchcq5").items() if l.get("cqType") == "BatchCQ"}
    assert mine == theirs
    assert "batch queues" in run_cli("stats", extracted("batchcq5")).out


def test_stats_and_the_report_count_messages_as_the_broker_does(extracted, run_cli, tmp_path):
    """An inner batch is one record of INNER_NUM messages: stats' messages are the broker's (its
    queues' max - min offsets: BatchTopic5 295 + 165 + 120 = 580, as info says), its records the
    commitlog's (240); the report and the metrics say the same, each under its own name."""
    from prometheus_client.parser import text_string_to_metric_families
    store = extracted("batchcq5")
    theirs = {k: l["maxOffset"] - l["minOffset"] for k, l in queue_lines("batchcq5").items()}
    records: dict = {}
    for l in expected_read("batchcq5"):
        if l["type"] == "commitlog_record":
            key = (l["message"]["topic"], l["message"]["queueId"])
            records[key] = records.get(key, 0) + 1
    prom = tmp_path / "stats.prom"
    result = run_cli("stats", "--json", store, "--prometheus", prom)
    lines = result.json_lines()
    assert {(l["topic"], l["queueId"]): l["messages"] for l in lines if l["type"] == "queue"} == theirs
    assert {(l["topic"], l["queueId"]): l["records"] for l in lines if l["type"] == "queue"} == records
    topic = {l["topic"]: l for l in lines if l["type"] == "topic"}
    assert (topic[BATCH]["messages"], topic[BATCH]["records"]) == (580, 240)
    assert sum(topic[BATCH]["messagesPerHour"].values()) == 580 and sum(topic[BATCH]["sizeHistogram"].values()) == 240
    samples = {(s.name, s.labels.get("topic")): s.value for f in text_string_to_metric_families(prom.read_text())
               for s in f.samples}
    assert samples[("mqtool_topic_messages", BATCH)] == 580 and samples[("mqtool_topic_records", BATCH)] == 240
    page = tmp_path / "r.html"
    assert run_cli("report", store, "-o", page).code == 0
    text = page.read_text(encoding="utf-8")
    assert f"<td>{BATCH}</td><td class=num>580</td>" in text
    info_prom = tmp_path / "info.prom"
    assert run_cli("info", store, "--prometheus", info_prom).code == 0
    names = {f.name for f in text_string_to_metric_families(info_prom.read_text())}
    assert "mqtool_topic_messages" not in names     # info's count (what the queues index) has its own name
    assert "mqtool_queue_messages" in names


def test_the_queue_rows_of_the_spark_source_hold_every_batch_unit(extracted):
    """format("rocketmq_cq") (both readers ask pipeline.queue_parts / queue_rows for their rows)."""
    from mqtool.pipeline import plan
    from mqtool.pipeline import rows as part_rows
    from mqtool.pipeline import schema as row_schema

    stores = plan.find_stores([f"batchcq5={extracted('batchcq5')}"])
    cols = [name for name, _ in row_schema.CQ_COLUMNS]
    rows = [dict(zip(cols, row)) for part in plan.queue_parts(stores) for row in part_rows.queue_rows(part)]
    mine = sorted((r["topic"], r["queueId"], r["queueOffset"], r["commitLogOffset"], r["size"], r["tagsCode"],
                   r["cqType"], r["batchSize"]) for r in rows if r["ok"])
    theirs = sorted([(u["topic"], u["queueId"], u["msgBaseOffset"], u["commitLogOffset"], u["size"], u["tagsCode"],
                      "BatchCQ", u["batchSize"]) for u in bcq_units()]
                    + [(u["topic"], u["queueId"], u["offset"], u["commitLogOffset"], u["size"], u["tagsCode"],
                        "SimpleCQ", 1) for u in expected_read("batchcq5") if u["type"] == "cq_unit"])
    assert mine == theirs and len(rows) == len(theirs)


# ------------------------------------------------------------------ lmq5: clean's loss report

def test_clean_tells_consumed_lmq_messages_from_unread_ones(store_copy, run_cli):
    """enableLmq: the broker keeps every offset in config/lmqConsumerOffset.json (fastjson, its
    ConfigManager falling back to the .bak): offsetTable for ordinary groups, lmqOffsetTable
    "topic@group" -> offset for LMQ groups (queue 0).  Removing the first commitlog file takes
    each queue's units below it; what a group had not read is its loss."""
    store = store_copy("lmq5")
    units = [l for l in expected_read("lmq5") if l["type"] == "cq_unit"]
    gone = {}
    for u in units:
        if u["commitLogOffset"] < 65536:
            gone[(u["topic"], u["queueId"])] = gone.get((u["topic"], u["queueId"]), 0) + 1
    room, plain = gone[("%LMQ%room-1", 0)], gone[("PlainTopic5", 1)]
    assert room > 10 and plain > 5
    config = store / "config"
    config.mkdir()
    written = ('{\n\t"lmqOffsetTable":{\n\t\t"%LMQ%room-1@%LMQ%g1":10,\n\t\t"%LMQ%room-2@%LMQ%g1":' + str(10 ** 6)
               + '\n\t},\n\t"offsetTable":{\n\t\t"PlainTopic5@plain-group":{0:' + str(10 ** 6) + ',1:5\n\t\t}\n\t}\n}')
    (config / "lmqConsumerOffset.json").write_text("{ torn")          # a torn write: the .bak is read
    (config / "lmqConsumerOffset.json.bak").write_text(written)
    args = ("clean", store, "--now", "--retention-ms", "0", "--max-files", "1", "--json", "--dry-run",
            *SETTINGS["lmq5"])
    result = run_cli(*args)
    assert result.code == 0, result.err
    lines = result.json_lines()
    losses = sorted((l["group"], l["topic"], l["queueId"], l["consumerOffset"], l["unreadRemoved"])
                    for l in lines if l["type"] == "loss")
    assert losses == [("%LMQ%g1", "%LMQ%room-1", 0, 10, room - 10), ("plain-group", "PlainTopic5", 1, 5, plain - 5)]
    assert lines[-1]["unreadMessagesRemoved"] == room - 10 + plain - 5
    assert "cannot tell" not in result.err
