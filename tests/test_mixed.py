"""A broker switched to DLedger mode (issue 32): the old commitlog/ below dividedCommitlogOffset and
DLedger's entries above, read, checked, recovered, rebuilt and cleaned as DLedgerCommitLog (5.3.3)
does.  The fixture mixed5 (../shared/fixtures/rocketmq-5.3.3-dledger/README.md): 150 messages by a
plain store, then 120 by the same directory in DLedger mode.

The reads every fixture goes through (dump, consume queues, index queries, verify-crc, info)
run on mixed5 too (conftest.DLEDGER holds it); here is what is the division's own."""

from __future__ import annotations

import base64
import os
import re
import shutil
from pathlib import Path

import pytest
from test_info_and_layout import snapshot

from conftest import expected_read, fixture_dir

NAME = "mixed5"
SIZES = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=6000",
         "--set", "maxHashSlotNum=100", "--set", "maxIndexNum=400"]


def of_type(kind):
    return [line for line in expected_read(NAME) if line["type"] == kind]


def switch_line() -> dict:
    """What the broker's log says of the switch (DLedgerCommitLog.recover, write.log)."""
    text = (fixture_dir(NAME) / "write.log").read_text(errors="replace")
    found = re.search(r"Recover old commitlog needWriteMagicCode=(\w+) pos=(\d+) file=\S+/(\d{20}) "
                      r"dividedCommitlogOffset=(\d+)", text)
    assert found, "write.log names the switch"
    return {"wroteBlank": found.group(1) == "true", "pos": int(found.group(2)), "file": found.group(3),
            "divided": int(found.group(4))}


def units(run_cli, store):
    lines = run_cli("dump", store, "consumequeue", "--json").json_lines()
    return sorted((l["topic"], l["queueId"], l["offset"], l["commitLogOffset"], l["size"], l["tagsCode"])
                  for l in lines if l["type"] == "cq_unit")


def broker_units(leave_out=()):
    return sorted((u["topic"], u["queueId"], u["offset"], u["commitLogOffset"], u["size"], u["tagsCode"])
                  for u in of_type("cq_unit") if u["commitLogOffset"] not in leave_out)


def entry(index):
    return next(e for e in of_type("dledger_entry") if e["index"] == index)


# ------------------------------------------------------------------ readers

def test_records_of_both_parts_are_where_the_broker_reads_them(extracted, run_cli):
    """Below dividedCommitlogOffset from commitlog/, above it from DLedger's entries (pos + 48), in
    one commitlog order."""
    divided = switch_line()["divided"]
    result = run_cli("dump", extracted(NAME), "commitlog", "--json", "--no-body")
    assert result.code == 0, result.err
    mine = [(l["commitLogOffset"], l["file"]) for l in result.json_lines() if l["type"] == "message"]
    assert [o for o, _ in mine] == [r["offset"] for r in of_type("commitlog_record")]
    old = [f for o, f in mine if o < divided]
    new = [f for o, f in mine if o >= divided]
    assert old and new
    assert all(f.startswith("commitlog/") for f in old)
    assert all(f.startswith("dledger-n0/data/") for f in new)
    assert {o for o, _ in mine if o >= divided} == {e["bodyOffset"] for e in of_type("dledger_entry")}


