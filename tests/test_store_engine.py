"""The embedded store: byte-identical replay of real broker stores, recovery, crashes, group commit."""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from mqtool.broker import spec as specs
from mqtool.engine.clock import ManualClock
from mqtool.engine.javamap import JavaHashMap
from mqtool.engine.message import MessageInner
from mqtool.engine.store import MessageStore
from mqtool.formats.commitlog import Record
from mqtool.storage import commitlog, consumequeue
from mqtool.storage.config import StoreConfig
from mqtool.storage.layout import discover

from conftest import ALL_FIXTURES, DLEDGER, expected_read, fixture_dir

REPLAYABLE = ["basic", "features", "multifile", "crash", "basic5"]
HERE = Path(__file__).resolve().parent


def fixture_config(root, name="basic", **extra) -> StoreConfig:
    """The configuration every fixture was written with (see the fixtures' README)."""
    settings = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100,
                    maxIndexNum=400, storeFormat="5" if name == "basic5" else "4")
    settings.update(extra)
    return StoreConfig(storePathRootDir=str(root), **settings)


def tree(name) -> dict[str, str]:
    result = {}
    for line in (fixture_dir(name) / "tree.txt").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        _, sha, rel = line.split("\t")
        result[rel] = sha
    return result


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def replay(name, root, **config_extra):
    """Put the fixture's spec lines with the broker's recorded store times; returns the put results."""
    writes = {w["index"]: w for w in map(json.loads, (fixture_dir(name) / "write.jsonl").open())
              if w.get("type") == "put"}
    version = "5" if name == "basic5" else "4"
    store = MessageStore(fixture_config(root, name, **config_extra), clock=ManualClock(1795305900000)).open()
    prepared, results = {}, []
    for i, line in enumerate((fixture_dir(name) / "spec.jsonl").open()):
        spec = json.loads(line)
        spec["storeTimestamp"] = writes[i].get("storeTimestamp") or 1795305900000
        msg = specs.to_message(spec, line=i, version=version, prepared_offsets=prepared,
                               allow_system_topics=True)
        result = store.put(msg)
        if result.ok:
            prepared[i] = result.wrote_offset
        results.append((writes[i], result))
    return store, results


@pytest.mark.parametrize("name", REPLAYABLE)
def test_replay_writes_commitlog_and_consume_queues_byte_identical(name, tmp_path):
    root = tmp_path / "store"
    store, results = replay(name, root)
    crashed = any(json.loads(l).get("type") == "crash" for l in (fixture_dir(name) / "write.jsonl").open())
    store.halt() if crashed else store.close()
    for theirs, mine in results:
        assert mine.status == theirs["status"], theirs["index"]
        if mine.ok:
            assert (mine.wrote_offset, mine.wrote_bytes, mine.queue_offset, mine.msg_id, mine.topic,
                    mine.queue_id) == (theirs["wroteOffset"], theirs["wroteBytes"], theirs["queueOffset"],
                                       theirs["msgId"], theirs["storedTopic"], theirs["storedQueueId"])
    expected = {rel: sha for rel, sha in tree(name).items() if rel.startswith(("commitlog/", "consumequeue/"))}
    written = {str(p.relative_to(root)) for p in root.rglob("*")
               if p.is_file() and str(p.relative_to(root)).startswith(("commitlog/", "consumequeue/"))}
    assert written == set(expected)
    for rel, sha in expected.items():
        assert sha256(root / rel) == sha, rel
    assert (root / "abort").exists() == crashed


def test_replay_with_transient_store_pool_writes_the_same_bytes(tmp_path):
    root = tmp_path / "store"
    store, _ = replay("multifile", root, transientStorePoolEnable=True, transientStorePoolSize=2)
    assert store.pool is not None
    store.close()
    for rel, sha in tree("multifile").items():
        if rel.startswith(("commitlog/", "consumequeue/")):
            assert sha256(root / rel) == sha, rel


def test_replay_index_answers_like_the_broker(tmp_path):
    """Keys are indexed as the broker indexes them: every index_query of the fixture
    returns the same offsets from mqtool's own index files."""
    root = tmp_path / "store"
    store, _ = replay("features", root)
    try:
        queries = [l for l in expected_read("features") if l["type"] == "index_query"]
        assert queries
        for q in queries:
            found = store.index.query(q["topic"], q["key"], 64, 0, 2**63 - 1)
            assert sorted(found) == q["commitLogOffsets"], q["indexKey"]
    finally:
        store.close()


