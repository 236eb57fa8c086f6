"""`mqtool append STORE`: put messages into a store through the embedded engine.

One message from options, or many as JSON lines (the fixtures' spec.jsonl
shape, see mqtool/broker/spec.py) from a file or stdin.  Each put is reported like a
producer's send result.  Refused (exit 3) while a broker holds the lock; exit 1
when a put was not PUT_OK.
"""

from __future__ import annotations

import gc
import json
import os
import select
import stat
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import click
import numpy as np

from mqtool.broker.specbatch import SpecBatcher, parse_line
from mqtool.cli import options, output
from mqtool.engine.batchappend import BatchResults
from mqtool.engine.message import MESSAGE_ILLEGAL, PUT_OK, PutResult
from mqtool.engine.store import MessageStore
from mqtool.errors import NotAStoreError, ProblemsFound, UsageError
from mqtool.formats.msgid import encode_offset_msgid
from mqtool.storage import fsutil
from mqtool.storage.settings import store_config_for_write


def _option_spec(topic, queue, tags, keys, props, body, body_file, born_host, delay_level, flag) -> dict:
    spec = {"topic": topic, "queueId": queue}
    if tags:
        spec["tags"] = tags
    if keys:
        spec["keys"] = list(keys)
    if props:
        spec["properties"] = {}
        for item in props:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise UsageError(f"--property {item!r}: expected NAME=VALUE")
            spec["properties"][name] = value
    if body_file:
        try:
            with _open_input(body_file) as fh:
                data = fh.read(MAX_BODY_FILE + 1)
        except OSError as exc:
            raise NotAStoreError(f"cannot read body file: {exc.strerror}", path=body_file) from None
        if len(data) > MAX_BODY_FILE:
            raise UsageError(f"body file longer than {MAX_BODY_FILE:,} bytes", path=body_file)
        import base64

        spec["bodyBase64"] = base64.b64encode(data).decode()
    else:
        spec["body"] = body or ""
    if born_host is not None:
        spec["bornHost"] = born_host
    if delay_level:
        spec["delayLevel"] = delay_level
    if flag:
        spec["flag"] = flag
    return spec


# One line holds one message: a broker's largest (maxMessageSize, 4 MiB by default) is under
# 6 MiB as base64.  A longer line is refused, not read on (memory stays bounded on /dev/zero).
MAX_LINE = 32 << 20
MAX_BODY_FILE = 64 << 20


CHUNK = 4 << 20      # bytes read at a time: a block of lines scanned together
IDLE = 0.02          # a pipe or terminal idle this long (seconds) closes the batch: its lines are stored


class _LineTooLong(Exception):
    """The line after the blocks read so far is longer than MAX_LINE."""


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


def _too_long(number: int) -> UsageError:
    return UsageError(f"input line {number}: longer than {MAX_LINE:,} bytes (one message a line)")


MIN_RUN = 16          # fast lines fewer than this between other lines go the per-line way
SCREENFUL = 20      # more puts than this are summed up, not listed one by one
LISTED_FAILURES = 100


@click.command("append")
@options.store_argument
@options.config_option
@options.json_option
@options.progress_option
@click.option("--topic", help="Topic of a single message given by options.")
@click.option("--queue", "queue_id", type=int, default=0, show_default=True, help="Queue id.")
@click.option("--tags", help="Tags.")
@click.option("--keys", multiple=True, help="A key (repeatable).")
@click.option("--property", "props", multiple=True, metavar="NAME=VALUE", help="A user property (repeatable).")
@click.option("--body", help="Body text (UTF-8).")
@click.option("--body-file", type=click.Path(dir_okay=False), help="Body bytes from a file.")
@click.option("--born-host", help="Producer address ip:port (default 127.0.0.1:0).")
@click.option("--delay-level", type=int, help="Delay level (1-based, as messageDelayLevel).")
@click.option("--flag", type=int, help="The message's flag.")
@click.option("--input", "input_path", type=click.Path(dir_okay=False, allow_dash=True),
              help="JSON lines of message specs ('-' for stdin; stdin is read when no --topic is given).")
