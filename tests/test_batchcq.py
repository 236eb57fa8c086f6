"""Batch consume queues (5.x BatchCQ topics) read by dump and checked by verify-crc, on stores whose
batch queue files are built here from the Java source's facts (BatchConsumeQueue: 46-byte units,
offset, size, tagsCode, storeTime, msgBaseOffset, batchSize, compactedOffset = -1, reserved)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from helpers.damage import records

TOPIC = "BatchT"
UNIT = struct.Struct(">qiqqqhii")
FILE_UNITS = 100
TAGS_CODE = ord("T")      # String.hashCode of the one-character tags "T"


def build_batch_store(tmp_path, run_cli, count: int = 12, body: str = "batch {i}", file_units: int = FILE_UNITS,
                      base: str = "{i}"):
    """A 5.x store whose BatchT records (INNER_NUM 1, INNER_BASE i, written as `base` says) have a
    batch queue built by hand: (store, the queue's files, the units)."""
    store = tmp_path / "store"
    lines = [json.dumps({"topic": TOPIC, "queueId": 0, "body": body.format(i=i), "tags": "T",
                         "properties": {"INNER_NUM": "1", "INNER_BASE": base.format(i=i)}}) for i in range(count)]
    lines += [json.dumps({"topic": "Plain", "queueId": 1, "body": "plain"})]
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    result = run_cli("append", store, "--set", "storeFormat=5", "--set", "mappedFileSizeCommitLog=65536",
                     "--set", "mappedFileSizeConsumeQueue=6000", "--input", tmp_path / "in.jsonl")
    assert result.code == 0, result.err
    shutil.rmtree(store / "consumequeue" / TOPIC)        # a BatchCQ topic has no consume queue
    units = []
    for log in sorted((store / "commitlog").iterdir()):
        data = log.read_bytes()
        for pos, size in records(log):
            topic_len_at = pos + 84 + 4 + struct.unpack_from(">i", data, pos + 84)[0]
            topic = data[topic_len_at + 1:topic_len_at + 1 + data[topic_len_at]].decode()
            if topic == TOPIC:
                store_time = struct.unpack_from(">q", data, pos + 56)[0]
                units.append((int(log.name) + pos, size, TAGS_CODE, store_time, len(units), 1, -1, 0))
    folder = store / "batchconsumequeue" / TOPIC / "0"
    folder.mkdir(parents=True)
    paths = []
    for first in range(0, len(units), file_units):
        path = folder / f"{first * UNIT.size:020d}"
        path.write_bytes(b"".join(UNIT.pack(*u) for u in units[first:first + file_units])
                         .ljust(file_units * UNIT.size, b"\0"))
        paths.append(path)
    return store, paths, units


@pytest.fixture
def batch_store(tmp_path, run_cli):
    store, paths, units = build_batch_store(tmp_path, run_cli)
    return store, paths[0], units


def _patch(path, n, field, value):
    units = bytearray(path.read_bytes())
    fields = list(UNIT.unpack_from(units, n * UNIT.size))
    fields[field] = value
    UNIT.pack_into(units, n * UNIT.size, *fields)
    path.write_bytes(bytes(units))


def test_a_sound_batch_queue_verifies_clean_and_covers_its_topic(batch_store, run_cli):
    store, _, units = batch_store
    assert len(units) == 12
    result = run_cli("verify-crc", store)
    assert result.code == 0, result.out + result.err
    info = run_cli("info", "--json", store).json_lines()[0]
    entry = next(e for e in info["census"] if e["path"] == "batchconsumequeue/")
    assert entry["status"] == "understood" and entry["feature"] == "batch-cq"


def test_dump_shows_every_unit(batch_store, run_cli):
    store, path, units = batch_store
    lines = run_cli("dump", store, "batchconsumequeue", "--json").json_lines()
    shown = [(u["commitLogOffset"], u["size"], u["tagsCode"], u["storeTimestamp"], u["msgBaseOffset"],
              u["batchSize"], u["compactedOffset"]) for u in lines if u["type"] == "batch_unit"]
    assert shown == [u[:7] for u in units]
    assert {u["topic"] for u in lines if u["type"] == "batch_unit"} == {TOPIC}
    one_file = run_cli("dump", path, "--json").json_lines()       # the kind read off the path
    assert [u["fileOffset"] for u in one_file if u["type"] == "batch_unit"] == [46 * i for i in range(12)]
    middle = units[6][0]
    later = run_cli("dump", store, "batchconsumequeue", "--json", "--offset-from", middle).json_lines()
    assert [u["commitLogOffset"] for u in later if u["type"] == "batch_unit"] == [u[0] for u in units[6:]]
    other = run_cli("dump", store, "batchconsumequeue", "--json", "--queue", "1").json_lines()
    assert not [u for u in other if u["type"] == "batch_unit"]
    table = run_cli("dump", store, "batchconsumequeue")
    assert table.code == 0 and "12 batch consume queue units" in table.err


@pytest.mark.parametrize("base", ["+{i}", "0{i}"])
def test_verify_reads_inner_base_as_the_broker_parses_it(tmp_path, run_cli, base):
    """Long.parseLong takes "+5" and "05": the broker's msgBaseOffset is 5, and so is verify's."""
    store, _, _ = build_batch_store(tmp_path, run_cli, base=base)
    result = run_cli("verify-crc", store)
    assert result.code == 0, result.out + result.err


@pytest.mark.parametrize("unit, field, value, kinds", [
    (3, 1, 17, {"unit-size-mismatch"}),
    (3, 0, 5, {"unit-not-a-record"}),
    (4, 4, 40, {"batch-unit-gap", "batch-unit-base", "unit-wrong-queue-offset"}),
    (5, 3, 1, {"batch-unit-store-time"}),
    (6, 5, 3, {"batch-unit-size", "batch-unit-gap"}),
    (7, 6, 0, {"batch-unit-compacted"}),
])
def test_verify_finds_damaged_units(batch_store, run_cli, unit, field, value, kinds):
    store, path, _ = batch_store
    _patch(path, unit, field, value)
    result = run_cli("verify-crc", "--json", store)
    found = {line["kind"] for line in result.json_lines() if line["type"] == "problem"}
    assert result.code == 1 and found == kinds, result.out


def test_verify_finds_a_batch_queue_behind_its_records(batch_store, run_cli):
    store, path, units = batch_store
    data = bytearray(path.read_bytes())
    data[11 * UNIT.size:12 * UNIT.size] = bytes(UNIT.size)     # the last unit never written
    path.write_bytes(bytes(data))
    result = run_cli("verify-crc", "--json", store)
    assert [line["kind"] for line in result.json_lines() if line["type"] == "problem"] == ["cq-behind"]


def test_writers_refuse_a_store_with_batch_queues(batch_store, run_cli):
    store, _, _ = batch_store
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    result = run_cli("append", store, "--topic", "Plain", "--body", "x")
    assert result.code == 3 and "batch-cq" in result.err, result.err
    assert "msgBaseOffset" in result.err and "consumequeue/" in result.err    # says what it would get wrong
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def _pack(units) -> bytes:
    return b"".join(UNIT.pack(*u) for u in units).ljust(FILE_UNITS * UNIT.size, b"\0")


@pytest.mark.parametrize("lag", [None, 5], ids=["queue-ahead-of-the-cut", "queue-behind-redispatched"])
def test_recover_cuts_batch_units_past_the_cut_and_dispatches_batch_records_into_them(batch_store, run_cli, lag):
    """Record 8 damaged: the commitlog ends there, so units 8.. go (truncateDirtyLogicFiles) and are
    kept in the quarantine; a queue that lags (units 5.. never written) gets the records up to the cut
    dispatched again as putBatchMessagePositionInfo writes them, into batchconsumequeue/ only."""
    store, path, units = batch_store
    log = sorted((store / "commitlog").iterdir())[0]
    data = bytearray(log.read_bytes())
    data[units[8][0] + 4:units[8][0] + 8] = b"\0\0\0\0"          # magic code of record 8
    log.write_bytes(bytes(data))
    if lag is not None:
        path.write_bytes(_pack(units[:lag]))
    result = run_cli("recover", "--json", store)
    assert result.code == 0, result.err
    plan = next(line for line in result.json_lines() if line["type"] == "plan")
    assert plan["cut"] == units[8][0]
    assert path.read_bytes() == _pack(units[:8])
    cuts = plan["batchQueueCuts"]
    if lag is None:
        assert [(c["topic"], c["queueId"], c["keepUnits"], c["unitsCut"]) for c in cuts] == [(TOPIC, 0, 8, 4)]
        (saved,) = (store / "quarantine").glob(f"*/batchconsumequeue/{TOPIC}/0/*.bin")
        assert saved.read_bytes() == b"".join(UNIT.pack(*u) for u in units[8:])
    else:
        assert cuts == [] and plan["redispatchFrom"] == units[lag - 1][0] + units[lag - 1][1]
    assert not (store / "consumequeue" / TOPIC).exists()
    verify = run_cli("verify-crc", "--json", store)
    assert verify.code == 0, verify.out


def test_rebuild_cq_writes_batch_queues_and_no_consume_queue_for_a_batch_topic(batch_store, run_cli):
    """The batch queue rebuilt from the commitlog is the hand-built one, byte for byte; the old
    files (a damaged batch queue, and a consume queue a batch topic must not have) go to the
    quarantine."""
    store, path, units = batch_store
    damaged = _pack(units[:3] + [(5, 1, 2, 3, 4, 1, -1, 0)])
    path.write_bytes(damaged)
    stray = store / "consumequeue" / TOPIC / "0" / "00000000000000000000"
    stray.parent.mkdir(parents=True)
    stray.write_bytes(bytes(6000))
    result = run_cli("rebuild-cq", "--json", store)
    assert result.code == 0, result.err
    report = result.json_lines()[-1]
    assert {"topic": TOPIC, "queueId": 0, "units": 12} in report["queues"]
    assert path.read_bytes() == _pack(units)
    assert not (store / "consumequeue" / TOPIC).exists()
    quarantine = Path(report["quarantine"])
    assert (quarantine / "batchconsumequeue" / TOPIC / "0" / path.name).read_bytes() == damaged
    assert (quarantine / "consumequeue" / TOPIC / "0" / stray.name).exists()
    assert not list(store.glob(".rebuild-*"))
    assert run_cli("verify-crc", store).code == 0


def test_clean_reclaims_batch_queue_files_below_the_new_minimum(tmp_path, run_cli):
    """BatchConsumeQueue.deleteExpiredFile (deleteExpiredFileByOffset, unit size 46): a file whose
    last unit points below the commitlog's new minimum offset goes, oldest first, never the last
    file; staged in the trash, and undo puts them back."""
    store, paths, units = build_batch_store(tmp_path, run_cli, count=60, body="x" * 3000 + "{i}", file_units=10)
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    logs = sorted((store / "commitlog").iterdir())
    assert len(logs) >= 3 and len(paths) == 6
    new_min = int(logs[2].name)
    gone = []
    for path in paths[:-1]:
        last_offset = UNIT.unpack_from(path.read_bytes(), 9 * UNIT.size)[0]
        if last_offset >= new_min:
            break
        gone.append(path)
    assert 1 <= len(gone) < 5
    result = run_cli("clean", store, "--now", "--retention-ms", "0", "--max-files", "2", "--json")
    assert result.code == 0, result.err
    staged = [line["file"] for line in result.json_lines()
              if line["type"] == "decision" and line["kind"] == "batchconsumequeue"]
    assert staged == [str(p.relative_to(store)) for p in gone]
    assert [p for p in paths if p.exists()] == paths[len(gone):]
    assert {p.name for p in (store / "trash").rglob("0*") if p.is_file() and TOPIC in str(p)} == {p.name for p in gone}
    assert not (store / "consumequeue" / TOPIC).exists()
    assert run_cli("clean", store, "--undo").code == 0
    assert all(p.read_bytes() == before[p] for p in paths)


def test_salvage_says_the_batch_queues_are_not_carried(batch_store, run_cli, tmp_path):
    store, _, _ = batch_store
    refused = run_cli("salvage", store, tmp_path / "out")
    assert refused.code == 3 and "batch-cq (queue.type=BatchCQ)" in refused.err
    assert not (tmp_path / "out").exists()
    done = run_cli("salvage", store, tmp_path / "out2", "--drop-features")
    assert done.code == 0, done.err
    assert "warning: batch-cq" in done.err
    assert not (tmp_path / "out2" / "batchconsumequeue").exists()
    assert run_cli("verify-crc", tmp_path / "out2").code == 0


def test_salvage_drops_features_the_settings_turn_on(store_copy, run_cli, tmp_path):
    store = store_copy("basic")
    args = ("--set", "enableMultiDispatch=true", "--set", "enableConsumeQueueExt=true")
    assert run_cli("salvage", store, tmp_path / "refused", *args).code == 3
    done = run_cli("salvage", store, tmp_path / "out", *args, "--drop-features")
    assert done.code == 0, done.err
    assert "warning: consumequeue-ext" in done.err and "warning: lmq" in done.err
