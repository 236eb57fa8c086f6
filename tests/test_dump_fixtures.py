"""dump --json against what real RocketMQ 4.9.8 and 5.3.3 report for the same files."""

from __future__ import annotations

import json

import pytest

from conftest import ALL_FIXTURES, DAMAGED, DLEDGER, UNDAMAGED, expected_read, fixture_dir

MESSAGE_FIELDS = [
    "topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "bodyCRCRecomputed",
    "flag", "sysFlag", "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
    "preparedTransactionOffset", "properties", "propertiesString", "bodyLength", "msgId", "uniqKey",
]


def broker_records(name):
    """commitlog offset -> the broker's full view of that record (body included)."""
    lines = expected_read(name)
    records = {}
    bodies = {}
    for line in lines:
        if line["type"] == "commitlog_record":
            records[line["offset"]] = line
        elif line["type"] == "message":
            bodies[line["commitLogOffset"]] = line
    for offset, rec in records.items():
        msg = dict(rec["message"])
        if "body" not in msg and offset in bodies:
            msg["body"] = bodies[offset]["body"]
            if "bodyDecompressed" in bodies[offset]:
                msg["bodyDecompressed"] = bodies[offset]["bodyDecompressed"]
        rec["full"] = msg
    return records


def dump_lines(run_cli, store, *args):
    result = run_cli("dump", store, *args, "--json")
    return result, result.json_lines()


@pytest.mark.parametrize("name", UNDAMAGED + DLEDGER)
def test_dump_commitlog_reproduces_every_broker_field(name, extracted, run_cli):
    store = extracted(name)
    result, lines = dump_lines(run_cli, store, "commitlog")
    assert result.code == 0, result.err
    ours = {l["commitLogOffset"]: l for l in lines if l["type"] == "message"}
    theirs = broker_records(name)
    assert sorted(ours) == sorted(theirs)
    for offset, rec in theirs.items():
        mine = ours[offset]
        expected = rec["full"]
        for field in MESSAGE_FIELDS:
            assert mine[field] == expected[field], (offset, field)
        assert "body" in expected, offset
        assert mine["body"] == expected["body"], offset
        assert mine.get("bodyDecompressed") == expected.get("bodyDecompressed"), offset
        # what the broker derives for dispatch
        dispatch = rec["dispatch"]
        assert mine["tagsCode"] == dispatch["tagsCode"], offset
        assert (mine["keys"] or "") == (dispatch["keys"] or ""), offset
        assert mine["uniqKey"] == dispatch["uniqKey"], offset
        assert mine["ok"] is True
    summary = lines[-1]
    end = next(l for l in expected_read(name) if l["type"] == "commitlog_end")
    assert summary["type"] == "summary"
    assert summary["records"] == end["records"]
    assert summary["blanks"] == end["blanks"]
    assert summary["endOffset"] == end["maxPhyOffset"]
    assert summary["problems"] == 0


@pytest.mark.parametrize("name", UNDAMAGED + DLEDGER)
def test_dump_blanks_match_broker(name, extracted, run_cli):
    _, lines = dump_lines(run_cli, extracted(name), "commitlog", "--no-body")
    ours = [(l["offset"], l["size"]) for l in lines if l["type"] == "blank"]
    theirs = [(l["offset"], _declared(l)) for l in expected_read(name) if l["type"] == "commitlog_blank"]
    assert ours == theirs


def _declared(blank: dict) -> int:
    """The size a broker's blank declares.  The harness reading a store switched to DLedger (mixed5)
    decodes the old commitlog's BLANKs in DLedger's field order (magic first): its magicCode is
    then the totalSize and its declaredSize the BLANK magic."""
    if blank.get("dledgerBlank") is False and blank["declaredSize"] == -875286124:     # 0xCBD43194
        return int(blank["magicCode"], 16)
    return blank["declaredSize"]


@pytest.mark.parametrize("name", UNDAMAGED + DAMAGED + DLEDGER)
def test_dump_consumequeue_matches_broker_units(name, extracted, run_cli):
    result, lines = dump_lines(run_cli, extracted(name), "consumequeue")
    expected = [l for l in expected_read(name) if l["type"] == "cq_unit"]
    ours = [l for l in lines if l["type"] == "cq_unit"]
    key = lambda l: (l["topic"], l["queueId"], l["offset"])  # noqa: E731
    mine = {key(l): l for l in ours}
    if name in DAMAGED:
        # the broker cut its queues in memory; the files still hold every unit
        assert set(map(key, expected)) <= set(mine)
    else:
        assert set(mine) == set(map(key, expected))
    for unit in expected:
        got = mine[key(unit)]
        assert (got["commitLogOffset"], got["size"], got["tagsCode"]) == \
            (unit["commitLogOffset"], unit["size"], unit["tagsCode"])
    assert result.code == 0


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_dump_checkpoint_matches_broker(name, extracted, run_cli):
    result, lines = dump_lines(run_cli, extracted(name), "checkpoint")
    assert result.code == 0
    pre = next(l for l in expected_read(name) if l["type"] == "pre")
    (line,) = lines
    for field, value in pre["checkpoint"].items():
        assert line[field] == value, field


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_dump_index_headers_match_broker(name, extracted, run_cli):
    result, lines = dump_lines(run_cli, extracted(name), "index")
    pre = next(l for l in expected_read(name) if l["type"] == "pre")
    headers = {l["file"].split("/")[-1]: l for l in lines if l["type"] == "index_header"}
    assert sorted(headers) == sorted(f["name"] for f in pre["indexFiles"])
    for f in pre["indexFiles"]:
        got = headers[f["name"]]
        for field in ("size", "beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset",
                      "hashSlotCount", "indexCount"):
            assert got[field] == f[field], (f["name"], field)
    entries = [l for l in lines if l["type"] == "index_entry"]
    assert len(entries) == sum(f["indexCount"] - 1 for f in pre["indexFiles"])


