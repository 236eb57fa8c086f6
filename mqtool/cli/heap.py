"""How the mqtool process asks glibc's malloc to treat its memory.

The compiled walks allocate column arrays of a few MiB per chunk of records and
free them right after.  By default glibc maps each such block fresh and unmaps
it on free, so every chunk pays page faults for memory it had a moment ago
(about a tenth of a verify-crc or rebuild-cq run).  keep_freed_memory() makes
blocks below 32 MiB come from the heap and keeps up to 1 GiB of freed heap for
reuse: the peak does not grow, the memory is only kept while the command runs.
The mqtool command calls it at start; a program that embeds mqtool decides for
itself.  Elsewhere than glibc it does nothing.

fewer_collections() is the same kind of setting for Python's cyclic garbage collector.
"""

from __future__ import annotations

import ctypes
import gc

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3


def keep_freed_memory() -> bool:
    """True when glibc took the settings."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    # 32 MiB is the highest threshold every glibc accepts (HEAP_MAX_SIZE / 2); when it is
    # refused nothing else is set, since the other two would turn off the adaptive threshold
    if not mallopt(M_MMAP_THRESHOLD, 32 << 20):
        return False
    mallopt(M_TRIM_THRESHOLD, 1 << 30)
    mallopt(M_TOP_PAD, 64 << 20)
    return True


def fewer_collections() -> None:
    """Run the cyclic collector a hundred times less often.  Importing numba, llvmlite and
    pyarrow creates hundreds of thousands of objects, and with Python's default threshold the
    collector ran through them again and again: 0.15-0.2 s of every command's start-up.  What
    mqtool keeps is in arrays, not reference cycles, so the memory this could hold back is small."""
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, 1) * 100, gen1, gen2)
