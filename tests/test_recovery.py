"""recover, rebuild-cq and salvage on real broker stores, crafted damage and crashed processes."""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_info_and_layout import age_times, snapshot
from test_lookups import FIELDS, holds_key, queries

from mqtool.engine.clock import ManualClock
from mqtool.engine.store import MessageStore
from mqtool.engine.storecheckpoint import StoreCheckpoint
from mqtool.formats.commitlog import RECORD
from mqtool.storage.config import StoreConfig

from conftest import ALL_FIXTURES, expected_read, fixture_dir
from helpers.lockholder import holding_lock

HERE = Path(__file__).resolve().parent
SIZES = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=6000",
         "--set", "maxHashSlotNum=100", "--set", "maxIndexNum=400"]


def visible_messages(run_cli, store) -> dict:
    """Every message reachable through the consume queues: (topic, queue, offset) -> message."""
    units = [l for l in run_cli("dump", store, "consumequeue", "--json").json_lines() if l["type"] == "cq_unit"
             and l["ok"]]
    records = {l["commitLogOffset"]: l for l in run_cli("dump", store, "commitlog", "--json").json_lines()
               if l["type"] == "message"}
    return {(u["topic"], u["queueId"], u["offset"]): records[u["commitLogOffset"]] for u in units}


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_recover_keeps_exactly_what_the_broker_keeps(name, store_copy, run_cli):
    store = store_copy(name)
    plan = run_cli("recover", store, *SIZES, "--json")
    assert plan.code == 0, plan.err
    (report,) = plan.json_lines()
    lines = expected_read(name)
    assert report["cut"] == next(l for l in lines if l["type"] == "store")["maxPhyOffset"]
    assert report["mode"] == next(l for l in lines if l["type"] == "open")["recovery"]
    mine = visible_messages(run_cli, store)
    theirs = {(l["topic"], l["queueId"], l["queueOffset"]): l for l in lines if l["type"] == "message"}
    assert sorted(mine) == sorted(theirs)
    for key, message in theirs.items():
        for field in FIELDS:
            assert mine[key][field] == message[field], (key, field)
        assert mine[key]["body"] == message["body"]
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 0, verify.out
    assert not (store / "abort").exists()
    # a second recovery has nothing to do
    again = run_cli("recover", store, *SIZES, "--dry-run", "--json")
    assert again.code == 0 and again.json_lines()[0]["bytesCut"] == 0


@pytest.mark.parametrize("name", ["flipped-body-byte", "garbage-tail"])
def test_after_recover_key_lookups_are_the_brokers(name, store_copy, run_cli):
    store = store_copy(name)
    summary = json.loads((fixture_dir(name) / "summary.json").read_text())
    assert run_cli("recover", store, *SIZES).code == 0
    for query, answer in queries(name):
        result = run_cli("lookup-by-key", store, "--topic", query["topic"], query["key"], "--json")
        found = sorted(l["commitLogOffset"] for l in result.json_lines() if l["type"] == "message")
        real = sorted({m["commitLogOffset"] for m in answer if holds_key(m, query["topic"], query["key"])})
        assert found == real, query["indexKey"]
    if name == "garbage-tail":
        # the 64 garbage bytes are zeros now, and kept in the quarantine
        change = json.loads((fixture_dir(name) / "corruption.json").read_text())["changes"][0]
        data = (store / change["file"]).read_bytes()
        assert data[change["fileOffset"]:change["fileOffset"] + 64] == bytes(64)
        (qdir,) = (store / "quarantine").iterdir()
        saved = json.loads((qdir / "manifest.json").read_text())["entries"]
        assert [(qdir / e["saved"]).read_bytes().hex() for e in saved] == [change["newHex"]]
    else:
        assert summary["maxPhyOffsetAfterRecovery"] == run_cli("info", store, "--json").json_lines()[0][
            "commitlog"]["maxOffset"]


def test_dry_run_changes_nothing_and_says_what_it_would_do(store_copy, run_cli):
    store = store_copy("crash")
    age_times(store)
    before = snapshot(store)
    result = run_cli("recover", store, *SIZES, "--dry-run", "--json")
    assert result.code == 1
    (plan,) = result.json_lines()
    assert plan["mode"] == "abnormal" and plan["applied"] is False
    assert plan["removedFiles"] and plan["droppedIndexFiles"]
    assert snapshot(store) == before
    table = run_cli("recover", store, *SIZES, "--dry-run")
    assert "would remove commitlog file" in table.out
    assert snapshot(store) == before