def test_info_shows_both_parts_and_where_the_switch_divided_them(extracted, run_cli):
    store = extracted(NAME)
    before = snapshot(store)
    result = run_cli("info", store, "--json")
    assert result.code == 0, result.err
    (info,) = result.json_lines()
    switch = switch_line()
    (opened,) = of_type("dledger_open")
    division = info["division"]
    assert division["dividedCommitlogOffset"] == switch["divided"] == opened["dividedCommitlogOffset"]
    assert division["atOldEnd"] is True
    assert division["oldDataEnd"] == switch["pos"]
    assert switch["wroteBlank"] and division["blank"] == {
        "offset": switch["pos"], "size": int(switch["file"]) + 65536 - switch["pos"], "reachesFileEnd": True}
    assert (division["oldFiles"], division["dledgerFiles"]) == (4, 3)
    assert "enableDLegerCommitLog" in division["setting"]
    (store_line,) = of_type("store")
    assert (info["commitlog"]["minOffset"], info["commitlog"]["maxOffset"]) == \
        (store_line["minPhyOffset"], store_line["maxPhyOffset"])
    census = {e["path"]: e for e in info["census"]}
    assert census["dledger-n0/"]["feature"] == "dledger-switched"
    assert "dividedCommitlogOffset" in census["commitlog/"]["what"]
    text = run_cli("info", store)
    assert f"dividedCommitlogOffset {switch['divided']}" in text.out
    assert snapshot(store) == before


def test_verify_checks_both_parts_and_names_the_division(extracted, run_cli):
    result = run_cli("verify-crc", extracted(NAME), "--scope", "all", "--json")
    assert result.code == 0, result.out
    summary = result.json_lines()[-1]
    (end,) = of_type("commitlog_end")
    assert (summary["records"], summary["blanks"], summary["problems"]) == (end["records"], end["blanks"], 0)
    assert summary["units"] == len(of_type("cq_unit"))
    assert summary["division"]["dividedCommitlogOffset"] == switch_line()["divided"]


def test_the_old_part_without_the_blank_of_the_switch_is_damage(store_copy, run_cli):
    """The BLANK DLedgerCommitLog.recover wrote at the old records' end is what ends that file: a
    copy without it has data that ends before a later file (the DLedger one)."""
    store = store_copy(NAME)
    switch = switch_line()
    path = store / "commitlog" / switch["file"]
    _patch(path, switch["pos"] - int(switch["file"]), bytes(8))
    result = run_cli("verify-crc", store, "--json")
    assert result.code == 1
    (problem,) = [l for l in result.json_lines() if l["type"] == "problem"]
    assert (problem["kind"], problem["offset"]) == ("missing-blank", switch["pos"])


@pytest.mark.parametrize("offset_of", [lambda: of_type("commitlog_record")[10]["offset"],
                                       lambda: entry(100)["bodyOffset"]])
def test_get_lookup_by_id_and_track_on_either_side_of_the_division(offset_of, extracted, run_cli):
    store = extracted(NAME)
    offset = offset_of()
    message = next(m for m in of_type("message") if m["commitLogOffset"] == offset)
    unit = next(u for u in of_type("cq_unit") if u["commitLogOffset"] == offset)
    got = run_cli("get", store, "--topic", unit["topic"], "--queue", unit["queueId"], "--offset", unit["offset"],
                  "--json")
    assert got.code == 0, got.err
    assert [l["commitLogOffset"] for l in got.json_lines() if l["type"] == "message"] == [offset]
    for key in (message["msgId"], message["uniqKey"]):
        found = run_cli("lookup-by-id", store, key, "--json")
        assert found.code == 0, found.err
        assert [l["commitLogOffset"] for l in found.json_lines() if l["type"] == "message"] == [offset]
        tracked = run_cli("track", store, key, "--json")       # forensics/lookup.StoreReader, as above
        assert tracked.code == 0, tracked.err
        assert [l["commitLogOffset"] for l in tracked.json_lines() if l["type"] == "hop"] == [offset]


def test_stats_and_export_count_both_parts(extracted, run_cli, tmp_path):
    store = extracted(NAME)
    stats = run_cli("stats", store, "--json")
    assert stats.code == 0, stats.err
    assert stats.json_lines()[-1]["messages"] == len(of_type("commitlog_record"))
    out = tmp_path / "out"
    exported = run_cli("export", store, "-o", out, "--format", "jsonl")
    assert exported.code == 0, exported.err
    rows = [line for path in sorted(out.rglob("*.jsonl")) for line in path.read_text().splitlines() if line]
    assert len(rows) == len(of_type("commitlog_record"))


