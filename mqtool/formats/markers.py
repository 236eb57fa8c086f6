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

    Uses F_GETLK, so it looks without taking the lock.  -1 means an
    open-file-description lock (mqtool's own), whose owner the kernel does not
    name; 0 a holder the kernel could not name either (another host over NFS);
    None means nobody holds it, or the file does not exist.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK    # a FIFO in its place must not block the open
    try:
        fd = os.open(path, flags | getattr(os, "O_NOATIME", 0))
    except PermissionError:
        fd = os.open(path, flags)
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


def try_lock(fd: int, *, shared: bool = False) -> bool:
    """Take the write lock on the first byte, as a broker does; False if someone holds it.
    shared: a read lock instead (on a descriptor opened read-only), for a run that only reads but
    must keep writers out meanwhile: it conflicts with a broker's lock and a writer's, not with
    another reader's.

    mqtool uses an open-file-description lock (F_OFD_SETLK): it conflicts with a
    broker's classic fcntl lock exactly like another fcntl lock would, but it is
    not dropped when this process closes some other descriptor of the same file
    (a classic POSIX lock is), and two opens in one process exclude each other.
    """
    ofd = getattr(fcntl, "F_OFD_SETLK", None)
    try:
        if ofd is not None:
            fcntl.fcntl(fd, ofd, _FLOCK.pack(fcntl.F_RDLCK if shared else fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
        else:  # pragma: no cover - non-Linux
            fcntl.lockf(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB, 1, 0)
    except OSError:
        return False
    return True


def parse_abort(content: bytes) -> int | None:
    """The pid a 5.x broker wrote into `abort`, if any."""
    text = content.strip()
    return int(text) if text.isdigit() else None
