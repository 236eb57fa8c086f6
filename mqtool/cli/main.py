"""The `mqtool` command group, and the one place that maps outcomes to exit codes.

0 ok, 1 problems found in the data, 2 usage error, 3 refused (lock held or
unsafe), 4 not a store or unreadable input; 130 on Ctrl-C; 141 when the
reader of our output went away (`mqtool dump ... | head -1`), silently.
Unexpected internal errors print one line (set MQTOOL_DEBUG=1 for the
traceback) and exit 70.
"""

from __future__ import annotations

import errno
import os
import sys

import click

from mqtool import __version__, errors
from mqtool.cli import heap, output

# Every command: its name, its module in mqtool/commands/ (loaded only when the command runs or
# its own --help is asked for), and its one line in `mqtool --help` and in shell completion,
# whole (no "..."): adding a command is adding its line here.  The line is the first paragraph of
# the command's own help, its docstring (tests/test_startup.py keeps the two equal): written twice
# so that listing the commands imports none of them.
COMMANDS = {
    "info": ("info", "The store at a glance: files, offsets, queues, lock."),
    "dump": ("dump", "The entries of a store's files, as they are on disk."),
    "append": ("append", "Put messages into a store, as a broker would."),
    "verify-crc": ("verify_crc", "Check every record, CRC, queue unit and index entry."),
    "recover": ("recover", "Recover a store as a broker's start would."),
    "rebuild-cq": ("rebuild_cq", "Rebuild consume queues (with --index, the index too)."),
    "salvage": ("salvage", "Copy every intact message of a damaged store into a new one."),
    "lookup-by-key": ("lookup_by_key", "Messages by key (KEYS or UNIQ_KEY) in a topic."),
    "lookup-by-id": ("lookup_by_id", "The message an offset message id or a UNIQ_KEY names."),
    "get": ("get", "Messages by queue offset, read through the consume queue."),
    "clean": ("clean", "Delete expired commitlog files by RocketMQ's rules."),
    "export": ("export", "Commitlog records as Parquet or JSON lines, per topic."),
    "stats": ("stats", "Messages, bytes, times, sizes and keys per topic and queue."),
    "lag": ("lag", "Consumer lag per group, topic and queue, offline."),
    "report": ("report", "A forensic HTML report with charts."),
    "diff": ("diff", "Where two replicas diverge, and what only one holds."),
    "track": ("track", "Where a message went: every hop, retry, delay and timer."),
    "transactions": ("transactions", "Every transaction: committed, rolled back or pending."),
}

INTERRUPTED = 130
BROKEN_PIPE = 141
INTERNAL = 70


class _OutputClosed(Exception):
    """stdout's reader went away; raised instead of BrokenPipeError so click does not
    turn it into its own exit 1."""


class MqtoolGroup(click.Group):
    """The command group, lazily (click's LazyGroup pattern): names and one-line help come from
    COMMANDS, and a command's module is imported only when that command is resolved."""

    def list_commands(self, ctx):
        return sorted(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        if name not in self.commands:
            import importlib

            self.add_command(importlib.import_module(f"mqtool.commands.{COMMANDS[name][0]}").cli, name)
        return self.commands[name]

    def format_commands(self, ctx, formatter):
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name][1]) for name in self.list_commands(ctx)])

    def shell_complete(self, ctx, incomplete):
        from click.shell_completion import CompletionItem

        return [CompletionItem(name, help=COMMANDS[name][1]) for name in self.list_commands(ctx)
                if name.startswith(incomplete)] + click.Command.shell_complete(self, ctx, incomplete)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise _OutputClosed() from None
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise _OutputClosed() from None
            raise


@click.group(cls=MqtoolGroup,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="mqtool")
def cli():
    """Administration and forensics for Apache RocketMQ message stores.

    Exit codes: 0 ok, 1 problems found in the data, 2 usage error, 3 refused
    (a broker holds the lock, or unsafe), 4 not a store or unreadable input.
    """


def _fail(message: str, code: int) -> int:
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001 - stdout may be the broken pipe itself
        pass
    try:
        sys.stderr.write(f"mqtool: {output.printable(message)}\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass
    return code


def _silence_broken_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except Exception:  # noqa: BLE001
        pass


def run(argv=None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    try:
        cli.main(args=argv, prog_name="mqtool", standalone_mode=False)
        sys.stdout.flush()
        return errors.OK
    except SystemExit as exc:  # click exits by itself only for --help/--version paths
        return exc.code if isinstance(exc.code, int) else errors.USAGE
    except errors.MqError as exc:
        return _fail(str(exc), exc.exit_code)
    except click.exceptions.NoArgsIsHelpError as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc), err=True)
        return errors.USAGE
    except click.UsageError as exc:
        hint = ""
        if exc.ctx is not None:
            hint = f" (try '{exc.ctx.command_path} --help')"
        return _fail(exc.format_message() + hint, errors.USAGE)
    except click.ClickException as exc:
        return _fail(exc.format_message(), errors.USAGE)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        return _fail("interrupted", INTERRUPTED)
    except (_OutputClosed, BrokenPipeError):
        _silence_broken_stdout()
        return BROKEN_PIPE
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            _silence_broken_stdout()
            return BROKEN_PIPE
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", errors.NOT_A_STORE)
    except Exception as exc:  # noqa: BLE001 - the last line of defence against tracebacks
        if os.environ.get("MQTOOL_DEBUG"):
            raise
        return _fail(f"internal error: {type(exc).__name__}: {exc} (set MQTOOL_DEBUG=1 for details)",
                     INTERNAL)


def main() -> None:
    # numpy's OpenBLAS starts a thread per core when it is imported, and they spin a while
    # (about 0.06 s of CPU a command): mqtool does no linear algebra, so one thread will do
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    heap.keep_freed_memory()
    heap.fewer_collections()
    sys.exit(run())