@click.option("--flush", "flush_type", type=click.Choice(["sync", "async"]),
              help="SYNC_FLUSH or ASYNC_FLUSH (default: the store's flushDiskType).")
@click.option("--batch", type=click.IntRange(1, 100000), default=4096, show_default=True,
              help="Lines read and checked before they are stored together.")
@click.option("--dry-run", is_flag=True, help="Read and check every line; store nothing (the store is not opened).")
@click.option("--allow-system-topics", is_flag=True,
              help="Allow topics and properties a broker refuses from producers (SCHEDULE_TOPIC_XXXX, ..., "
                   "%LMQ% topics, INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET), stored as given.")
def cli(store, config_path, settings, as_json, progress, topic, queue_id, tags, keys, props, body, body_file,
        born_host, delay_level, flag, input_path, flush_type, batch, dry_run, allow_system_topics):
    """Put messages into STORE, as a broker would store them."""
    settings = list(settings)
    if flush_type:
        settings.append(f"flushDiskType={'SYNC_FLUSH' if flush_type == 'sync' else 'ASYNC_FLUSH'}")
    config = store_config_for_write(store, config_path, settings)
    for warning in config.effective_warnings():
        output.note(f"warning: {warning}")
    if topic is not None and input_path is not None:
        raise UsageError("give --topic (one message) or --input (JSON lines), not both")
    if topic is None and input_path is None:
        if sys.stdin.isatty():
            raise UsageError("give --topic (one message) or JSON lines on stdin / --input FILE")
        input_path = "-"
    batcher = SpecBatcher(version="5" if config.is_5x else "4", cluster=config.brokerClusterName,
                          allow_system_topics=allow_system_topics)
    report = _Report(as_json)
    if topic is not None:   # one message from options: built (and its --body-file read) before the store opens
        spec = _option_spec(topic, queue_id, tags, keys, props, body, body_file, born_host, delay_level, flag)
        single = batcher.message(1, spec, None, {})
        if dry_run:
            report.checked(1)
            return
        with _open_store(config) as engine:
            report.puts([1], [engine.put(single)])
        report.finish()
        return
    source = sys.stdin.buffer if input_path == "-" else _open_input(input_path)
    # no reference cycles are made per line: the cyclic collector would only walk the
    # batch's objects again and again (a tenth of the run)
    gc.disable()
    try:
        _append_lines(config, _Reader(source, batcher, batch, report, dry_run, _streaming(source)), report,
                      progress and not dry_run, _size(input_path))
    finally:
        gc.enable()


def _append_lines(config, reader, report, progress: bool, size: int | None) -> None:
    """Store the lines a batch at a time, each batch read and checked before it is stored.

    A batch is stored by a second thread while this one reads and checks the next: the
    compiled append releases the GIL, so on two cores the writing overlaps the parsing."""
    with output.progress(size, "appending", enabled=progress) as bar:
        try:
            reader.fill()     # the first batch is checked before the store is touched
            if reader.dry_run:
                while not reader.done:
                    reader.take()
                    reader.fill()
                report.checked(reader.lines)
                return
            with _open_store(config) as engine, ThreadPoolExecutor(1, "append") as worker:
                pending = None

                def settle():
                    """Wait for the batch being stored, and report it."""
                    nonlocal pending
                    if pending is not None:
                        done, pending = pending, None
                        stored = done.result()
                        for numbers, results in stored:
                            report.puts(numbers, results)
                        if reader.fd is not None:
                            report.acknowledged(stored)
                        sys.stdout.flush()   # acknowledged: a program reading them must not wait on a buffer
                        bar.update(reader.bytes_read)

                reader.settle = settle
                try:
                    while True:
                        segments = reader.take()
                        settle()
                        pending = worker.submit(_store, engine, segments, reader.prepared)
                        if reader.done:
                            break
                        reader.fill()
                finally:
                    settle()
        except UsageError:
            report.finish(stopped=True)
            raise
    report.finish()


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


def _size(path) -> int | None:
    """The input's length when it is a regular file (for the progress bar)."""
    if path == "-" or not fsutil.is_regular_file(path):
        return None
    return os.stat(path).st_size