def _as_a_reader(args):
    """Run mqtool as a user who may read but not write: this user where permissions bite, else
    (root, where they do not) the user `nobody`, through setpriv (a uid dropped in Python's
    preexec_fn cannot even start an interpreter installed under /root; setpriv's exec can)."""
    command = [sys.executable, "-m", "mqtool", *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "HOME": "/nonexistent"}
    if os.geteuid() == 0:
        import shutil
        if shutil.which("setpriv") is None:
            pytest.skip("as root, permissions do not bite, and there is no setpriv to drop to `nobody`")
        drop = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
        probe = subprocess.run([*drop, sys.executable, "-c", "import mqtool.cli.main"], capture_output=True, env=env)
        if probe.returncode:
            pytest.skip(f"`nobody` cannot run this checkout's Python: {probe.stderr.decode()[-200:]}")
        command = drop + command
    return subprocess.run(command, capture_output=True, text=True, env=env)


def test_dry_run_needs_only_read_access(extracted):
    """A dry run plans from what it reads: a user who can read the store but not write it (not
    even its lock file) gets the plan; while a broker holds the lock it is still refused."""
    import shutil
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="mqtool-readonly-"))
    store = base / "store"
    try:
        shutil.copytree(extracted("crash"), store, symlinks=True)
        os.chmod(base, 0o755)
        for dirpath, _, filenames in os.walk(store):
            os.chmod(dirpath, 0o555)
            for name in filenames:
                os.chmod(os.path.join(dirpath, name), 0o444)
        # bytes and mtimes: O_NOATIME is the owner's alone, so a reader who does not own a file
        # cannot keep its access time (docs/promises.md)
        before = {path: seen[:2] for path, seen in snapshot(store).items()}
        result = _as_a_reader(["recover", *SIZES, "--dry-run", "--json", str(store)])
        assert result.returncode == 1, result.stderr     # 1: the crash store needs recovery
        (plan,) = [json.loads(line) for line in result.stdout.splitlines()]
        assert plan["mode"] == "abnormal" and plan["applied"] is False and plan["removedFiles"]
        assert {path: seen[:2] for path, seen in snapshot(store).items()} == before
        with holding_lock(store) as holder:
            held = _as_a_reader(["recover", *SIZES, "--dry-run", str(store)])
            assert held.returncode == 3 and f"process {holder.pid}" in held.stderr, held.stderr
    finally:
        for dirpath, _, _ in os.walk(base):
            os.chmod(dirpath, 0o755)
        shutil.rmtree(base)


def test_recover_never_creates_a_store(tmp_path, run_cli):
    for args in ((), ("--dry-run",)):
        assert run_cli("recover", tmp_path / "nothing", *args).code == 4
    assert not (tmp_path / "nothing").exists()
    (tmp_path / "empty").mkdir()
    assert run_cli("recover", tmp_path / "empty").code == 4
    assert list((tmp_path / "empty").iterdir()) == []


def test_recover_refuses_while_a_broker_holds_the_lock(store_copy):
    store = store_copy("basic")
    with holding_lock(store) as holder:
        mqtool = os.path.join(os.path.dirname(sys.executable), "mqtool")
        for command in (["recover"], ["rebuild-cq"]):
            proc = subprocess.run([mqtool, *command, str(store)], capture_output=True, text=True)
            assert proc.returncode == 3, proc.stderr
            assert f"process {holder.pid}" in proc.stderr


def test_quarantine_dir_and_no_quarantine(store_copy, tmp_path, run_cli):
    store = store_copy("flipped-body-byte")
    elsewhere = tmp_path / "keep"
    assert run_cli("recover", store, *SIZES, "--quarantine-dir", elsewhere).code == 0
    (qdir,) = elsewhere.iterdir()
    assert (qdir / "manifest.json").exists()
    assert not (store / "quarantine").exists()
    other = store_copy("garbage-tail")
    assert run_cli("recover", other, *SIZES, "--no-quarantine").code == 0
    assert not (other / "quarantine").exists()


