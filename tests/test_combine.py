"""The combining protocol under MessageStore.put: batches, answers, failures."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest
from helpers.sigint import default_sigint

from mqtool.engine.combine import Combiner


def run_threads(target, count):
    workers = [threading.Thread(target=target, args=(t,)) for t in range(count)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
        assert not w.is_alive(), "a caller was left waiting"


def test_every_caller_gets_its_own_answer_and_calls_are_batched():
    batches = []

    def run_batch(items):
        batches.append(len(items))
        time.sleep(0.001)            # like an fsync: the others queue up meanwhile
        return [item * 2 for item in items]

    combiner = Combiner(run_batch)
    answers = {}

    def caller(t):
        for i in range(50):
            answers[(t, i)] = combiner.submit(t * 1000 + i)

    run_threads(caller, 16)
    assert answers == {(t, i): 2 * (t * 1000 + i) for t in range(16) for i in range(50)}
    assert sum(batches) == 16 * 50
    assert max(batches) > 1 and len(batches) < 16 * 50 / 2
    assert combiner.waiting() == 0


def test_a_failed_batch_fails_each_of_its_callers_and_the_next_batches_run():
    def run_batch(items):
        time.sleep(0.001)
        if any(item < 0 for item in items):
            raise OSError("disk said no")
        return list(items)

    combiner = Combiner(run_batch)
    outcomes = {}

    def caller(t):
        for i in range(20):
            item = -1 if (t, i) == (3, 5) else t * 100 + i
            try:
                outcomes[(t, i)] = combiner.submit(item)
            except OSError as exc:
                outcomes[(t, i)] = exc

    run_threads(caller, 8)
    failed = [key for key, value in outcomes.items() if isinstance(value, OSError)]
    assert (3, 5) in failed
    assert len(failed) < len(outcomes)          # only the poisoned batch failed
    for key, value in outcomes.items():
        if key not in failed:
            assert value == key[0] * 100 + key[1]
    with pytest.raises(OSError):
        combiner.submit(-1)                     # a lone caller runs its own batch
    assert combiner.submit(7) == 7


def test_a_batch_answered_short_fails_its_callers_instead_of_stranding_them():
    def run_batch(items):
        time.sleep(0.001)
        return list(items)[1:]       # one answer missing

    combiner = Combiner(run_batch)
    outcomes = []

    def caller(t):
        for i in range(10):
            try:
                outcomes.append(combiner.submit(i))
            except RuntimeError as exc:
                outcomes.append(exc)

    run_threads(caller, 6)
    assert len(outcomes) == 60 and all(isinstance(o, RuntimeError) for o in outcomes)


CTRL_C_STORM = textwrap.dedent("""
    import os, random, signal, threading, time
    from collections import Counter
    from mqtool.engine.combine import Combiner

    runs = Counter()
    def run_batch(items):
        for item in items:
            runs[item] += 1
        time.sleep(random.random() * 0.0003)
        return [("done", item) for item in items]

    combiner = Combiner(run_batch)
    answers, worker_errors, stop = {}, [], threading.Event()

    def worker(t):
        i = 0
        while not stop.is_set():
            try:
                answers[(t, i)] = combiner.submit((t, i))
            except BaseException as exc:
                worker_errors.append(repr(exc))
            i += 1

    go = threading.Event()     # the storm starts once sender.start() has returned (a SIGINT while
                               # start() waits for the thread would hit the harness, not the combiner)

    def ctrl_c():
        go.wait()
        while not stop.is_set():
            time.sleep(random.random() * 0.002)
            os.kill(os.getpid(), signal.SIGINT)

    def watchdog():
        time.sleep(20)
        print("HUNG", combiner.waiting(), flush=True)
        os._exit(3)

    workers = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(8)]
    for w in workers:
        w.start()
    threading.Thread(target=watchdog, daemon=True).start()
    sender = threading.Thread(target=ctrl_c, daemon=True)
    sender.start()
    go.set()
    deadline, i, interrupted = time.monotonic() + 1.5, 0, 0
    while True:
        try:
            while time.monotonic() < deadline:
                try:
                    assert combiner.submit(("main", i)) == ("done", ("main", i))
                except KeyboardInterrupt:
                    interrupted += 1
                i += 1
            stop.set()
            sender.join()
            break
        except KeyboardInterrupt:
            interrupted += 1
    for j in range(10):
        assert combiner.submit(("after", j)) == ("done", ("after", j))
    for w in workers:
        w.join(5)
    stuck = [w.name for w in workers if w.is_alive()]
    wrong = [k for k, v in answers.items() if v != ("done", k)]
    twice = [k for k, v in runs.items() if v > 1]
    print(interrupted, len(answers), stuck, wrong[:3], twice[:3], worker_errors[:3], combiner.waiting(), flush=True)
    os._exit(0)
""")


def test_ctrl_c_storms_on_the_main_thread_strand_no_caller():
    """The main thread submits among 8 workers while SIGINT arrives every ~1 ms: it sees its
    Ctrl-Cs, nobody waits for ever, no worker sees one, every item runs once."""
    proc = subprocess.run([sys.executable, "-c", CTRL_C_STORM], capture_output=True, text=True, timeout=60,
                          preexec_fn=default_sigint)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = proc.stdout.strip().split(" ", 2)   # Ctrl-Cs seen, worker answers, what must be empty
    assert int(line[0]) > 50 and int(line[1]) > 1000, proc.stdout
    assert line[2] == "[] [] [] [] 0", proc.stdout
