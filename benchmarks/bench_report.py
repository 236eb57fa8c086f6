"""Benchmark `mqtool report` on generated stores of 256 MiB and 1 GiB.

    python benchmarks/bench_report.py [--sizes 256M,1G] [--file-size 1G] [--repeat 1]

Stores come from storegen.py (cached in benchmarks/.work).  Each run is a child process,
`mqtool report STORE -o FILE --json` from a warm page cache: its wall time, peak RSS, user and system
CPU.  Targets: the 1 GiB store under 5 s, and memory flat (peak RSS of the biggest store at most
1.15 times the smallest's).  It asserts nothing; the exit status is non-zero only when a report fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import storegen  # noqa: E402
from bench_dump import mqtool_command, run_once, warm  # noqa: E402

TARGET_S = 5.0
FLAT_RATIO = 1.15
MB = 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="256M,1G")
    parser.add_argument("--file-size", type=storegen.parse_size, default=storegen.DEFAULT_FILE_SIZE)
    parser.add_argument("--repeat", type=int, default=1)
    args, _ = parser.parse_known_args(argv)
    sizes = sorted(storegen.parse_size(s) for s in args.sizes.split(","))
    print("bench_report: mqtool report STORE -o FILE --json, warm page cache")
    header = f"{'store':>6} {'records':>9} {'wall s':>7} {'peak RSS MB':>11} {'user s':>7} {'sys s':>6} {'page KB':>8}"
    print(header)
    print("-" * len(header))
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            store, manifest = storegen.ensure_store(size, args.file_size)
            warm(store, manifest["data_end"])
            out = Path(tmp) / f"report-{size}.html"
            runs = [run_once(mqtool_command() + ["report", str(store), "-o", str(out), "--json"])
                    for _ in range(args.repeat)]
            bad = [r for r in runs if r["code"] not in (0, 1)]    # 1: the page shows problems (no offsets file)
            if bad:
                print(f"{storegen.format_size(size):>6}  report exited {bad[0]['code']}: {bad[0]['stderr'][-500:]}")
                return 1
            best = min(runs, key=lambda r: r["wall"])
            results[size] = best | {"rss": max(r["rss"] for r in runs)}
            print(f"{storegen.format_size(size):>6} {manifest['records']:>9} {best['wall']:>7.2f} "
                  f"{results[size]['rss'] / MB:>11.1f} {best['user']:>7.2f} {best['sys']:>6.2f} "
                  f"{out.stat().st_size / 1e3:>8.0f}", flush=True)
    small, big = results[sizes[0]], results[sizes[-1]]
    ratio = big["rss"] / small["rss"]
    print(f"\n{storegen.format_size(sizes[-1])}: {big['wall']:.2f} s (target < {TARGET_S:g} s) "
          f"{'PASS' if big['wall'] < TARGET_S else 'FAIL'}; peak RSS {storegen.format_size(sizes[-1])} / "
          f"{storegen.format_size(sizes[0])} = {ratio:.2f} (target <= {FLAT_RATIO}) "
          f"{'PASS' if ratio <= FLAT_RATIO else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