# ------------------------------------------------------------- the abnormal start file

def spread_store(root: Path, *, files: int = 6) -> list[int]:
    """A store whose commitlog files start at known store times (10 s apart); left crashed."""
    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200,
                         maxHashSlotNum=16, maxIndexNum=64)
    store = MessageStore(config, clock=ManualClock(1_800_000_000_000)).open()
    starts = []
    ts = 1_800_000_000_000
    while len(store.commitlog_queue.files) <= files:
        before = len(store.commitlog_queue.files)
        from mqtool.engine.message import MessageInner

        result = store.put(MessageInner(topic="Spread", queue_id=0, body=b"x" * 900, properties={"KEYS": "k"},
                                        store_timestamp=ts))
        if len(store.commitlog_queue.files) != before or not starts:
            mf = store.commitlog_queue.find_by_offset(result.wrote_offset)
            if mf.file_from_offset == result.wrote_offset:
                starts.append(ts)
        ts += 1000
    store.halt()
    return starts


def set_checkpoint(root: Path, physic: int, logics: int, index: int) -> None:
    cp = StoreCheckpoint(root / "checkpoint")
    cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp = physic, logics, index
    cp.flush()
    cp.close()


def plan_for(root: Path, **settings) -> dict:
    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200,
                         maxHashSlotNum=16, maxIndexNum=64, **settings)
    store = MessageStore(config).open(dry_run=True)
    return store.recovery_plan


def test_abnormal_recovery_starts_at_the_newest_file_stored_before_the_safe_time(tmp_path):
    root = tmp_path / "s"
    starts = spread_store(root)
    assert len(starts) >= 5
    # min(physic, logics) - 3 s falls just after the 3rd file's first record
    set_checkpoint(root, physic=starts[2] + 3000, logics=starts[4], index=0)
    assert plan_for(root).walk_from == 2 * 4096
    # ... and 1 ms before it: the margin of 3 s moves the start a file back
    set_checkpoint(root, physic=starts[2] + 2999, logics=starts[4], index=0)
    assert plan_for(root).walk_from == 1 * 4096
    # logics is the smaller one now
    set_checkpoint(root, physic=starts[4], logics=starts[3] + 3000, index=0)
    assert plan_for(root).walk_from == 3 * 4096
    # no file qualifies: file 0
    set_checkpoint(root, physic=starts[0], logics=starts[0], index=0)
    assert plan_for(root).walk_from == 0


def test_message_index_safe_brings_the_index_time_in(tmp_path):
    root = tmp_path / "s"
    starts = spread_store(root)
    set_checkpoint(root, physic=starts[4] + 3000, logics=starts[4] + 3000, index=starts[1])
    assert plan_for(root).walk_from == 4 * 4096                            # index time ignored
    assert plan_for(root, messageIndexSafe=True).walk_from == 1 * 4096     # min with the index time
    assert plan_for(root, messageIndexSafe=True, messageIndexEnable=False).walk_from == 4 * 4096


