"""Corrupt input: a clean one-line error and the documented exit code, never a traceback.

Exit codes: 0 ok, 1 problems found in the data, 2 usage error, 3 refused, 4 not a store
or unreadable input.  Every damage is made on a private copy of a real fixture store,
at offsets taken from what RocketMQ itself reported for that store (expected-read.jsonl).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.formats.commitlog import BLANK_MAGIC, MESSAGE_MAGICS

from conftest import REPO, expected_read

# the interpreter running the tests, and the mqtool script installed beside it
PYTHON = Path(sys.executable)
MQTOOL = PYTHON.parent / "mqtool"
CL0 = "commitlog/00000000000000000000"
FILE_SIZE = 65536
LOAD_KINDS = {"bad-file-name", "bad-file-size", "misaligned-file", "file-gap", "file-overlap"}


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("MQTOOL_DEBUG", raising=False)


# -------------------------------------------------------------------------- helpers

class Rec:
    def __init__(self, offset: int, size: int):
        self.offset = offset
        self.size = size

    @property
    def end(self) -> int:
        return self.offset + self.size

    @property
    def file_start(self) -> int:
        return self.offset - self.offset % FILE_SIZE

    @property
    def file_offset(self) -> int:
        return self.offset % FILE_SIZE

    @property
    def file(self) -> str:
        return f"commitlog/{self.file_start:020d}"


_RECORDS: dict[str, list[Rec]] = {}


def records(name: str) -> list[Rec]:
    """The records RocketMQ found in the fixture, in order."""
    if name not in _RECORDS:
        _RECORDS[name] = [Rec(l["offset"], l["size"]) for l in expected_read(name)
                          if l["type"] == "commitlog_record"]
    return _RECORDS[name]


def patch(path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(data)


def garbage(length: int, seed: int) -> bytes:
    """Deterministic random bytes that hold no record or BLANK magic code."""
    rng = random.Random(seed)
    data = rng.randbytes(length)
    for magic in (*MESSAGE_MAGICS, BLANK_MAGIC):
        assert magic.to_bytes(4, "big") not in data
    return data


def error_line(result) -> str:
    """The single stderr line of a failed run, with no traceback anywhere."""
    assert "Traceback" not in result.out + result.err
    assert "internal error" not in result.err
    lines = result.err.splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("mqtool: ")
    return lines[0]


def dump_json(run_cli, *args):
    result = run_cli("dump", *args, "--json", "--no-body")
    assert "Traceback" not in result.out + result.err
    return result, result.json_lines()


def messages(lines) -> list[int]:
    return [l["commitLogOffset"] for l in lines if l["type"] == "message"]


def problems(lines) -> list[dict]:
    return [l for l in lines if l["type"] == "problem"]


def first_problem_prefix(lines) -> str:
    """What the stderr line must start with: the first problem's file and byte offset."""
    for line in lines:
        if line["type"] == "problem":
            if line["kind"] in LOAD_KINDS:
                return f"mqtool: {line['file']}: {line['kind']} ("
            return f"mqtool: {line['file']} at byte {line['fileOffset']}: {line['kind']} ("
        if line["type"] == "message" and not line["ok"]:
            return f"mqtool: {line['file']} at byte {line['fileOffset']}: {line['problems'][0]['kind']} ("
    raise AssertionError("no problem in the output")


def assert_problems_exit(result, lines):
    assert result.code == 1
    line = error_line(result)
    assert line.startswith(first_problem_prefix(lines)), line
    count = sum(1 for l in lines if l["type"] == "problem") + \
        sum(len(l.get("problems", [])) for l in lines if l["type"] == "message")
    assert f"{count} problem(s) found" in line


def info_json(run_cli, store):
    """info's JSON; it exits 1 with its first problem on stderr when it lists any."""
    result = run_cli("info", store, "--json")
    assert "Traceback" not in result.out + result.err
    (info,) = result.json_lines()
    if info["problems"]:
        assert result.code == 1
        assert result.err.startswith(f"mqtool: {info['problems'][0]}")
    else:
        assert result.code == 0, result.err
        assert result.err == ""
    return info


# ------------------------------------------------------- commitlog cut mid-record

def test_commitlog_file_cut_mid_record_in_the_middle_of_the_log(store_copy, run_cli):
    store = store_copy("multifile")
    all_recs = records("multifile")
    in_file = [r for r in all_recs if r.file_start == 2 * FILE_SIZE]
    cut_rec = next(r for r in in_file[4:] if r.size >= 100)
    cut_at = cut_rec.file_offset + cut_rec.size // 2
    os.truncate(store / cut_rec.file, cut_at)

    result, lines = dump_json(run_cli, store, "commitlog")
    found = problems(lines)
    assert [(p["kind"], p["file"]) for p in found] == [("bad-file-size", cut_rec.file), ("truncated", cut_rec.file)]
    assert f"file is {cut_at} bytes, expected {FILE_SIZE}" in found[0]["message"]
    damage = found[1]
    assert damage["fileOffset"] == cut_rec.file_offset and damage["offset"] == cut_rec.offset
    assert damage["skippedBytes"] == cut_at - cut_rec.file_offset
    assert damage["message"] == (f"file truncated: it ends {cut_at - cut_rec.file_offset} bytes into the record "
                                 f"here (totalSize {cut_rec.size})")
    # everything else, including every record of the 41 later files, is still shown
    lost = {r.offset for r in in_file if r.offset >= cut_rec.offset}
    assert messages(lines) == [r.offset for r in all_recs if r.offset not in lost]
    assert_problems_exit(result, lines)
    assert error_line(result).startswith(f"mqtool: {cut_rec.file}: bad-file-size")

    info = info_json(run_cli, store)
    assert info["commitlog"]["oddFiles"] == [cut_rec.file]      # its path in the store
    end = next(l for l in expected_read("multifile") if l["type"] == "commitlog_end")
    assert info["commitlog"]["maxOffset"] == end["maxPhyOffset"]


