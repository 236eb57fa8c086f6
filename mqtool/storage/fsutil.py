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
import tempfile
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


def data_end(fd: int, size: int, *, most_segments: int = 64) -> int:
    """Where the file's last data ends: past it the file is a hole, which reads as zeros
    (SEEK_DATA / SEEK_HOLE).  A file written front to back, as store files are, has one stretch
    of data then its unwritten hole; one cut into more than most_segments stretches, or a file
    system that cannot say, counts as data to its end."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        return size
    end = pos = 0
    try:
        for _ in range(most_segments):
            if pos >= size:
                return min(end, size)
            start = os.lseek(fd, pos, seek_data)
            end = pos = os.lseek(fd, start, seek_hole)
    except OSError as exc:
        return min(end, size) if exc.errno == errno.ENXIO else size   # ENXIO: no data from pos on
    return size


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


def _open_dir(directory) -> int:
    """A descriptor of directory for listing, without touching its atime where allowed."""
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _NOATIME)
    except PermissionError:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY)


def scandir(directory):
    """(name, is_file, is_dir, stat) for each entry of directory, without touching its atime; a
    dangling link comes with its own stat (neither file nor folder)."""
    fd = _open_dir(directory)
    try:
        result = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    st = os.stat(entry.name, dir_fd=fd)
                except OSError as exc:   # a dangling or looping link: the link's own stat
                    if exc.errno not in (errno.ENOENT, errno.ELOOP):
                        raise
                    st = os.stat(entry.name, dir_fd=fd, follow_symlinks=False)
                result.append((entry.name, _is_reg(st.st_mode), _is_dir(st.st_mode), st))
        return result
    finally:
        os.close(fd)


def scandir_kinds(directory):
    """(name, is_file, is_dir) for each entry of directory, as scandir() tells them (links
    followed; a dangling or looping link is neither), without touching its atime, and without a
    stat of each entry where the directory itself says what it is (listing 10,000 queue folders)."""
    fd = _open_dir(directory)
    try:
        result = []
        with os.scandir(fd) as entries:
            for entry in entries:
                try:
                    is_file, is_dir = entry.is_file(), entry.is_dir()
                except OSError as exc:   # a looping link: neither (scandir's link stat)
                    if exc.errno not in (errno.ENOENT, errno.ELOOP):
                        raise
                    is_file = is_dir = False
                result.append((entry.name, is_file, is_dir))
        return result
    finally:
        os.close(fd)


def tree_size(path) -> tuple[int, int]:
    """(files, bytes) below path, listed without touching an access time and not following links
    out of it; a folder that cannot be listed counts nothing (the census reports it)."""
    files = size = 0
    try:
        listing = scandir(path)
    except OSError:
        return 0, 0
    for name, is_file, is_dir, st in listing:
        if is_file:
            files += 1
            size += st.st_size
        elif is_dir:
            more_files, more_bytes = tree_size(Path(path) / name)
            files, size = files + more_files, size + more_bytes
    return files, size


def common_size(sizes: list[int], default: int) -> int:
    """The size most of a queue's files have (sizes in file order; the last file may be odd if
    damaged, a 0-byte one, from a crash while creating it, says nothing); default without any."""
    sizes = [size for size in sizes if size > 0]
    if not sizes:
        return default
    candidates = sizes[:-1] or sizes
    return max(set(candidates), key=candidates.count)


def symlinks(directory) -> dict:
    """{name: where it points} for the symbolic links in directory (none when it cannot be
    listed), without touching its atime."""
    try:
        fd = _open_dir(directory)
    except OSError:
        return {}
    try:
        with os.scandir(fd) as entries:
            return {e.name: os.readlink(e.name, dir_fd=fd) for e in entries if e.is_symlink()}
    finally:
        os.close(fd)


def _is_reg(mode: int) -> bool:
    return stat.S_ISREG(mode)


def _is_dir(mode: int) -> bool:
    return stat.S_ISDIR(mode)


def what_is(path) -> str | None:
    """None for a regular file (a link to one included); else what stands there, in words an
    operator can act on: a dangling link (and where it points), a folder, a FIFO, a device."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return f"a dangling symbolic link (to {os.readlink(path)})"
        return "missing"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link that loops"
        return f"unreadable ({exc.strerror})"
    mode = st.st_mode
    if _is_reg(mode):
        return None
    if _is_dir(mode):
        return "a folder"
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


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


def read_whole(path, limit: int) -> bytes:
    """A whole small file (a broker.conf, a config JSON, a manifest), read without a trace; a
    file longer than limit is refused (OSError EFBIG), never read on and on (/dev/zero as a
    config file), and anything but a regular file is refused by open_read (a FIFO would block)."""
    data = read_small(path, limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"longer than {limit:,} bytes, too long for this kind of file", str(path))
    return data


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


def private_cache_dir(name: str, environ=None, writable=None) -> str | None:
    """A directory of this user's own for files mqtool makes once and reuses (compiled kernels,
    the JVM reader's jar): `name` under $XDG_CACHE_HOME, ~/.cache or the system's temp directory,
    created 0700 and used only when this user owns it and can write it.  None: no such place."""
    environ = os.environ if environ is None else environ
    writable = writable or (lambda path: os.access(path, os.W_OK))
    home = os.path.expanduser("~")
    for base in (environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), tempfile.gettempdir()):
        candidate = os.path.join(base, name)
        try:
            os.makedirs(candidate, mode=0o700, exist_ok=True)
            if os.stat(candidate).st_uid == os.geteuid() and writable(candidate):
                return candidate
        except OSError:
            continue
    return None


def process_command(pid: int) -> str | None:
    """A process's command line as /proc shows it (arguments joined by spaces), or None when
    /proc does not show it (another host's process, no /proc, not allowed, gone)."""
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as fh:
            raw = fh.read(4096)
    except (OSError, ValueError):
        return None
    words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    return " ".join(" ".join(words).split()) or None     # one line: an argument's newlines are spaces


def process_alive(pid: int) -> bool:
    """Is a process with this pid running here (signal 0 reaches it, or exists but is not ours)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def shown_path(path, root: Path | None) -> str:
    """A path as answers show it: relative to the store's root, or as given outside it (or
    without a root).  The one rule: every command's text and JSON name files by it."""
    if root is not None:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            pass
    return str(path)


def relative_paths(layout_root: Path | None):
    """A function showing a path relative to the store's root (or as given, outside it): shown_path."""
    def display(path) -> str:
        return shown_path(path, layout_root)
    return display