def consume_queue_units(root, config):
    layout = discover(config, config_given=True)
    units = []
    for cq in consumequeue.open_all(layout):
        try:
            units.extend((u.topic, u.queue_id, u.queue_offset, u.commitlog_offset, u.size, u.tags_code)
                         for u in cq.units())
        finally:
            cq.close()
    return sorted(units)


@pytest.mark.parametrize("name", [n for n in ALL_FIXTURES if n not in DLEDGER])   # the engine appends
def test_open_recovers_like_the_broker(name, store_copy):
    root = store_copy(name)
    config = fixture_config(root, name)
    store = MessageStore(config).open()
    plan = store.recovery_plan
    store.close()
    lines = expected_read(name)
    broker = next(l for l in lines if l["type"] == "open")
    assert plan.mode == broker["recovery"]
    store_line = next(l for l in lines if l["type"] == "store")
    assert plan.cut == store_line["maxPhyOffset"]
    expected = sorted((l["topic"], l["queueId"], l["offset"], l["commitLogOffset"], l["size"], l["tagsCode"])
                      for l in lines if l["type"] == "cq_unit")
    assert consume_queue_units(root, config) == expected
    assert not (root / "abort").exists()


def test_recovery_keeps_cut_bytes_in_the_quarantine(store_copy):
    root = store_copy("garbage-tail")
    corruption = json.loads((fixture_dir("garbage-tail") / "corruption.json").read_text())["changes"][0]
    with MessageStore(fixture_config(root)) as store:
        plan = store.recovery_plan
        qdir = store.quarantine.dir
    assert plan.data_end - plan.cut == corruption["length"]
    manifest = json.loads((qdir / "manifest.json").read_text())
    (entry,) = manifest["entries"]
    saved = (qdir / entry["saved"]).read_bytes()
    assert saved.hex() == corruption["newHex"]
    data = (root / corruption["file"]).read_bytes()
    assert data[corruption["fileOffset"]:corruption["fileOffset"] + corruption["length"]] == bytes(64)
    assert len(data) == 65536   # a cut keeps the file at its mapped size


def _msg(i, topic="T", queue=0, key=None):
    props = JavaHashMap()
    props.put("KEYS", key or f"key-{i}")
    return MessageInner(topic=topic, queue_id=queue, body=f"body {i}".encode(), properties=props,
                        born_host="10.1.1.1:5000", born_timestamp=i)


@pytest.mark.parametrize("topic", ["../escape", "a/b", "x\x00y", "", "..", "T" * 128, "sp ace"])
def test_topics_that_cannot_be_directory_names_are_refused(topic, tmp_path):
    root = tmp_path / "store"
    with MessageStore(fixture_config(root)) as store:
        result = store.put(_msg(1, topic=topic))
    assert result.status == "MESSAGE_ILLEGAL"
    assert not (tmp_path / "escape").exists()
    cq_dir = root / "consumequeue"
    assert not cq_dir.exists() or list(cq_dir.iterdir()) == []


def test_rejected_put_leaves_nothing(tmp_path):
    root = tmp_path / "store"
    with MessageStore(fixture_config(root, maxMessageSize=1024)) as store:
        big = _msg(1)
        big.body = b"x" * 1025
        assert store.put(big).status == "MESSAGE_ILLEGAL"
        assert store.put(_msg(2)).wrote_offset == 0