def test_empty_newest_files_a_crash_left_are_set_aside(tmp_path, run_cli):
    """Creating a file is an open, then a resize: a crash in between leaves a 0-byte newest file
    (commitlog, consume queue or index), which a 4.9.8 broker refuses to load and a 5.x broker
    deletes.  recover sets such files aside (kept in the quarantine) and the store goes on."""
    root = tmp_path / "s"
    spread_store(root, files=2)
    names = {"commitlog": sorted((root / "commitlog").iterdir())[-1],
             "cq": sorted((root / "consumequeue" / "Spread" / "0").iterdir())[-1],
             "index": sorted((root / "index").iterdir())[-1]}
    empty = [names["commitlog"].parent / f"{int(names['commitlog'].name) + 4096:020d}",
             names["cq"].parent / f"{int(names['cq'].name) + 200:020d}",
             names["index"].parent / "29991231235959999"]
    for path in empty:
        path.touch()
    sizes = ["--set", "mappedFileSizeCommitLog=4096", "--set", "mappedFileSizeConsumeQueue=200",
             "--set", "maxHashSlotNum=16", "--set", "maxIndexNum=64"]
    assert run_cli("verify-crc", root, *sizes).code == 1          # read-only: reported, not hidden
    dry = run_cli("recover", root, *sizes, "--dry-run", "--json")
    assert dry.code == 1, dry.err
    assert sorted(dry.json_lines()[0]["emptyFiles"]) == sorted(map(str, empty))
    assert all(p.exists() for p in empty)
    done = run_cli("recover", root, *sizes, "--json")
    assert done.code == 0, done.err
    quarantine = Path(done.json_lines()[0]["quarantine"])
    manifest = json.loads((quarantine / "manifest.json").read_text())
    assert sorted(e["source"] for e in manifest["entries"] if "0-byte" in e["reason"]) == sorted(map(str, empty))
    assert not any(p.exists() for p in empty)
    assert run_cli("verify-crc", root, *sizes).code == 0
    # the store rolls into those names again as it grows
    specs = "".join(json.dumps({"topic": "Spread", "queueId": 0, "body": "y" * 900}) + "\n" for _ in range(12))
    spec_file = tmp_path / "more.jsonl"
    spec_file.write_text(specs)
    assert run_cli("append", root, *sizes, "--input", spec_file).code == 0
    assert run_cli("verify-crc", root, *sizes).code == 0


def test_empty_files_that_are_not_crash_leftovers_are_refused(tmp_path, run_cli):
    """Only a 0-byte newest file named as the store names its files, and holding nothing the
    store points at, is set aside: an emptied commitlog file that consume queues point into
    lost messages (refused, exit 3), a stray empty file is not the store's (exit 4)."""
    sizes = ["--set", "mappedFileSizeCommitLog=4096", "--set", "mappedFileSizeConsumeQueue=200",
             "--set", "maxHashSlotNum=16", "--set", "maxIndexNum=64"]
    root = tmp_path / "s"
    spread_store(root, files=2)
    stray = root / "consumequeue" / "Spread" / "0" / "zz-notes"
    stray.touch()
    assert run_cli("recover", root, *sizes, "--dry-run").code == 4
    assert run_cli("recover", root, *sizes).code == 4
    assert stray.exists()
    stray.unlink()
    files = sorted((root / "commitlog").iterdir())
    if not any(files[-1].read_bytes()):               # the pre-created next file: not the point here
        files.pop().unlink()
    last = files[-1]
    before = last.read_bytes()
    last.write_bytes(b"")                              # its messages are gone
    for args in (["recover", "--dry-run"], ["recover"], ["rebuild-cq"]):
        result = run_cli(args[0], root, *sizes, *args[1:])
        assert result.code == 3, (args, result.err)
        assert last.name in result.err
    assert last.exists() and last.stat().st_size == 0 and before


def test_a_file_of_the_wrong_size_is_damage_for_the_writing_commands(store_copy, run_cli):
    """A broker refuses to load a file of another length; so do recover and clean, as damage
    (exit 1), naming the file."""
    store = store_copy("multifile")
    victim = sorted((store / "commitlog").iterdir())[2]
    with open(victim, "r+b") as fh:
        fh.truncate(1000)
    for args in (["recover"], ["recover", "--dry-run"], ["clean", "--now"]):
        result = run_cli(args[0], store, *args[1:])
        assert result.code == 1 and victim.name in result.err and "1000 bytes" in result.err, (args, result.err)
    assert victim.stat().st_size == 1000


# ------------------------------------------------------------------ rebuild-cq

@pytest.mark.parametrize("name", ["basic", "features", "multifile", "basic5"])
def test_rebuild_cq_writes_the_brokers_files(name, store_copy, run_cli):
    store = store_copy(name)
    import shutil

    shutil.rmtree(store / "consumequeue")
    result = run_cli("rebuild-cq", store, *SIZES, "--json")
    assert result.code == 0, result.err
    for line in (fixture_dir(name) / "tree.txt").read_text().splitlines():
        if "\tconsumequeue/" in line:
            _, sha, rel = line.split("\t")
            assert hashlib.sha256((store / rel).read_bytes()).hexdigest() == sha, rel