def test_lag_counts_the_unconsumed_messages_across_the_division(store_copy, run_cli):
    """A group that stopped in the old part: its lag runs across the division, its oldest
    unconsumed message is read from the old commitlog."""
    store = store_copy(NAME)
    divided = switch_line()["divided"]
    queue = [u for u in of_type("cq_unit") if (u["topic"], u["queueId"]) == ("OrderTopicD", 0)]
    committed = max(u["offset"] for u in queue if u["commitLogOffset"] < divided)
    assert any(u["commitLogOffset"] >= divided for u in queue)
    (store / "config").mkdir()
    (store / "config" / "consumerOffset.json").write_text(
        '{"offsetTable":{"OrderTopicD@g1":{"0":%d}}}' % committed)
    result = run_cli("lag", store, "--json")
    assert result.code == 0, result.err
    (line,) = [l for l in result.json_lines() if l["type"] == "lag" and l["queueId"] == 0]
    unconsumed = [u for u in queue if u["offset"] >= committed]
    oldest = next(m for m in of_type("message") if m["commitLogOffset"] == unconsumed[0]["commitLogOffset"])
    assert (line["lagMessages"], line["lagBytes"], line["oldestUnconsumedTimestamp"]) == \
        (len(unconsumed), sum(u["size"] for u in unconsumed), oldest["storeTimestamp"])


def test_diff_of_two_replicas_across_the_division(extracted, store_copy, run_cli):
    behind = store_copy(NAME)
    same = run_cli("diff", extracted(NAME), behind, "--json")
    assert same.code == 0, same.out
    summary = same.json_lines()[-1]
    assert (summary["same"], summary["commonRecords"]) == (True, len(of_type("commitlog_record")))
    last = entry(119)
    _patch(behind / "dledger-n0" / "data" / "00000000000000393216", last["pos"] - 393216, bytes(last["size"]))
    differ = run_cli("diff", extracted(NAME), behind, "--json")
    assert differ.code == 1
    summary = differ.json_lines()[-1]
    assert (summary["divergedAt"], summary["reason"], summary["onlyInA"]) == (last["bodyOffset"], "B ends here", 1)
    assert summary["a"]["entryAtDivergence"] == {"index": 119, "term": last["term"], "pos": last["pos"]}
    # the common records are found by the compiled comparison of bytes in either part (each chunk's
    # file asked for its kind), not record by record
    from mqtool.forensics import replicadiff
    from mqtool.native import fastscan
    from mqtool.storage import commitlog
    from mqtool.storage.config import StoreConfig
    from mqtool.storage.layout import discover

    a, b = (discover(StoreConfig(storePathRootDir=str(p))) for p in (extracted(NAME), behind))
    with commitlog.open_queue(a) as qa, commitlog.open_queue(b) as qb:
        assert replicadiff._identical_run(qa, qb, 0, fastscan) == (len(of_type("commitlog_record")) - 1, last["pos"])


def test_a_dledger_part_that_does_not_start_at_the_old_end_is_named(store_copy, run_cli):
    """The broker divides at the old last file's end: a DLedger part that starts elsewhere (here the
    old last file is gone) leaves a gap the load reports, and info says the division is misplaced."""
    store = store_copy(NAME)
    (store / "commitlog" / switch_line()["file"]).unlink()
    (info,) = run_cli("info", store, "--json").json_lines()
    assert info["division"]["atOldEnd"] is False
    verify = run_cli("verify-crc", store, "--scope", "commitlog", "--json")
    assert verify.code == 1
    assert [(l["kind"], l["offset"]) for l in verify.json_lines() if l["type"] == "problem"][:1] == \
        [("file-gap", switch_line()["divided"])]


# ------------------------------------------------------------------ recover and rebuild-cq