def _open_store(config) -> MessageStore:
    engine = MessageStore(config).open()
    plan = engine.recovery_plan
    if plan is not None and plan.changes_anything and (plan.data_end > plan.cut or plan.queue_cuts):
        output.note(f"recovered the store first ({plan.mode}): cut at commitlog offset {plan.cut}; "
                    f"cut bytes kept in {engine.quarantine.dir or 'the quarantine'}")
    for note in engine.notes:
        output.note(note)
    return engine


class _Reader:
    """Reads and checks input lines into segments to store in order: runs of fast lines
    (specblock) as one ColumnBatch, runs of other plain lines as one PlainBatch, runs of
    the rest as MessageInner objects; each line parsed once."""

    def __init__(self, source, batcher: SpecBatcher, batch: int, report, dry_run: bool, fd: int | None = None):
        from mqtool.broker.specblock import BlockScanner  # compiled code: loaded only for --input

        self.blocks = _blocks(source, fd)
        self.fd = fd             # a pipe or terminal: batches close when it is idle (_idle)
        self.was_idle = False
        self.scanner = BlockScanner(batcher, MAX_LINE)
        self.block, self.pos, self.block_bytes = None, 0, 0   # the block being read, its next line
        self.next_number = 1     # the number of the first line of the next block
        self.batcher, self.batch, self.report, self.dry_run = batcher, batch, report, dry_run
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
                    self.report.puts([number], [PutResult(
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


class _Report:
    """Each put as a JSON line (--json); else a table of a screenful of puts, or for more a
    summary (counts per status, first and last commitlog offsets, the failures)."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        self.count = 0
        self.statuses: Counter = Counter()
        self.rows: list = []          # the first puts, while they fit a screen
        self.failures: list = []      # the first LISTED_FAILURES failed puts
        self.failed = 0
        self.first_line = self.last_line = None
        self.first_offset = self.last_offset = None

    def acknowledged(self, stored: list) -> None:
        """From a pipe or terminal, without --json: one line per stored batch as it is acknowledged
        (the table or summary still comes at the end); --json lines are written as they come."""
        if self.as_json or not stored:
            return
        puts = sum(len(results) for _, results in stored)
        failed = sum(0 if isinstance(results, BatchResults) else sum(not r.ok for r in results)
                      for _, results in stored)
        if not puts:
            return
        first, last = int(stored[0][0][0]), int(stored[-1][0][-1])
        lines = f"line {first}" if first == last else f"lines {first}-{last}"
        output.stdout().print(f"stored input {lines}: {puts - failed:,} PUT_OK"
                              + (f", {failed:,} not stored" if failed else ""), highlight=False, markup=False)

    def checked(self, lines: int) -> None:
        if self.as_json:
            output.emit_json({"type": "checked", "lines": lines})
        else:
            output.stdout().print(f"{lines:,} line(s) read and checked; nothing stored (--dry-run)",
                                  highlight=False)

    def puts(self, numbers: list, results) -> None:
        if not len(results):
            return
        if self.first_line is None:
            self.first_line = int(numbers[0])
        self.last_line = int(numbers[-1])
        if isinstance(results, BatchResults):   # every put PUT_OK
            self.statuses[PUT_OK] += len(results)
            if self.first_offset is None:
                self.first_offset = int(results.wrote[0])
            self.last_offset = int(results.wrote[-1])
            if self.as_json:
                output.emit_json_lines(_json_lines(numbers, results))
            elif self.count <= SCREENFUL:
                self.rows.extend(zip(numbers[:SCREENFUL + 1], results[:SCREENFUL + 1]))
            self.count += len(results)
            return
        if isinstance(numbers, np.ndarray):
            numbers = numbers.tolist()
        for number, result in zip(numbers, results):
            self.statuses[result.status] += 1
            if result.ok:
                if self.first_offset is None:
                    self.first_offset = result.wrote_offset
                self.last_offset = result.wrote_offset
            else:
                self.failed += 1
                if len(self.failures) < LISTED_FAILURES:
                    self.failures.append((number, result))
            if self.as_json:
                output.emit_json({"type": "put", "line": number, **result.to_json()})
            elif self.count <= SCREENFUL:
                self.rows.append((number, result))
            self.count += 1

    def finish(self, stopped: bool = False) -> None:
        """The table or summary; exit 1 when a put failed.  stopped: a bad line ended the
        input early, and the user must learn what was stored before it."""
        if not self.as_json:
            if self.count <= SCREENFUL:
                _table(self.rows)
            else:
                self._summary()
        if stopped:
            if self.count:
                output.note(f"input lines {self.first_line}-{self.last_line} were stored ({self.count:,} puts); "
                            f"nothing after line {self.last_line} (go on from line {self.last_line + 1} once "
                            f"the input is fixed: tail -n +{self.last_line + 1})")
            else:
                output.note("nothing was stored")
        elif self.failed:
            raise ProblemsFound(f"{self.failed} message(s) were not stored")

    def _summary(self) -> None:
        console = output.stdout()
        counts = ", ".join(f"{status} {n:,}" for status, n in self.statuses.most_common())
        console.print(f"{self.count:,} puts from input lines {self.first_line}-{self.last_line}: {counts}",
                      highlight=False)
        if self.first_offset is not None:
            console.print(f"commitlog offsets of the first and last stored message: "
                          f"{self.first_offset} .. {self.last_offset}", highlight=False)
        if self.failures:
            _table(self.failures, "not stored")
            if self.failed > len(self.failures):
                console.print(f"... and {self.failed - len(self.failures):,} more not stored "
                              f"(--json reports every put)", highlight=False)


def _table(rows, title=None) -> None:
    table = output.TableStream(title, [
        ("#", {"justify": "right"}), ("status", {}), ("topic", {}), ("queue", {"justify": "right"}),
        ("queue offset", {"justify": "right"}), ("commitlog offset", {"justify": "right"}), ("msgId", {}),
        ("remark", {})])
    for number, r in rows:
        table.add(number, r.status, r.topic, r.queue_id, r.queue_offset, r.wrote_offset, r.msg_id, r.remark or "")
    table.flush()


def _json_lines(numbers, results: BatchResults) -> np.ndarray:
    """The --json lines of a compiled batch, as PutResult.to_json gives them, rendered by
    compiled code (at hundreds of thousands of puts a second, objects per put would cost
    more than the puts)."""
    from mqtool.native import putlines

    prefixes = [encode_offset_msgid(address, port, 0)[:-16].encode("ascii") for address, port, _ in results.hosts]
    topics = [json.dumps(t, ensure_ascii=False).encode("utf-8") for t in results.topic_names]
    prefix_buf, prefix_off = _joined(prefixes)
    topic_buf, topic_off = _joined(topics)
    parts, part_off = putlines.parts()
    n = len(results)
    room = n * (int(part_off[-1]) + max(map(len, prefixes)) + 16 + 6 * 20 + max(map(len, topics)))
    out = np.empty(room, dtype=np.uint8)
    size = putlines.render_puts(np.asarray(numbers, dtype=np.int64), np.asarray(results.store_id, dtype=np.int64),
                                prefix_buf, prefix_off, results.wrote, results.lengths, results.queue_offsets,
                                results.store_ts, results.topic_id, topic_buf, topic_off,
                                np.asarray(results.queue_ids, dtype=np.int64), parts, part_off, out)
    return out[:size]


def _joined(items: list) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings one after the other, and where each starts (n + 1 offsets)."""
    lengths = np.array([len(b) for b in items], dtype=np.int64)
    return (np.frombuffer(b"".join(items) or b"\0", dtype=np.uint8),
            np.concatenate(([0], np.cumsum(lengths))).astype(np.int64))


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


def _open_input(path):
    """A file, a FIFO or a terminal to read lines from; a device or a folder is refused."""
    what = fsutil.what_is(path)
    if what not in (None, "a FIFO", "missing") and not (what == "a character device" and _is_tty(path)):
        raise UsageError(f"{what}, not a file of JSON lines (a file, a FIFO, a pipe or '-')", path=path)
    try:
        return open(path, "rb")
    except OSError as exc:
        raise NotAStoreError(f"cannot read input: {exc.strerror}", path=path) from None


def _is_tty(path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.isatty()
    except OSError:
        return False