def test_rebuild_cq_with_index_verifies_clean(store_copy, run_cli):
    store = store_copy("multifile")
    result = run_cli("rebuild-cq", store, *SIZES, "--index", "--json")
    assert result.code == 0
    (report,) = result.json_lines()
    assert report["records"] == 2350 and report["keys"] > 0
    assert run_cli("verify-crc", store).code == 0
    quarantined = list((store / "quarantine").rglob("*"))
    assert any("consumequeue" in str(p) for p in quarantined) and any("/index/" in str(p) for p in quarantined)


def test_rebuild_cq_for_one_topic_leaves_the_others_alone(store_copy, run_cli):
    store = store_copy("multifile")
    other = store / "consumequeue" / "OrderTopic" / "1" / "00000000000000000000"
    before = other.stat().st_mtime_ns
    (store / "consumequeue" / "PaymentTopic" / "2" / "00000000000000000000").unlink()
    assert run_cli("rebuild-cq", store, *SIZES, "--topic", "PaymentTopic").code == 0
    assert other.stat().st_mtime_ns == before
    assert run_cli("verify-crc", store, "--scope", "cq").code == 0


def hostile_store(root: Path) -> None:
    """A commitlog whose records name topics that must never become paths."""
    (root / "commitlog").mkdir(parents=True)
    records = []
    offset = 0
    for i, topic in enumerate(["Good", "../escape", "a/b", "x\x00y", "Good", "." * 3]):
        data = RECORD.build(dict(queueId=0, flag=0, queueOffset=0 if topic != "Good" else i // 4,
                                 physicalOffset=offset, sysFlag=0, bornTimestamp=1, bornHost="1.2.3.4:5",
                                 storeTimestamp=2, storeHost="127.0.0.1:10911", reconsumeTimes=0,
                                 preparedTransactionOffset=0, body=b"hostile", topic=topic,
                                 properties="KEYS\x01k"))
        records.append(data)
        offset += len(data)
    blob = b"".join(records)
    (root / "commitlog" / "00000000000000000000").write_bytes(blob + bytes(65536 - len(blob)))
    (root / "checkpoint").write_bytes(bytes(4096))


def test_rebuild_and_salvage_never_turn_hostile_topics_into_paths(tmp_path, run_cli):
    store = tmp_path / "store"
    hostile_store(store)
    result = run_cli("rebuild-cq", store, *SIZES, "--index", "--json")
    assert result.code == 1
    (report,) = result.json_lines()
    assert set(report["unsafeTopics"]) == {"../escape", "a/b", "x\x00y", "..."}
    assert sorted(p.name for p in (store / "consumequeue").iterdir()) == ["Good"]
    assert not (tmp_path / "escape").exists() and not (store / "escape").exists()
    out = tmp_path / "out"
    salvage = run_cli("salvage", store, out, *SIZES, "--json")
    assert salvage.code == 1
    assert sorted(p.name for p in (out / "consumequeue").iterdir()) == ["Good"]
    assert not (tmp_path / "escape").exists()


# --------------------------------------------------------------------- salvage

def test_salvage_keeps_every_undamaged_message(store_copy, tmp_path, run_cli):
    store = store_copy("multifile")
    damaged = store / "commitlog" / "00000000000000131072"
    raw = bytearray(damaged.read_bytes())
    raw[3000:3400] = os.urandom(400)           # the middle of the store
    damaged.write_bytes(bytes(raw))
    before = snapshot(store)
    intact = [l for l in run_cli("dump", store, "commitlog", "--json").json_lines()
              if l["type"] == "message" and l["ok"]]
    out = tmp_path / "out"
    result = run_cli("salvage", store, out, *SIZES, "--json")
    assert result.code == 1
    (report,) = result.json_lines()
    assert report["copied"] == len(intact) and report["damage"]
    assert snapshot(store) == before            # the source is only read
    copied = [l for l in run_cli("dump", out, "commitlog", "--json").json_lines() if l["type"] == "message"]
    key = lambda m: (m["topic"], m["uniqKey"] or "", m["body"], m["storeTimestamp"], m["propertiesString"])  # noqa: E731
    assert sorted(map(key, copied)) == sorted(map(key, intact))
    assert run_cli("verify-crc", out).code == 0


# -------------------------------------------------------------- crash torture

