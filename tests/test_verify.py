"""verify-crc: clean stores are clean; each kind of damage is reported at its true offset."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from mqtool.formats import index as index_format
from mqtool.storage import fsutil

from conftest import DLEDGER, UNDAMAGED, expected_read, fixture_dir
from helpers.lockholder import holding_lock


def problems(run_cli, store, *args):
    result = run_cli("verify-crc", store, "--json", *args)
    lines = result.json_lines()
    assert lines[-1]["type"] == "summary"
    return result, [l for l in lines if l["type"] == "problem"], lines[-1]


def records(name):
    return [l for l in expected_read(name) if l["type"] == "commitlog_record"]


@pytest.mark.parametrize("name", UNDAMAGED + DLEDGER)
def test_clean_fixtures_are_clean(name, extracted, run_cli):
    result, found, summary = problems(run_cli, extracted(name))
    assert result.code == 0, found
    assert found == []
    assert summary["records"] == len(records(name))
    assert summary["units"] == len([l for l in expected_read(name) if l["type"] == "cq_unit"])
    pre = next(l for l in expected_read(name) if l["type"] == "pre")
    assert summary["entries"] == sum(f["indexCount"] - 1 for f in pre["indexFiles"])


@pytest.mark.parametrize("name", ["flipped-body-byte", "garbage-tail"])
def test_the_damaged_fixtures(name, extracted, run_cli):
    change = json.loads((fixture_dir(name) / "corruption.json").read_text())["changes"][0]
    result, found, _ = problems(run_cli, extracted(name))
    assert result.code == 1
    (problem,) = found
    assert problem["file"] == change["file"]
    if name == "flipped-body-byte":
        record = next(r for r in records("basic") if r["offset"] <= change["fileOffset"] < r["offset"] + r["size"])
        assert (problem["kind"], problem["fileOffset"]) == ("crc-mismatch", record["offset"])
        assert problem["expected"] == record["message"]["bodyCRC"]
    else:
        assert (problem["kind"], problem["fileOffset"]) == ("bad-magic", change["fileOffset"])
        assert problem["skippedBytes"] == change["length"]
    assert "Traceback" not in result.err and result.err.startswith("mqtool: ")


def _patch(path: Path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


def test_flipped_header_byte_is_found_and_the_walk_resynchronises(store_copy, run_cli):
    store = store_copy("basic")
    target = records("basic")[10]
    _patch(store / "commitlog" / "00000000000000000000", target["offset"] + 4, b"\x00")   # magic
    result, found, summary = problems(run_cli, store, "--scope", "commitlog")
    assert result.code == 1
    problem, gap = found
    assert (problem["kind"], problem["fileOffset"]) == ("bad-magic", target["offset"])
    assert problem["skippedBytes"] == target["size"]
    assert summary["records"] == len(records("basic")) - 1       # everything after it is still checked
    # the skipped record's queue offset is missing from its queue: the next one says so
    nxt = next(r for r in records("basic") if r["offset"] > target["offset"]
               and r["dispatch"]["queueId"] == target["dispatch"]["queueId"])
    assert (gap["kind"], gap["fileOffset"]) == ("queue-offset-order", nxt["offset"])
    assert gap["expected"] == target["dispatch"]["consumeQueueOffset"]


def test_physical_offset_field_and_queue_offset_order(store_copy, run_cli):
    store = store_copy("basic")
    path = store / "commitlog" / "00000000000000000000"
    a, b = records("basic")[3], records("basic")[20]
    _patch(path, a["offset"] + 28, struct.pack(">q", 999))
    _patch(path, b["offset"] + 20, struct.pack(">q", 77))
    result, found, _ = problems(run_cli, store, "--scope", "commitlog", "--no-crc")
    kinds = {(p["kind"], p["fileOffset"]) for p in found}
    assert ("offset-mismatch", a["offset"]) in kinds
    assert ("queue-offset-order", b["offset"]) in kinds
    order = [p for p in found if p["kind"] == "queue-offset-order" and p["fileOffset"] == b["offset"]][0]
    assert order["found"] == 77 and order["expected"] == b["dispatch"]["consumeQueueOffset"]
    assert result.code == 1


def test_cut_commitlog_file(store_copy, run_cli):
    store = store_copy("multifile")
    path = store / "commitlog" / "00000000000000065536"
    path.write_bytes(path.read_bytes()[:40000])
    result, found, _ = problems(run_cli, store, "--scope", "commitlog")
    assert result.code == 1
    kinds = {p["kind"] for p in found}
    assert "bad-file-size" in kinds
    cut = [r for r in records("multifile") if r["offset"] < 65536 + 40000 < r["offset"] + r["size"]]
    assert any(p["offset"] == cut[0]["offset"] for p in found if p["kind"] != "bad-file-size")


def test_dropped_consume_queue_file(store_copy, run_cli):
    store = store_copy("multifile")
    queues = sorted((store / "consumequeue").glob("*/*"))
    victim = next(q for q in queues if len(list(q.iterdir())) > 1)
    first = sorted(victim.iterdir())[0]
    first.unlink()
    result, found, _ = problems(run_cli, store, "--scope", "cq")
    assert result.code == 1
    # the commitlog still holds those records: the queue is missing units
    topic, queue_id = victim.parent.name, victim.name
    (problem,) = found
    assert problem["file"] == f"consumequeue/{topic}/{queue_id}"
    assert (problem["kind"], problem["expected"], problem["found"]) == ("cq-missing-start", 0, 300)
    first_record = next(r for r in records("multifile") if r["dispatch"]["topic"] == topic
                        and r["dispatch"]["queueId"] == int(queue_id))
    assert problem["offset"] == first_record["offset"]


def test_consume_queue_unit_damage(store_copy, run_cli):
    store = store_copy("basic")
    path = store / "consumequeue" / "BasicTopic" / "2" / "00000000000000000000"
    _patch(path, 3 * 20 + 12, struct.pack(">q", 12345))        # tagsCode of unit 3
    _patch(path, 5 * 20 + 8, struct.pack(">i", 10))            # size of unit 5
    _patch(path, 7 * 20, struct.pack(">q", 1))                 # commitlog offset of unit 7
    result, found, _ = problems(run_cli, store, "--scope", "cq")
    got = {(p["kind"], p["fileOffset"]) for p in found}
    assert ("unit-wrong-tags-code", 60) in got
    assert ("unit-size-mismatch", 100) in got
    assert ("unit-not-a-record", 140) in got
    tags = next(p for p in found if p["kind"] == "unit-wrong-tags-code")
    assert tags["found"] == 12345
    assert result.code == 1


def test_index_slot_and_entry_damage(store_copy, run_cli):
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    raw = path.read_bytes()
    slots = struct.unpack_from(">100i", raw, index_format.HEADER_SIZE)
    used = next(i for i, v in enumerate(slots) if v > 0)
    _patch(path, index_format.slot_position(used), struct.pack(">i", 399))      # beyond indexCount
    entry_at = index_format.entry_position(100, 5)
    key_hash = struct.unpack_from(">i", raw, entry_at)[0]
    _patch(path, entry_at, struct.pack(">i", key_hash ^ 1))                    # a hash no key has
    result, found, _ = problems(run_cli, store, "--scope", "index")
    got = {(p["kind"], p["fileOffset"]) for p in found}
    assert ("bad-slot", index_format.slot_position(used)) in got
    assert ("entry-wrong-hash", entry_at) in got
    assert result.code == 1


def test_index_structure_damage(store_copy, run_cli):
    """Slots and chains checked from the index file alone: a slot whose head belongs to another
    slot, an entry whose prevIndex points forward, a negative timeDiff, a wrong hashSlotCount."""
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    raw = path.read_bytes()
    slots = struct.unpack_from(">100i", raw, index_format.HEADER_SIZE)
    used = [i for i, v in enumerate(slots) if v > 0]
    entry_hash = lambda n: struct.unpack_from(">i", raw, index_format.entry_position(100, n))[0]  # noqa: E731
    a, b = used[0], next(s for s in used if entry_hash(slots[s]) % 100 != used[0])
    _patch(path, index_format.slot_position(a), struct.pack(">i", slots[b]))    # a's head is b's
    forward = index_format.entry_position(100, 3)
    _patch(path, forward + 16, struct.pack(">i", 7))                           # prevIndex 7 > 3
    late = index_format.entry_position(100, 4)
    _patch(path, late + 12, struct.pack(">i", -5))                             # timeDiff < 0
    count = struct.unpack_from(">i", raw, 32)[0]
    _patch(path, 32, struct.pack(">i", count + 1))                             # hashSlotCount
    result, found, _ = problems(run_cli, store, "--scope", "index")
    got = {(p["kind"], p["fileOffset"]) for p in found}
    assert {("bad-slot", index_format.slot_position(a)), ("bad-entry", forward), ("bad-entry", late),
            ("bad-header", 32)} <= got
    header = next(p for p in found if p["kind"] == "bad-header" and p["fileOffset"] == 32)
    assert (header["expected"], header["found"]) == (len(used), count + 1)
    assert result.code == 1


def test_index_times_against_the_records(store_copy, run_cli):
    """An entry's timeDiff is its record's store time - beginTimestamp, in seconds, from entry 2
    on; beginTimestamp and endTimestamp are the first and the last entry's store times."""
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    raw = path.read_bytes()
    begin, end = struct.unpack_from(">qq", raw, 0)
    count = struct.unpack_from(">i", raw, index_format.HEADER_FIELD_AT["indexCount"])[0]
    entry = index_format.entry_position(100, 6)
    diff = struct.unpack_from(">i", raw, entry + index_format.TIME_DIFF_AT)[0]
    _patch(path, entry + index_format.TIME_DIFF_AT, struct.pack(">i", diff + 3))
    first = index_format.entry_position(100, 1)
    _patch(path, first + index_format.TIME_DIFF_AT, struct.pack(">i", 12345))    # entry 1's is not checked
    _patch(path, index_format.HEADER_FIELD_AT["endTimestamp"], struct.pack(">q", end + 7))
    result, found, _ = problems(run_cli, store, "--scope", "index")
    assert result.code == 1
    got = {(p["kind"], p["fileOffset"]): p for p in found}
    assert set(got) == {("entry-wrong-time", entry + index_format.TIME_DIFF_AT),
                        ("bad-header", index_format.HEADER_FIELD_AT["endTimestamp"])}
    wrong = got[("entry-wrong-time", entry + index_format.TIME_DIFF_AT)]
    assert (wrong["expected"], wrong["found"]) == (diff, diff + 3)
    header = got[("bad-header", index_format.HEADER_FIELD_AT["endTimestamp"])]
    assert (header["expected"], header["found"]) == (end, end + 7)
    assert count > 6 and begin <= end


