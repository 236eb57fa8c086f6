"""File-system primitives that leave no trace on read, and make writes durable.

Read-only commands promise not to change a byte or a file time, so reads open
files and directories with O_NOATIME (allowed for the file's owner and for
root; otherwise we fall back to a plain open, and the kernel's relatime rules
apply).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

_NOATIME = getattr(os, "O_NOATIME", 0)


def open_read(path) -> int:
    """A read-only file descriptor that does not update the file's access time.  Only regular
    files: a FIFO or a device where a store file should be is refused (OSError), never waited
    on (O_NONBLOCK keeps the open itself from blocking; it changes nothing for files)."""
    flags = os.O_RDONLY | os.O_NONBLOCK
    try:
        fd = os.open(path, flags | _NOATIME)
    except PermissionError:
        if not _NOATIME:
            raise
        fd = os.open(path, flags)
    if not _is_reg(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def open_store_file(path, *, create_size: int | None = None, writable: bool = False) -> int:
    """A descriptor for a store file: a new sparse file of create_size bytes (never over an
    existing one), read-write, or read-only without touching its atime."""
    if create_size is not None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.ftruncate(fd, create_size)
        return fd
    if writable:
        return os.open(path, os.O_RDWR)
    return open_read(path)


def empty_last_file(paths: list, is_store_name) -> tuple[list, object]:
    """(paths, the last one when it is 0 bytes long, else None) for name-sorted store files.

    Creating a store file is an open and then a resize: a crash between the two leaves a
    0-byte newest file.  RocketMQ 5.x deletes it when it loads the directory (4.9.8 refuses
    to load); mqtool's stores set it aside at open the same way (into the quarantine).  Only
    a file named as the store names its files (is_store_name) counts; anything else is left
    for the loader to refuse."""
    if paths and is_store_name(paths[-1].name):
        try:
            empty = os.stat(paths[-1]).st_size == 0
        except OSError:      # a dangling link and the like: the loader says what is wrong
            empty = False
        if empty:
            return paths[:-1], paths[-1]
    return paths, None


def scandir(directory):
    """(name, is_file, stat) for each entry of directory, without touching its atime."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _NOATIME)
    except PermissionError:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        result = []
        with os.scandir(fd) as entries:
            for entry in entries:
                st = os.stat(entry.name, dir_fd=fd)
                result.append((entry.name, _is_reg(st.st_mode), _is_dir(st.st_mode), st))
        return result
    finally:
        os.close(fd)


def _is_reg(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _is_dir(mode: int) -> bool:
    return stat.S_ISDIR(mode)


def is_regular_file(path) -> bool:
    """A regular file (following links); False for anything else, or what cannot be stat'ed."""
    try:
        return _is_reg(os.stat(path).st_mode)
    except OSError:
        return False


def read_small(path, limit: int = 1 << 20) -> bytes:
    """The whole content of a small file (checkpoint, config JSON), read without a trace."""
    fd = open_read(path)
    try:
        chunks, total = [], 0
        while total < limit:
            chunk = os.read(fd, min(65536, limit - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def fsync_dir(directory) -> None:
    """Make renames and new entries in directory durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def exists(path) -> bool:
    return Path(path).exists()


def move_file(source, target, *, before_copy=None) -> None:
    """Move a file durably: rename, or where target is on another file system copy, fsync and
    remove (before_copy(size) is called first, to refuse when the target has no room); then
    fsync both directories, so the move survives a crash either way."""
    import shutil

    source, target = Path(source), Path(target)
    try:
        os.rename(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        if before_copy is not None:
            before_copy(source.stat().st_size)
        shutil.copy2(source, target)
        with open(target, "rb+") as fh:
            os.fsync(fh.fileno())
        source.unlink()
    fsync_dir(target.parent)
    fsync_dir(source.parent)