def test_second_opener_is_refused_while_the_lock_is_held(tmp_path, run_cli):
    root = tmp_path / "store"
    store = MessageStore(fixture_config(root)).open()
    try:
        holder = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(HERE.parent)!r})
            from mqtool.storage.config import StoreConfig
            from mqtool.store import MessageStore
            from mqtool.errors import RefusedError
            try:
                MessageStore(StoreConfig(storePathRootDir={str(root)!r}, mappedFileSizeCommitLog=65536)).open()
            except RefusedError as exc:
                print("refused", exc)
        """)
        proc = subprocess.run([sys.executable, "-c", holder], capture_output=True, text=True)
        assert proc.stdout.startswith("refused"), proc.stderr
        assert f"process {os.getpid()}" in proc.stdout
        # a second open in the same process is refused too (the lock is per open file)
        result = run_cli("append", root, "--topic", "T", "--body", "x")
        assert result.code == 3, result.err
        (info,) = run_cli("info", root, "--json").json_lines()
        command = " ".join(open(f"/proc/{os.getpid()}/cmdline", "rb").read().decode().replace("\0", " ").split())
        holder = info["lock"].pop("holder")
        assert info["lock"] == {"exists": True, "held": True, "heldBy": os.getpid(), "command": command}
        assert holder.startswith(f"process {os.getpid()} ({command[:100]}")
        cli = subprocess.run([os.path.join(os.path.dirname(sys.executable), "mqtool"), "append", str(root),
                              "--topic", "T", "--body", "x"], capture_output=True, text=True)
        assert cli.returncode == 3, cli.stderr
        assert "lock" in cli.stderr and cli.stderr.count("\n") == 1
    finally:
        store.close()


def test_close_is_clean_and_a_halt_leaves_abort(tmp_path):
    root = tmp_path / "store"
    store = MessageStore(fixture_config(root)).open()
    assert (root / "abort").exists()
    store.put(_msg(1))
    store.close()
    assert not (root / "abort").exists()
    store = MessageStore(fixture_config(root)).open()
    store.put(_msg(2))
    store.halt()
    assert (root / "abort").exists()
    store = MessageStore(fixture_config(root)).open()
    assert store.recovery_plan.mode == "abnormal"
    assert store.put(_msg(3)).queue_offset == 2
    store.close()


def walk_records(root, config) -> dict[int, Record]:
    layout = discover(config, config_given=True)
    queue = commitlog.open_queue(layout)
    try:
        return {e.offset: e for e in commitlog.walk(queue) if isinstance(e, Record)}
    finally:
        queue.close()


def test_group_commit_batches_fsyncs_for_concurrent_producers(tmp_path):
    root = tmp_path / "store"
    config = fixture_config(root, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20)
    store = MessageStore(config).open()
    threads, per_thread, results = 16, 40, {}
    lock = threading.Lock()

    def producer(t):
        for i in range(per_thread):
            r = store.put(_msg(t * 1000 + i, queue=t % 4, key=f"k{t}-{i}"))
            with lock:
                results[(t, i)] = r

    workers = [threading.Thread(target=producer, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    fsyncs = store.flusher.fsyncs
    store.close()
    total = threads * per_thread
    assert all(r.status == "PUT_OK" for r in results.values())
    assert fsyncs < total / 4, f"{fsyncs} fsyncs for {total} messages"
    records = walk_records(root, config)
    for (t, i), r in results.items():
        rec = records[r.wrote_offset]
        assert rec.properties["KEYS"] == f"k{t}-{i}" and rec.crc_ok()
    units = consume_queue_units(root, config)
    assert len(units) == total
    for q in range(4):
        offsets = [u[2] for u in units if u[1] == q]
        assert offsets == list(range(len(offsets)))


def test_a_producer_interrupted_while_waiting_still_wakes_the_ones_behind_it(tmp_path):
    """put() wakes a batch's producers in a chain; Ctrl-C in one of them must not strand the rest."""
    root = tmp_path / "store"
    config = fixture_config(root, flushDiskType="SYNC_FLUSH", mappedFileSizeCommitLog=1 << 20)
    store = MessageStore(config).open()
    results = {}

    def producer(name, i):
        results[name] = store.put(_msg(i, key=name))

    def queued(n):
        deadline = time.monotonic() + 10
        while store._combiner.waiting() < n:
            assert time.monotonic() < deadline, "producer never queued"
            time.sleep(0.001)

    store.writer.lock.acquire()           # the first leader stalls inside its put
    leader = threading.Thread(target=producer, args=("leader", 1))
    leader.start()
    deadline = time.monotonic() + 10
    while store._combiner.waiting():   # the leader took its batch and waits on the writer lock
        assert time.monotonic() < deadline
        time.sleep(0.001)
    successor = threading.Thread(target=producer, args=("successor", 2))
    successor.start()
    queued(1)

    def interrupt_then_let_go():
        queued(3)                        # the main thread and the one behind it wait too
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)
        store.writer.lock.release()

    behind = threading.Thread(target=producer, args=("behind", 4))
    helper = threading.Thread(target=interrupt_then_let_go)
    helper.start()
    threading.Timer(0.05, behind.start).start()   # queues after the main thread
    with pytest.raises(KeyboardInterrupt):
        store.put(_msg(3, key="main"))
    for t in (leader, successor, behind, helper):
        t.join(timeout=10)
        assert not t.is_alive(), "a producer was left waiting"
    store.close()
    assert {name: r.status for name, r in results.items()} == \
        {"leader": "PUT_OK", "successor": "PUT_OK", "behind": "PUT_OK"}
    keys = sorted(r.properties["KEYS"] for r in walk_records(root, config).values())
    assert keys == ["behind", "leader", "main", "successor"]   # the interrupted put was stored


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_no_acknowledged_message(tmp_path):
    """A subprocess appends with SYNC_FLUSH and is killed at random moments; after recovery
    every put that returned PUT_OK is in the commitlog and its consume queue."""
    root = tmp_path / "store"
    rng = random.Random(20261122)
    acknowledged: dict[int, tuple[int, int]] = {}
    next_index = 0
    for round_ in range(12):
        proc = subprocess.Popen([sys.executable, str(HERE / "helpers" / "torture_worker.py"), str(root), str(next_index),
                                 "100000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(HERE.parent)})
        assert proc.stdout.readline().strip() == "open", proc.stderr.read()
        deadline = time.monotonic() + rng.uniform(0.05, 0.6)
        lines = []
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate()
        lines.extend(rest.splitlines(True))
        for line in lines:
            parts = line.split()
            if parts and parts[0] == "ok":
                i, offset, qoff = map(int, parts[1:])
                acknowledged[i] = (offset, qoff)
                next_index = max(next_index, i + 1)
        next_index += 1000  # indexes of puts that may have been written but not acknowledged
    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 * 1024,
                         mappedFileSizeConsumeQueue=20 * 50, maxHashSlotNum=64, maxIndexNum=256)
    with MessageStore(config) as store:
        assert store.recovery_plan.mode == "abnormal"
    assert len(acknowledged) > 50
    records = walk_records(root, config)
    units = {(u[1], u[2]): u for u in consume_queue_units(root, config)}
    for i, (offset, qoff) in acknowledged.items():
        rec = records.get(offset)
        assert rec is not None, (i, offset)
        assert rec.properties["KEYS"] == f"key-{i}" and rec.crc_ok()
        assert units[(i % 3, qoff)][3] == offset


@pytest.mark.parametrize("line, field", [
    ('{"topic":"T","queueId":-1,"body":"x"}', "queueId"),
    ('{"topic":"T","queueId":99999999999,"body":"x"}', "queueId"),
    ('{"topic":"T","bornTimestamp":1e400,"body":"x"}', "bornTimestamp"),
    ('{"topic":"T","bornTimestamp":99999999999999999999999,"body":"x"}', "bornTimestamp"),
    ('{"topic":"T","storeTimestamp":"a","body":"x"}', "storeTimestamp"),
    ('{"topic":"T","properties":[1],"body":"x"}', "properties"),
    ("5", "JSON object"),
])
def test_append_refuses_bad_input_before_writing_it(tmp_path, run_cli, line, field):
    spec = tmp_path / "in.jsonl"
    spec.write_text(line + "\n")
    result = run_cli("append", tmp_path / "s", "--input", spec)
    assert result.code == 2 and field in result.err, result.err
    assert not (tmp_path / "s" / "commitlog").exists() or not any(
        any(p.read_bytes()) for p in (tmp_path / "s" / "commitlog").iterdir())


def test_a_bad_line_stops_the_input_after_the_batches_before_it(tmp_path, run_cli, monkeypatch):
    good = [json.dumps({"topic": "T", "queueId": 0, "body": f"m{i}"}) for i in range(5)]
    spec = tmp_path / "in.jsonl"
    spec.write_text("\n".join(good + ['{"topic":"T","queueId":-1,"body":"x"}']) + "\n")
    # a bad line in the first batch: checked before the store is touched, which is not even created
    result = run_cli("append", tmp_path / "s", "--input", spec)
    assert result.code == 2 and "line 6" in result.err and "queueId" in result.err
    assert "nothing was stored" in result.err
    assert not (tmp_path / "s").exists()
    # --dry-run reads and checks every line and stores nothing, however many batches
    result = run_cli("append", tmp_path / "s", "--input", spec, "--batch", "2", "--dry-run")
    assert result.code == 2 and "line 6" in result.err
    assert not (tmp_path / "s").exists()
    good_only = tmp_path / "good.jsonl"
    good_only.write_text("\n".join(good) + "\n")
    result = run_cli("append", tmp_path / "s", "--input", good_only, "--batch", "2", "--dry-run", "--json")
    assert result.code == 0 and result.json_lines() == [{"type": "checked", "lines": 5}]
    assert not (tmp_path / "s").exists()
    # a bad line in a later batch: the batches before it are stored, and the report says so
    result = run_cli("append", tmp_path / "s", "--input", spec, "--batch", "2")
    assert result.code == 2 and "line 6" in result.err
    assert "input lines 1-4 were stored (4 puts); nothing after line 4" in " ".join(result.err.split())
    assert len(result.out.splitlines()) > 4   # the table of the stored puts
    config = StoreConfig(storePathRootDir=str(tmp_path / "s"))
    assert len(walk_records(tmp_path / "s", config)) == 4
    # the same from stdin
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(spec.read_bytes())))
    result = run_cli("append", tmp_path / "s2", "--input", "-", "--batch", "2", "--json")
    assert result.code == 2 and "line 6" in result.err
    assert [p["line"] for p in result.json_lines()] == [1, 2, 3, 4]
    assert len(walk_records(tmp_path / "s2", config)) == 4