@pytest.mark.parametrize("configured", [True, False])
def test_single_commitlog_file_cut_mid_record(configured, store_copy, run_cli):
    store = store_copy("basic")
    recs = records("basic")
    cut_rec = recs[20]
    cut_at = cut_rec.offset + 100
    os.truncate(store / CL0, cut_at)
    extra = ["--set", f"mappedFileSizeCommitLog={FILE_SIZE}"] if configured else []

    result, lines = dump_json(run_cli, store, "commitlog", *extra)
    found = problems(lines)
    damage = found[-1]
    assert (damage["kind"], damage["file"], damage["fileOffset"]) == ("truncated", CL0, cut_rec.offset)
    assert damage["message"].startswith("file truncated: it ends 100 bytes into the record here")
    assert damage["skippedBytes"] == 100
    assert messages(lines) == [r.offset for r in recs[:20]]
    assert next(l for l in lines if l["type"] == "end")["offset"] == cut_rec.offset
    assert lines[-1]["type"] == "summary" and lines[-1]["endOffset"] == cut_rec.offset
    assert_problems_exit(result, lines)
    if configured:  # the configured size shows the file is short
        assert [p["kind"] for p in found] == ["bad-file-size", "truncated"]
        assert error_line(result).startswith(f"mqtool: {CL0}: bad-file-size")
    else:  # a lone file's size is read off the file itself
        assert [p["kind"] for p in found] == ["truncated"]
        assert error_line(result).startswith(f"mqtool: {CL0} at byte {cut_rec.offset}: truncated")
        # info does not pass it: where the data ends, a record the file's end cuts off
        info = info_json(run_cli, store)
        assert info["problems"][0].startswith(f"{CL0} at byte {cut_rec.offset}: file truncated")
        verify = run_cli("verify-crc", store)
        assert verify.code == 1 and f"{CL0} at byte {cut_rec.offset}: truncated" in verify.err


def test_cut_commitlog_in_table_mode_names_the_file_once(store_copy, run_cli):
    store = store_copy("basic")
    cut_rec = records("basic")[20]
    os.truncate(store / CL0, cut_rec.offset + 100)
    result = run_cli("dump", store, "commitlog", "--no-body")
    assert result.code == 1
    assert "Traceback" not in result.out + result.err
    assert "file truncated" in result.out
    # the human summary note, then the one error line naming the file and offset
    err = result.err.splitlines()
    assert [l for l in err if l.startswith("mqtool: ")] == [err[-1]]
    assert err[-1].startswith(f"mqtool: {CL0} at byte {cut_rec.offset}: truncated")


# ------------------------------------------------------------ garbage in the middle

def test_garbage_over_whole_records_resyncs_at_the_next_record(store_copy, run_cli):
    store = store_copy("basic")
    recs = records("basic")
    start, stop = recs[10].offset, recs[12].offset + recs[12].size // 2   # 10, 11 and half of 12
    patch(store / CL0, start, garbage(stop - start, 1))

    result, lines = dump_json(run_cli, store, "commitlog")
    (damage,) = problems(lines)
    assert damage["file"] == CL0 and damage["fileOffset"] == start and damage["offset"] == start
    assert damage["skippedBytes"] == recs[13].offset - start
    assert f"next valid record at {recs[13].offset}" in damage["message"]
    after = lines[lines.index(damage) + 1]
    assert after["type"] == "message" and after["commitLogOffset"] == recs[13].offset and after["ok"]
    assert messages(lines) == [r.offset for i, r in enumerate(recs) if i not in (10, 11, 12)]
    assert_problems_exit(result, lines)
    assert error_line(result).startswith(f"mqtool: {CL0} at byte {start}: ")


def test_garbage_inside_a_record_of_a_later_file(store_copy, run_cli):
    store = store_copy("multifile")
    all_recs = records("multifile")
    in_file = [r for r in all_recs if r.file_start == 7 * FILE_SIZE]
    hit = in_file[3]
    start = hit.offset + 37                      # inside the damaged record's header
    stop = in_file[5].offset + 11                # into the middle of a later record's header
    patch(store / hit.file, start - hit.file_start, garbage(stop - start, 2))

    result, lines = dump_json(run_cli, store, "commitlog")
    (damage,) = problems(lines)
    resume = in_file[6]
    assert (damage["file"], damage["fileOffset"]) == (hit.file, hit.file_offset)   # where the walk lost sync
    assert damage["skippedBytes"] == resume.offset - hit.offset
    assert messages(lines) == [r.offset for r in all_recs if r not in in_file[3:6]]
    assert_problems_exit(result, lines)
    assert error_line(result).startswith(f"mqtool: {hit.file} at byte {hit.file_offset}: ")


