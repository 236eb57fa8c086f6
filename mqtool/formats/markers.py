"""The store's marker files: `abort`, `lock` (and 5.x's `abort.bak`).

abort: created empty when a store opens (5.x writes the process id into it),
removed on a clean shutdown; present at start means the last run crashed.
lock: a broker writes `lock` into it and holds a POSIX record lock on its
first byte (FileChannel.tryLock(0, 1, false), i.e. fcntl F_SETLK) while it runs.
"""

from __future__ import annotations

import fcntl
import os
import struct

ABORT = "abort"
ABORT_BAK = "abort.bak"
LOCK = "lock"
LOCK_CONTENT = b"lock"

# struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
_FLOCK = struct.Struct("hhqqi4x")


def lock_holder(path) -> int | None:
    """The pid of a process holding a write-conflicting lock on the lock file's first byte.

    Uses F_GETLK, so it looks without taking the lock.  0 means a holder was
    found but the kernel did not say which process (another host over NFS);
    None means nobody holds it, or the file does not exist.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOATIME", 0))
    except PermissionError:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        query = _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        l_type, _, _, _, pid = _FLOCK.unpack(answer)
        if l_type == fcntl.F_UNLCK:
            return None
        return pid
    finally:
        os.close(fd)


def parse_abort(content: bytes) -> int | None:
    """The pid a 5.x broker wrote into `abort`, if any."""
    text = content.strip()
    return int(text) if text.isdigit() else None