def test_an_input_that_can_be_read_only_once_is_stored_as_it_comes(tmp_path, run_cli):
    lines = "".join(json.dumps({"topic": "T", "queueId": 0, "body": f"m{i}"}) + "\n" for i in range(3))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_text, args=(lines,))
    writer.start()
    result = run_cli("append", tmp_path / "s", "--input", fifo, "--json")
    writer.join(timeout=10)
    assert result.code == 0 and [p["line"] for p in result.json_lines()] == [1, 2, 3]


def test_a_line_naming_a_refused_line_is_not_stored_either(tmp_path, run_cli, monkeypatch):
    spec = tmp_path / "in.jsonl"
    spec.write_text("\n".join(json.dumps(line) for line in [
        {"topic": "T", "queueId": 0, "body": "a"},
        {"topic": "T" * 128, "queueId": 0, "body": "b", "transaction": "prepared"},   # refused by the store
        {"topic": "T", "queueId": 0, "body": "c", "transaction": "commit", "preparedTransactionOffsetOf": 1},
    ]) + "\n")
    result = run_cli("append", tmp_path / "s", "--input", spec, "--json")
    assert result.code == 1
    puts = result.json_lines()
    assert [p["status"] for p in puts] == ["PUT_OK", "MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL"]
    assert "line was not stored" in puts[2]["remark"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(spec.read_bytes())))   # the same from stdin
    result = run_cli("append", tmp_path / "s2", "--input", "-", "--json")
    assert result.code == 1
    assert [p["status"] for p in result.json_lines()] == ["PUT_OK", "MESSAGE_ILLEGAL", "MESSAGE_ILLEGAL"]


