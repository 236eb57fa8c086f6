"""Where output goes: JSON lines or rich tables on stdout, progress and notes on stderr.

stdout carries data only.  Progress bars appear only when stderr is a
terminal, so pipes and cron never see them.  JSON is one object per line with
stable field names (documented in README.md).
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager

_stdout = None
_stderr = None
_console_class = None


def _Console(**kwargs):
    """A rich Console whose plain strings are escaped, made with rich loaded at first use (a command
    that prints no table or note, `mqtool --version` or a completion request, never loads rich)."""
    global _console_class
    if _console_class is None:
        from rich.console import Console

        class _Escaping(Console):
            def print(self, *objects, **kwargs) -> None:
                """Plain strings are data or carry data (paths, topics): their control characters are escaped."""
                super().print(*(printable(o) if isinstance(o, str) else o for o in objects), **kwargs)

            def on_broken_pipe(self) -> None:
                """rich would exit 1 here; let the CLI map a closed pipe like every other command."""
                raise BrokenPipeError()

        _console_class = _Escaping
    return _console_class(**kwargs)


def stdout():
    global _stdout
    if _stdout is None:
        console = _Console(file=sys.stdout, soft_wrap=True)
        if not console.is_terminal:  # piped: do not squeeze tables into 80 columns
            console = _Console(file=sys.stdout, soft_wrap=True, width=200)
        _stdout = console
    return _stdout


def stderr():
    global _stderr
    if _stderr is None:
        _stderr = _Console(file=sys.stderr, stderr=True)
    return _stderr


def reset_consoles() -> None:
    """Forget cached consoles (the test runner swaps sys.stdout between invocations)."""
    global _stdout, _stderr
    _stdout = _stderr = None


_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode  # made once


def _finite(value):
    """JSON has no Infinity or NaN (a damaged config file can hold 1e400): they become strings."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def emit_json(obj: dict) -> None:
    try:
        text = _encode_json(obj)
    except ValueError:
        text = _encode_json(_finite(obj))
    sys.stdout.write(text + "\n")


def emit_json_lines(data) -> None:
    """Ready JSON lines (UTF-8 bytes, or a uint8 array of them) on stdout, after what came before."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(bytes(data).decode("utf-8"))
        return
    sys.stdout.flush()
    buffer.write(memoryview(data))


# control characters (C0 but tab and newline, DEL, C1) shown as \xNN: a topic or key holding ESC
# must not drive the terminal
_CONTROLS = {i: f"\\x{i:02x}" for i in (*range(0, 32), *range(127, 160)) if i not in (9, 10)}


def printable(text: str) -> str:
    """text for a terminal: control characters escaped, everything else as it is."""
    return text.translate(_CONTROLS)


def utc_time(millis) -> str:
    """A time (epoch ms) as every command prints it: ISO 8601 in UTC with a Z and milliseconds
    (2026-11-22T00:38:25.524Z; forensics.storeinfo.iso, the JSON lines' form too), or "-" for
    none or a value that is no time."""
    from mqtool.forensics.storeinfo import iso   # at use: every command imports this module

    return iso(millis) or "-"


def note(message: str) -> None:
    """A human remark on stderr (never mixed into data on stdout), one line however long (a program
    reading stderr, or grep, sees it whole)."""
    stderr().print(printable(message), highlight=False, markup=False, soft_wrap=True)


class TableStream:
    """Prints rows as rich tables of `page` rows, so a long dump never piles up in memory."""

    def __init__(self, title: str, columns: list[tuple[str, dict]], page: int = 200):
        self.title = title
        self.columns = columns
        self.page = page
        self.rows: list[list[str]] = []
        self.pages = 0

    def add(self, *cells) -> None:
        from rich.text import Text

        # cells are data (topics, keys, messages): plain text, never rich markup
        self.rows.append([Text("" if c is None else printable(str(c))) for c in cells])
        if len(self.rows) >= self.page:
            self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        from rich.table import Table

        title = printable(self.title) if self.title and self.pages == 0 else None
        table = Table(title=title, show_lines=False,
                      header_style="bold")
        for name, opts in self.columns:
            table.add_column(name, **opts)
        for row in self.rows:
            table.add_row(*row)
        stdout().print(table)
        self.rows = []
        self.pages += 1


@contextmanager
def progress(total: int | None, description: str, *, enabled: bool = True, unit_bytes: bool = True):
    """A rich progress bar on stderr when stderr is a terminal; a no-op otherwise."""
    console = stderr()
    if not enabled or not console.is_terminal:
        yield _NoProgress()
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    columns = [TextColumn("{task.description}"), BarColumn()]
    if unit_bytes:
        columns += [DownloadColumn(), TransferSpeedColumn()]
    columns.append(TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total)
        yield _Progress(bar, task)


class _NoProgress:
    def advance(self, amount: int = 1) -> None:
        pass

    def update(self, completed: int) -> None:
        pass


class _Progress:
    def __init__(self, bar, task):
        self.bar = bar
        self.task = task

    def advance(self, amount: int = 1) -> None:
        self.bar.advance(self.task, amount)

    def update(self, completed: int) -> None:
        self.bar.update(self.task, completed=completed)


def in_use(layouts, as_json: bool, *, say: bool = True) -> None:
    """Readers of a store a live process holds: one line on stderr per store, and with --json a
    first line {"type": "in_use", "store", "pid", "command"} (StoreLayout.in_use, the one
    lock-owner rule), so what is read is known to be a moving target.  say=False: no stderr line
    (the command's refusal that follows is that line)."""
    for layout in layouts:
        held = layout.in_use()
        if held is None:
            continue
        if say:
            note(f"note: the store {layout.root} is in use: {held['holder']} holds its lock file; what it writes "
                 "while this reads can be missing or look damaged")
        if as_json:
            emit_json({"type": "in_use", "store": str(layout.root), "pid": held["pid"], "command": held["command"]})
