"""Consume queue extensions (enableConsumeQueueExt): the tags field of a unit holds the address of
an ext unit in consumequeue_ext/<topic>/<queueId>/.  The stores are built from the Java source's
facts (ConsumeQueueExt.java, ConsumeQueue.putMessagePositionInfoWrapper, rocketmq-all-4.9.8 and
5.3.3): the records and plain consume queues by `mqtool append`, then every unit's tags code moved
into an ext unit written here with struct (size 20, tagsCode, msgStoreTime, bitMapSize 0), its
address (offset + Long.MIN_VALUE) put in its place; a unit that does not fit before a file's last
4 bytes goes to the next file after a short -1.  Nothing here uses mqtool's ext code.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from helpers.timergen import string_hash

CQ_FILE = 200
EXT_FILE = 200        # 9 ext units a file: 180 bytes, then 16 < 20 + 4 left
UNIT = struct.Struct(">qiq")
EXT = struct.Struct(">hqqh")
STORE_TIME = 1795300000000


def ext_store(tmp_path: Path, run_cli, *fmt, count: int = 40, offsets: list | None = None) -> tuple[Path, dict]:
    """A store of `count` messages in three queues with its consume queues moved to extension units.
    Returns {relative path: bytes} of the consume queue and ext files as a broker writes them;
    the records' commitlog offsets are added to `offsets`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = tmp_path / "store"
    spec = tmp_path / "spec.jsonl"
    spec.write_text("".join(json.dumps({"topic": "Orders" if i % 4 else "Audit", "queueId": i % 2,
                                        "tags": f"T{i % 5}", "body": f"m{i}", "storeTimestamp": STORE_TIME + i})
                            + "\n" for i in range(count)))
    result = run_cli("append", store, "--input", spec, "--json", "--set", f"mappedFileSizeConsumeQueue={CQ_FILE}",
                     *fmt)
    assert result.code == 0, result.err
    stored = {line["wroteOffset"]: (f"T{i % 5}", STORE_TIME + i) for i, line in enumerate(result.json_lines())}
    if offsets is not None:
        offsets.extend(line["wroteOffset"] for line in result.json_lines())
    files = {}
    for queue_dir in sorted(p for p in (store / "consumequeue").glob("*/*") if p.is_dir()):
        topic, queue_id = queue_dir.parent.name, queue_dir.name
        ext_files: list[bytearray] = []
        wrote = EXT_FILE           # no file yet
        for path in sorted(queue_dir.iterdir()):
            data = bytearray(path.read_bytes())
            for pos in range(0, len(data), 20):
                offset, size, tags = UNIT.unpack_from(data, pos)
                if size <= 0:
                    continue
                tag, store_time = stored[offset]
                assert tags == string_hash(tag)
                if EXT.size > EXT_FILE - wrote - 4:
                    if ext_files:
                        ext_files[-1][wrote:wrote + 2] = struct.pack(">h", -1)
                    ext_files.append(bytearray(EXT_FILE))
                    wrote = 0
                ext_files[-1][wrote:wrote + 20] = EXT.pack(20, tags, store_time, 0)
                address = (len(ext_files) - 1) * EXT_FILE + wrote - (1 << 63)
                wrote += 20
                data[pos:pos + 20] = UNIT.pack(offset, size, address)
            path.write_bytes(bytes(data))
            files[str(path.relative_to(store))] = bytes(data)
        for i, data in enumerate(ext_files):
            path = store / "consumequeue_ext" / topic / queue_id / f"{i * EXT_FILE:020d}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(bytes(data))
            files[str(path.relative_to(store))] = bytes(data)
    return store, files


def snapshot(store: Path) -> dict:
    return {str(p.relative_to(store)): p.read_bytes() for under in ("consumequeue", "consumequeue_ext")
            for p in sorted((store / under).rglob("*")) if p.is_file()}


def problems(run_cli, store, *args) -> list[tuple]:
    result = run_cli("verify-crc", store, "--json", *args)
    return [(p["kind"], p["file"]) for p in result.json_lines() if p["type"] == "problem"]


@pytest.mark.parametrize("fmt", [(), ("--set", "storeFormat=5")], ids=["4.9.8", "5.3.3"])
def test_verify_reads_ext_addresses(tmp_path, run_cli, fmt):
    store, files = ext_store(tmp_path, run_cli, *fmt)
    assert len([f for f in files if f.startswith("consumequeue_ext/Orders/1/")]) == 3   # 20 units: 9, 9, 2
    result = run_cli("verify-crc", store, "--json", "--set", "enableConsumeQueueExt=true")
    assert result.code == 0, result.out
    assert problems(run_cli, store) == []           # the files alone say it


def test_verify_checks_the_ext_units(tmp_path, run_cli):
    store, files = ext_store(tmp_path, run_cli)
    ext = store / "consumequeue_ext" / "Orders" / "1" / f"{0:020d}"
    data = bytearray(ext.read_bytes())
    data[22:30] = struct.pack(">q", 99)                        # the second unit's tags code
    ext.write_bytes(bytes(data))
    (store / "consumequeue_ext" / "Audit" / "0" / f"{0:020d}").unlink()
    found = problems(run_cli, store)
    assert found.count(("ext-unit-wrong", f"consumequeue/Orders/1/{0:020d}")) == 1
    assert found.count(("ext-unit-missing", f"consumequeue/Audit/0/{0:020d}")) == 9
    assert len(found) == 10, found


