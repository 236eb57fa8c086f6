"""Benchmark mqtool's first runs against its second ones: nothing may compile at run time.

    python benchmarks/bench_coldstart.py [--size 256M] [--venv DIR] [--keep]

A new venv (benchmarks/.work/coldstart-venv, made afresh unless --venv names one to reuse) gets
the project installed as README says (`pip install '.[spark]'`, a wheel built from this
checkout: the kernels built ahead of time, the JVM reader's jar).  Then every command runs twice
in a row, each time a new process with an empty HOME (a new temporary directory, no
XDG_CACHE_HOME, no NUMBA_CACHE_DIR): verify-crc --json, stats --jobs 1 --json, dump commitlog
--json --no-body, export (Parquet) and append --json of 2,000 lines (into a new store each run),
on a generated store of --size of 1 KiB messages (benchmarks/.work, shared with the other
benchmarks).  Stdout goes to /dev/null.

Targets: each first run at most 0.3 s slower than its second, and a command's start-up (`mqtool
--version`, first run) under 0.5 s.  After the runs the benchmark looks for anything numba
compiled into a cache (*.nbi/*.nbc files under the venv's mqtool package or the HOMEs): there
must be none.  The machine is shared: the load average is printed first.  The exit status is
non-zero when a run fails or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from storegen import ensure_store, parse_size  # noqa: E402

MARGIN = 0.3        # s: a first run's cost over the second's
STARTUP = 0.5       # s: mqtool --version, first run
BODY = "0123456789abcdef" * 64


def make_venv(venv: Path) -> float:
    """A new venv with the project installed as README says; returns the install's seconds."""
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    started = time.perf_counter()
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", f"{ROOT}[spark]"], check=True)
    return time.perf_counter() - started


def append_input(path: Path, lines: int = 2000) -> None:
    with open(path, "w") as fh:
        for i in range(lines):
            fh.write(json.dumps({"topic": "BenchTopic", "queueId": i % 8, "tags": "TagA", "keys": f"key-{i}",
                                 "body": BODY}, separators=(",", ":")) + "\n")


def timed(argv, home: Path, stdin=None) -> float:
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR", "PYTHONPATH", "VIRTUAL_ENV")}
    env["HOME"] = str(home)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdin=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(map(str, argv))}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
    return seconds


def compiled_files(*roots: Path) -> list[Path]:
    return [p for root in roots if root.exists() for p in root.rglob("*") if p.suffix in (".nbi", ".nbc")]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="256M", help="commitlog data of the generated store")
    parser.add_argument("--venv", help="reuse this venv (mqtool installed) instead of making a new one")
    parser.add_argument("--keep", action="store_true", help="keep the new venv for the next run (--venv)")
    args, _ = parser.parse_known_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} (2 cores: wall times mean little above 2)")
    store, manifest = ensure_store(parse_size(args.size))
    work = HERE / ".work"
    if args.venv:
        venv = Path(args.venv)
    else:
        venv = work / "coldstart-venv"
        print(f"installing the project into a new venv ({venv}) ...", flush=True)
        print(f"  pip install '.[spark]': {make_venv(venv):.1f} s")
    mqtool = str(venv / "bin" / "mqtool")
    package = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import mqtool, os; print(os.path.dirname("
                                   "mqtool.__file__))"], capture_output=True, text=True, check=True).stdout.strip())
    before = set(compiled_files(package))
    failed = False
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        tmp = Path(tmp)
        lines = tmp / "lines.jsonl"
        append_input(lines)
        homes = []

        def home() -> Path:
            path = Path(tempfile.mkdtemp(dir=tmp, prefix="home-"))
            homes.append(path)
            return path

        startup = timed([mqtool, "--version"], home())
        ok = startup < STARTUP
        failed |= not ok
        print(f"{'start-up (mqtool --version)':<34} {startup:6.2f} s   target < {STARTUP} s   {'PASS' if ok else 'FAIL'}")
        commands = {
            "verify-crc --json": lambda n: [mqtool, "verify-crc", store, "--json"],
            "stats --jobs 1 --json": lambda n: [mqtool, "stats", store, "--jobs", "1", "--json"],
            "dump commitlog --json --no-body": lambda n: [mqtool, "dump", store, "commitlog", "--json", "--no-body"],
            "export (parquet)": lambda n: [mqtool, "export", store, "--out", tmp / f"export-{n}"],
            "append --json (2,000 lines)": lambda n: [mqtool, "append", tmp / f"append-{n}", "--json",
                                                      "--input", lines],
        }
        print(f"{'command':<34} {'first':>7} {'second':>7} {'extra':>7}   target: extra <= {MARGIN} s")
        for name, argv_of in commands.items():
            first = timed(argv_of(1), home())
            second = timed(argv_of(2), home())
            ok = first - second <= MARGIN
            failed |= not ok
            print(f"{name:<34} {first:6.2f}s {second:6.2f}s {first - second:+6.2f}s   {'PASS' if ok else 'FAIL'}",
                  flush=True)
        written = [p for p in compiled_files(package, *homes) if p not in before]
        print(f"numba cache files written by the runs: {len(written)}"
              + "".join(f"\n  {p}" for p in written[:10]))
        failed |= bool(written)
    if not args.venv and not args.keep:
        shutil.rmtree(venv, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