def test_preallocated_empty_file_is_normal_but_bytes_after_the_data_are_not(store_copy, run_cli):
    store = store_copy("crash")     # ends with a pre-created, all-zero next file
    result, found, _ = problems(run_cli, store, "--scope", "commitlog")
    assert result.code == 0 and found == []
    last = sorted((store / "commitlog").iterdir())[-2]
    end = max(r["offset"] + r["size"] for r in records("crash")) - int(last.name)
    _patch(last, end + 100, b"\x07")
    result, found, _ = problems(run_cli, store, "--scope", "commitlog")
    assert result.code == 1
    assert [(p["file"], p["fileOffset"]) for p in found] == [(f"commitlog/{last.name}", end + 100)]


def test_jobs_find_the_same(store_copy, run_cli):
    store = store_copy("multifile")
    path = store / "commitlog" / "00000000000000131072"
    _patch(path, 5000, b"\xff" * 8)
    one = problems(run_cli, store)[1]
    many = problems(run_cli, store, "--jobs", "3")[1]
    key = lambda p: (p["scope"], p["kind"], p["file"], p["fileOffset"])  # noqa: E731
    assert sorted(map(key, one)) == sorted(map(key, many)) and one


def test_verify_changes_nothing_and_tables_work(extracted, run_cli):
    result = run_cli("verify-crc", extracted("features"))
    assert result.code == 0
    assert "0 problem(s)" in result.err