def test_recover_after_a_crash_keeps_the_old_part_and_rebuilds_the_brokers_queues(store_copy, run_cli):
    """DLedgerCommitLog.recover walks DLedger's files only once it has data: after a crash the walk
    and the re-dispatch start at or above the division, and the queues come out as the broker's."""
    store = store_copy(NAME)
    (store / "abort").write_text(str(os.getpid() + 10_000_000))
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.err
    (plan,) = result.json_lines()
    divided = switch_line()["divided"]
    (end,) = of_type("commitlog_end")
    assert plan["mode"] == "abnormal" and plan["walkFrom"] >= divided and plan["cut"] == end["maxPhyOffset"]
    assert plan["bytesCut"] == 0 and plan["removedFiles"] == []
    assert units(run_cli, store) == broker_units()
    assert not (store / "abort").exists()
    assert run_cli("verify-crc", store, "--scope", "all").code == 0


def test_after_a_crash_queues_that_stop_in_the_old_part_are_dispatched_across_the_division(store_copy, run_cli):
    """A crash soon after the switch, before the dispatch of the old part's last records: the
    broker's reput starts at the queues' furthest offset, in the old part, and reads on across the
    division (getData below it from the old commitlog); the units come back, old part and DLedger's."""
    store = store_copy(NAME)
    records = [r["offset"] for r in of_type("commitlog_record")]
    divided = switch_line()["divided"]
    tail = set(records[records.index(min(o for o in records if o >= divided)) - 5:])   # 5 old, every DLedger one
    for unit in of_type("cq_unit"):
        if unit["commitLogOffset"] in tail:
            path = store / "consumequeue" / unit["topic"] / str(unit["queueId"]) / "00000000000000000000"
            _patch(path, unit["offset"] * 20, bytes(20))
    (store / "abort").write_text(str(os.getpid() + 10_000_000))
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.err
    (plan,) = result.json_lines()
    assert plan["redispatchFrom"] <= min(tail)
    assert units(run_cli, store) == broker_units()
    assert run_cli("verify-crc", store, "--scope", "all").code == 0


def test_the_old_part_is_not_walked_again_once_dledger_has_data(store_copy, run_cli):
    """A record of the old part whose CRC fails does not cut the store: the broker's recovery of a
    switched store never walks the old commitlog again (it only recovered it, once, when it switched)."""
    store = store_copy(NAME)
    record = of_type("commitlog_record")[140]       # in the old last file
    assert record["offset"] >= 196608
    path = store / "commitlog" / "00000000000000196608"
    raw = path.read_bytes()
    body = base64.b64decode(next(m["body"] for m in of_type("message") if m["commitLogOffset"] == record["offset"]))
    at = raw.index(body, record["offset"] - 196608)
    _patch(path, at, bytes([raw[at] ^ 0xFF]))       # its body CRC fails now
    before = path.read_bytes()
    _patch(store / "checkpoint", 0, bytes(24))      # no time is safe: a plain store's walk starts at file 0
    (store / "abort").write_text(str(os.getpid() + 10_000_000))
    assert run_cli("verify-crc", store, "--scope", "commitlog").code == 1
    plan = run_cli("recover", store, *SIZES, "--dry-run", "--json").json_lines()[0]
    assert plan["walkFrom"] >= switch_line()["divided"]
    assert plan["cut"] == of_type("commitlog_end")[0]["maxPhyOffset"] and plan["stop"] is None
    run_cli("recover", store, *SIZES)
    assert path.read_bytes() == before
    assert len(list((store / "commitlog").iterdir())) == 4