def test_input_that_is_not_utf8_or_comes_with_topic_is_a_usage_error(tmp_path, run_cli):
    spec = tmp_path / "in.jsonl"
    spec.write_bytes(b'{"topic":"T","queueId":0,"body":"ok"}\n{"topic":"T","queueId":0,"body":"\xff"}\n')
    result = run_cli("append", tmp_path / "s", "--input", spec)
    assert result.code == 2 and "input line 2: not UTF-8" in result.err
    assert not (tmp_path / "s").exists()
    result = run_cli("append", tmp_path / "s", "--input", spec, "--topic", "T")
    assert result.code == 2 and "not both" in result.err


def test_lone_surrogates_are_stored_as_java_stores_them(tmp_path, run_cli):
    """A Java String's getBytes(UTF-8) writes '?' for a lone surrogate; the tags code and the
    index keys are then those of the stored text, and the store verifies clean."""
    spec = tmp_path / "in.jsonl"
    spec.write_text(json.dumps({"topic": "T", "body": "x", "tags": "\udcff", "keys": "\ud800"}) + "\n")
    assert run_cli("append", tmp_path / "s", "--input", spec).code == 0
    assert run_cli("verify-crc", tmp_path / "s").code == 0
    (record,) = [l for l in run_cli("dump", tmp_path / "s", "commitlog", "--json").json_lines()
                 if l["type"] == "message"]
    assert record["tags"] == "?" and record["keys"] == "?"


def test_a_sync_append_that_finds_the_disk_full_says_where(tmp_path):
    """Sync-flushed appends are written with pwrite: a full disk is an error naming the file and
    the byte, not a SIGBUS, and the write position stays where the last whole record ended."""
    from mqtool.storage.mappedfile import MappedFile

    mf = MappedFile(tmp_path / "00000000000000000000", 4096, create=True)
    mf.append_with_pwrite = True
    assert mf.append(b"x" * 100) and mf.wrote_position == 100
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, mf._fd)                # the file's descriptor now writes to a full disk
    os.close(full)
    with pytest.raises(OSError) as caught:
        mf.append(b"y" * 100)
    assert caught.value.filename == str(mf.path) and "appending at byte 100" in caught.value.strerror
    assert mf.wrote_position == 100
    mf.close()
