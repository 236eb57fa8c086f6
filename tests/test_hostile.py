"""Hostile stores: damage of many kinds and hostile file systems, on copies of the real fixtures.

Two properties, over seeded random cases (more with MQTOOL_FUZZ_CASES=N):
- recover's promise: after exit 0 the store verifies clean; after exit 1 it names what is left
  and what to run next, and running that leaves a store that verifies clean; a refusal (exit 3
  or 4) changes nothing.
- every command on any damage: no internal error (exit 70), no traceback, no hang, and a
  read-only command changes no byte and no file time.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
from contextlib import contextmanager

import pytest

from helpers.damage import BATCH_MUTATIONS, HOSTILE, MUTATIONS, TIMER_MUTATIONS, damage, state


def damage_timer(root, rng):
    """Bytes of the timer store changed at random (a unit, a slot, the timercheck)."""
    choices = sorted((root / "timerlog").iterdir()) if (root / "timerlog").is_dir() else []
    choices += [p for p in (root / "timerwheel", root / "config" / "timercheck", root / "config" / "timermetrics")
                if p.is_file()]
    if not choices:
        return None
    path = rng.choice(choices)
    data = bytearray(path.read_bytes())
    if not data:
        return None
    pos = rng.randrange(min(len(data), 8192)) if path.name != "timerwheel" else rng.randrange(len(data))
    data[pos] ^= rng.choice([0x01, 0x80, 0xFF])
    path.write_bytes(bytes(data))
    return f"{path.relative_to(root)} byte {pos} changed"


CASES = int(os.environ.get("MQTOOL_FUZZ_CASES", "0"))
FIXTURE_NAMES = ["basic", "multifile", "features", "crash", "basic5", "garbage-tail", "flipped-body-byte", "timer5"]
SECONDS = 60       # a command that runs longer on these small stores hangs


@contextmanager
def deadline(seconds, what):
    def alarm(signum, frame):
        raise TimeoutError(f"hung: {what}")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _one_line_error(result):
    lines = [line for line in result.err.splitlines() if line.startswith("mqtool: ")]
    assert lines, result.err
    assert "Traceback" not in result.err


@pytest.mark.parametrize("seed", range(CASES or 60))
def test_recover_leaves_a_store_that_verifies_clean_or_names_what_is_left(seed, store_copy, run_cli):
    """Follow recover's advice, as an operator would, until the store verifies clean: each step
    recover names (rebuild-cq, salvage) mends what it says, and a few rounds always suffice."""
    rng = random.Random(seed)
    name = rng.choice(FIXTURE_NAMES)
    store = store_copy(name)
    said = damage(store, rng, TIMER_MUTATIONS if name == "timer5" else MUTATIONS, count=rng.choice([1, 1, 2, 3]))
    _follow_recovers_advice(store, rng, said, seed, run_cli)


@pytest.mark.parametrize("seed", range(CASES or 30))
def test_recover_mends_damaged_batch_queues_or_names_what_is_left(seed, store_copy, run_cli):
    """The same promise on the broker-written BatchCQ store (batchcq5): damage to its batch
    queues (a file lost, units zeroed, a field changed) as well as to the rest."""
    rng = random.Random(50_000 + seed)
    store = store_copy("batchcq5")
    said = damage(store, rng, BATCH_MUTATIONS * 3 + MUTATIONS, count=rng.choice([1, 1, 2]))
    _follow_recovers_advice(store, rng, said, seed, run_cli)


def _follow_recovers_advice(store, rng, said, seed, run_cli):
    flags = ["--no-quarantine"] if rng.random() < 0.2 else []
    for round in range(4):
        before = state(store)
        with deadline(SECONDS, f"recover after {said}"):
            result = run_cli("recover", *flags, store)
        assert result.code in (0, 1, 3, 4), (said, result.code, result.err)
        assert "Traceback" not in result.err
        if result.code in (3, 4):
            _one_line_error(result)
            assert state(store) == before, said
            return
        check = run_cli("verify-crc", store)
        if result.code == 0:
            assert check.code == 0, (said, round, check.out)
            return
        assert check.code == 1 or "changed nothing" in result.err, (said, result.err)
        assert "next: " in result.err, (said, result.err)
        if "salvage" in result.err:    # commitlog damage before the cut: salvage copies what is valid
            target = store.parent / f"salvaged-{seed}"
            drop = ["--drop-features"] if "salvage --drop-features" in result.err else []
            assert run_cli("salvage", *drop, store, target).code in (0, 1)
            assert run_cli("verify-crc", target).code == 0, said
            return
        index = "rebuild-cq --index" in result.err
        rebuilt = run_cli("rebuild-cq", *(["--index"] if index else []), store)
        assert rebuilt.code == 0 or "run `mqtool recover`" in rebuilt.out, (said, rebuilt.out, rebuilt.err)
    pytest.fail(f"no clean store after following recover's advice: {said}")


READERS = [
    ("info", "{store}"),
    ("info", "--json", "{store}"),
    ("dump", "{store}", "commitlog", "--limit", "50"),
    ("dump", "{store}", "commitlog", "--json", "--no-body"),
    ("dump", "{store}", "consumequeue"),
    ("dump", "{store}", "index"),
    ("dump", "{store}", "checkpoint"),
    ("dump", "{store}", "timerwheel", "--json"),
    ("dump", "{store}", "timerlog"),
    ("dump", "{store}", "timermetrics"),
    ("verify-crc", "{store}"),
    ("verify-crc", "--json", "--no-crc", "{store}"),
    ("lookup-by-key", "{store}", "--topic", "BasicTopic", "order-1"),
    ("stats", "{store}"),
    ("get", "{store}", "--topic", "BasicTopic", "--queue", "0", "--offset", "0"),
    ("export", "{store}", "--out", "{out}", "--format", "jsonl"),
    ("recover", "--dry-run", "{store}"),
    ("clean", "--dry-run", "--force", "{store}"),
    ("rebuild-cq", "--dry-run", "{store}"),
    ("lag", "--json", "{store}"),
    ("report", "{store}", "-o", "{out}"),
]
WRITERS = [("recover", "{store}"), ("rebuild-cq", "{store}"), ("clean", "--force", "{store}"),
           ("append", "{store}", "--topic", "BasicTopic", "--body", "x")]


@pytest.mark.parametrize("seed", range(CASES or 250))
def test_no_command_fails_inside_on_a_hostile_store(seed, store_copy, run_cli, tmp_path):
    rng = random.Random(10_000 + seed)
    store = store_copy(rng.choice(FIXTURE_NAMES))
    said = damage(store, rng, MUTATIONS + HOSTILE * 2 + [damage_timer], count=rng.choice([1, 2]))
    for n, command in enumerate(rng.sample(READERS, 3) + rng.sample(WRITERS, 1)):
        out = tmp_path / f"out{n}"
        args = [a.format(store=store, out=out) for a in command]
        before = state(store)
        with deadline(SECONDS, f"{args} after {said}"):
            result = run_cli(*args)
        assert result.code in (0, 1, 2, 3, 4), (said, args, result.code, result.err)
        assert "Traceback" not in result.err
        if result.code >= 2:
            _one_line_error(result)
        if command in READERS:
            assert state(store) == before, (said, args)
        shutil.rmtree(out, ignore_errors=True)
