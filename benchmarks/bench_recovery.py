"""Benchmark rebuild-cq and an abnormal recovery over a commitlog of >= 1 GiB.

    python benchmarks/bench_recovery.py [--size 1G]

Uses the store bench_verify.py writes (1 KiB messages with one key each,
written by mqtool's engine, cached under benchmarks/.work).  From a warm page
cache and warm compile caches:

- rebuild-cq --index: messages/s and MB/s of rebuilding every consume queue
  and the index from the commitlog, as a fresh command (its own `seconds`;
  loading the compiled kernels from their cache first, ~0.15 s, is start-up
  and reported as `loadSeconds`) and in process after a first run (target:
  >= 2,000,000 messages/s);
- recover --mode abnormal with the checkpoint at 0 (so the whole commitlog
  is dispatched again and every index file rebuilt): its time (target: under
  2 s for 1 GiB).

Both are timed as the command reports them (in-process) and as whole
commands with Python start-up.  Replaced files are not kept (--no-quarantine).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_verify  # noqa: E402

MB = 1e6


def mqtool(*args) -> tuple[float, list[dict]]:
    command = [str(Path(sys.executable).with_name("mqtool")), *map(str, args)]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0,):
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed, [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]


def in_process_rebuild(root: Path) -> tuple[float, int]:
    """rebuild.rebuild as the command calls it, in this process after a first run has loaded the
    kernels: the best of three (seconds, records)."""
    from mqtool.cli import heap
    from mqtool.engine import rebuild
    from mqtool.storage.settings import open_layout

    heap.keep_freed_memory()      # as the mqtool command does at start
    layout = open_layout(str(root), None, ())
    rebuild.rebuild(layout, with_index=True, keep_old=False)
    best = None
    for _ in range(3):
        started = time.perf_counter()
        report = rebuild.rebuild(layout, with_index=True, keep_old=False)
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
    return best, report.records


def crash(root: Path) -> None:
    """Make the store look crashed with a checkpoint that trusts nothing."""
    (root / "abort").write_bytes(b"")
    with open(root / "checkpoint", "r+b") as fh:
        fh.write(bytes(40))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G")
    args, _ = parser.parse_known_args()
    root = HERE / ".work" / f"verify-store-{args.size}"
    if not root.with_name(root.name + ".complete").exists():
        print(f"writing a {args.size} store with mqtool's engine into {root} ...", flush=True)
        bench_verify.build_store(root, bench_verify.parse_size(args.size))
    data = bench_verify.data_bytes(root)
    records = int(root.with_name(root.name + ".complete").read_text())
    bench_verify.bare_crc_loop(bench_verify.commitlog_files(root), data)   # page cache warm
    mqtool("rebuild-cq", root, "--index", "--no-quarantine", "--json")    # compile caches warm
    print(f"commitlog data: {data / MB:,.0f} MB, {records:,} messages of 1 KiB with one key each")
    wall, lines = mqtool("rebuild-cq", root, "--index", "--no-quarantine", "--json")
    report = lines[-1]
    rate = report["records"] / report["seconds"]
    verdict = "PASS" if rate >= 2_000_000 else "FAIL"
    print(f"  rebuild-cq --index, a fresh command   {rate:>12,.0f} msgs/s  "
          f"{data / report['seconds'] / MB:>8,.0f} MB/s  ratio {rate / 2e6:.2f}  {verdict}   ({report['seconds']:.2f} s, "
          f"after {report['loadSeconds']:.2f} s loading the compiled kernels; the whole command {wall:.2f} s)")
    seconds, records_done = in_process_rebuild(root)
    rate = records_done / seconds
    verdict = "PASS" if rate >= 2_000_000 else "FAIL"
    print(f"  rebuild-cq --index, in process, warm  {rate:>12,.0f} msgs/s  {data / seconds / MB:>8,.0f} MB/s  "
          f"target 2,000,000 msgs/s  ratio {rate / 2e6:.2f}  {verdict}   ({seconds:.2f} s, best of 3)")
    crash(root)
    wall, lines = mqtool("recover", root, "--mode", "abnormal", "--no-quarantine", "--json")
    plan = lines[-1]
    verdict = "PASS" if wall < 2.0 else "FAIL"
    print(f"  recover --mode abnormal (re-dispatches {plan['redispatchBytes'] / MB:,.0f} MB)  "
          f"{wall:.2f} s as a whole command  target < 2 s  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