def test_a_store_written_by_mqtool_verifies_clean(tmp_path, run_cli):
    messages = tmp_path / "m.jsonl"
    lines = (fixture_dir("features") / "spec.jsonl").read_text().splitlines()
    messages.write_text("\n".join(l for l in lines if '"expect"' not in l) + "\n")
    store = tmp_path / "store"
    assert run_cli("append", store, "--set", "mappedFileSizeCommitLog=65536", "--set",
                   "mappedFileSizeConsumeQueue=6000", "--set", "maxHashSlotNum=100", "--set", "maxIndexNum=400",
                   "--input", messages, "--allow-system-topics", "--json").code == 0
    result, found, summary = problems(run_cli, store)
    assert result.code == 0, found
    assert summary["records"] == len(lines) - 3


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_each_commitlog_part_opens_only_its_own_file(jobs, tmp_path, run_cli, monkeypatch):
    """A task per part must not list and map the whole commitlog: with thousands of files
    that made verify-crc quadratic (20 s for 773 files of 64 KiB)."""
    from mqtool.storage.layout import StoreLayout

    messages = tmp_path / "m.jsonl"
    messages.write_text("".join(json.dumps({"topic": "T", "queueId": i % 2, "keys": f"k{i}", "body": "x" * 300})
                                + "\n" for i in range(300)))
    store = tmp_path / "store"
    assert run_cli("append", store, "--set", "mappedFileSizeCommitLog=4096", "--input", messages).code == 0
    assert len(list((store / "commitlog").iterdir())) > 25
    listed = []
    real = StoreLayout.commitlog_files
    monkeypatch.setattr(StoreLayout, "commitlog_files", lambda self: listed.append(1) or real(self))
    result, found, summary = problems(run_cli, store, "--jobs", jobs)
    assert result.code == 0, found
    assert summary["records"] == 300
    assert len(listed) <= 6, f"the commitlog directory was listed {len(listed)} times"   # not once a file


