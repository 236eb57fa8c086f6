"""Mapped files: one commitlog, consume-queue or index file, memory-mapped.

A MappedFile knows its start offset (from its name), its size, and three
positions: wrote (appended), committed (copied from a write buffer, for the
transient store pool) and flushed (on disk).  It is reference counted the way
RocketMQ's ReferenceResource is: readers hold() it while they use it, and
shutdown() only unmaps it once the last reader releases it, or forcibly after
an interval.

Read-only users map with ACCESS_READ through a descriptor opened with
O_NOATIME, and drop pages they have walked past (MADV_DONTNEED) so that
walking a huge store keeps memory flat.
"""

from __future__ import annotations

import errno
import mmap
import os
import threading
import time
from pathlib import Path

from mqtool.errors import DataError, NotAStoreError
from mqtool.formats.filenames import is_offset_name, name_to_offset
from mqtool.storage import fsutil

PAGE_SIZE = mmap.PAGESIZE


def drop_pages(buf, since: int, position: int, step: int, at_end: bool = False) -> int:
    """MADV_DONTNEED the whole pages of the mapping buf between since and position, once `step`
    bytes of them have gathered (or at_end); returns where the dropped pages now end.  Only this
    process's page table entries go: the page cache keeps the pages (dirty ones stay dirty)."""
    end = (position // PAGE_SIZE) * PAGE_SIZE
    if end > since and (end - since >= step or at_end):
        if hasattr(mmap, "MADV_DONTNEED"):
            buf.madvise(mmap.MADV_DONTNEED, since, end - since)
        return end
    return since
OS_PAGE_SIZE = 4096  # MappedFile.OS_PAGE_SIZE: the unit of flush/commit least pages
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)
POPULATE_STEP = 32 * 1024 * 1024
DONTNEED_STEP = 64 * 1024 * 1024
WRITTEN_STEP = 16 * 1024 * 1024      # drop_written_pages: a long append's resident set stays small