# ----------------------------------------------------------------- flipped bytes

@pytest.mark.parametrize("at, mask, kind", [
    (1, 0x01, "bad-size"),         # totalSize + 65536: runs past the file
    (3, 0x01, "bad-length"),       # totalSize off by one: disagrees with the parts
    (4, 0xFF, "bad-magic"),        # magic code
    (84, 0x40, "bad-length"),      # bodyLength (IPv4 hosts)
])
def test_flipped_header_byte(at, mask, kind, store_copy, run_cli):
    store = store_copy("basic")
    recs = records("basic")
    hit = recs[7]
    data = (store / CL0).read_bytes()
    patch(store / CL0, hit.offset + at, bytes([data[hit.offset + at] ^ mask]))

    result, lines = dump_json(run_cli, store, "commitlog")
    (damage,) = problems(lines)
    assert (damage["kind"], damage["fileOffset"]) == (kind, hit.offset)
    assert damage["skippedBytes"] == hit.size
    assert messages(lines) == [r.offset for r in recs if r is not hit]
    assert_problems_exit(result, lines)
    assert error_line(result).startswith(f"mqtool: {CL0} at byte {hit.offset}: {kind} (1 problem(s) found")


@pytest.mark.parametrize("at, kind", [(31, "offset-mismatch"), (88 + 5, "crc-mismatch")])
def test_flipped_byte_inside_a_sound_record_is_flagged_on_the_record(at, kind, store_copy, run_cli):
    store = store_copy("basic")
    recs = records("basic")
    hit = recs[30]
    data = (store / CL0).read_bytes()
    patch(store / CL0, hit.offset + at, bytes([data[hit.offset + at] ^ 0x01]))
    result, lines = dump_json(run_cli, store, "commitlog")
    assert problems(lines) == []
    assert messages(lines) == [r.offset for r in recs]
    bad = [l for l in lines if l["type"] == "message" and not l["ok"]]
    assert [(b["commitLogOffset"], [p["kind"] for p in b["problems"]]) for b in bad] == [(hit.offset, [kind])]
    assert_problems_exit(result, lines)
    assert error_line(result).startswith(f"mqtool: {CL0} at byte {hit.offset}: {kind} (")


# ------------------------------------------------------------------ zero-filled holes

def test_zero_hole_over_whole_records(store_copy, run_cli):
    store = store_copy("basic")
    recs = records("basic")
    patch(store / CL0, recs[3].offset, bytes(recs[5].offset - recs[3].offset))   # records 3 and 4
    result, lines = dump_json(run_cli, store, "commitlog")
    (gap,) = problems(lines)
    assert (gap["kind"], gap["fileOffset"]) == ("zero-gap", recs[3].offset)
    assert gap["skippedBytes"] == recs[5].offset - recs[3].offset
    # the record right after the hole starts with zero bytes too (its totalSize): it is kept
    assert messages(lines) == [r.offset for i, r in enumerate(recs) if i not in (3, 4)]
    assert_problems_exit(result, lines)
    assert error_line(result).startswith(f"mqtool: {CL0} at byte {recs[3].offset}: zero-gap (")


def test_zero_hole_across_record_boundaries(store_copy, run_cli):
    store = store_copy("basic")
    recs = records("basic")
    start, stop = recs[7].offset + 50, recs[8].offset + 30
    patch(store / CL0, start, bytes(stop - start))
    result, lines = dump_json(run_cli, store, "commitlog")
    (damage,) = problems(lines)
    assert damage["fileOffset"] == recs[7].offset
    assert damage["skippedBytes"] == recs[9].offset - recs[7].offset
    assert messages(lines) == [r.offset for i, r in enumerate(recs) if i not in (7, 8)]
    assert_problems_exit(result, lines)


def test_zero_hole_from_a_boundary_into_a_record(store_copy, run_cli):
    store = store_copy("basic")
    recs = records("basic")
    start, stop = recs[3].offset, recs[4].offset + 100
    patch(store / CL0, start, bytes(stop - start))
    result, lines = dump_json(run_cli, store, "commitlog")
    found = problems(lines)
    assert found[0]["kind"] == "zero-gap" and found[0]["fileOffset"] == start
    assert sum(p["skippedBytes"] for p in found) == recs[5].offset - start
    assert messages(lines) == [r.offset for i, r in enumerate(recs) if i not in (3, 4)]
    assert_problems_exit(result, lines)


