"""`mqtool append STORE`: put messages into a store through the embedded engine.

One message from options, or many as JSON lines (the fixtures' spec.jsonl
shape, see mqtool/broker/spec.py) from a file or stdin.  Each put is reported like a
producer's send result.  Refused (exit 3) while a broker holds the lock; exit 1
when a put was not PUT_OK.
"""

from __future__ import annotations

import sys

import click
import numpy as np

from mqtool.broker import ingest
from mqtool.broker.spec import spec_from_options
from mqtool.broker.specbatch import SpecBatcher
from mqtool.cli import options, output, requires
from mqtool.engine.batchappend import BatchResults
from mqtool.errors import ProblemsFound, UsageError

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
              help="sync: flushDiskType=SYNC_FLUSH, async: ASYNC_FLUSH (default: the store's flushDiskType).")
@click.option("--batch", type=click.IntRange(1, 100000), default=4096, show_default=True,
              help="Lines read and checked before they are stored together.")
@click.option("--dry-run", is_flag=True, help="Read and check every line; store nothing (the store is not opened).")
@click.option("--allow-system-topics", is_flag=True,
              help="Allow topics and properties a broker refuses from producers (SCHEDULE_TOPIC_XXXX, ..., "
                   "%LMQ% topics, INNER_MULTI_DISPATCH / INNER_MULTI_QUEUE_OFFSET), stored as given.")
@requires.run
def cli(run, store, config_path, settings, as_json, progress, topic, queue_id, tags, keys, props, body, body_file,
        born_host, delay_level, flag, input_path, flush_type, batch, dry_run, allow_system_topics):
    """Put messages into a store, as a broker would."""
    settings = list(settings)
    if flush_type:
        settings.append(f"flushDiskType={'SYNC_FLUSH' if flush_type == 'sync' else 'ASYNC_FLUSH'}")
    config = run.write_config(store, config_path, settings)
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
        spec = spec_from_options(topic, queue_id, tags, keys, props, body,
                                 ingest.read_body_file(body_file) if body_file else None, born_host, delay_level, flag)
        single = batcher.message(1, spec, None, {})
        if dry_run:
            report.checked(1)
            return
        with run.open_store(config) as engine:
            report.puts([1], [engine.put(single)])
        report.finish()
        return
    source = sys.stdin.buffer if input_path == "-" else ingest.open_input(input_path)
    try:
        with output.progress(ingest.input_size(input_path), "appending", enabled=progress and not dry_run) as bar:
            report.bar = bar
            lines = ingest.ingest(source, batcher, batch, lambda: run.open_store(config), report, dry_run)
    except UsageError:
        report.finish(stopped=True)
        raise
    if dry_run:
        report.checked(lines)
    else:
        report.finish()


class _Report(ingest.Tally):
    """Each put as a JSON line (--json); else a table of a screenful of puts, or for more a
    summary (counts per status, first and last commitlog offsets, the failures)."""

    def __init__(self, as_json: bool):
        super().__init__(LISTED_FAILURES, SCREENFUL + 1)   # the first puts, while they fit a screen
        self.as_json = as_json
        self.bar = None

    def stored(self, stored: list, bytes_read: int, streaming: bool) -> None:
        """A batch is stored: from a pipe or terminal, without --json, one line per stored batch
        as it is acknowledged (the table or summary still comes at the end); --json lines are
        written as they come.  A program reading them must not wait on a buffer."""
        first, last, puts, failed = ingest.span(stored) if streaming and not self.as_json else (0, 0, 0, 0)
        if puts:
            lines = f"line {first}" if first == last else f"lines {first}-{last}"
            output.stdout().print(f"stored input {lines}: {puts - failed:,} PUT_OK"
                                  + (f", {failed:,} not stored" if failed else ""), highlight=False, markup=False)
        sys.stdout.flush()
        self.bar.update(bytes_read)

    def checked(self, lines: int) -> None:
        if self.as_json:
            output.emit_json({"type": "checked", "lines": lines})
        else:
            output.stdout().print(f"{lines:,} line(s) read and checked; nothing stored (--dry-run)",
                                  highlight=False)

    def puts(self, numbers, results) -> None:
        batch = isinstance(results, BatchResults)   # every put PUT_OK
        if not batch and isinstance(numbers, np.ndarray):
            numbers = numbers.tolist()
        self.add(numbers, results)
        if self.as_json:
            if batch:
                output.emit_json_lines(results.json_lines(numbers))
            else:
                for number, result in zip(numbers, results):
                    output.emit_json({"type": "put", "line": number, **result.to_json()})

    def finish(self, stopped: bool = False) -> None:
        """The table or summary; exit 1 when a put failed.  stopped: a bad line ended the
        input early, and the user must learn what was stored before it."""
        if not self.as_json:
            if self.count <= SCREENFUL:
                _table(self.first_puts)
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