class ReferenceResource:
    """hold/release/shutdown with a forced release after an interval (ReferenceResource)."""

    def __init__(self):
        self._ref_lock = threading.Lock()
        self._refcount = 1
        self.available = True
        self.cleanup_over = False
        self.first_shutdown_timestamp = 0

    def hold(self) -> bool:
        with self._ref_lock:
            if self.available and self._refcount > 0:
                self._refcount += 1
                return True
            return False

    def release(self) -> None:
        with self._ref_lock:
            self._refcount -= 1
            if self._refcount > 0:
                return
        self._cleanup_once()

    def shutdown(self, interval_forcibly_ms: int, now_ms: int | None = None) -> None:
        """First call: mark unavailable and drop the owner's reference.  Later calls,
        once interval_forcibly_ms has passed, force the count down (by 1000 a call,
        as RocketMQ does) so a leaked reference cannot pin a file forever."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        if self.available:
            self.available = False
            self.first_shutdown_timestamp = now_ms
            self.release()
        elif self.refcount > 0 and now_ms - self.first_shutdown_timestamp >= interval_forcibly_ms:
            with self._ref_lock:
                self._refcount = -1000 - self._refcount
            self.release()

    @property
    def refcount(self) -> int:
        return self._refcount

    def is_cleanup_over(self) -> bool:
        return self._refcount <= 0 and self.cleanup_over

    def _cleanup_once(self) -> None:
        with self._ref_lock:
            if self.cleanup_over:
                return
            self.cleanup_over = True
        self.cleanup()

    def cleanup(self) -> None:  # overridden
        pass


SMALL_READ = 64 * 1024     # read-only files up to this size are read, not mapped


def _read_all(fd: int, size: int) -> bytes:
    """size bytes from the start of fd; a file cut shorter meanwhile reads as zeros past its end
    (so the bytes keep the length the file had)."""
    chunks, pos = [], 0
    while pos < size:
        chunk = os.pread(fd, size - pos, pos)
        if not chunk:
            chunks.append(bytes(size - pos))
            break
        chunks.append(chunk)
        pos += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class MappedFile(ReferenceResource):
    """One file of a mapped-file queue.

    Writers append at wrote_position.  With a write buffer (the transient
    store pool) appends land in the buffer, commit() copies them into the
    file with pwrite, and only committed bytes are visible to readers;
    without one, appends go straight into the mapping.  flush() makes what is
    readable durable with fdatasync, which on Linux also writes back pages
    dirtied through the mapping.
    """

    def __init__(self, path, file_size: int, *, writable: bool = False, strict: bool = True,
                 create: bool = False, write_buffer=None, read_small: bool = False):
        """strict: refuse a file whose length is not file_size, as a broker's load does.
        Forensic readers pass strict=False: the file is mapped at its real length and
        `size_mismatch` records what was expected.  create: make a new, zero-filled
        (sparse) file of file_size bytes, as a broker does when it rolls.  read_small: a
        read-only file of at most SMALL_READ bytes is read into bytes instead of mapped (a
        snapshot: a reader of many small files, such as consume queues)."""
        super().__init__()
        self.strict = strict
        self.expected_size = file_size
        self.size_mismatch = False
        self.path = path if isinstance(path, Path) else Path(path)
        self.file_name = self.path.name
        if not is_offset_name(self.file_name):
            raise NotAStoreError("file name is not a 20-digit offset", path=self.path)
        self.file_from_offset = name_to_offset(self.file_name)
        self.file_size = file_size
        self.writable = writable or create
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # the last message's store time (for reclaim and recovery)
        self.first_create_in_queue = False
        self.warmed_to = 0
        self.write_buffer = write_buffer
        # Appends written with pwrite instead of through the mapping (set for a sync-flushed
        # commitlog).  Pages dirtied through a mapping must be write-protected again before
        # fdatasync writes them back, a TLB flush on every core running the process; with
        # pwrite they stay read-only in the mapping: fdatasync with 16 producers 265 -> 205 us
        # (median), 8 % more messages a second.  The bytes land in the same page cache.
        self.append_with_pwrite = False
        self._dropped_until = 0
        self._fd = -1
        self._read_fd = -1       # read_into's descriptor, opened when first asked
        self._flush_lock = threading.Lock()
        self.data_end = file_size
        self.read_small = read_small
        self.buf = self._map(create)

    def _map(self, create: bool):
        try:
            fd = fsutil.open_store_file(self.path, create_size=self.file_size if create else None,
                                        writable=self.writable)
        except OSError as exc:
            raise NotAStoreError(f"cannot open: {exc.strerror}", path=self.path) from None
        keep = False
        try:
            actual = os.fstat(fd).st_size
            # a small file read only is read whole (one pread costs less than a mapping and its
            # unmapping: 10,000 queues of a few units each); its bytes are all there, data_end its size
            small = self.read_small and not self.writable and 0 < actual <= SMALL_READ
            # a reader may skip what lies past the last data (a hole: zeros); a writer's bytes move
            self.data_end = actual if self.writable or small else fsutil.data_end(fd, actual)
            if actual != self.file_size:
                if self.strict:
                    raise DataError(f"file is {actual} bytes, but files of this kind are "
                                    f"{self.file_size} bytes", path=self.path)
                self.size_mismatch = True
                self.file_size = actual
            if actual == 0:
                return b""
            if small:
                return _read_all(fd, actual)
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            mapped = mmap.mmap(fd, actual, access=access)
            if self.writable:
                self._fd = fd  # kept for fdatasync and pwrite
                keep = True
            return mapped
        finally:
            if not keep:
                os.close(fd)

    # ------------------------------------------------------------------ reading
    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def read_position(self) -> int:
        """How far readers may read: committed bytes with a write buffer, else written ones."""
        return self.committed_position if self.write_buffer is not None else self.wrote_position

    def advise_sequential(self) -> None:
        if isinstance(self.buf, mmap.mmap) and hasattr(mmap, "MADV_SEQUENTIAL"):
            self.buf.madvise(mmap.MADV_SEQUENTIAL)

    def drop_pages_before(self, position: int, step: int = DONTNEED_STEP) -> None:
        """Tell the kernel this process no longer needs pages before position (once `step`
        bytes of them are left behind: one call per record is cheap).

        For a read-only mapping the page cache keeps them; only this process's
        resident set shrinks, which keeps memory flat on stores of any size.
        """
        if self.writable or not isinstance(self.buf, mmap.mmap):
            return
        self._drop_before(position, step)

    def drop_written_pages(self, step: int = WRITTEN_STEP) -> None:
        """Unmap from this process the pages appended so far (`step` bytes at a time), so that a
        long append keeps a flat resident set.  Safe for a writable shared mapping: a dirty page
        stays dirty in the page cache and is written back as before; only this process's page
        table entries go (a later read faults the page back in)."""
        if not self.writable or not isinstance(self.buf, mmap.mmap):
            return
        self._drop_before(self.wrote_position, step)

    def _drop_before(self, position: int, step: int) -> None:
        self._dropped_until = drop_pages(self.buf, self._dropped_until, position, step, position >= self.file_size)

    def populate(self, start: int, length: int) -> None:
        """Map [start, start+length) into this process in one go (MADV_POPULATE_READ, Linux
        5.14+) instead of one page fault per page: reading a page-cached file through the
        mapping gets about half again faster.  Ignored where the kernel lacks it."""
        if not isinstance(self.buf, mmap.mmap) or length <= 0:
            return
        start -= start % PAGE_SIZE
        try:
            self.buf.madvise(MADV_POPULATE_READ, start, min(length, self.file_size - start))
        except (OSError, ValueError):
            pass

    def read_into(self, view, position: int) -> int:
        """Copy the file's bytes from position into view (a writable buffer) through the page
        cache instead of the mapping; returns how many were copied (fewer at the file's end).  A
        walk that reads each byte once (storage/commitlog's copied walk) builds no page tables
        this way, and reads a window that stays in the CPU's cache.  Where the page cache holds
        the file in 4 KiB folios, mapping a GiB in and letting it go costs more than the copy
        (0.12 s against 0.10 s here); in 2 MiB folios the mapping is nearly free, but a walk over
        it reads memory instead of the cached window, which costs what the copy does."""
        if not isinstance(self.buf, mmap.mmap):      # read whole (small), or empty
            data = memoryview(self.buf)[position:position + len(view)]
            view[:len(data)] = data
            return len(data)
        if self._read_fd < 0:
            self._read_fd = self._fd if self._fd >= 0 else fsutil.open_store_file(self.path)
        return os.preadv(self._read_fd, [view], position)

    def release_pages(self) -> None:
        """Drop the whole file from this process's resident set (the page cache keeps it):
        after random reads all over a file, so memory stays flat."""
        if not self.writable and isinstance(self.buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            self.buf.madvise(mmap.MADV_DONTNEED)

    # ------------------------------------------------------------------ writing
    def is_full(self) -> bool:
        return self.wrote_position == self.file_size

    def space_left(self) -> int:
        return self.file_size - self.wrote_position

    def append(self, data) -> bool:
        """appendMessage(byte[]): write data at the write position if it fits."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return False
        if self.write_buffer is not None:
            self.write_buffer[pos:end] = data
        elif self.appends_by_pwrite():
            self.pwrite(data, pos)
        else:
            self.buf[pos:end] = data
        self.wrote_position = end
        return True

    def write_at(self, pos: int, data) -> None:
        """Overwrite bytes below the write position (index headers and slots)."""
        target = self.write_buffer if self.write_buffer is not None else self.buf
        target[pos:pos + len(data)] = data

    def commit(self, least_pages: int) -> int:
        """Copy appended bytes from the write buffer into the file (transient store pool)."""
        if self.write_buffer is None:
            return self.wrote_position  # nothing to commit: appends went to the mapping
        wrote, committed = self.wrote_position, self.committed_position
        if wrote > committed and (self.is_full() or (
                wrote // OS_PAGE_SIZE - committed // OS_PAGE_SIZE >= least_pages if least_pages > 0
                else True)):
            if self.hold():
                try:
                    os.pwrite(self._fd, memoryview(self.write_buffer)[committed:wrote], committed)
                    self.committed_position = wrote
                finally:
                    self.release()
        return self.committed_position

    def appends_by_pwrite(self, batch: bool = False) -> bool:
        """The one rule for how appended bytes reach the file: never by pwrite with a write buffer
        (the transient store pool's: commit() writes it out); else by pwrite when the file is
        open for writing and either a batch of records is written (engine/batchappend.py: through
        the mapping, every page of a fresh sparse file is a page fault that reads ahead zeroed
        pages around it, the most of a record's cost) or single appends were asked to
        (append_with_pwrite, for a sync-flushed commitlog); else through the mapping."""
        return self.write_buffer is None and self.can_pwrite() and (batch or self.append_with_pwrite)

    def can_pwrite(self) -> bool:
        """Whether pwrite() works: the file is open for writing (not only mapped)."""
        return self.writable and self._fd >= 0

    def pwrite(self, data, position: int) -> None:
        """Write data at position with pwrite (the same page cache as the mapping's); the
        caller moves wrote_position."""
        try:
            _pwrite_all(self._fd, data, position)
        except OSError as exc:   # a full disk: say where (the bytes past position are not the store's)
            raise OSError(exc.errno, f"{exc.strerror} (appending at byte {position})", str(self.path)) from None

    def flush(self, least_pages: int) -> int:
        """Make readable bytes durable once at least least_pages pages are waiting (0: any)."""
        with self._flush_lock:
            ready = self.read_position()
            done = self.flushed_position
            able = ready > done and (self.is_full() or least_pages <= 0
                                     or ready // OS_PAGE_SIZE - done // OS_PAGE_SIZE >= least_pages)
            if able and self.hold():
                try:
                    os.fdatasync(self._fd)
                    self.flushed_position = ready
                finally:
                    self.release()
            return self.flushed_position

    def warm_to(self, end: int) -> None:
        """MappedFile.warmMappedFile, a chunk at a time: pre-write [warmed_to, end) with
        zeros through the mapping and flush it, ahead of the appends.  Appends then
        dirty pages whose blocks exist, and their fdatasync writes data only (several
        times faster for small synchronous appends).  GIL-free (ctypes memset and
        fdatasync release it)."""
        end = min(end, self.file_size)
        start = max(self.warmed_to, self.wrote_position)
        if end <= start:
            return
        import ctypes

        import numpy as np

        view = np.frombuffer(self.write_buffer if self.write_buffer is not None else self.buf, dtype=np.uint8)
        try:
            ctypes.memset(view.ctypes.data + start, 0, end - start)
        finally:
            del view
        if self.write_buffer is None:
            os.fdatasync(self._fd)
        self.warmed_to = end

    def set_positions(self, position: int) -> None:
        """Recovery: everything up to position is written, committed and flushed."""
        self.wrote_position = self.committed_position = self.flushed_position = position

    def zero_from(self, position: int) -> None:
        """Zero-fill [position, end): how a cut keeps the file at its mapped size."""
        if position < self.file_size:
            self.buf[position:self.file_size] = bytes(self.file_size - position)

    def destroy(self, interval_forcibly_ms: int = 0, now_ms: int | None = None) -> bool:
        """Shut down and delete the file once no reader holds it; False while one does."""
        self.shutdown(interval_forcibly_ms, now_ms)
        if not self.is_cleanup_over():
            return False
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        return True

    # ---------------------------------------------------------------- lifetime
    def cleanup(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            try:
                self.buf.close()
            except BufferError:  # a memoryview still points into it; the GC will unmap
                pass
        if self._read_fd >= 0 and self._read_fd != self._fd:
            os.close(self._read_fd)
        self._read_fd = -1
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def close(self) -> None:
        """Unmap now (users that know no one else holds the file)."""
        self.shutdown(0)

    def __repr__(self) -> str:
        return f"MappedFile({self.path}, wrote={self.wrote_position}, flushed={self.flushed_position})"


def _pwrite_all(fd: int, data, position: int) -> None:
    """pwrite until every byte is written (a full disk can cut a write short)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        if written <= 0:
            raise OSError(errno.ENOSPC, "no byte written")
        view, position = view[written:], position + written
