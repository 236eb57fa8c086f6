"""`mqtool append STORE`: put messages into a store through the embedded engine.

One message from options, or many as JSON lines (the fixtures' spec.jsonl
shape, see mqtool/broker/spec.py) from a file or stdin.  Each put is reported like a
producer's send result.  Refused (exit 3) while a broker holds the lock; exit 1
when a put was not PUT_OK.
"""

from __future__ import annotations

import json
import sys

import click

from mqtool.broker import spec as specs
from mqtool.cli import options, output
from mqtool.engine.message import MESSAGE_ILLEGAL, PUT_OK, PutResult
from mqtool.engine.store import MessageStore
from mqtool.errors import NotAStoreError, ProblemsFound, UsageError
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
    if born_host:
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


def _lines(source):
    """The lines of a binary source, none longer than MAX_LINE."""
    number = 0
    while True:
        raw = source.readline(MAX_LINE + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE:
            raise UsageError(f"input line {number}: longer than {MAX_LINE:,} bytes (one message a line)")
        yield number, raw


def _read_specs(source):
    """(line number, parsed JSON) of each non-blank line of a binary source."""
    for number, raw in _lines(source):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(f"input line {number}: not UTF-8 (byte {exc.start} of the line)") from None
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(f"input line {number}: not JSON ({exc.msg} at column {exc.colno})") from None


@click.command("append")
@options.store_argument
@options.config_option
@options.json_option
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
@click.option("--batch", type=click.IntRange(1, 100000), default=256, show_default=True,
              help="Messages per put_many call when reading JSON lines.")
@click.option("--allow-system-topics", is_flag=True,
              help="Allow topics a broker refuses from producers (SCHEDULE_TOPIC_XXXX, ...).")
def cli(store, config_path, settings, as_json, topic, queue_id, tags, keys, props, body, body_file, born_host,
        delay_level, flag, input_path, flush_type, batch, allow_system_topics):
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
    version = "5" if config.is_5x else "4"
    cluster = config.brokerClusterName
    # only a regular file can be read twice (checked, then stored); a pipe, a FIFO or
    # /dev/stdin is read once, as stdin is
    if input_path not in (None, "-") and fsutil.is_regular_file(input_path):
        _check_input(input_path, version, cluster, allow_system_topics)
    table = None if as_json else output.TableStream(None, [
        ("#", {"justify": "right"}), ("status", {}), ("topic", {}), ("queue", {"justify": "right"}),
        ("queue offset", {"justify": "right"}), ("commitlog offset", {"justify": "right"}), ("msgId", {}),
        ("remark", {})])
    failures = 0
    single = None      # one message from options: built (and its --body-file read) before the store opens
    if topic is not None:
        spec = _option_spec(topic, queue_id, tags, keys, props, body, body_file, born_host, delay_level, flag)
        single = _to_message(spec, 1, version, cluster, {}, allow_system_topics)
    else:
        source = sys.stdin.buffer if input_path == "-" else _open_input(input_path)
    with MessageStore(config) as engine:
        plan = engine.recovery_plan
        if plan is not None and plan.changes_anything and (plan.data_end > plan.cut or plan.queue_cuts):
            output.note(f"recovered the store first ({plan.mode}): cut at commitlog offset {plan.cut}; "
                        f"cut bytes kept in {engine.quarantine.dir or 'the quarantine'}")

        def report(number, result):
            nonlocal failures
            if result.status != PUT_OK:
                failures += 1
            if as_json:
                output.emit_json({"type": "put", "line": number, **result.to_json()})
            else:
                table.add(number, result.status, result.topic, result.queue_id, result.queue_offset,
                          result.wrote_offset, result.msg_id, result.remark or "")

        if topic is not None:
            report(1, engine.put(single))
        else:
            prepared: dict[int, int] = {}   # half/prepared lines stored: their commitlog offsets
            named: set[int] = set()          # half/prepared lines read, stored or not
            pending = []

            def flush_pending():
                results = engine.put_many([m for _, m, _ in pending])
                for (number, _, referable), result in zip(pending, results):
                    if result.ok and referable:
                        prepared[number - 1] = result.wrote_offset
                    report(number, result)
                pending.clear()

            for number, spec in _read_specs(source):
                refers = isinstance(spec, dict) and "preparedTransactionOffsetOf" in spec
                if refers and pending:
                    flush_pending()
                ref = spec["preparedTransactionOffsetOf"] if refers else None
                if refers and ref in named and ref not in prepared:
                    # it names a half/prepared line the store refused: not stored either
                    report(number, PutResult(MESSAGE_ILLEGAL, topic=spec.get("topic"),
                                             queue_id=spec.get("queueId", -1),
                                             remark=f"preparedTransactionOffsetOf {ref}: that line was not stored"))
                    continue
                referable = _referable(spec)
                if referable:
                    named.add(number - 1)
                pending.append((number, _to_message(spec, number, version, cluster, prepared,
                                                    allow_system_topics), referable))
                if len(pending) >= batch:
                    flush_pending()
            flush_pending()
    if table is not None:
        table.flush()
    if failures:
        raise ProblemsFound(f"{failures} message(s) were not stored")


def _check_input(path, version, cluster, allow_system_topics) -> None:
    """Read an --input file through once before the store is touched, so that a bad line
    stops the command with nothing stored.  (stdin cannot be read twice: its lines are
    stored in batches as they come, and a bad one stops the command after the batches
    before it, which the report lists.)"""
    earlier: dict[int, int] = {}   # lines a preparedTransactionOffsetOf may name
    with _open_input(path) as source:
        for number, spec in _read_specs(source):
            _to_message(spec, number, version, cluster, earlier, allow_system_topics)
            if _referable(spec):
                earlier[number - 1] = 0


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


def _to_message(spec, number, version, cluster, prepared, allow_system_topics):
    try:
        return specs.to_message(spec, line=number, version=version, cluster=cluster,
                                prepared_offsets=prepared, allow_system_topics=allow_system_topics)
    except specs.SpecError as err:
        raise UsageError(f"input {err}") from None