@pytest.mark.slow
def test_recover_after_sigkill_keeps_every_acknowledged_message(tmp_path, run_cli):
    root = tmp_path / "store"
    rng = random.Random(7)
    acknowledged: dict[int, int] = {}
    index = 0
    for _ in range(8):
        proc = subprocess.Popen([sys.executable, str(HERE / "helpers" / "torture_worker.py"), str(root), str(index), "100000"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(HERE.parent)})
        assert proc.stdout.readline().strip() == "open"
        # the kill moment counts from the first acknowledged put, so a slow first put (modules
        # and compiled kernels loading on a busy machine) cannot starve the test of acknowledgements
        lines = [proc.stdout.readline()]
        deadline = time.monotonic() + rng.uniform(0.05, 0.5)
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate()
        for line in lines + rest.splitlines():
            parts = line.split()
            if parts and parts[0] == "ok":
                acknowledged[int(parts[1])] = int(parts[2])
                index = max(index, int(parts[1]) + 1)
        index += 1000
        settings = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=1000",
                    "--set", "maxHashSlotNum=64", "--set", "maxIndexNum=256"]
        dry = run_cli("recover", root, *settings, "--dry-run", "--json")
        assert dry.code in (0, 1), dry.err
        plan = dry.json_lines()[0]
        tail = b""
        if plan["bytesCut"]:
            last = sorted((root / "commitlog").iterdir())
            mf = next(p for p in last if int(p.name) <= plan["cut"] < int(p.name) + 65536)
            data = mf.read_bytes()
            tail = data[plan["cut"] - int(mf.name):plan["cut"] - int(mf.name) + plan["bytesCut"]]
        result = run_cli("recover", root, *settings, "--json")
        assert result.code == 0, result.err
        (report,) = result.json_lines()
        assert run_cli("verify-crc", root, *settings).code == 0
        if tail:
            manifest = json.loads((Path(report["quarantine"]) / "manifest.json").read_text())
            kept = [e for e in manifest["entries"] if e["kind"] == "range" and "commitlog" in e["source"]]
            assert (Path(report["quarantine"]) / kept[0]["saved"]).read_bytes() == tail
    records = {l["commitLogOffset"]: l for l in run_cli("dump", root, "commitlog", "--json").json_lines()
               if l["type"] == "message"}
    assert len(acknowledged) > 20
    for i, offset in acknowledged.items():
        assert records[offset]["keys"] == f"key-{i}" and records[offset]["ok"]


def test_salvage_never_writes_into_the_store_it_reads(store_copy, run_cli):
    store = store_copy("basic")
    result = run_cli("salvage", store, store / "out")
    assert result.code == 3 and "overlaps" in result.err
    assert not (store / "out").exists()


def test_rebuild_keeps_commitlog_order_around_records_the_kernels_cannot_take(store_copy, run_cli):
    """A record whose tags are not UTF-8 is dispatched record by record; the fast records around
    it must still reach every queue and the index in commitlog order, as a broker's reput does."""
    import struct

    store = store_copy("basic")
    path = sorted((store / "commitlog").iterdir())[0]
    data = bytearray(path.read_bytes())
    marks = [i for i in range(len(data)) if data.startswith(b"TAGS\x01Tag", i)]
    for at in marks[5:40:7]:             # a few records in the middle (4.9.8 has no CRC over properties)
        data[at + 5] = 0xFF
    path.write_bytes(bytes(data))
    assert run_cli("rebuild-cq", "--index", store).code == 0
    for queue in sorted((store / "consumequeue" / "BasicTopic").iterdir()):
        units = (queue / "00000000000000000000").read_bytes()
        offsets = [struct.unpack_from(">q", units, i)[0] for i in range(0, len(units), 20)
                   if units[i:i + 20] != bytes(20)]
        assert offsets == sorted(offsets) and len(offsets) >= 12, queue
    index = sorted((store / "index").iterdir())[0].read_bytes()
    count = struct.unpack_from(">i", index, 36)[0]        # indexCount (entry 0 is never used)
    first = 40 + 100 * 4                                   # the fixtures' 100 slots
    phys = [struct.unpack_from(">q", index, first + i * 20 + 4)[0] for i in range(1, count)]
    assert len(phys) > 50 and phys == sorted(phys)
    assert run_cli("verify-crc", store).code == 0
