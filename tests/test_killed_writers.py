"""Every writer picks up after a SIGKILL (issue 22, 2): append into a new directory, rebuild-cq,
salvage, recover and clean are killed at random points; the rerun exits 0 and leaves what an
uninterrupted run leaves on a copy, and verify-crc finds nothing.  Marked slow: a few kills each,
every one a fresh process."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqtool.formats import index as index_format

pytestmark = pytest.mark.slow

_SCRIPT = Path(sys.executable).with_name("mqtool")
MQTOOL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mqtool"]
KILLS = 3       # kill points per writer
SLOTS = 64
SMALL = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=6000",
         "--set", f"maxHashSlotNum={SLOTS}", "--set", "maxIndexNum=256"]


def mqtool(*args, check=None, **kw) -> subprocess.CompletedProcess:
    done = subprocess.run(MQTOOL + [str(a) for a in args], capture_output=True, text=True, timeout=120, **kw)
    if check is not None:
        assert done.returncode == check, (args, done.returncode, done.stderr[-2000:])
    return done


def lines(count: int, start: int = 0) -> str:
    return "".join(json.dumps({"topic": f"K{i % 3}", "queueId": i % 4, "keys": f"key-{i}", "tags": "t",
                               "bornTimestamp": 1700000000000 + i, "body": f"message {i} " + "x" * (i % 97)})
                   + "\n" for i in range(start, start + count))


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A store of 3,000 messages in 64 KiB commitlog files, small queue and index files."""
    root = tmp_path_factory.mktemp("killbase")
    source = root / "in.jsonl"
    source.write_text(lines(3000))
    mqtool("append", root / "store", "--input", source, *SMALL, check=0)
    return root / "store"


def snapshot(root: Path, skip=("quarantine", "trash", "lock", "abort", "abort.bak", "checkpoint")) -> dict:
    """{relative path: sha1} of the store's files, the index files as what they answer: the (key
    hash, commitlog offset) of their entries that point at records still in the commitlog.  Their
    bytes depend on how they were made (a killed writer's abort file makes the next command's
    recovery rebuild them from what is left, without the entries of deleted records), and their
    names are the time they were made."""
    out, entries = {}, set()
    logs = sorted(p.name for p in (root / "commitlog").iterdir()) if (root / "commitlog").is_dir() else []
    low = int(logs[0]) if logs else 0
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_dir() or rel.parts[0] in skip:
            continue
        data = path.read_bytes()
        if rel.parts[0] == "index":
            count = index_format.HEADER_STRUCT.unpack_from(data)[5]     # indexCount (entry 0 unused)
            for n in range(1, count):
                at = index_format.entry_position(SLOTS, n)
                key_hash, offset, _, _ = index_format.ENTRY_STRUCT.unpack_from(data, at)
                if offset >= low:
                    entries.add((key_hash, offset))
            continue
        out[str(rel)] = hashlib.sha1(data).hexdigest()
    out["index entries"] = hashlib.sha1(repr(sorted(entries)).encode()).hexdigest()
    return out


def messages(store: Path) -> list[tuple]:
    found = mqtool("dump", store, "commitlog", "--json")
    return [(m["topic"], m["queueId"], m["queueOffset"], m["commitLogOffset"], m["keys"], m["body"])
            for m in map(json.loads, found.stdout.splitlines()) if m["type"] == "message" and m.get("ok")]