def test_zero_hole_at_the_start_of_a_later_file(store_copy, run_cli):
    store = store_copy("multifile")
    all_recs = records("multifile")
    in_file = [r for r in all_recs if r.file_start == 5 * FILE_SIZE]
    first = in_file[0]
    assert first.file_offset == 0
    patch(store / first.file, 0, bytes(in_file[2].file_offset))
    result, lines = dump_json(run_cli, store, "commitlog")
    (gap,) = problems(lines)
    assert (gap["kind"], gap["file"], gap["fileOffset"]) == ("zero-gap", first.file, 0)
    assert gap["skippedBytes"] == in_file[2].file_offset
    assert messages(lines) == [r.offset for r in all_recs if r not in in_file[:2]]
    assert_problems_exit(result, lines)


# -------------------------------------------------- random files named like commitlog

def test_random_file_named_like_the_next_commitlog_file(store_copy, run_cli):
    store = store_copy("basic")
    junk = garbage(FILE_SIZE, 3)
    (store / "commitlog" / f"{FILE_SIZE:020d}").write_bytes(junk)
    result, lines = dump_json(run_cli, store, "commitlog")
    assert messages(lines) == [r.offset for r in records("basic")]
    found = problems(lines)
    end = records("basic")[-1].end
    assert [(p["kind"], p["file"], p["fileOffset"]) for p in found] == [
        ("missing-blank", CL0, end), ("bad-magic", f"commitlog/{FILE_SIZE:020d}", 0)]
    assert found[1]["skippedBytes"] == len(junk.rstrip(b"\0"))
    assert_problems_exit(result, lines)

    info = info_json(run_cli, store)
    assert info["commitlog"]["files"] == 2
    assert info["commitlog"]["problemsInLastFile"] >= 1


def test_random_short_file_named_like_a_commitlog_file(store_copy, run_cli):
    store = store_copy("basic")
    name = f"commitlog/{FILE_SIZE:020d}"
    (store / name).write_bytes(garbage(1000, 4))
    result, lines = dump_json(run_cli, store, "commitlog")
    kinds = [(p["kind"], p["file"]) for p in problems(lines)]
    assert kinds[0] == ("bad-file-size", name)
    assert ("missing-blank", CL0) in kinds
    assert any(f == name and k not in LOAD_KINDS for k, f in kinds)
    assert messages(lines) == [r.offset for r in records("basic")]
    assert_problems_exit(result, lines)


def test_commitlog_file_replaced_by_random_bytes(store_copy, run_cli):
    store = store_copy("basic")
    (store / CL0).write_bytes(garbage(FILE_SIZE, 5))
    result, lines = dump_json(run_cli, store, "commitlog")
    assert messages(lines) == []
    (damage,) = problems(lines)
    assert (damage["file"], damage["fileOffset"]) == (CL0, 0)
    assert_problems_exit(result, lines)
    info = info_json(run_cli, store)
    assert info["commitlog"]["maxOffset"] == 0 and info["commitlog"]["problemsInLastFile"] == 1


# ------------------------------------------------------------------- checkpoint

@pytest.mark.parametrize("size", [0, 10, 23])
def test_checkpoint_too_short_to_read(size, store_copy, run_cli):
    store = store_copy("basic")
    os.truncate(store / "checkpoint", size)
    expected = (f"mqtool: {store / 'checkpoint'} at byte {size}: checkpoint is {size} bytes; "
                "it needs at least 24")
    for args in (("dump", store, "checkpoint"), ("dump", store / "checkpoint"),
                 ("dump", store, "checkpoint", "--json")):
        result = run_cli(*args)
        assert result.code == 4
        assert error_line(result) == expected
        assert result.out == ""
    info = info_json(run_cli, store)
    assert info["checkpoint"]["error"] == expected[len("mqtool: "):]


def test_checkpoint_shorter_than_a_page(store_copy, run_cli):
    store = store_copy("basic")
    os.truncate(store / "checkpoint", 100)
    result, lines = dump_json(run_cli, store, "checkpoint")
    (line,) = lines
    assert line["fileSize"] == 100 and line["problem"] == "checkpoint is 100 bytes, expected 4096"
    pre = next(l for l in expected_read("basic") if l["type"] == "pre")
    for field in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
        assert line[field] == pre["checkpoint"][field]
    assert result.code == 1
    assert error_line(result).startswith("mqtool: checkpoint: bad-file-size (1 problem(s) found")


def test_checkpoint_with_impossible_times(store_copy, run_cli):
    store = store_copy("basic")
    patch(store / "checkpoint", 0, (1 << 62).to_bytes(8, "big") + (-(1 << 62)).to_bytes(8, "big", signed=True)
          + ((1 << 63) - 1).to_bytes(8, "big"))
    result, (line,) = dump_json(run_cli, store, "checkpoint")
    assert result.code == 0 and result.err == ""
    assert line["physicMsgTimestamp"] == 1 << 62 and line["physicMsgTimestampIso"] is None
    for args in (("dump", store, "checkpoint"), ("info", store)):
        result = run_cli(*args)
        assert result.code == 0, result.err
        assert "Traceback" not in result.out + result.err and "internal error" not in result.err
        assert str(1 << 62) in result.out


# ------------------------------------------------------------------------ index