def test_the_ci_example_script(extracted, tmp_path):
    import subprocess

    script = Path(__file__).resolve().parent.parent / "examples" / "verify-ci.sh"
    report = tmp_path / "report.jsonl"
    env = {**os.environ, "MQTOOL": str(Path(sys.executable).parent / "mqtool")}
    clean = subprocess.run(["bash", str(script), str(extracted("basic")), str(report)], capture_output=True,
                           text=True, env=env)
    assert clean.returncode == 0 and "clean" in clean.stdout
    assert json.loads(report.read_text().splitlines()[-1])["problems"] == 0
    damaged = subprocess.run(["bash", str(script), str(extracted("flipped-body-byte")), str(report)],
                             capture_output=True, text=True, env=env)
    assert damaged.returncode == 1 and "PROBLEMS FOUND" in damaged.stderr
    assert json.loads(report.read_text().splitlines()[0])["kind"] == "crc-mismatch"


def _cq_units(name):
    return [l for l in expected_read(name) if l["type"] == "cq_unit"]


def _unit_file(store, unit, per_file):
    """The consume queue file holding a unit, and the unit's byte offset in it."""
    first = unit["offset"] // per_file * per_file
    return (store / "consumequeue" / unit["topic"] / str(unit["queueId"]) / f"{first * 20:020d}",
            (unit["offset"] - first) * 20)


def _index_entries(path, slots=100):
    """(byte offset in the file, hash, commitlog offset) of each entry of an index file."""
    raw = path.read_bytes()
    count = struct.unpack_from(">i", raw, 36)[0]
    at = [index_format.entry_position(slots, i) for i in range(1, count)]
    return [(a,) + struct.unpack_from(">iq", raw, a) for a in at]


def _damage_pointers(store):
    """Damage multifile's commitlog, consume queues and index so that units and entries point
    inside records, at a damaged record and at a record of another topic.  Returns the findings
    expected: (kind, file, file offset) -> (expected, found) or None."""
    recs = records("multifile")
    units = _cq_units("multifile")
    want = {}
    damaged = recs[700]                       # its magic: the walk skips it
    base = damaged["offset"] // 65536 * 65536
    _patch(store / "commitlog" / f"{base:020d}", damaged["offset"] - base + 4, b"\x00\x00\x00\x00")
    want[("bad-magic", f"commitlog/{base:020d}", damaged["offset"] - base)] = None
    own = next(u for u in units if u["commitLogOffset"] == damaged["offset"])
    path, at = _unit_file(store, own, 300)
    want[("unit-not-a-record", str(path.relative_to(store)), at)] = None
    inside = units[100]                       # points 8 bytes into its record
    path, at = _unit_file(store, inside, 300)
    _patch(path, at, struct.pack(">q", inside["commitLogOffset"] + 8))
    want[("unit-not-a-record", str(path.relative_to(store)), at)] = None
    other = next(r for r in recs[1500:] if r["dispatch"]["topic"] != units[1200]["topic"])
    wrong = units[1200]                       # points at a record of another topic
    path, at = _unit_file(store, wrong, 300)
    _patch(path, at, struct.pack(">qi", other["offset"], other["size"]))
    want[("unit-wrong-topic", str(path.relative_to(store)), at)] = (wrong["topic"], other["dispatch"]["topic"])
    for ix in sorted((store / "index").iterdir()):
        for at, _, phy in _index_entries(ix):
            if phy == damaged["offset"]:
                want[("entry-not-a-record", f"index/{ix.name}", at)] = None
    ix = sorted((store / "index").iterdir())[3]
    at, _, phy = _index_entries(ix)[50]       # points 1 byte into its record
    _patch(ix, at + 4, struct.pack(">q", phy + 1))
    want[("entry-not-a-record", f"index/{ix.name}", at)] = None
    return want