def test_recover_of_a_copy_cut_mid_entry_in_dledger_mode(store_copy, run_cli):
    """The last DLedger data file cut inside its last entry (a crash while it was written): DLedger's
    recovery ends the data before that entry, the queues lose its unit, the old part stays."""
    store = store_copy(NAME)
    last = entry(119)
    path = store / "dledger-n0" / "data" / "00000000000000393216"
    data = bytearray(path.read_bytes())
    at = last["pos"] - 393216 + 20          # inside the entry's header
    data[at:] = bytes(len(data) - at)
    path.write_bytes(bytes(data))
    (store / "abort").write_text(str(os.getpid() + 10_000_000))
    result = run_cli("recover", store, *SIZES, "--json")
    assert result.code == 0, result.err
    (plan,) = result.json_lines()
    assert plan["cut"] == last["pos"]
    assert units(run_cli, store) == broker_units(leave_out={last["bodyOffset"]})
    assert run_cli("verify-crc", store, "--scope", "all").code == 0
    assert len(list((store / "commitlog").iterdir())) == 4


def test_rebuild_cq_rebuilds_the_queues_and_index_across_the_division(store_copy, run_cli):
    store = store_copy(NAME)
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    result = run_cli("rebuild-cq", store, "--index", *SIZES)
    assert result.code == 0, result.err
    assert units(run_cli, store) == broker_units()
    for query in of_type("index_query")[::40]:
        found = run_cli("lookup-by-key", store, "--topic", query["topic"], query["key"], "--json", "--no-body")
        assert {m["commitLogOffset"] for m in found.json_lines() if m["type"] == "message"} <= \
            set(query["commitLogOffsets"])


# ------------------------------------------------------------------ writers

@pytest.mark.parametrize("command", [["append", "--topic", "T", "--body", "x"], ["salvage", "{tmp}/out"]])
def test_append_and_salvage_refuse_with_the_reason(command, store_copy, tmp_path, run_cli):
    store = store_copy(NAME)
    before = snapshot(store)
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    result = run_cli(args[0], store, *args[1:])
    assert result.code == 3, (result.out, result.err)
    assert "dledger-switched" in result.err and "Traceback" not in result.err
    assert snapshot(store) == before


def _clean(run_cli, store, *more):
    result = run_cli("clean", store, "--now", "--retention-ms", "0", "--json", *more)
    return result, [l for l in result.json_lines() if l.get("type") == "decision" and l.get("kind") == "commitlog"]


def test_clean_expires_the_old_files_as_dledgercommitlog_does_and_keeps_dledgers(store_copy, run_cli):
    """While old commitlog files exist, DLedgerCommitLog.deleteExpiredFile expires them by the usual
    rules (never the last), turns DLedger's own cleaner off, and deletes the last old file once it
    is the only one left; then the store is a DLedger store, which clean refuses."""
    store = store_copy(NAME)
    before = snapshot(store)
    result, decisions = _clean(run_cli, store, "--dry-run")
    assert result.code == 0, result.err
    assert snapshot(store) == before
    acts = [(d["file"], d["action"], d["reason"]) for d in decisions]
    old = [f"commitlog/{n:020d}" for n in (0, 65536, 131072, 196608)]
    data = [f"dledger-n0/data/{n:020d}" for n in (262144, 327680, 393216)]
    assert [a[0] for a in acts] == old + data
    assert all(a[1] != "keep" for a in acts[:3])
    assert acts[3][1:] == ("keep", "last-old-file")
    assert all(a[1:] == ("keep", "dledger-off") for a in acts[4:])
    assert "disableDeleteDledger" in decisions[-1]["why"]
    result, _ = _clean(run_cli, store)
    assert result.code == 0, result.err
    assert sorted(p.name for p in (store / "commitlog").iterdir()) == ["00000000000000196608"]
    result, decisions = _clean(run_cli, store)
    assert result.code == 0, result.err
    assert [(d["file"], d["reason"]) for d in decisions if d["action"] != "keep"] == [(old[3], "last-old-file")]
    assert list((store / "commitlog").iterdir()) == []
    assert len(list((store / "dledger-n0" / "data").iterdir())) == 3
    assert run_cli("verify-crc", store).code == 0
    result, decisions = _clean(run_cli, store)      # the old files wait in trash/: DLedger's stay
    assert result.code == 0 and [(d["action"], d["reason"]) for d in decisions] == [("keep", "dledger-off")] * 3
    shutil.rmtree(store / "trash")                  # as once they are removed
    refused = run_cli("clean", store, "--now", "--retention-ms", "0")
    assert refused.code == 3 and "dledger" in refused.err


