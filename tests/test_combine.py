"""The combining protocol under MessageStore.put: batches, answers, failures."""

from __future__ import annotations

import threading
import time

import pytest

from mqtool.combine import Combiner


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
