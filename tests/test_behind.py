"""engine/behind.Behind: work in a second thread, a piece at a time, in order."""

from __future__ import annotations

import pytest

from mqtool.engine.behind import Behind


def test_one_piece_at_a_time_in_order_and_its_error_raised():
    made = []
    with Behind() as behind:
        behind.run(made.append, 1)
        behind.run(made.append, 2)      # waits for the piece before
        behind.wait()
        assert made == [1, 2]
        behind.run(lambda: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            behind.wait()