def test_units_and_entries_pointing_anywhere_are_found_at_their_true_offsets(store_copy, run_cli):
    store = store_copy("multifile")
    want = _damage_pointers(store)
    result, found, _ = problems(run_cli, store)
    assert result.code == 1
    got = {(p["kind"], p["file"], p["fileOffset"]): p for p in found}
    for key, values in want.items():
        assert key in got, key
        if values is not None:
            assert (got[key]["expected"], got[key]["found"]) == values


def test_segments_parts_and_jobs_find_the_same(store_copy, run_cli, monkeypatch):
    """Units and entries are checked a stretch of records at a time (SEGMENT_BYTES), files cut
    into parts when tasks run in parallel: the findings do not depend on either."""
    from mqtool.forensics.verify import commitlog as verify_commitlog
    from mqtool.native import fastscan
    from mqtool.storage import commitlog

    store = store_copy("multifile")
    want = _damage_pointers(store)
    path, at = _unit_file(store, _cq_units("multifile")[2000], 300)
    _patch(path, at + 12, struct.pack(">q", 4242))          # a wrong tags code too

    def findings(*args):
        found = problems(run_cli, store, *args)[1]
        assert {(p["kind"], p["file"], p["fileOffset"]) for p in found} >= set(want)
        return sorted(json.dumps(p, sort_keys=True) for p in found)

    whole = findings()
    stretches = []
    check_pointers = verify_commitlog._check_pointers
    monkeypatch.setattr(verify_commitlog, "_check_pointers", lambda *a: stretches.append(a[3:5]) or check_pointers(*a))
    monkeypatch.setattr(commitlog, "CHUNK_RECORDS", 5)      # chunks, and so stretches, of a few records
    monkeypatch.setattr(verify_commitlog, "SEGMENT_BYTES", 3000)
    assert findings() == whole
    assert len(stretches) > 5 * len(list((store / "commitlog").iterdir()))
    # parts (the damaged record is not at the edge of one: there its skipped bytes would end with the part)
    monkeypatch.setattr(fastscan, "PART_BYTES", 8000)
    assert findings("--jobs", "2") == whole


def test_delayed_message_tags_code_is_its_delivery_time(store_copy, run_cli):
    store = store_copy("features")
    unit = next(u for u in _cq_units("features") if u["topic"] == "SCHEDULE_TOPIC_XXXX")
    path, at = _unit_file(store, unit, 300000)
    _patch(path, at + 12, struct.pack(">q", unit["tagsCode"] + 1000))
    result, found, _ = problems(run_cli, store, "--scope", "cq")
    (problem,) = found
    assert (problem["kind"], problem["file"], problem["fileOffset"]) == \
        ("unit-wrong-tags-code", str(path.relative_to(store)), at)
    assert (problem["expected"], problem["found"]) == (unit["tagsCode"], unit["tagsCode"] + 1000)


def test_units_and_entries_pointing_where_the_commitlog_has_no_file(store_copy, run_cli):
    """The newest commitlog file deleted: every unit and index entry pointing into it is
    reported (no commitlog part ever sees them); a file deleted from the middle: the same for
    the hole, beside the file-gap."""
    store = store_copy("multifile")
    newest = sorted((store / "commitlog").iterdir())[-1]
    start = int(newest.name)
    newest.unlink()
    result, found, _ = problems(run_cli, store)
    assert result.code == 1
    units = [u for u in _cq_units("multifile") if u["commitLogOffset"] >= start]
    got = [p for p in found if p["kind"] == "unit-outside-commitlog"]
    assert sorted(p["offset"] for p in got) == sorted(u["commitLogOffset"] for u in units) and units
    entries = [p for p in found if p["kind"] == "entry-outside-commitlog"]
    assert entries and all(p["offset"] >= start for p in entries)


