"""Benchmark the commands that turn records into rows against a bare zlib.crc32 loop over the same bytes.

    python benchmarks/bench_columnar.py [--size 1G] [--repeat 1]

On storegen's store (~1 KiB messages, cached as benchmarks/.work/store-<size>-f1G/), each
command runs as a child process in one process (`--jobs 1`), output to /dev/null or a
temporary directory: `export --format parquet`, `export --format jsonl`, `stats --json` and
`dump commitlog --json --no-body`.  For each: wall time (the whole command, Python start-up
included), records/s, MB/s of commitlog data, peak RSS of the child, and the ratio to the bare
loop measured in the same run (bench_verify.bare_crc_loop: zlib.crc32 over the commitlog
read in 64 KiB chunks).  A command that times its own work (stats' total line and export's
summary: `seconds`, after `loadSeconds` loading its compiled kernels, as bench_verify takes
verify-crc's) is compared by that time (its row's wall, records/s and MB/s), the whole command's
time printed beside it.  Targets (issue 15): export to Parquet >= 1/3 of the loop, stats >= 1x,
dump --json --no-body >= 250,000 records/s, peak RSS < 300 MB.  Both start from a warm page
cache.  It asserts nothing; the exit status is non-zero only when a command fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import storegen  # noqa: E402
from bench_verify import bare_crc_loop  # noqa: E402

MB = 1e6


def mqtool() -> list[str]:
    """This interpreter's mqtool (python -m: PYTHONPATH picks the checkout to time)."""
    return [sys.executable, "-m", "mqtool"]


def run(args: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak RSS bytes, stdout) of one child running mqtool args."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(mqtool() + args, stdout=out, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        err = proc.stderr.read().decode()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode not in (0, 1):
            raise RuntimeError(f"mqtool {' '.join(args)} exited {proc.returncode}: {err}")
        out.seek(max(0, out.seek(0, os.SEEK_END) - 4096))    # the tail only: a forked child starts
        tail = out.read().decode(errors="replace")            # with this process's RSS as its own
    return wall, usage.ru_maxrss * 1024, tail


def own_time(tail: str) -> tuple[float, float] | None:
    """(seconds, loadSeconds) of a command that times its own work, as verify-crc does: from the
    last JSON line of its output (stats' total); None when it has none."""
    try:
        last = json.loads(tail.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    if isinstance(last, dict) and "seconds" in last:
        return last["seconds"], last.get("loadSeconds", 0.0)
    return None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=storegen.parse_size, default=storegen.parse_size("1G"))
    parser.add_argument("--repeat", type=int, default=1, help="runs per command; the best wall time counts")
    opts = parser.parse_args(argv)
    root, manifest = storegen.ensure_store(opts.size)
    records, data = manifest["records"], manifest["data_end"]
    files = sorted((root / "commitlog").iterdir())
    bare_crc_loop(files, data)                       # warm the page cache
    loop = max(bare_crc_loop(files, data) for _ in range(3))
    print(f"store {root} ({data / MB:,.0f} MB, {records:,} records); bare zlib.crc32 loop {loop:,.0f} MB/s")
    out = Path(tempfile.mkdtemp(prefix="bench-columnar-"))
    store = str(root)
    commands = [
        ("export parquet", ["export", store, "--out", str(out / "p"), "--overwrite", "--jobs", "1", "--json"], 1 / 3,
         None),
        ("export jsonl", ["export", store, "--out", str(out / "j"), "--format", "jsonl", "--overwrite",
                          "--jobs", "1"], None, None),
        ("stats", ["stats", store, "--json", "--jobs", "1"], 1.0, None),
        ("dump --json --no-body", ["dump", store, "commitlog", "--json", "--no-body"], None, 250_000),
    ]
    print(f"{'command':<24} {'wall':>7} {'records/s':>11} {'MB/s':>8} {'ratio':>6} {'peak RSS':>9}  target")
    for name, args, ratio_target, rate_target in commands:
        best, peak, own = None, 0, None
        for _ in range(opts.repeat):
            wall, rss, tail = run(args)
            best = wall if best is None else min(best, wall)
            peak = max(peak, rss)
            timed = own_time(tail)
            own = timed if own is None or (timed and timed[0] < own[0]) else own
        if name == "stats":
            assert json.loads(tail.strip().splitlines()[-1])["messages"] == records
        whole = ""
        if own:   # its own work is what compares with the loop; the whole command beside it
            whole = f"; whole command {best:.2f}s, kernels loaded in {own[1]:.2f}s"
            best = own[0]
        rate, mbs = records / best, data / best / MB
        ratio = mbs / loop
        if ratio_target is not None:
            verdict = f"ratio >= {ratio_target:.2f}: {'PASS' if ratio >= ratio_target else 'FAIL'}"
        else:
            verdict = f">= {rate_target:,} records/s: {'PASS' if rate >= rate_target else 'FAIL'}" if rate_target else ""
        verdict += f"; RSS < 300 MB: {'PASS' if peak < 300e6 else 'FAIL'}" + whole
        print(f"{name:<24} {best:>6.2f}s {rate:>11,.0f} {mbs:>8,.0f} {ratio:>6.2f} {peak / MB:>7,.0f}MB  {verdict}")
    subprocess.run(["rm", "-rf", str(out)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