def test_the_last_old_file_goes_through_the_checks_every_file_does(store_copy):
    """The last old file, once the only one, is deleted by the checks every commitlog file goes
    through: a reader holding it has it shut down and kept (referenced), and a later run deletes the
    hanged file (redeleteHangedFile) at any hour, forcibly destroyMapedFileIntervalForcibly after the
    first attempt, rather than leave a file no reader can take in the commitlog."""
    from test_reclaim import FixedDisk, actions, local_ms

    from mqtool.engine.clock import ManualClock
    from mqtool.engine.reclaim import Policy
    from mqtool.engine.store import MessageStore
    from mqtool.storage.config import StoreConfig

    store = store_copy(NAME)
    clock = ManualClock(local_ms(11))               # outside deleteWhen=04
    old = sorted((store / "commitlog").iterdir())
    for path in old:
        os.utime(path, (clock.now / 1000 - 100 * 3600,) * 2)
    config = StoreConfig(storePathRootDir=str(store), mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=6000,
                         maxHashSlotNum=100, maxIndexNum=400, storeFormat="5")
    with MessageStore(config, clock=clock, disk_usage=FixedDisk(0.10), start_services=False, writer="clean").open() as ms:
        first = actions(ms.reclaim(Policy(ignore_window=True)))
        assert first[:4] == [(p.name, "delete", "expired") for p in old[:3]] + [(old[3].name, "keep", "last-old-file")]
        last = ms.commitlog_queue.files[0]
        assert last.hold()                                            # a reader
        report = ms.reclaim(Policy(ignore_window=True))
        assert actions(report) == [(old[3].name, "keep", "referenced")]
        assert not last.available and not last.hold()                 # no new reader can take it
        clock.advance(60000)
        assert actions(ms.reclaim()) == [(old[3].name, "keep", "referenced")]
        clock.advance(60000)                                           # 120 s after the first attempt
        report = ms.reclaim()
        assert actions(report)[0] == (old[3].name, "delete", "hanged")
        assert "held by 1 reader(s)" in report.decisions[0].why
        last.release()
    assert list((store / "commitlog").iterdir()) == []


def test_clean_undo_puts_every_old_file_back_after_the_last_went(store_copy, run_cli):
    """Staged in trash/, the old files come back with --undo even once none is left in commitlog/
    (the store then looks like a plain DLedger store, whose DLedger files clean never touches)."""
    store = store_copy(NAME)
    before = sorted(p.name for p in (store / "commitlog").iterdir())
    for _ in range(2):
        result, _ = _clean(run_cli, store, "--delete-delay", "1h")
        assert result.code == 0, result.err
    assert list((store / "commitlog").iterdir()) == []
    result, decisions = _clean(run_cli, store, "--delete-delay", "1h", "--dry-run")
    assert result.code == 0, result.err
    assert [(d["action"], d["reason"]) for d in decisions] == [("keep", "dledger-off")] * 3
    undo = run_cli("clean", store, "--undo")
    assert undo.code == 0, undo.err
    assert sorted(p.name for p in (store / "commitlog").iterdir()) == before
    assert run_cli("verify-crc", store, "--scope", "all").code == 0