def test_units_pointing_into_a_missing_middle_file(store_copy, run_cli):
    middle = store_copy("multifile")
    gone = sorted((middle / "commitlog").iterdir())[3]
    low, high = int(gone.name), int(gone.name) + gone.stat().st_size
    gone.unlink()
    result, found, _ = problems(run_cli, middle)
    holes = {p["offset"] for p in found if p["kind"] == "unit-outside-commitlog"}
    assert holes == {u["commitLogOffset"] for u in _cq_units("multifile") if low <= u["commitLogOffset"] < high}
    assert any(p["kind"] == "file-gap" for p in found)


def test_one_size_given_leaves_the_others_read_off_the_files(extracted, run_cli):
    store = extracted("basic")
    assert run_cli("verify-crc", store, "--set", "maxIndexNum=400").code == 0
    assert run_cli("verify-crc", store, "--set", "maxHashSlotNum=100").code == 0
    (info,) = run_cli("info", store, "--set", "mappedFileSizeConsumeQueue=6000", "--json").json_lines()
    assert info["commitlog"]["fileSize"] == 65536
    for bad in ("mappedFileSizeCommitLog=0", "maxHashSlotNum=-1", "mappedFileSizeConsumeQueue=0"):
        result = run_cli("verify-crc", store, "--set", bad)
        assert result.code == 2 and bad.split("=")[0] in result.err


def test_a_zero_byte_commitlog_file_is_damage_not_a_file_size(store_copy, run_cli):
    """A 0-byte file says nothing about the store's file size: it is reported as a file of the
    wrong size, and the readers find no record there instead of failing."""
    store = store_copy("basic")
    (path,) = (store / "commitlog").iterdir()
    path.write_bytes(b"")
    result, found, _ = problems(run_cli, store)
    assert result.code == 1
    assert ("bad-file-size", f"commitlog/{path.name}") in {(p["kind"], p["file"]) for p in found}
    got = run_cli("get", store, "--topic", "BasicTopic", "--queue", "0", "--offset", "0")
    assert got.code == 1 and "outside" in got.err
    from mqtool.formats.msgid import encode_offset_msgid

    msgid = encode_offset_msgid(bytes([127, 0, 0, 1]), 10911, 0)
    for args in (("lookup-by-key", "--topic", "BasicTopic", "user-3"), ("lookup-by-id", msgid)):
        result = run_cli(args[0], store, *args[1:])
        assert result.code in (0, 1) and "internal error" not in result.err, result.err


def test_verify_says_when_a_writer_holds_the_store(store_copy, run_cli):
    """Read-only, so it runs; but what a writer has in flight can look like damage: said on
    stderr, in the summary (inUseBy) and in the final error line."""
    store = store_copy("basic")
    with holding_lock(store) as proc:
        result = run_cli("verify-crc", store, "--json")
        assert result.code == 0, result.err
        assert result.json_lines()[-1]["inUseBy"] == f"process {proc.pid}"
        assert "warning: the store is in use" in result.err
        (store / "consumequeue" / "BasicTopic" / "0" / "00000000000000000000").write_bytes(b"\x01" * 40)
        damaged = run_cli("verify-crc", store)
        assert damaged.code == 1 and f"the store was in use by process {proc.pid}" in damaged.err
    assert run_cli("verify-crc", store, "--json").json_lines()[-1]["inUseBy"] is None


