"""A command costs its work and no more: `mqtool --version` and a shell completion request load
no command module, numpy, numba or pyarrow; a command's own modules load when it runs; where the
kernels were built ahead of time, nothing imports numba.  Checked by what each process imported
(sys.modules), never by a timing (the timings are benchmarks/bench_startup.py's)."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import shutil
import sys
from pathlib import Path

import click
import pytest

from mqtool.cli.main import COMMANDS, cli
from mqtool.native import aot

REPORT_MODULES = """
import atexit, json, sys
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n"))
sys.argv = ["mqtool", *sys.argv[1:]]
from mqtool.cli.main import main
main()
"""

HEAVY = ("numpy", "numba", "llvmlite", "pyarrow", "pyspark")


def _mqtool(*args, env=None):
    """Run mqtool in a new process: (exit code, stdout, the modules it had imported at exit)."""
    proc = subprocess.run([sys.executable, "-c", REPORT_MODULES, *map(str, args)], capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=300)
    last = proc.stderr.rstrip().splitlines()[-1]
    assert last.startswith("MODULES "), proc.stderr
    return proc.returncode, proc.stdout, set(json.loads(last[len("MODULES "):]))


def _loaded(modules, tops=HEAVY, commands=True):
    return sorted(m for m in modules if m.split(".")[0] in tops or (commands and m.startswith("mqtool.commands.")))


def test_version_loads_no_command_and_nothing_heavy():
    code, out, modules = _mqtool("--version")
    assert code == 0 and "mqtool, version" in out
    assert _loaded(modules) == []


def test_completion_of_the_command_names_loads_no_command():
    env = {"_MQTOOL_COMPLETE": "bash_complete", "COMP_WORDS": "mqtool ", "COMP_CWORD": "1"}
    code, out, modules = _mqtool(env=env)
    assert code == 0
    assert [line.split(",", 1)[1] for line in out.splitlines()] == sorted(COMMANDS)
    assert _loaded(modules) == []
    env = {"_MQTOOL_COMPLETE": "bash_complete", "COMP_WORDS": "mqtool lookup-by", "COMP_CWORD": "1"}
    code, out, modules = _mqtool(env=env)
    assert [line.split(",", 1)[1] for line in out.splitlines()] == ["lookup-by-id", "lookup-by-key"]
    assert _loaded(modules) == []


def test_group_help_lists_every_command_whole_without_loading_them():
    code, out, modules = _mqtool("--help", env={"COLUMNS": "80"})
    assert code == 0
    listed = out[out.index("Commands:"):].splitlines()[1:]
    assert [line.split()[0] for line in listed] == sorted(COMMANDS)     # one line each: never wrapped
    for line in listed:
        name = line.split()[0]
        assert line.split(None, 1)[1] == COMMANDS[name][1]                # whole: never cut with "..."
    assert _loaded(modules) == []


def test_a_command_loads_its_own_module_only():
    code, out, modules = _mqtool("lag", "--help")
    assert code == 0 and "--group" in out
    assert sorted(m for m in modules if m.startswith("mqtool.commands.")) == ["mqtool.commands.lag"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_registered_command_is_that_command(name):
    """COMMANDS names each command's module and one line of help: the module's command has that
    name, the line is the first paragraph of the command's own help (its docstring: what click
    would list, had it imported the command) and it fits the listing."""
    command = cli.get_command(click.Context(cli), name)
    assert command is not None and command.name == name
    assert inspect.cleandoc(command.help).split("\n\n")[0] == COMMANDS[name][1]
    assert command.get_short_help_str(limit=80) == COMMANDS[name][1]
    width = 80 - 6 - max(map(len, COMMANDS))       # click's room for it in an 80-column listing
    assert len(COMMANDS[name][1]) <= width and not COMMANDS[name][1].endswith("...")


def test_unknown_command_is_a_usage_error():
    code, _, modules = _mqtool("nosuchcommand")
    assert code == 2
    assert _loaded(modules) == []


needs_built = pytest.mark.skipif(not aot.available(), reason="the kernels were not built ahead of time from "
                                 "these sources (pip install -e . builds them): the JIT fallback loads numba")


@needs_built
def test_built_kernels_serve_without_numba():
    """Every family's kernels, built ahead of time, run (each family's warm_up calls them) without
    numba ever being imported."""
    code = ("import importlib, json, sys\n"
            "from mqtool.native import aot\n"
            "for family, (module, names) in aot.FAMILIES.items():\n"
            "    m = importlib.import_module(module)\n"
            "    assert all(aot.adopted(getattr(m, n)) for n in names), family\n"
            "    getattr(m, 'warm_up', lambda: None)()\n"
            "print(json.dumps(sorted(t for t in ('numba', 'llvmlite') if t in sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@needs_built
@pytest.mark.parametrize("args", [("info", "{store}"), ("verify-crc", "{store}"), ("stats", "{store}", "-j", "1"),
                                  ("dump", "{store}", "commitlog", "--json")])
def test_commands_do_not_import_numba_where_the_kernels_are_built(args, extracted):
    code, out, modules = _mqtool(*[a.format(store=extracted("basic")) for a in args])
    assert code == 0, out
    assert _loaded(modules, ("numba", "llvmlite", "pyarrow"), commands=False) == []


SMALL_STORE = Path(__file__).resolve().parent.parent / "examples" / "store"     # 4.x, no timer store, 64 KiB


@pytest.mark.parametrize("args", [("info", "{store}"), ("info", "{store}", "--json"),
                                  ("dump", "{store}", "checkpoint"), ("dump", "{store}", "index", "--json"),
                                  ("dump", "{store}/commitlog/00000000000000000000", "--json"),
                                  ("lag", "{store}", "--json")], ids=" ".join)
def test_commands_on_a_small_store_import_neither_numpy_nor_numba(args, tmp_path):
    """info, dump and lag of a store of a few messages without a timer store take the plain walks:
    numpy (the timer store's view, the columns of compiled chunks, long queues' sums) is not loaded,
    nor numba.  lag reads a group's committed offsets (config/consumerOffset.json added to a copy)."""
    store = tmp_path / "store"
    shutil.copytree(SMALL_STORE, store)
    (store / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": {"BasicTopic@billing": {"0": 3}}}))
    code, out, modules = _mqtool(*[a.format(store=store) for a in args])
    assert code == 0, out
    assert out.strip()
    if args[0] == "lag":          # the queue's tail was summed: 10 messages after committed offset 3
        line = next(json.loads(x) for x in out.splitlines() if '"queueId":0,' in x)
        assert line["lagMessages"] == 10 and line["lagBytes"] > 0
    assert _loaded(modules, ("numpy", "numba", "llvmlite", "pyarrow"), commands=False) == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_help_works(name, run_cli):
    result = run_cli(name, "--help")
    assert result.code == 0 and result.out.startswith(f"Usage: mqtool {name} ")