def test_lone_index_file_shorter_than_its_header(store_copy, run_cli):
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    os.truncate(path, 20)
    result, lines = dump_json(run_cli, store, "index")
    (problem,) = lines
    assert problem["type"] == "problem" and problem["kind"] == "bad-index-file"
    assert problem["file"] == f"index/{path.name}" and problem["fileOffset"] == 0
    assert "shorter than its 40-byte header" in problem["message"]
    assert result.code == 1
    assert error_line(result).startswith(f"mqtool: index/{path.name} at byte 0: bad-index-file (")
    info = info_json(run_cli, store)
    (header,) = info["indexFiles"]
    assert header["size"] == 20 and "shorter than its 40-byte header" in header["error"]


def test_one_of_many_index_files_shorter_than_its_header(store_copy, run_cli):
    store = store_copy("multifile")
    pre = next(l for l in expected_read("multifile") if l["type"] == "pre")
    victim = pre["indexFiles"][2]["name"]
    os.truncate(store / "index" / victim, 39)
    result, lines = dump_json(run_cli, store, "index")
    headers = [l["file"] for l in lines if l["type"] == "index_header"]
    assert headers == [f"index/{f['name']}" for f in pre["indexFiles"] if f["name"] != victim]
    entries = [l for l in lines if l["type"] == "index_entry"]
    assert len(entries) == sum(f["indexCount"] - 1 for f in pre["indexFiles"] if f["name"] != victim)
    (problem,) = problems(lines)
    assert problem["file"] == f"index/{victim}"
    assert result.code == 1
    assert error_line(result).startswith(f"mqtool: index/{victim} at byte 0: bad-index-file (")


def test_index_file_cut_inside_its_entries(store_copy, run_cli):
    store = store_copy("multifile")
    pre = next(l for l in expected_read("multifile") if l["type"] == "pre")
    victim = next(f for f in pre["indexFiles"] if f["indexCount"] > 300)
    os.truncate(store / "index" / victim["name"], 5000)
    result, lines = dump_json(run_cli, store, "index")
    header = next(l for l in lines if l["type"] == "index_header" and l["file"] == f"index/{victim['name']}")
    assert header["problem"] == "file is 5000 bytes, expected 8440"
    assert header["indexCount"] == victim["indexCount"]
    shown = [l["entry"] for l in lines if l["type"] == "index_entry" and l["file"] == header["file"]]
    whole = (5000 - 40 - 100 * 4) // 20          # entries that still fit in the file
    assert shown == list(range(1, whole))
    assert result.code == 1
    assert error_line(result).startswith(f"mqtool: index/{victim['name']}: bad-file-size (")
    # the table view of the same store works too
    table = run_cli("dump", store, "index")
    assert table.code == 1 and "Traceback" not in table.out + table.err


# ----------------------------------------------------------------- consume queues

def test_consume_queue_file_cut_inside_a_unit(store_copy, run_cli):
    store = store_copy("basic")
    rel = "consumequeue/BasicTopic/1/00000000000000000000"
    os.truncate(store / rel, 250)                              # 12 units and half of the 13th
    result, lines = dump_json(run_cli, store, "consumequeue")
    expected = [l for l in expected_read("basic") if l["type"] == "cq_unit"]
    units = [l for l in lines if l["type"] == "cq_unit"]
    key = lambda l: (l["queueId"], l["offset"])  # noqa: E731
    assert sorted(map(key, units)) == sorted(key(u) for u in expected
                                             if not (u["queueId"] == 1 and u["offset"] >= 12))
    (problem,) = problems(lines)
    assert (problem["kind"], problem["file"]) == ("bad-file-size", rel)
    assert problem["message"] == "file is 250 bytes, expected 6000"
    assert result.code == 1
    assert error_line(result).startswith(f"mqtool: {rel}: bad-file-size (")
    info = info_json(run_cli, store)
    queue = next(q for q in info["queues"] if q["queueId"] == 1)
    assert (queue["minOffset"], queue["maxOffset"]) == (0, 12)
    alone, alone_lines = dump_json(run_cli, store / rel)     # the file on its own: whole units only
    assert alone.code in (0, 1) and not alone.err.count("\n") > 1
    assert [l["offset"] for l in alone_lines if l["type"] == "cq_unit"] == list(range(12))


def test_consume_queue_file_longer_than_configured(store_copy, run_cli):
    store = store_copy("basic")
    rel = "consumequeue/BasicTopic/2/00000000000000000000"
    with open(store / rel, "ab") as fh:
        fh.write(bytes(100))
    result, lines = dump_json(run_cli, store, "consumequeue")
    (problem,) = problems(lines)
    assert (problem["kind"], problem["file"]) == ("bad-file-size", rel)
    expected = [l for l in expected_read("basic") if l["type"] == "cq_unit"]
    assert len([l for l in lines if l["type"] == "cq_unit"]) == len(expected)
    assert result.code == 1
    assert error_line(result).startswith(f"mqtool: {rel}: bad-file-size (")


