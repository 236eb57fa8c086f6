"""JSON lines into a store: the ingest engine behind `mqtool append --input`.

Lines are read in blocks, checked (each parsed once: runs of common flat lines scanned by
compiled code into column batches, the rest the reference way), and stored a batch at a
time by a second thread while this one reads and checks the next (the compiled append
releases the GIL, so on two cores the writing overlaps the parsing).  Every line's put
result goes to a sink, in input order, as its batch is stored; the caller renders them.
"""

from __future__ import annotations

import gc
import os
import select
import stat
from collections import Counter
from typing import Protocol

import numpy as np

from mqtool.broker.specbatch import SpecBatcher, parse_line
from mqtool.engine.batchappend import BatchResults
from mqtool.engine.behind import Behind
from mqtool.engine.message import MESSAGE_ILLEGAL, PUT_OK, PutResult
from mqtool.errors import NotAStoreError, UsageError
from mqtool.storage import fsutil

# One line holds one message: a broker's largest (maxMessageSize, 4 MiB by default) is under
# 6 MiB as base64.  A longer line is refused, not read on (memory stays bounded on /dev/zero).
MAX_LINE = 32 << 20
CHUNK = 4 << 20      # bytes read at a time: a block of lines scanned together
IDLE = 0.02          # a pipe or terminal idle this long (seconds) closes the batch: its lines are stored
MIN_RUN = 16         # fast lines fewer than this between other lines go the per-line way
MAX_BODY_FILE = 64 << 20


class Sink(Protocol):
    """Where the put results go, in input order."""

    def puts(self, numbers, results) -> None:
        """The results of the lines numbered (a list or an int64 array)."""

    def stored(self, batches: list, bytes_read: int, streaming: bool) -> None:
        """A batch is stored ([(numbers, results)], already given to puts): an acknowledgement
        point.  streaming: the input is a pipe or terminal whose batches close when it is idle."""


def ingest(source, batcher: SpecBatcher, batch: int, open_store, sink: Sink, dry_run: bool = False) -> int:
    """Read, check and (unless dry_run) store the JSON lines of a binary source; the number of
    non-blank lines read.  open_store() gives the store as a context manager, opened only once
    the first batch is checked.  A bad line raises UsageError naming it, after the batches
    before it were stored (and given to the sink)."""
    # no reference cycles are made per line: the cyclic collector would only walk the
    # batch's objects again and again (a tenth of the run)
    gc.disable()
    try:
        reader = _Reader(source, batcher, batch, sink, dry_run, _streaming(source))
        reader.fill()     # the first batch is checked before the store is touched
        if dry_run:
            while not reader.done:
                reader.take()
                reader.fill()
            return reader.lines
        with open_store() as engine, Behind("append") as behind:
            def settle():
                """Wait for the batch being stored, and give its results to the sink."""
                stored = behind.wait()
                if stored is not None:
                    for numbers, results in stored:
                        sink.puts(numbers, results)
                    sink.stored(stored, reader.bytes_read, reader.fd is not None)

            reader.settle = settle
            try:
                while True:
                    segments = reader.take()
                    settle()
                    behind.run(_store, engine, segments, reader.prepared)
                    if reader.done:
                        break
                    reader.fill()
            finally:
                settle()
        return reader.lines
    finally:
        gc.enable()