@pytest.mark.parametrize("fmt", [(), ("--set", "storeFormat=5")], ids=["4.9.8", "5.3.3"])
def test_rebuild_cq_writes_ext_units_and_addresses_as_the_broker(tmp_path, run_cli, fmt):
    store, files = ext_store(tmp_path, run_cli, *fmt)
    for path in (store / "consumequeue_ext").rglob("*"):
        if path.is_file():
            path.write_bytes(bytes(path.stat().st_size))
    for path in (store / "consumequeue").rglob("*"):
        if path.is_file():
            path.unlink()
    result = run_cli("rebuild-cq", store, "--json", "--set", f"mappedFileSizeConsumeQueue={CQ_FILE}")
    assert result.code == 0, result.err
    assert snapshot(store) == files
    assert problems(run_cli, store) == []


@pytest.mark.parametrize("fmt", [(), ("--set", "storeFormat=5")], ids=["4.9.8", "5.3.3"])
def test_recover_cuts_ext_units_with_the_queues_at_a_damaged_commitlog_tail(tmp_path, run_cli, fmt):
    """The commitlog damaged at message 27: recovery cuts the records from there, the units pointing
    at them and the ext units only those pointed at; left is what a broker writes for 27 messages."""
    offsets = []
    store, files = ext_store(tmp_path / "full", run_cli, *fmt, offsets=offsets)
    _, expected = ext_store(tmp_path / "prefix", run_cli, *fmt, count=27)
    assert len(expected) < len(files)                 # whole cq and ext files go too
    log = store / "commitlog" / f"{0:020d}"
    with open(log, "r+b") as fh:
        fh.seek(offsets[27] + 4)
        fh.write(b"\x0b\xad\xf0\x0d")                   # not a magic code: the valid data ends there
    dry = run_cli("recover", store, "--dry-run", "--json")
    assert dry.code == 1, dry.err
    plan = dry.json_lines()[0]
    assert plan["cut"] == offsets[27]
    assert {(e["topic"], e["queueId"]) for e in plan["extCuts"]} == {("Orders", 0), ("Orders", 1), ("Audit", 0)}
    text = run_cli("recover", store, "--dry-run")
    assert "would cut consume queue extension Orders/1 at ext offset" in text.out, text.out
    assert snapshot(store) == files                   # a dry run changes nothing
    result = run_cli("recover", store, "--json")
    assert result.code == 0, result.out + result.err
    assert snapshot(store) == expected
    manifest = json.loads(next((store / "quarantine").glob("*/manifest.json")).read_text())
    saved = {(Path(e["source"]).relative_to(store).parts[0], e["kind"]) for e in manifest["entries"]}
    assert saved >= {("consumequeue_ext", "range"), ("consumequeue_ext", "file"), ("commitlog", "range")}
    assert problems(run_cli, store) == []


def test_recover_cuts_ext_units_no_unit_points_at_and_writes_them_again(tmp_path, run_cli):
    """A crash after the last 6 records' ext units were written but before their consume queue
    units were: recovery cuts the ext tail past the last unit that points into it
    (truncateByMaxAddress) and dispatches the 6 records again, ext units first."""
    offsets = []
    store, files = ext_store(tmp_path, run_cli, offsets=offsets)
    for path in (store / "consumequeue").rglob("*"):
        data = bytearray(path.read_bytes()) if path.is_file() else None
        for pos in range(0, len(data or b""), 20):
            if UNIT.unpack_from(data, pos)[0] >= offsets[34] and any(data[pos:pos + 20]):
                data[pos:pos + 20] = bytes(20)
        if data is not None:
            path.write_bytes(bytes(data))
    result = run_cli("recover", store, "--json")
    assert result.code == 0, result.out + result.err
    plan = result.json_lines()[0]
    assert plan["mode"] == "normal" and plan["redispatchFrom"] == offsets[34]
    # messages 34..39 are units 8-9 of Orders/0 (i % 4 == 2), 9 of Audit/0 and 17-19 of Orders/1; 9 ext units a
    # file: each queue's last file goes, and in the file before, the units after the kept ones and the short -1
    cuts = {(e["topic"], e["queueId"]): (e["keepBytes"], e["bytesCut"], len(e["removedFiles"]))
            for e in plan["extCuts"]}
    assert cuts == {("Orders", 0): (160, 22, 1), ("Audit", 0): (180, 2, 1), ("Orders", 1): (EXT_FILE + 160, 22, 1)}
    assert snapshot(store) == files
    assert problems(run_cli, store) == []


def test_rebuild_cq_refuses_filter_bitmaps(tmp_path, run_cli):
    store, files = ext_store(tmp_path, run_cli)
    ext = store / "consumequeue_ext" / "Audit" / "0" / f"{0:020d}"
    data = bytearray(ext.read_bytes())
    data[0:2], data[18:20] = struct.pack(">h", 28), struct.pack(">h", 8)     # a unit with an 8-byte bitmap
    ext.write_bytes(bytes(data))
    result = run_cli("rebuild-cq", store)
    assert result.code == 3 and "filter bitmaps" in result.err
    assert snapshot(store)[str(ext.relative_to(store))] == bytes(data)


def test_ext_schema_and_fast_decoder_agree():
    from mqtool.formats import consumequeueext as ext

    data = EXT.pack(28, -5, STORE_TIME, 8) + bytes(range(8))      # built from the Java layout, not by mqtool
    parsed = ext.UNIT.parse(data)
    assert (parsed.size, parsed.tagsCode, parsed.msgStoreTime, parsed.bitMapSize) == ext.HEAD.unpack_from(data)
    assert parsed.filterBitMap == bytes(range(8))
    assert ext.pack(-5, STORE_TIME) == EXT.pack(20, -5, STORE_TIME, 0)
    assert ext.decorate(0) == -(1 << 63) and ext.undecorate(-(1 << 63) + 180) == 180
    assert ext.is_ext_addr(-(1 << 31) - 1) and not ext.is_ext_addr(-(1 << 31))    # any int tags code is not