def kill_during(args, delay: float, ready=None) -> None:
    """Start mqtool, wait until ready() (when given) and then delay seconds, and SIGKILL it."""
    proc = subprocess.Popen(MQTOOL + [str(a) for a in args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        if ready is not None:
            deadline = time.monotonic() + 60
            while not ready() and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
        time.sleep(delay)
    finally:
        proc.kill()
        proc.wait()


def timed(*args, check=0) -> float:
    started = time.monotonic()
    mqtool(*args, check=check)
    return time.monotonic() - started


def _copy(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def _has(directory: Path, prefix: str):
    def ready() -> bool:
        try:
            return any(name.startswith(prefix) for name in os.listdir(directory))
        except OSError:
            return False
    return ready


def test_append_into_a_new_directory_killed_then_rerun(tmp_path):
    rng = random.Random(22)
    source = tmp_path / "in.jsonl"
    source.write_text(lines(4000))
    whole = tmp_path / "whole"
    took = timed("append", whole, "--input", source, "--flush", "sync", *SMALL)
    expected = messages(whole)
    for k in range(KILLS):
        store = tmp_path / f"killed{k}"
        kill_during(["append", store, "--input", source, "--flush", "sync", *SMALL], rng.uniform(0.1, 0.9) * took)
        if store.exists():     # no store, or one every command opens
            assert mqtool("info", store).returncode != 4
        stored = len(messages(store)) if store.exists() else 0
        rest = tmp_path / f"rest{k}.jsonl"
        rest.write_text("".join(source.read_text().splitlines(keepends=True)[stored:]))
        mqtool("append", store, "--input", rest, "--flush", "sync", *SMALL, check=0)
        assert messages(store) == expected
        mqtool("verify-crc", store, check=0)


def test_a_new_store_killed_before_its_first_folder_opens_everywhere(tmp_path):
    """`mkdir d && : > d/lock`: what a kill right after taking the lock leaves."""
    store = tmp_path / "r4"
    store.mkdir()
    (store / "lock").write_bytes(b"")
    for args in (["info", store], ["verify-crc", store], ["dump", store, "commitlog"], ["recover", store],
                 ["stats", store], ["rebuild-cq", store]):
        assert mqtool(*args).returncode == 0, args
    mqtool("append", store, "--topic", "T", "--body", "x", check=0)
    assert len(messages(store)) == 1


def test_rebuild_cq_killed_then_rerun(base, tmp_path):
    rng = random.Random(23)
    whole = _copy(base, tmp_path / "whole")
    took = timed("rebuild-cq", whole, "--index", *SMALL)
    expected = snapshot(whole)
    for k in range(KILLS):
        store = _copy(base, tmp_path / f"killed{k}")
        if k == 0:
            kill_during(["rebuild-cq", store, "--index", *SMALL], rng.uniform(0, 0.02), ready=_has(store, ".rebuild-"))
        else:
            kill_during(["rebuild-cq", store, "--index", *SMALL], rng.uniform(0.3, 1.0) * took)
        again = mqtool("rebuild-cq", store, "--index", *SMALL, check=0)
        if any(p.name.startswith(".rebuild-") for p in (tmp_path / f"killed{k}").iterdir()):
            pytest.fail("a staging folder is left")
        assert snapshot(store) == expected, again.stdout
        mqtool("verify-crc", store, check=0)


def test_a_killed_rebuild_staging_is_named_by_verify_and_cleared_by_recover(base, tmp_path):
    store = _copy(base, tmp_path / "s")
    kill_during(["rebuild-cq", store, "--index", *SMALL], 0.005, ready=_has(store, ".rebuild-"))
    staged = [p.name for p in store.iterdir() if p.name.startswith(".rebuild-")]
    if not staged:
        pytest.skip("the run ended before the kill")
    check = mqtool("verify-crc", store, "--json", *SMALL)
    summary = json.loads(check.stdout.splitlines()[-1])
    assert [s["path"] for s in summary["staging"]] == [staged[0] + "/"] and not summary["staging"][0]["running"]
    assert "killed rebuild-cq run" in mqtool("verify-crc", store, *SMALL).stderr
    done = mqtool("recover", store, *SMALL)
    assert done.returncode in (0, 1), done.stderr   # the killed run may have left queues to rebuild
    assert f"cleared {staged[0]}/" in done.stdout
    assert not (store / staged[0]).exists()
    mqtool("rebuild-cq", store, "--index", *SMALL, check=0)


def test_salvage_killed_then_rerun(tmp_path, extracted):
    rng = random.Random(24)
    damaged = extracted("garbage-tail")
    out = tmp_path / "whole"
    took = timed("salvage", damaged, out, check=1)
    expected = messages(out)
    for k in range(KILLS):
        target = tmp_path / f"out{k}"
        if k == 0:
            kill_during(["salvage", damaged, target], rng.uniform(0, 0.01), ready=_has(tmp_path, f".out{k}.salvage-"))
        else:
            kill_during(["salvage", damaged, target], rng.uniform(0.3, 1.0) * took)
        if target.exists() and any(target.iterdir()):   # OUT appears only complete: killed after the rename
            assert messages(target) == expected
            assert mqtool("salvage", damaged, target).returncode == 2     # a new or empty OUT only
        else:
            again = mqtool("salvage", damaged, target)
            assert again.returncode == 1, again.stderr      # the damage is skipped again, and said
            assert messages(target) == expected
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".out{k}.salvage-")]
        mqtool("verify-crc", target, check=0)


def _crashed(base: Path, target: Path) -> Path:
    """base with garbage after its last record and the abort file of a crash."""
    store = _copy(base, target)
    last = sorted((store / "commitlog").iterdir())[-1]
    data = bytearray(last.read_bytes())
    end = len(data.rstrip(b"\0"))
    data[end:end + 300] = bytes(random.Random(5).randrange(256) for _ in range(300))
    last.write_bytes(bytes(data))
    (store / "abort").write_bytes(b"")
    return store


def test_recover_killed_then_rerun(base, tmp_path):
    rng = random.Random(25)
    whole = _crashed(base, tmp_path / "whole")
    took = timed("recover", whole, *SMALL)
    expected = snapshot(whole)
    for k in range(KILLS):
        store = _crashed(base, tmp_path / f"killed{k}")
        kill_during(["recover", store, *SMALL], rng.uniform(0.3, 1.0) * took)
        mqtool("recover", store, *SMALL, check=0)
        assert snapshot(store) == expected
        mqtool("verify-crc", store, check=0)


def test_clean_killed_then_rerun(base, tmp_path):
    rng = random.Random(26)
    args = ["--retention-bytes", "300K", "--now", "--delete-delay", "0", *SMALL]
    whole = _copy(base, tmp_path / "whole")
    took = timed("clean", whole, *args)
    expected = snapshot(whole)
    assert len(expected) < len(snapshot(base))     # it deleted something
    for k in range(KILLS):
        store = _copy(base, tmp_path / f"killed{k}")
        kill_during(["clean", store, *args], rng.uniform(0.3, 1.0) * took)
        mqtool("clean", store, *args, check=0)
        assert snapshot(store) == expected
        mqtool("verify-crc", store, check=0)