def test_old_files_staged_from_a_commitlog_outside_the_store_keep_it_switched(store_copy, run_cli):
    """The old commitlog in storePathCommitLog, outside the store: its staged files wait in
    trash/external/<its path>.  The store stays a switched one while they wait (storage/layout's
    kept_place, where engine/trash puts them), so clean keeps DLedger's files and --undo puts them back."""
    store = store_copy(NAME)
    outside = store.parent / "old-commitlog"
    shutil.move(store / "commitlog", outside)
    where = ("--set", f"storePathCommitLog={outside}")
    before = sorted(p.name for p in outside.iterdir())
    for _ in range(2):
        result, _ = _clean(run_cli, store, "--delete-delay", "1h", *where)
        assert result.code == 0, result.err
    assert list(outside.iterdir()) == [] and not (store / "trash" / "commitlog").exists()
    assert sorted(p.name for p in (store / "trash" / "external").rglob("0*")) == before
    result, decisions = _clean(run_cli, store, "--delete-delay", "1h", "--dry-run", *where)
    assert result.code == 0, result.err
    assert [(d["action"], d["reason"]) for d in decisions] == [("keep", "dledger-off")] * 3
    undo = run_cli("clean", store, "--undo", *where)
    assert undo.code == 0, undo.err
    assert sorted(p.name for p in outside.iterdir()) == before


def test_files_moved_by_hand_into_dledgers_folder_are_named_not_cut(store_copy, run_cli):
    """Old commitlog files moved into DLedger's data folder: read as the old commitlog (their records
    at their offsets), named by info and verify-crc; recover refuses rather than cut them as
    DLedger's recovery would."""
    store = store_copy(NAME)
    for path in sorted((store / "commitlog").iterdir()):
        shutil.move(path, store / "dledger-n0" / "data" / path.name)
    dump = run_cli("dump", store, "commitlog", "--json", "--no-body")
    assert dump.code == 0, dump.err
    assert [l["commitLogOffset"] for l in dump.json_lines() if l["type"] == "message"] == \
        [r["offset"] for r in of_type("commitlog_record")]
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 1
    found = [(l["kind"], l["offset"]) for l in verify.json_lines() if l["type"] == "problem"]
    assert found == [("moved-by-hand", n) for n in (0, 65536, 131072, 196608)]
    info = run_cli("info", store, "--json")
    assert info.code == 1 and any("moved there by hand" in p for p in info.json_lines()[0]["problems"])
    # one rule names them for info, verify-crc and the writers' census (storage/dledger.moved_files)
    from mqtool.storage import census, dledger
    from mqtool.storage.config import StoreConfig
    from mqtool.storage.layout import discover

    moved = sorted((store / "dledger-n0" / "data").glob("0000000000000*"))[:4]
    assert info.json_lines()[0]["movedByHand"] == [str(p) for p in moved]
    layout = discover(StoreConfig(storePathRootDir=str(store)))
    assert census.take(layout).moved == dledger.moved_files(layout) == moved
    (store / "abort").write_text(str(os.getpid() + 10_000_000))
    before = snapshot(store)
    refused = run_cli("recover", store, *SIZES)
    assert refused.code == 3 and "moved there by hand" in refused.err
    assert snapshot(store) == before


@pytest.mark.parametrize("seed", range(8))
def test_no_command_fails_inside_on_a_damaged_switched_store(seed, store_copy, extracted, run_cli):
    """Random damage on either side of the division (test_dledger's for the DLedger part, flips,
    zeros and cuts for the old part): every reader answers with an exit code, changes nothing."""
    import random

    from test_dledger import READERS, _mutate, readers_then_recover

    rng = random.Random(32_000 + seed)
    store = store_copy(NAME)
    said = []
    for _ in range(rng.choice([1, 2])):
        if rng.random() < 0.5:
            said.append(_mutate(store, rng))
            continue
        path = rng.choice(sorted((store / "commitlog").iterdir()))
        at = rng.randrange(0, 65536 - 64)
        if rng.random() < 0.7:
            _patch(path, at, bytes(rng.randrange(256) for _ in range(4)))
        else:
            os.truncate(path, at)
        said.append(f"old {path.name}@{at}")
    readers_then_recover(run_cli, store, extracted(NAME), said, READERS + [("clean", "--dry-run", "--now", "{store}")])


def _patch(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)