def test_consume_queue_unit_overwritten(store_copy, run_cli):
    store = store_copy("basic")
    rel = "consumequeue/BasicTopic/0/00000000000000000000"
    patch(store / rel, 5 * 20, b"\xff" * 20)                 # offset -1, size -1
    result, lines = dump_json(run_cli, store, "consumequeue")
    q0 = [l for l in lines if l["type"] == "cq_unit" and l["queueId"] == 0]
    assert [l.get("problem") for l in q0[4:7]] == [None, "invalid", "after-invalid"]
    assert result.code == 1
    assert error_line(result).startswith(f"mqtool: {rel} at byte 100: invalid unit (")


# ------------------------------------------------------- not a store, missing paths

def test_directory_that_is_not_a_store(tmp_path, run_cli):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "sub").mkdir()
    for args in (("dump", tmp_path, "commitlog"), ("info", tmp_path), ("info", tmp_path, "--json")):
        result = run_cli(*args)
        assert result.code == 4
        assert error_line(result) == (f"mqtool: {tmp_path}: not a RocketMQ store: no commitlog/, "
                                      "consumequeue/, index/ or checkpoint here")
        assert result.out == ""


def test_regular_file_given_as_a_store(tmp_path, run_cli):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    result = run_cli("info", path)
    assert result.code == 4
    assert error_line(result) == f"mqtool: {path}: not a directory (a store is a directory)"


def test_missing_path(tmp_path, run_cli):
    missing = tmp_path / "no-such-store"
    for args, message in ((("dump", missing, "commitlog"), "no such store directory"),
                          (("dump", missing), "no such store directory or file"),
                          (("info", missing), "no such store directory")):
        result = run_cli(*args)
        assert result.code == 4
        assert error_line(result) == f"mqtool: {missing}: {message}"


# ------------------------------------------------------------------ file names

def test_commitlog_file_name_that_is_not_an_offset(store_copy, run_cli):
    store = store_copy("basic")
    (store / "commitlog" / "12345").write_bytes(garbage(100, 6))
    result, lines = dump_json(run_cli, store, "commitlog")
    (problem,) = problems(lines)
    assert (problem["kind"], problem["file"]) == ("bad-file-name", "commitlog/12345")
    assert messages(lines) == [r.offset for r in records("basic")]
    assert result.code == 1
    assert error_line(result).startswith("mqtool: commitlog/12345: bad-file-name (")
    assert "commitlog/12345" in info_json(run_cli, store)["commitlog"]["oddFiles"]


def test_a_file_is_named_by_its_path_in_the_store_or_as_given_outside_it(store_copy, run_cli):
    """One rule shows a path (storage/fsutil.shown_path): relative to the store, and as given outside
    it (a commitlog in storePathCommitLog); dump, info and verify-crc name files by it."""
    from mqtool.storage.fsutil import relative_paths, shown_path

    store = store_copy("basic")
    outside = store.parent / "elsewhere" / "commitlog"
    outside.parent.mkdir()
    shutil.move(store / "commitlog", outside)
    (outside / "12345").write_bytes(garbage(100, 6))
    where = ("--set", f"storePathCommitLog={outside}")
    result, lines = dump_json(run_cli, store, "commitlog", *where)
    (problem,) = problems(lines)
    assert (problem["kind"], problem["file"]) == ("bad-file-name", str(outside / "12345"))
    info = run_cli("info", store, "--json", *where).json_lines()[0]
    assert info["commitlog"]["oddFiles"] == [str(outside / "12345")]
    verify = run_cli("verify-crc", store, "--json", *where)
    assert {l["file"] for l in verify.json_lines() if l["type"] == "problem"} == {str(outside / "12345")}
    for show in (relative_paths(store), lambda path: shown_path(path, store)):
        assert show(store / "consumequeue" / "T" / "0") == "consumequeue/T/0"
        assert show(outside / "12345") == str(outside / "12345") == shown_path(outside / "12345", None)


@pytest.mark.parametrize("name", [f"{FILE_SIZE:020d}\n", "０" * 20, f"{FILE_SIZE:019d}"])
def test_names_that_only_look_like_offsets_are_not_loaded(name, store_copy, run_cli):
    store = store_copy("basic")
    (store / "commitlog" / name).write_bytes(garbage(FILE_SIZE, 7))
    result, lines = dump_json(run_cli, store, "commitlog")
    assert [(p["kind"], p["file"]) for p in problems(lines)] == [("bad-file-name", f"commitlog/{name}")]
    assert messages(lines) == [r.offset for r in records("basic")]
    assert result.code == 1


def test_dumping_a_file_whose_kind_cannot_be_told(store_copy, run_cli):
    store = store_copy("basic")
    path = store / "commitlog" / "12345"
    path.write_bytes(b"x" * 100)
    result = run_cli("dump", path)
    assert result.code == 2
    assert error_line(result).startswith(f"mqtool: cannot tell what kind of file {path} is; give KIND")


# ------------------------------------------------------------------------- usage

