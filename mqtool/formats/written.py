"""How far a pre-allocated store file's bytes reach.

Every store file is pre-allocated and zeros where nothing was written (commitlog, consume queues
and their extensions, batch queues, the timerlog, DLedger data files): the written part ends
just past the last non-zero byte.  Readers and recovery take a file's end from here.
"""

from __future__ import annotations

_ZERO_SCAN = 1 << 20     # written_end reads back a megabyte at a time


def written_end(buf, start: int = 0, end: int | None = None, unit: int = 1) -> int:
    """Where the written part of buf[start:end] ends: just past its last non-zero byte, rounded
    up to a whole unit counted from byte 0 (a partly written unit counts as written); start when
    it is all zeros.  Every store file is pre-allocated and zeros where nothing was written
    (see above): the one rule for how far their bytes reach."""
    end = len(buf) if end is None else min(end, len(buf))
    pos = end
    while pos > start:
        begin = max(start, pos - _ZERO_SCAN)
        stripped = buf[begin:pos].rstrip(b"\x00")
        if stripped:
            last = begin + len(stripped)
            return max(start, -(-last // unit) * unit)
        pos = begin
    return start
