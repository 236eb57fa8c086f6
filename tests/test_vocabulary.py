"""One vocabulary across the commands: each shared option declared once (cli/options.py), one
--jobs default, one time format, and help that names what a command takes."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from mqtool.cli.main import cli
from mqtool.forensics.dumpkinds import KINDS

REPO = Path(__file__).resolve().parent.parent
# append's --body is the text of the message it puts (not how bodies are shown): a name it had first
OWN = {("append.py", "--body")}
SHARED = {"--since", "--until", "--body", "--no-body", "--jobs", "--engine", "--master", "--spark-conf", "--json",
          "--config", "--set", "--progress/--no-progress", "--prometheus"}
NAMES = cli.list_commands(click.Context(cli))
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _command(name):
    return cli.get_command(click.Context(cli), name)


def test_shared_options_are_declared_only_in_cli_options():
    """A command module that declares --since, --body, --jobs... itself is a second home for it."""
    restated = []
    for path in sorted((REPO / "mqtool" / "commands").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "option"
                    and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in SHARED
                    and (path.name, node.args[0].value) not in OWN):
                restated.append(f"{path.name}: {node.args[0].value}")
    assert restated == []


def test_jobs_has_one_default():
    """-j/--jobs is 1 wherever it is taken (this process; 0 asks for a worker per CPU)."""
    jobs = {name: p for name in NAMES for p in _command(name).params if p.name == "jobs"}
    assert {"export", "report", "stats", "verify-crc"} <= set(jobs)
    assert {name: (p.default, p.opts) for name, p in jobs.items()} == {name: (1, ["--jobs", "-j"]) for name in jobs}


def test_jobs_zero_is_a_worker_per_cpu():
    import os

    ctx = click.Context(_command("stats"))
    param = next(p for p in _command("stats").params if p.name == "jobs")
    assert param.process_value(ctx, 0) == len(os.sched_getaffinity(0))
    assert param.process_value(ctx, 3) == 3


def test_dump_usage_keeps_kind_whole_and_help_names_every_kind(run_cli):
    text = run_cli("dump", "--help").out
    usage = text[: text.index("\n\n")]
    assert usage.split() == ["Usage:", "mqtool", "dump", "[OPTIONS]", "STORE|FILE", "[KIND]"]
    listed = [line.split()[0] for line in text.splitlines() if line.startswith("    ") and line.split()]
    assert [k for k in KINDS if k in listed] == list(KINDS)


def test_one_time_format_in_tables_and_json(extracted, run_cli):
    """Every time printed is ISO 8601 in UTC with milliseconds and a Z: no +00:00, no space
    between date and time, in tables and JSON lines alike."""
    store = extracted("basic")
    outputs = [run_cli("info", store).out, run_cli("dump", store, "checkpoint").out,
               run_cli("dump", store, "checkpoint", "--json").out,
               run_cli("dump", store, "commitlog", "--limit", "3").out,
               run_cli("dump", store, "index", "--limit", "3").out,
               run_cli("get", store, "--topic", "BasicTopic", "--queue", "0", "--offset", "0").out,
               run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3").out,
               run_cli("lookup-by-id", store, "7F00000100002A9F0000000000000000").out,
               run_cli("stats", store, "--json").out]
    for text in outputs:
        assert "+00:00" not in text
        assert not re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d", text), text
        assert TIME.search(text), text