@pytest.mark.parametrize("args, message", [
    (["dump", "{store}", "commitlog", "--bogus"], "No such option '--bogus'"),
    (["dump", "{store}"], "give KIND after STORE: commitlog, consumequeue, index, checkpoint, config"),
    (["dump"], "Missing argument 'STORE|FILE'"),
    (["dump", "{store}", "bogus"], "'bogus' is not one of 'commitlog', 'consumequeue', 'index'"),
    (["dump", "{store}", "commitlog", "--limit", "-1"], "Invalid value for '--limit'"),
    (["dump", "{store}", "commitlog", "--since", "yesterday"], "--since 'yesterday'"),
    (["dump", "{store}", "commitlog", "--set", "novalue"], "--set 'novalue': expected KEY=VALUE"),
    (["info"], "Missing argument 'STORE'"),
    (["frobnicate"], "No such command 'frobnicate'"),
])
def test_bad_usage(args, message, extracted, run_cli):
    store = extracted("basic")
    result = run_cli(*[a.format(store=store) for a in args])
    assert result.code == 2
    line = error_line(result)
    assert message in line, line
    assert result.out == ""


# --------------------------------------------------------------------- config JSON

def test_malformed_consumer_offset_json(store_copy, run_cli):
    """A damaged config file is damage in the data (exit 1), named with its byte offset; the dump
    goes on (to the .bak a broker would fall back to)."""
    store = store_copy("basic")
    path = store / "config" / "consumerOffset.json"
    raw = '{\n\t"offsetTable":{\n\t\t"ΩTopic@Ελλάδα":{0:12,1:3\n\t\t},\n\t\t"x": ;garbage'.encode("utf-8")
    path.write_bytes(raw)
    (store / "config" / "consumerOffset.json.bak").write_text('{"offsetTable":{"t@g":{0:4}}}')
    bad_at = raw.index(b";")                      # a byte offset; the text before it is not ASCII
    result = run_cli("dump", store, "config", "--json")
    assert result.code == 1
    assert error_line(result) == (f"mqtool: config/consumerOffset.json at byte {bad_at}: bad-config-file "
                                  "(1 problem(s) found; see the entries marked above)")
    problem, *rest = result.json_lines()
    assert (problem["kind"], problem["fileOffset"], problem["message"]) == \
        ("bad-config-file", bad_at, "not fastjson: unexpected ';'")
    assert {"type": "config", "file": "config/consumerOffset.json.bak",
            "content": {"offsetTable": {"t@g": {"0": 4}}}} in rest
    single = run_cli("dump", path, "--json")
    assert single.code == 1 and f"{path} at byte {bad_at}: bad-config-file" in error_line(single)


@pytest.mark.parametrize("raw, what", [
    (b'{"offsetTable":{"a\xff@g":{}}}', "not UTF-8"),
    (b"[" * 5000, "not fastjson: nested too deeply"),
    (b"{}}", "not fastjson: trailing characters"),
    (b'{"offsetTable":{"t@g":{0:1,', "not fastjson: expected a key"),
])
def test_unreadable_config_json(raw, what, store_copy, run_cli):
    store = store_copy("basic")
    path = store / "config" / "consumerOffset.json"
    path.write_bytes(raw)
    result = run_cli("dump", store, "config", "--json")
    assert result.code == 1
    problem = result.json_lines()[0]
    assert problem["kind"] == "bad-config-file" and problem["file"] == "config/consumerOffset.json"
    assert problem["message"].startswith(what), problem
    offset = problem["fileOffset"]
    assert 0 <= offset <= len(raw)
    if what == "not UTF-8":
        assert offset == raw.index(b"\xff")
    assert f"config/consumerOffset.json at byte {offset}: bad-config-file" in error_line(result)


# ---------------------------------------------------- data that looks like markup

def test_markup_in_message_text_is_shown_as_text(store_copy, run_cli):
    store = store_copy("basic")
    data = bytearray((store / CL0).read_bytes())
    at = data.index(b"TAGS\x01TagA") + 5
    data[at:at + 4] = b"[/x]"                    # the CRC covers the body only: still a sound record
    (store / CL0).write_bytes(bytes(data))
    result = run_cli("dump", store, "commitlog", "--no-body")
    assert result.code == 0, result.err
    assert "[/x]" in result.out
    assert "Traceback" not in result.out + result.err


def test_markup_in_file_names_and_paths_is_shown_as_text(tmp_path, extracted, run_cli):
    store = tmp_path / "odd[/dir]" / "store"
    shutil.copytree(extracted("basic"), store)
    (store / "commitlog" / "[red]x").write_bytes(b"")
    os.truncate(store / "checkpoint", 10)
    result = run_cli("info", store)
    assert result.code == 1, result.err          # the odd file and the short checkpoint
    assert "[red]x" in result.out and "odd[/dir]" in result.out
    assert result.err.startswith("mqtool: commitlog/[red]x: ") and len(result.err.splitlines()) == 1
    assert "Traceback" not in result.out + result.err


# ------------------------------------------------------------- random damage (fuzz)

