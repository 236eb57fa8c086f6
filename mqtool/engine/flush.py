"""Making appended bytes durable, RocketMQ's way.

SYNC_FLUSH: GroupCommitService.  A producer whose put must be on disk waits
until its bytes are flushed, or syncFlushTimeout passes (FLUSH_DISK_TIMEOUT);
concurrent producers share one fdatasync (see the class for how).

ASYNC_FLUSH: FlushRealTimeService flushes every flushIntervalCommitLog ms once
flushCommitLogLeastPages pages are dirty, and everything at least every
flushCommitLogThoroughInterval ms.  With the transient store pool
(transientStorePoolEnable, async flush only) appends land in pooled write
buffers and CommitRealTimeService first copies them into the files
(commitIntervalCommitLog, commitCommitLogLeastPages,
commitCommitLogThoroughInterval), then wakes the flusher.

After a thorough flush the store time of the last flushed message becomes the
checkpoint's physicMsgTimestamp (on_flushed).
"""

from __future__ import annotations

import mmap
import threading
import time
from collections import deque

PUT_OK = "PUT_OK"
FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
RETRY_TIMES_OVER = 10


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class ServiceThread:
    """A daemon thread with RocketMQ's waitForRunning/wakeup handshake."""

    name = "service"

    def __init__(self):
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.halted = False   # stopped without the final flush (a simulated crash)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run_guarded, name=self.name, daemon=True)
        self._thread.start()

    def _run_guarded(self) -> None:
        self.run()

    def run(self) -> None:  # overridden
        pass

    def wakeup(self) -> None:
        self._wake.set()

    def wait_for_running(self, interval_ms: int) -> None:
        if self._wake.is_set():
            self._wake.clear()
            self.on_wait_end()
            return
        self._wake.wait(interval_ms / 1000)
        self._wake.clear()
        self.on_wait_end()

    def on_wait_end(self) -> None:
        pass

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def shutdown(self) -> None:
        self._stopped.set()
        self.wakeup()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def halt(self) -> None:
        """Stop without the final flush a clean shutdown does."""
        self.halted = True
        self.shutdown()


class GroupCommitService:
    """SYNC_FLUSH's group commit, run by the producers themselves.

    RocketMQ hands each request to a GroupCommitService thread.  In Python that
    costs two thread hand-offs per put, more than the fsync itself, so here the
    waiting producers elect a leader instead: whoever gets the flush lock
    flushes everything appended so far (one fdatasync) and every producer whose
    bytes that covered returns at once.  While one leader is in fdatasync
    (which releases the GIL) the others append and queue up behind the lock,
    so concurrent puts share one fsync just as RocketMQ's batched requests do.
    A producer that cannot see its bytes flushed within syncFlushTimeout gets
    FLUSH_DISK_TIMEOUT.
    """

    def __init__(self, queue, on_flushed=None, timeout_ms: int = 5000):
        self.queue = queue
        self.on_flushed = on_flushed
        self.timeout_ms = timeout_ms
        self._cond = threading.Condition()
        self._flushing = False
        self._waiters = 0
        self.fsyncs = 0           # statistics: how many flushes served how many requests
        self.requests_served = 0

    def commit(self, next_offset: int) -> str:
        """Return once bytes up to next_offset are on disk: PUT_OK, or FLUSH_DISK_TIMEOUT."""
        queue = self.queue
        deadline = time.monotonic() + self.timeout_ms / 1000
        with self._cond:
            while queue.flushed_where < next_offset:
                if not self._flushing:
                    # become the leader: flush everything appended so far, for everyone
                    self._flushing = True
                    self._cond.release()
                    try:
                        if self._waiters:
                            time.sleep(0)  # let producers that are ready append first: one fsync for all
                        queue.flush(0)
                        self.fsyncs += 1
                    finally:
                        self._cond.acquire()
                        self._flushing = False
                        self._cond.notify_all()
                    if self.on_flushed is not None and queue.store_timestamp > 0:
                        self.on_flushed(queue.store_timestamp)
                    continue
                remaining = deadline - time.monotonic()
                self._waiters += 1
                try:
                    woken = remaining > 0 and self._cond.wait(remaining)
                finally:
                    self._waiters -= 1
                if not woken:
                    if queue.flushed_where < next_offset:
                        return self._served(FLUSH_DISK_TIMEOUT)
            return self._served(PUT_OK)

    def _served(self, status: str) -> str:
        self.requests_served += 1   # under the condition's lock
        return status

    # the store starts and stops every flush service the same way
    def start(self) -> None:
        pass

    def wakeup(self) -> None:
        pass

    def shutdown(self) -> None:
        with self._cond:
            self.queue.flush(0)

    def halt(self) -> None:
        pass


class FlushRealTimeService(ServiceThread):
    name = "FlushRealTimeService"

    def __init__(self, queue, config, on_flushed=None):
        super().__init__()
        self.queue = queue
        self.config = config
        self.on_flushed = on_flushed
        self.last_flush_timestamp = 0

    def run(self) -> None:
        config = self.config
        while not self.stopped:
            least = config.flushCommitLogLeastPages
            now = _now_ms()
            if now >= self.last_flush_timestamp + config.flushCommitLogThoroughInterval:
                self.last_flush_timestamp = now
                least = 0
            if config.flushCommitLogTimed:
                self._stopped.wait(config.flushIntervalCommitLog / 1000)
            else:
                self.wait_for_running(config.flushIntervalCommitLog)
            self.queue.flush(least)
            if least == 0 and self.on_flushed is not None and self.queue.store_timestamp > 0:
                self.on_flushed(self.queue.store_timestamp)
        for _ in range(0 if self.halted else RETRY_TIMES_OVER):
            if self.queue.flush(0):
                break


class CommitRealTimeService(ServiceThread):
    name = "CommitRealTimeService"

    def __init__(self, queue, config, flusher: FlushRealTimeService):
        super().__init__()
        self.queue = queue
        self.config = config
        self.flusher = flusher
        self.last_commit_timestamp = 0

    def run(self) -> None:
        config = self.config
        while not self.stopped:
            least = config.commitCommitLogLeastPages
            begin = _now_ms()
            if begin >= self.last_commit_timestamp + config.commitCommitLogThoroughInterval:
                self.last_commit_timestamp = begin
                least = 0
            if not self.queue.commit(least):
                self.last_commit_timestamp = _now_ms()
                self.flusher.wakeup()
            self.wait_for_running(config.commitIntervalCommitLog)
        for _ in range(0 if self.halted else RETRY_TIMES_OVER):
            if self.queue.commit(0):
                break


class TransientStorePool:
    """Write buffers for the transient store pool: transientStorePoolSize buffers of one
    commitlog file each, handed to new files and returned when a file is fully committed.
    Buffers are private anonymous mappings: unused capacity costs no memory, and a
    returned buffer is zeroed for free with MADV_DONTNEED (so the bytes after a BLANK
    record are zeros in the file, not a previous file's data)."""

    def __init__(self, pool_size: int, file_size: int):
        self.file_size = file_size
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
        self._free = deque(mmap.mmap(-1, file_size, flags=flags) for _ in range(pool_size))
        self._lock = threading.Lock()

    def borrow(self):
        with self._lock:
            if self._free:
                return self._free.popleft()
        return None   # as RocketMQ: no buffer free, the file is written directly

    def give_back(self, buffer) -> None:
        buffer.madvise(mmap.MADV_DONTNEED)
        with self._lock:
            self._free.append(buffer)

    def available(self) -> int:
        return len(self._free)

    def close(self) -> None:
        with self._lock:
            while self._free:
                self._free.popleft().close()