def test_units_past_a_hole_in_a_sparse_queue_file_are_still_read(store_copy, run_cli):
    """verify reads a queue file only up to its last data (SEEK_DATA/SEEK_HOLE: a hole reads as
    zeros); a unit written far past a hole is data, so it is still found."""
    store = store_copy("basic")
    path = store / "consumequeue" / "BasicTopic" / "2" / "00000000000000000000"
    data, size = path.read_bytes(), path.stat().st_size
    written = max(i for i in range(0, len(data), 20) if any(data[i:i + 20])) + 20
    last = (size // 20 - 1) * 20
    path.unlink()
    with open(path, "wb") as fh:          # the written units, a hole, then one stray unit at the end
        fh.write(data[:written])
        fh.truncate(size)
        fh.seek(last)
        fh.write(struct.pack(">qiq", 7, 0, 0))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert written <= fsutil.data_end(fd, size) and fsutil.data_end(fd, size) >= last + 20
    finally:
        os.close(fd)
    result, found, _ = problems(run_cli, store, "--scope", "cq")
    assert ("invalid-unit", last) in {(p["kind"], p["fileOffset"]) for p in found}
    assert result.code == 1


def test_data_end_of_sparse_files(tmp_path):
    def end_of(write_at, size):
        path = tmp_path / f"f{len(list(tmp_path.iterdir()))}"
        with open(path, "wb") as fh:
            fh.truncate(size)
            for at in write_at:
                fh.seek(at)
                fh.write(b"x" * 10)
        fd = os.open(path, os.O_RDONLY)
        try:
            return fsutil.data_end(fd, size)
        finally:
            os.close(fd)

    size = 1 << 20
    assert end_of([], size) in (0, size)                       # all hole (or a file system that cannot say)
    assert 10 <= end_of([0], size) <= size
    assert end_of([size - 10], size) == size
    assert end_of([0, 500_000], size) >= 500_010


def test_consume_queue_files_on_their_own(store_copy, run_cli):
    """What a queue file holds whatever the commitlog says: a unit zeroed between written ones
    is a hole, a unit that is neither valid nor ConsumeQueue.fillPreBlank's is invalid, and so is
    a pre-blank anywhere but at the start of the queue; a file whose units do not go up is still
    checked unit by unit against the records (its units swapped: each at the other's queue offset)."""
    store = store_copy("multifile")
    units = _cq_units("multifile")
    topic, queue_id = units[0]["topic"], units[0]["queueId"]
    mine = sorted((u for u in units if (u["topic"], u["queueId"]) == (topic, queue_id)), key=lambda u: u["offset"])
    assert len(mine) > 300      # two files at least: the second is not the queue's first
    path, _ = _unit_file(store, mine[300], 300)
    _patch(path, 10 * 20, bytes(20))                                   # a hole
    _patch(path, 20 * 20, struct.pack(">qiq", -5, 10, 0))              # neither valid nor a pre-blank
    _patch(path, 0, struct.pack(">qiq", 0, 0x7FFFFFFF, 0))             # a pre-blank, not at the queue's start
    _patch(path, 30 * 20, struct.pack(">qiq", mine[331]["commitLogOffset"], mine[331]["size"], mine[331]["tagsCode"]))
    _patch(path, 31 * 20, struct.pack(">qiq", mine[330]["commitLogOffset"], mine[330]["size"], mine[330]["tagsCode"]))
    result, found, _ = problems(run_cli, store, "--scope", "cq")
    assert result.code == 1
    shown = str(path.relative_to(store))
    got = {(p["kind"], p["fileOffset"]): p for p in found if p["file"] == shown}
    assert set(got) == {("cq-hole", 200), ("invalid-unit", 400), ("invalid-unit", 0),
                        ("unit-wrong-queue-offset", 600), ("unit-wrong-queue-offset", 620)}
    assert got[("invalid-unit", 400)]["found"] == [-5, 10, 0]
    assert got[("invalid-unit", 0)]["found"] == [0, 0x7FFFFFFF, 0]
    assert (got[("unit-wrong-queue-offset", 600)]["expected"], got[("unit-wrong-queue-offset", 600)]["found"]) == (330, 331)


def test_pre_blanks_that_start_a_queue_are_normal(store_copy, run_cli):
    """ConsumeQueue.fillPreBlank fills a queue that starts past 0 with pre-blank units: at the
    start of its first file they are no problem; the units after them are checked as before."""
    store = store_copy("basic")
    path = store / "consumequeue" / "BasicTopic" / "2" / "00000000000000000000"
    for i in range(3):
        _patch(path, i * 20, struct.pack(">qiq", 0, 0x7FFFFFFF, 0))
    _patch(path, 3 * 20, struct.pack(">qiq", 0, 0x7FFFFFFF, 7))   # a tags code: a unit, not a pre-blank
    _patch(path, 5 * 20 + 8, struct.pack(">i", 10))            # and a real problem after them
    _, found, _ = problems(run_cli, store, "--scope", "cq")
    unit_findings = {(p["kind"], p["fileOffset"]) for p in found if p["file"] == "consumequeue/BasicTopic/2/00000000000000000000"}
    assert unit_findings == {("unit-size-mismatch", 60), ("unit-size-mismatch", 100)}