@pytest.mark.parametrize("name", UNDAMAGED + DAMAGED)
def test_one_index_file_gives_its_geometry_by_its_size(name, extracted, run_cli, tmp_path):
    """An index file dumped on its own, without --config: its geometry is read off its size at the
    broker's ratio (the fixtures' brokers ran with maxHashSlotNum 100 / maxIndexNum 400, README), and
    a size no geometry gives is a usage error naming the file."""
    pre = next(l for l in expected_read(name) if l["type"] == "pre")
    for f in pre["indexFiles"]:
        result, lines = dump_lines(run_cli, extracted(name) / "index" / f["name"])
        assert result.code == 0
        header = lines[0]
        assert (header["type"], header["maxHashSlotNum"], header["maxIndexNum"]) == ("index_header", 100, 400)
        assert (header["indexCount"], header["endPhyOffset"]) == (f["indexCount"], f["endPhyOffset"])
    cut = tmp_path / "index" / pre["indexFiles"][0]["name"]
    cut.parent.mkdir()
    cut.write_bytes((extracted(name) / "index" / cut.name).read_bytes()[:-7])
    result = run_cli("dump", cut)
    assert result.code == 2
    assert str(cut) in result.err and "cannot infer maxHashSlotNum/maxIndexNum from 8433 bytes" in result.err


def test_flipped_body_byte_is_marked_where_the_broker_cut(extracted, run_cli):
    name = "flipped-body-byte"
    summary = json.loads((fixture_dir(name) / "summary.json").read_text())
    result, lines = dump_lines(run_cli, extracted(name), "commitlog")
    assert result.code == 1
    messages = [l for l in lines if l["type"] == "message"]
    assert len(messages) == summary["messagesWritten"]   # dump shows what is on disk
    bad = [m for m in messages if not m["ok"]]
    assert [m["commitLogOffset"] for m in bad] == [summary["maxPhyOffsetAfterRecovery"]]
    assert bad[0]["problems"][0]["kind"] == "crc-mismatch"
    # everything before the cut is exactly what the broker still reads
    theirs = broker_records(name)
    for offset, rec in theirs.items():
        mine = next(m for m in messages if m["commitLogOffset"] == offset)
        for field in MESSAGE_FIELDS:
            assert mine[field] == rec["full"][field]


def test_garbage_tail_is_reported_at_its_offset(extracted, run_cli):
    name = "garbage-tail"
    corruption = json.loads((fixture_dir(name) / "corruption.json").read_text())
    change = corruption["changes"][0]
    result, lines = dump_lines(run_cli, extracted(name), "commitlog")
    assert result.code == 1
    assert len([l for l in lines if l["type"] == "message"]) == 50
    problems = [l for l in lines if l["type"] == "problem"]
    assert len(problems) == 1
    assert problems[0]["kind"] == "bad-magic"
    assert problems[0]["fileOffset"] == change["fileOffset"]
    assert problems[0]["file"] == change["file"]
    assert problems[0]["skippedBytes"] == change["length"]
    assert "one problem" not in result.err
    assert "problem" in result.err


def test_a_topic_the_store_has_no_queue_of_is_said(extracted, run_cli):
    store = extracted("basic")
    for kind in ("commitlog", "consumequeue"):
        result = run_cli("dump", store, kind, "--topic", "Orders")
        assert result.code == 0
        assert "the store has no queue of topic Orders" in result.err and "BasicTopic" in result.err, result.err
    assert "no queue of topic" not in run_cli("dump", store, "consumequeue", "--topic", "BasicTopic").err


def test_a_limit_on_the_timer_wheel_and_the_ledger_says_the_dump_stopped_early(extracted, run_cli):
    whole = run_cli("dump", extracted("timer5"), "timerwheel", "--json").json_lines()
    written = sum(l["type"] == "timer_slot" for l in whole)
    limited = run_cli("dump", extracted("timer5"), "timerwheel", "--limit", 5)
    assert written > 5 and "5 slots shown; stopped at slot" in limited.err and "the rest was not read" in limited.err
    assert f"{written} slots written" in run_cli("dump", extracted("timer5"), "timerwheel").err
    ledger = run_cli("dump", extracted("dledger1"), "dledger", "--limit", 4, "--json").json_lines()
    entries = [l for l in ledger if l["type"] == "dledger_entry"]
    summary = ledger[-1]
    assert len(entries) == 4 and summary["entries"] == 4
    assert summary["stoppedAt"] == next(l for l in run_cli("dump", extracted("dledger1"), "dledger", "--json")
                                        .json_lines() if l["type"] == "dledger_entry" and l["index"] == 4)["offset"]
    text = run_cli("dump", extracted("dledger1"), "dledger", "--limit", 4)
    assert "4 entries" in text.err and "(--limit): the rest was not read" in text.err