@pytest.mark.slow
def test_random_damage_never_loses_an_undamaged_record(store_copy, run_cli, extracted):
    """Any damage to the commitlog: exit 0 or 1, one clean error line, nothing invented, and
    every record that lies wholly outside the damaged span still shown (the walk resyncs)."""
    store = store_copy("basic")
    pristine = (extracted("basic") / CL0).read_bytes()
    all_recs = records("basic")

    @settings(max_examples=40, deadline=None)
    @given(start=st.integers(0, 12000), length=st.integers(1, 700),
           fill=st.sampled_from(["zero", "ones", "random"]), seed=st.integers(0, 1 << 30))
    def check(start, length, fill, seed):
        fills = {"zero": bytes(length), "ones": b"\xff" * length,
                 "random": random.Random(seed).randbytes(length)}
        damaged = bytearray(pristine)
        damaged[start:start + length] = fills[fill]
        (store / CL0).write_bytes(bytes(damaged[:len(pristine)]))

        result, lines = dump_json(run_cli, store, "commitlog")
        assert result.code in (0, 1)
        if result.code == 0:
            assert result.err == ""
        else:
            assert_problems_exit(result, lines)
        shown = set(messages(lines))
        assert shown <= {r.offset for r in all_recs}                # nothing invented
        for r in all_recs:
            if r.end <= start or r.offset >= start + length:
                assert r.offset in shown, (r.offset, start, length, fill)
        info = run_cli("info", store, "--json")
        assert info.code in (0, 1)     # 1: the damage ends the data, and info says so (issue 33)
        if info.code == 0:
            assert info.err == ""
        else:
            assert info.err.count("\n") == 1 and info.err.startswith("mqtool: ")

    check()


KIND_FILES = {
    "commitlog": CL0,
    "consumequeue": "consumequeue/BasicTopic/2/00000000000000000000",
    "index": "index/20261122000510622",
    "checkpoint": "checkpoint",
    "config": "config/delayOffset.json",
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(KIND_FILES))
def test_any_content_in_any_file_gives_a_clean_outcome(kind, store_copy, run_cli, extracted):
    store = store_copy("basic")
    rel = KIND_FILES[kind]
    original = (extracted("basic") / rel).read_bytes()

    @settings(max_examples=25, deadline=None)
    @given(content=st.one_of(
        st.binary(max_size=300),
        st.integers(0, len(original)).map(lambda n: original[:n]),                       # cut short
        st.tuples(st.integers(0, max(len(original) - 1, 0)), st.binary(min_size=1, max_size=64)).map(
            lambda t: original[:t[0]] + t[1] + original[t[0] + len(t[1]):]),           # overwritten
    ), table=st.booleans())
    def check(content, table):
        (store / rel).write_bytes(content)
        args = ["dump", store, kind] + ([] if table else ["--json"])
        result = run_cli(*args)
        assert result.code in (0, 1, 4), result.err
        assert "Traceback" not in result.out + result.err and "internal error" not in result.err
        if result.code:
            assert result.err.splitlines()[-1].startswith("mqtool: ")
            assert len([l for l in result.err.splitlines() if l.startswith("mqtool: ")]) == 1
        info = run_cli("info", store, *([] if table else ["--json"]))
        assert info.code in (0, 1, 4), info.err
        if info.code:
            assert len([l for l in info.err.splitlines() if l.startswith("mqtool: ")]) == 1
        assert "Traceback" not in info.out + info.err and "internal error" not in info.err

    check()


# ------------------------------------------------------------- real subprocesses

def test_head_closing_the_pipe_is_silent(store_copy):
    store = store_copy("multifile")
    proc = subprocess.run(["bash", "-c", f"set -o pipefail; '{MQTOOL}' dump '{store}' commitlog --json | head -1"],
                          capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    assert len(lines) == 1
    first = json.loads(lines[0])
    assert first["type"] == "message" and first["commitLogOffset"] == 0
    assert proc.stderr == ""
    assert proc.returncode == 141                    # mqtool's exit status: EPIPE, quietly


def test_corrupt_store_in_a_real_process(store_copy):
    store = store_copy("basic")
    recs = records("basic")
    patch(store / CL0, recs[10].offset, garbage(recs[11].offset - recs[10].offset, 8))
    proc = subprocess.run([str(MQTOOL), "dump", str(store), "commitlog", "--json", "--no-body"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.splitlines() == [
        f"mqtool: {CL0} at byte {recs[10].offset}: bad-magic (1 problem(s) found; see the entries marked above)"]
    proc = subprocess.run([str(MQTOOL), "info", str(store / "nope")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr == f"mqtool: {store / 'nope'}: no such store directory\n"


def test_python_dash_m_mqtool():
    proc = subprocess.run([str(PYTHON), "-m", "mqtool", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: ")
    assert "dump" in proc.stdout and "info" in proc.stdout and "Exit codes" in proc.stdout
    assert proc.stderr == ""
    proc = subprocess.run([str(PYTHON), "-m", "mqtool", "dump"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["mqtool: Missing argument 'STORE|FILE'. (try 'mqtool dump --help')"]


def test_json_output_stays_json_for_numbers_json_cannot_hold(store_copy, run_cli):
    store = store_copy("basic")
    (store / "config").mkdir(exist_ok=True)
    path = store / "config" / "delayOffset.json"
    path.write_text('{"offsetTable":{1:1e400}}')
    result = run_cli("dump", path, "--json")
    assert result.code == 0, result.err
    lines = [json.loads(line) for line in result.out.splitlines() if line.strip()]   # strict JSON
    assert "Infinity" not in result.out and lines