class Tally:
    """What the puts came to: counts per status, the first and last input lines and commitlog
    offsets of the stored messages, the first `first` puts and the first `listed` failures."""

    def __init__(self, listed: int = 100, first: int = 0):
        self.listed, self.first = listed, first
        self.first_puts: list = []    # (line number, PutResult) of the first puts
        self.count = 0
        self.statuses: Counter = Counter()
        self.failures: list = []      # (line number, PutResult) of the first failed puts
        self.failed = 0
        self.first_line = self.last_line = None
        self.first_offset = self.last_offset = None

    def add(self, numbers, results) -> None:
        """The results of the lines numbered: a BatchResults (every put PUT_OK) or PutResults."""
        if not len(results):
            return
        if self.first_line is None:
            self.first_line = int(numbers[0])
        self.last_line = int(numbers[-1])
        if self.count < self.first:
            self.first_puts.extend(zip(numbers[:self.first - self.count], results[:self.first - self.count]))
        self.count += len(results)
        if isinstance(results, BatchResults):
            self.statuses[PUT_OK] += len(results)
            if self.first_offset is None:
                self.first_offset = int(results.wrote[0])
            self.last_offset = int(results.wrote[-1])
            return
        for number, result in zip(numbers, results):
            self.statuses[result.status] += 1
            if result.ok:
                if self.first_offset is None:
                    self.first_offset = result.wrote_offset
                self.last_offset = result.wrote_offset
            else:
                self.failed += 1
                if len(self.failures) < self.listed:
                    self.failures.append((number, result))


def span(stored: list) -> tuple[int, int, int, int]:
    """A stored batch ([(numbers, results)]) in brief: its first and last line numbers, its puts,
    and how many of them failed."""
    puts = sum(len(results) for _, results in stored)
    if not puts:
        return 0, 0, 0, 0
    failed = sum(0 if isinstance(results, BatchResults) else sum(not r.ok for r in results) for _, results in stored)
    return int(stored[0][0][0]), int(stored[-1][0][-1]), puts, failed


def open_input(path):
    """A file, a FIFO or a terminal to read lines from; a device or a folder is refused."""
    what = fsutil.what_is(path)
    if what not in (None, "a FIFO", "missing") and not (what == "a character device" and _is_tty(path)):
        raise UsageError(f"{what}, not a file of JSON lines (a file, a FIFO, a pipe or '-')", path=path)
    try:
        return open(path, "rb")
    except OSError as exc:
        raise NotAStoreError(f"cannot read input: {exc.strerror}", path=path) from None


def read_body_file(path) -> bytes:
    """A message body from a file (append --body-file), up to MAX_BODY_FILE bytes."""
    try:
        with open_input(path) as fh:
            data = fh.read(MAX_BODY_FILE + 1)
    except OSError as exc:
        raise NotAStoreError(f"cannot read body file: {exc.strerror}", path=path) from None
    if len(data) > MAX_BODY_FILE:
        raise UsageError(f"body file longer than {MAX_BODY_FILE:,} bytes", path=path)
    return data


def input_size(path) -> int | None:
    """The input's length when it is a regular file (for a progress bar)."""
    if path == "-" or not fsutil.is_regular_file(path):
        return None
    return os.stat(path).st_size


def _is_tty(path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.isatty()
    except OSError:
        return False


def _store(engine, segments, prepared: dict) -> list:
    """Store the segments in order: [(line numbers, put results)]."""
    out = []
    for kind, numbers, payload, referable in segments:
        if kind == "batch":
            results = engine.put_batch(payload)
        else:
            results = engine.put_many(payload)
            for number, result, named in zip(numbers, results, referable):
                if named and result.ok:
                    prepared[number - 1] = result.wrote_offset
        out.append((numbers, results))
    return out


class _LineTooLong(Exception):
    """The line after the blocks read so far is longer than MAX_LINE."""


def _too_long(number: int) -> UsageError:
    return UsageError(f"input line {number}: longer than {MAX_LINE:,} bytes (one message a line)")


def _blocks(source, fd: int | None = None):
    """uint8 arrays of whole lines (the last one may lack its newline) of a binary source.
    A line longer than MAX_LINE raises _LineTooLong, not read on (memory stays bounded on
    /dev/zero); the caller, which counts the lines, says which.  fd: the source's descriptor
    when it is a pipe or a terminal, read directly (no buffer hides what has arrived from
    _streaming's select)."""
    carry = b""
    read = (lambda n: _read_ready(fd, n)) if fd is not None else getattr(source, "read1", source.read)
    while True:
        chunk = read(CHUNK)
        if not chunk:
            if carry:
                if len(carry) > MAX_LINE:
                    raise _LineTooLong()
                yield np.frombuffer(carry, dtype=np.uint8)
            return
        data = carry + chunk if carry else chunk
        cut = data.rfind(b"\n") + 1
        if not cut:
            if len(data) > MAX_LINE:
                raise _LineTooLong()
            carry = data
            continue
        carry = data[cut:]
        yield np.frombuffer(data, dtype=np.uint8)[:cut]


def _streaming(source) -> int | None:
    """The descriptor of a source that delivers lines as they come (a pipe, a FIFO, a terminal,
    a socket), whose batches close when it goes idle; None for a regular file (read at full speed)."""
    try:
        fd = source.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):
        return None
    return None if stat.S_ISREG(mode) or stat.S_ISBLK(mode) else fd


