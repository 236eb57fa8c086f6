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

import mmap
import os
import threading
import time
from pathlib import Path

from mqtool import fsutil
from mqtool.errors import NotAStoreError
from mqtool.formats.filenames import is_offset_name, name_to_offset

PAGE_SIZE = mmap.PAGESIZE
DONTNEED_STEP = 64 * 1024 * 1024


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


class MappedFile(ReferenceResource):
    """One file of a mapped-file queue."""

    def __init__(self, path, file_size: int, *, writable: bool = False, strict: bool = True):
        """strict: refuse a file whose length is not file_size, as a broker's load does.
        Forensic readers pass strict=False: the file is mapped at its real length and
        `size_mismatch` records what was expected."""
        super().__init__()
        self.strict = strict
        self.expected_size = file_size
        self.size_mismatch = False
        self.path = Path(path)
        self.file_name = self.path.name
        if not is_offset_name(self.file_name):
            raise NotAStoreError("file name is not a 20-digit offset", path=self.path)
        self.file_from_offset = name_to_offset(self.file_name)
        self.file_size = file_size
        self.writable = writable
        self.wrote_position = 0
        self.committed_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0  # the last message's store time (for reclaim and recovery)
        self._dropped_until = 0
        self.buf = self._map()

    def _map(self):
        try:
            if self.writable:
                fd = os.open(self.path, os.O_RDWR)
            else:
                fd = fsutil.open_read(self.path)
        except OSError as exc:
            raise NotAStoreError(f"cannot open: {exc.strerror}", path=self.path) from None
        try:
            actual = os.fstat(fd).st_size
            if actual != self.file_size:
                if self.strict:
                    raise NotAStoreError(f"file is {actual} bytes, but files of this kind are "
                                         f"{self.file_size} bytes", path=self.path)
                self.size_mismatch = True
                self.file_size = actual
            if actual == 0:
                return b""
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            return mmap.mmap(fd, actual, access=access)
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ reading
    @property
    def file_end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    def advise_sequential(self) -> None:
        if isinstance(self.buf, mmap.mmap) and hasattr(mmap, "MADV_SEQUENTIAL"):
            self.buf.madvise(mmap.MADV_SEQUENTIAL)

    def drop_pages_before(self, position: int) -> None:
        """Tell the kernel this process no longer needs pages before position.

        For a read-only mapping the page cache keeps them; only this process's
        resident set shrinks, which keeps memory flat on stores of any size.
        """
        if self.writable or not isinstance(self.buf, mmap.mmap):
            return
        end = (position // PAGE_SIZE) * PAGE_SIZE
        if end - self._dropped_until >= DONTNEED_STEP or (end and position >= self.file_size):
            if hasattr(mmap, "MADV_DONTNEED") and end > self._dropped_until:
                self.buf.madvise(mmap.MADV_DONTNEED, self._dropped_until, end - self._dropped_until)
            self._dropped_until = end

    def cleanup(self) -> None:
        if isinstance(self.buf, mmap.mmap):
            try:
                self.buf.close()
            except BufferError:  # a memoryview still points into it; the GC will unmap
                pass

    def close(self) -> None:
        """Unmap now (read-only users that know no one else holds the file)."""
        self.shutdown(0)

    def __repr__(self) -> str:
        return f"MappedFile({self.path}, wrote={self.wrote_position}, flushed={self.flushed_position})"
