"""engine/behind.Behind: work in other threads, what must keep its order kept in order."""

from __future__ import annotations

import threading

import pytest

from mqtool.engine.behind import Behind


def test_pieces_are_made_at_once_and_their_then_runs_in_order():
    """With two workers the second piece is made while the first still is (the first waits for
    the second to start), and each then() runs in the order of run(), whichever piece is made
    first: dump's JSON lines are rendered two blocks at once and written in order."""
    second_started = threading.Event()
    written = []

    def make(i):
        if i == 0:
            assert second_started.wait(5), "the second piece was not made while the first was"
        else:
            second_started.set()
        return i

    with Behind(workers=2) as behind:
        for i in range(6):
            behind.run(make, i, then=written.append)
        behind.wait()
    assert written == list(range(6))


def test_one_worker_makes_one_piece_at_a_time_and_raises_its_error():
    made = []
    with Behind() as behind:
        behind.run(made.append, 1)
        behind.run(made.append, 2)      # waits for the piece before
        behind.wait()
        assert made == [1, 2]
        behind.run(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            behind.wait()