def _read_ready(fd: int, size: int) -> bytes:
    """Up to size bytes of a pipe: one read that waits, then what has arrived meanwhile (a pipe
    gives 64 KiB a read; a fast producer's lines are scanned in blocks as large as a file's)."""
    parts = [os.read(fd, size)]
    got = len(parts[0])
    while parts[-1] and got < size and _readable(fd, 0):
        parts.append(os.read(fd, size - got))
        got += len(parts[-1])
    if not parts[-1] and len(parts) > 1:
        parts.pop()     # the end of the input: the next read says so again
    return b"".join(parts) if len(parts) > 1 else parts[0]


def _readable(fd: int, timeout: float) -> bool:
    """Is there input (or its end) on fd within timeout seconds?"""
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    except (OSError, ValueError):
        return True     # cannot wait on it: read (and block) as before


def _referable(spec) -> bool:
    """Only a half or prepared transaction message is named by a later line's
    preparedTransactionOffsetOf: only those lines are remembered (memory stays flat
    however many lines come)."""
    return isinstance(spec, dict) and spec.get("transaction") in ("half", "prepared")


class _Reader:
    """Reads and checks input lines into segments to store in order: runs of fast lines
    (specblock) as one ColumnBatch, runs of other plain lines as one PlainBatch, runs of
    the rest as MessageInner objects; each line parsed once."""

    def __init__(self, source, batcher: SpecBatcher, batch: int, sink: Sink, dry_run: bool, fd: int | None = None):
        from mqtool.broker.specblock import BlockScanner  # compiled code: loaded only for --input

        self.blocks = _blocks(source, fd)
        self.fd = fd             # a pipe or terminal: batches close when it is idle (_idle)
        self.was_idle = False
        self.scanner = BlockScanner(batcher, MAX_LINE)
        self.block, self.pos, self.block_bytes = None, 0, 0   # the block being read, its next line
        self.next_number = 1     # the number of the first line of the next block
        self.batcher, self.batch, self.sink, self.dry_run = batcher, batch, sink, dry_run
        self.segments: list = []
        self.pending = 0
        self.lines = 0           # non-blank lines read
        self.read_before = 0     # bytes of the blocks before this one
        self.done = False
        self.prepared: dict[int, int] = {}   # half/prepared lines stored: their commitlog offsets
        self.named: set[int] = set()          # half/prepared lines read, stored or not
        self._held = None
        self.settle = lambda: None   # waits until the lines read so far are stored

    @property
    def bytes_read(self) -> int:
        block = self.block
        return self.read_before + (int(block.starts[self.pos]) if block is not None and self.pos < len(block) else
                                   self.block_bytes)

    def _current(self):
        """The block with lines left to read, or None at the end of the input."""
        while self.block is None or self.pos >= len(self.block):
            self.read_before += self.block_bytes
            self.block = None
            try:
                data = next(self.blocks, None)
            except _LineTooLong:
                raise _too_long(self.next_number) from None
            if data is None:
                self.block_bytes = 0
                return None
            self.block, self.pos, self.block_bytes = self.scanner.scan(data, self.next_number), 0, len(data)
            self.next_number += len(self.block)
        return self.block

    def _next(self):
        """The next line the reference way: (number, raw, spec, plain), or None at the end."""
        if self._held is not None:
            item, self._held = self._held, None
            return item
        while (block := self._current()) is not None:
            i = self.pos
            self.pos += 1
            number = block.first + i
            if block.too_long(i):
                raise _too_long(number)
            raw = block.line(i)
            spec, plain = parse_line(raw, number)
            if spec is None and not plain:
                continue   # a blank line
            self.lines += 1
            return number, raw, spec, plain
        self.done = True
        return None

    def _fast_run(self) -> bool:
        """Take the run of fast lines at the reading position, if it is long enough to pay."""
        if self._held is not None or (block := self._current()) is None:
            return False
        i = self.pos
        if not block.fast(i):
            return False
        j = block.run_end(i, i + self.batch - self.pending)
        if j - i < MIN_RUN and j < len(block) and j - i < self.batch - self.pending:
            return False    # a few lines between others: the per-line path costs less
        if len(self.batcher):
            self.segments.append(("batch", *self.batcher.take(), None))
        if not self.dry_run:
            numbers = np.arange(block.first + i, block.first + j, dtype=np.int64)
            self.segments.append(("batch", numbers, self.scanner.batch(block, i, j), None))
        self.pos, self.lines, self.pending = j, self.lines + j - i, self.pending + j - i
        return True

    def _idle(self) -> bool:
        """A pipe or terminal with nothing to read for IDLE seconds, when the lines read so far
        are all taken: True closes the batch (its lines are stored and acknowledged now, not
        when `batch` lines have come).  With no line waiting, the batch being stored is
        acknowledged (settle) before the read blocks."""
        if self.fd is None or self._held is not None or (self.block is not None and self.pos < len(self.block)):
            return False
        if _readable(self.fd, 0):
            self.was_idle = False
            return False
        if self.pending:
            if _readable(self.fd, IDLE):
                return False
            self.was_idle = True
            return True
        if self.was_idle or not _readable(self.fd, IDLE):
            self.was_idle = False
            self.settle()
        return False

    def fill(self) -> None:
        """Read until `batch` lines wait, the input ends, a pipe's input goes idle (_idle), or a
        line names an earlier half or prepared line while lines wait (they are stored first: it
        may name one of them)."""
        batcher = self.batcher
        while self.pending < self.batch:
            if self._idle():
                return
            if self._fast_run():
                continue
            item = self._next()
            if item is None:
                return
            number, raw, spec, plain = item
            refers = isinstance(spec, dict) and "preparedTransactionOffsetOf" in spec
            if refers and self.pending and not self.dry_run:
                self._held = item
                return
            if refers:
                self.settle()   # the lines before it are stored: the one it names has its offset
                ref = spec["preparedTransactionOffsetOf"]
                if type(ref) is not int:
                    raise UsageError(f"input line {number}: preparedTransactionOffsetOf must be a line index")
                if ref in self.named and ref not in self.prepared:
                    # it names a half/prepared line the store refused: not stored either
                    self.sink.puts([number], [PutResult(
                        MESSAGE_ILLEGAL, topic=spec.get("topic"), queue_id=spec.get("queueId", -1),
                        remark=f"preparedTransactionOffsetOf {ref}: that line was not stored")])
                    continue
            if not (plain and batcher.add(number, spec)):
                if len(batcher):
                    self.segments.append(("batch", *batcher.take(), None))
                msg = batcher.message(number, spec, raw if plain else None, self.prepared)
                named = _referable(spec)
                if named:
                    self.named.add(number - 1)
                    if self.dry_run:
                        self.prepared[number - 1] = 0
                if not self.segments or self.segments[-1][0] != "messages":
                    self.segments.append(("messages", [], [], []))
                _, numbers, msgs, referable = self.segments[-1]
                numbers.append(number)
                msgs.append(msg)
                referable.append(named)
            self.pending += 1

    def take(self) -> list:
        """The segments read so far, in order; the reader starts afresh."""
        if len(self.batcher):
            self.segments.append(("batch", *self.batcher.take(), None))
        segments, self.segments, self.pending = self.segments, [], 0
        return segments
