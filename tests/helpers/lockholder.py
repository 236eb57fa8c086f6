"""A process holding a store's lock file as a running broker does, for the tests of what readers
say and writers refuse while a broker runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from contextlib import contextmanager

LOCK_HOLDER = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)   # what FileChannel.tryLock(0, 1, false) takes
    print("locked", flush=True)
    time.sleep(60)
""")


@contextmanager
def holding_lock(store):
    """The holder's Popen once it holds store/lock (its pid is the holder's); killed after."""
    proc = subprocess.Popen([sys.executable, "-c", LOCK_HOLDER, str(store / "lock")],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait()
