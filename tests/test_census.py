"""Every kind of store: the census `info` shows, the writers' refusals, config .bak files and the
controller's epoch file.  Stores are fixture copies given the files a 5.3.3 broker with each
feature lays out (paths and names from rocketmq-all-5.3.3, see mqtool/storage/census.py)."""

from __future__ import annotations

import hashlib
import os
import shutil
import zlib
from datetime import datetime
from pathlib import Path

import pytest

from mqtool.formats import epochfile

from conftest import expected_read

FILE = 65536


def tree(root: Path) -> dict:
    """Every file's bytes and mtime below root: what a refused writer must leave alone."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[str(path.relative_to(root))] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    return out


def _first_cq_file(store: Path) -> Path:
    return next(p for p in sorted((store / "consumequeue").rglob("*")) if p.is_file())


def _lmq(store):
    queue = store / "consumequeue" / "%LMQ%orders" / "0"
    queue.mkdir(parents=True)
    (queue / "00000000000000000000").write_bytes(_first_cq_file(store).read_bytes())


def _ext(store):
    (store / "consumequeue_ext" / "BasicTopic" / "0").mkdir(parents=True)


def _batch(store):
    (store / "batchconsumequeue" / "BatchTopic" / "0").mkdir(parents=True)


def _rocksdb(store):
    for name in ("CURRENT", "IDENTITY", "MANIFEST-000005", "OPTIONS-000007", "000009.sst"):
        (store / "consumequeue" / name).write_bytes(b"rocksdb")


def _compaction(store):
    (store / "compaction" / "compactionLog" / "Compacted" / "0").mkdir(parents=True)


def _transaction(store):
    (store / "transaction" / "statetable").mkdir(parents=True)


FEATURES = [  # (name, how to lay it out, the setting the refusal names, writers that refuse)
    # (the timer store is understood and kept by every writer: tests/test_timer.py; LMQ is checked
    # by verify-crc and kept by recover, rebuild-cq and clean: tests/test_lmq.py; consume queue extensions
    # by verify-crc, recover and rebuild-cq: tests/test_cq_ext.py; BatchCQ by recover, rebuild-cq and clean:
    # tests/test_batchcq.py)
    ("lmq", _lmq, "enableLmq / enableMultiDispatch", ["append"]),
    ("consumequeue-ext", _ext, "enableConsumeQueueExt", ["append", "clean"]),
    ("batch-cq", _batch, "queue.type=BatchCQ", ["append"]),
    ("rocksdb-consumequeue", _rocksdb, "storeType=defaultRocksDB", ["append", "recover", "rebuild-cq", "clean"]),
    ("compaction", _compaction, "cleanup.policy=COMPACTION", ["append", "recover", "rebuild-cq", "clean"]),
    ("transaction-table", _transaction, "transaction/", ["recover"]),
]

UNDERSTOOD = {"lmq": "understood", "consumequeue-ext": "understood",   # checked by verify-crc; the others
              "batch-cq": "understood"}                               # are only shown

WRITE = {  # a writer's command line (the append reads one message from stdin)
    "append": ["append", "--topic", "BasicTopic", "--body", "x"],
    "recover": ["recover"],
    "rebuild-cq": ["rebuild-cq"],
    "clean": ["clean", "--now", "--force"],
}


def test_a_real_5x_store_is_understood_and_writable(extracted, run_cli):
    info = run_cli("info", extracted("basic5"), "--json")
    assert info.code == 0, info.err
    line = info.json_lines()[0]
    assert {e["path"] for e in line["census"]} >= {"commitlog/", "consumequeue/", "index/", "checkpoint", "compaction/"}
    assert {e["status"] for e in line["census"]} == {"understood"}
    assert line["features"] == [] and line["unchecked"] == []


@pytest.mark.parametrize("name, make, setting, refusing", FEATURES, ids=[f[0] for f in FEATURES])
def test_each_feature_is_named_and_writers_that_cannot_keep_it_refuse(name, make, setting, refusing,
                                                                     store_copy, run_cli):
    store = store_copy("basic5")
    make(store)
    info = run_cli("info", store, "--json")
    assert info.code == 0, info.err
    line = info.json_lines()[0]
    assert name in line["features"]
    mine = [e for e in line["census"] if e["feature"] == name]
    status = UNDERSTOOD.get(name, "read-only")
    assert mine and all(e["status"] == status for e in mine)
    assert any(line_.startswith(f"{name} ({setting}") for line_ in line["unchecked"]) == (status == "read-only")
    before = tree(store)
    for writer in refusing:
        result = run_cli(*WRITE[writer][:1], store, *WRITE[writer][1:])
        assert result.code == 3, (writer, result.err)
        assert result.err.count("\n") == 1
        assert f"uses {name} ({setting}" in result.err and f"which {writer} cannot keep consistent" in result.err
    assert tree(store) == before


def test_settings_alone_turn_a_feature_on(store_copy, run_cli):
    """A broker.conf that turns LMQ on needs multi-dispatch on every put: refused before any file exists."""
    store = store_copy("basic")
    result = run_cli("append", store, "--set", "enableLmq=true", "--topic", "T", "--body", "x")
    assert result.code == 3 and "lmq (enableLmq / enableMultiDispatch: the broker's settings)" in result.err
    result = run_cli("recover", store, "--set", "storeType=defaultRocksDB", "--dry-run")
    assert result.code == 3 and "rocksdb-consumequeue" in result.err


def test_an_unknown_file_is_a_problem_and_stops_writers(store_copy, run_cli):
    store = store_copy("basic")
    (store / "nohup.out").write_text("a broker's console output")
    info = run_cli("info", store)
    assert info.code == 1 and "nohup.out: not a file or folder of a RocketMQ store" in info.err
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 1
    assert [(p["kind"], p["file"]) for p in verify.json_lines() if p["type"] == "problem"] == \
        [("unknown-file", "nohup.out")]
    before = tree(store)
    for writer in ("recover", "clean", "rebuild-cq"):
        result = run_cli(*WRITE[writer][:1], store, *WRITE[writer][1:])
        assert result.code == 3 and "nohup.out is not part of a RocketMQ store" in result.err, writer
    assert run_cli("clean", store, "--dry-run").code == 3     # a dry run says what the real run does
    assert tree(store) == before


def test_mqtools_own_folders_and_config_backups_are_known(store_copy, run_cli):
    store = store_copy("basic")
    (store / "trash").mkdir()
    (store / "quarantine").mkdir()
    (store / "config" / "topics.json.bak").write_text("{}")
    (store / "config" / "consumerOrderInfo.json").write_text("{}")
    info = run_cli("info", store, "--json")
    assert info.code == 0, info.err
    census = {e["path"]: e for e in info.json_lines()[0]["census"]}
    assert census["trash/"]["feature"] == census["quarantine/"]["feature"] == "mqtool"
    assert census["config/topics.json.bak"]["feature"] == "config"
    assert census["config/consumerOrderInfo.json"]["feature"] == "config"


def test_a_config_file_falls_back_to_its_bak_as_a_broker_does(store_copy, run_cli):
    store = store_copy("basic")
    config = store / "config"
    (config / "consumerOffset.json").write_text('{"offsetTable":{')          # cut short while written
    (config / "consumerOffset.json.bak").write_text('{"offsetTable":{"BasicTopic@g":{0:3}}}')
    (config / "topics.json.bak").write_text('{"topicConfigTable":{}}')       # the file itself is missing
    info = run_cli("info", store, "--json")
    assert info.code == 0, info.err
    files = info.json_lines()[0]["configFiles"]
    assert files["consumerOffset.json"]["read"] == "consumerOffset.json.bak"
    assert "cannot be read" in files["consumerOffset.json"]["note"]
    assert files["topics.json"] == {"exists": False, "read": "topics.json.bak",
                                    "note": "topics.json is missing: read topics.json.bak, as a broker does"}


# ------------------------------------------------------------------ the controller's epoch file

def epoch_text(entries) -> str:
    """CheckpointFile.write's layout, written out here from the Java source's description."""
    body = "".join(f"{epoch}-{start}\n" for epoch, start in entries)
    return f"{len(entries)}\n{zlib.crc32(body.encode()) & 0x7FFFFFFF}\n{body}"


def test_epoch_file_format_round_trips_and_is_checked():
    entries = [(1, 0), (2, 65536), (7, 3 * 65536 + 120)]
    parsed = epochfile.parse(epoch_text(entries))
    assert [(e.epoch, e.start_offset) for e in parsed] == entries
    assert epochfile.render(parsed) == epoch_text(entries)
    bad = epoch_text(entries).replace("2-65536", "2-65537")
    with pytest.raises(epochfile.EpochFileError, match="CRC"):
        epochfile.parse(bad)
    assert len(epochfile.parse(bad.replace(bad.split("\n")[1], "0", 1))) == 3   # CRC 0: not checked


def test_clean_trims_the_epoch_file_as_the_broker_does(store_copy, run_cli):
    root = store_copy("multifile")
    names = sorted(p.name for p in (root / "commitlog").iterdir())
    now = datetime.now().timestamp()
    for name in names[:3]:
        os.utime(root / "commitlog" / name, (now - 100 * 3600, now - 100 * 3600))
    entries = [(1, 0), (2, FILE + 10), (3, 3 * FILE + 50), (4, 5 * FILE)]
    original = epoch_text(entries)
    (root / "epochFileCheckpoint").write_text(original)
    dry = run_cli("clean", root, "--now", "--delete-delay", "0", "--max-files", "3", "--dry-run")
    assert dry.code == 0, dry.err
    assert "would remove 1 epoch entry" in dry.out + dry.err
    assert (root / "epochFileCheckpoint").read_text() == original
    result = run_cli("clean", root, "--now", "--delete-delay", "0", "--max-files", "3")
    assert result.code == 0, result.err
    assert sorted(p.name for p in (root / "commitlog").iterdir())[0] == f"{3 * FILE:020d}"
    # truncatePrefixByOffset(minPhyOffset - 1): entry 1 ends at FILE + 10 <= 3 * FILE - 1; entry 2 ends later
    assert (root / "epochFileCheckpoint").read_text() == epoch_text(entries[1:])
    assert (root / "epochFileCheckpoint.bak").read_text() == original


def test_recover_cuts_the_epoch_file_where_it_cuts_the_commitlog(store_copy, run_cli):
    root = store_copy("garbage-tail")
    cut = run_cli("recover", root, "--dry-run", "--json").json_lines()[0]["cut"]
    entries = [(1, 0), (2, cut - 100), (3, cut), (4, cut + 64)]
    original = epoch_text(entries)
    (root / "epochFileCheckpoint").write_text(original)
    dry = run_cli("recover", root, "--dry-run", "--json")
    assert any("would remove 2 epoch entries" in note for note in dry.json_lines()[0]["notes"])
    assert (root / "epochFileCheckpoint").read_text() == original
    result = run_cli("recover", root, "--json")
    assert result.code == 0, result.err
    assert (root / "epochFileCheckpoint").read_text() == epoch_text(entries[:2])   # start >= cut: gone
    assert (root / "epochFileCheckpoint.bak").read_text() == original


def test_readers_of_consume_queues_say_rocksdb_is_not_read(store_copy, run_cli):
    store = store_copy("basic5")
    for queue in list((store / "consumequeue").iterdir()):
        shutil.rmtree(queue)
    _rocksdb(store)
    for args in (("dump", store, "consumequeue"), ("get", store, "--topic", "BasicTopic", "--queue", "0",
                                                    "--offset", "0")):
        result = run_cli(*args)
        assert result.code == 4 and "consume queues are in RocksDB (storeType=defaultRocksDB)" in result.err
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 0, verify.out
    summary = verify.json_lines()[-1]
    assert summary["scopes"] == ["commitlog", "index"]
    assert any("the cq scope was not checked" in line for line in summary["unchecked"])


def test_a_batchcq_topic_declared_in_topics_json_stops_writers(store_copy, run_cli):
    """A broker dispatches a topic with queue.type=BatchCQ into batchconsumequeue/ (46-byte units)
    even before that folder exists; a writer that would put it into consumequeue/ must refuse."""
    import json

    store = store_copy("basic5")
    topics = {"topicConfigTable": {"BasicTopic": {"topicName": "BasicTopic", "readQueueNums": 4,
                                                  "writeQueueNums": 4, "attributes": {"queue.type": "BatchCQ"}},
                                   "Other": {"topicName": "Other", "attributes": {}}}}
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "topics.json").write_text(json.dumps(topics))
    (store / "abort").write_bytes(b"")
    before = tree(store)
    for writer in ("append",):
        result = run_cli(*WRITE[writer][:1], store, *WRITE[writer][1:])
        assert result.code == 3, (writer, result.err)
        assert "batch-cq (queue.type=BatchCQ: config/topics.json: BasicTopic)" in result.err
    assert tree(store) == before
    assert not (store / "consumequeue" / "BasicTopic" / "9").exists()
    # recover keeps it: its records (single messages, no INNER_BASE/INNER_NUM) get batch queue
    # units as 5.3.3's DispatchRequest has them (msgBaseOffset = the queue offset, batchSize 1),
    # and none goes into consumequeue/BasicTopic
    cq_before = {p: p.read_bytes() for p in (store / "consumequeue" / "BasicTopic").rglob("0*") if p.is_file()}
    assert run_cli("recover", store).code == 0
    units = [u for u in run_cli("dump", store, "batchconsumequeue", "--json").json_lines() if u["type"] == "batch_unit"]
    assert sorted((u["queueId"], u["msgBaseOffset"], u["batchSize"], u["commitLogOffset"], u["size"]) for u in units) == \
        sorted((u["queueId"], u["offset"], 1, u["commitLogOffset"], u["size"]) for u in expected_read("basic5")
               if u["type"] == "cq_unit" and u["topic"] == "BasicTopic")
    assert {p: p.read_bytes() for p in (store / "consumequeue" / "BasicTopic").rglob("0*") if p.is_file()} == cq_before
