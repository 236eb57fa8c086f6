"""Benchmark `mqtool dump STORE commitlog --json > /dev/null` on synthetic stores.

    python benchmarks/bench_dump.py [--sizes 256M,1280M] [--file-size 1G] [--repeat 1]

For each store size (generated once by storegen.py and cached under
benchmarks/.work/) and each variant (with bodies, and --no-body), dump runs
in a child process with stdout on /dev/null.  Measured per run: wall time,
messages/s, MB/s of commitlog data, and the child's peak RSS (ru_maxrss from
os.wait4 on that child alone, so one run never sees another's peak).

The target is "peak memory well under 300 MB, flat as the store grows": the
report ends with the big/small peak RSS ratio per variant and PASS or FAIL.

Then the speed (issue 31's target: `dump --json --no-body` of the 256 MiB store at
400,000 records/s or more, whole process): on the smallest store, `--runs`
runs of the whole dump interleaved with as many of the same command with
`--limit 1` (start-up: the interpreter, the imports, loading the kernels and
the first chunk), medians of each (the machine is shared: a change of load hits
both alike).  Printed: records/s of the whole process and its ratio to the
target, and records/s of the walk and the rendering alone (the records over
the difference of the medians).  `--baseline COMMAND` runs another build the
same way, interleaved too, and prints each figure's ratio to it.
Nothing is asserted; the exit status is non-zero only when a dump itself fails.
MB here is 10^6 bytes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import storegen  # noqa: E402

DEFAULT_SIZES = "256M,1280M"
TARGET_RECORDS_S = 400_000   # dump --json --no-body of the 256 MiB store, the whole process (issue 31)
RSS_LIMIT_MB = 300      # peak RSS must stay below this ...
FLAT_RATIO = 1.15       # ... and grow by at most this factor from the smallest to the largest store
VARIANTS = {"json": [], "no-body": ["--no-body"]}
MB = 1e6


def mqtool_command() -> list[str]:
    """The mqtool of the interpreter running this script (its venv's console script)."""
    script = Path(sys.executable).with_name("mqtool")
    if script.exists():
        return [str(script)]
    found = shutil.which("mqtool")
    return [found] if found else [sys.executable, "-m", "mqtool"]


def warm(store: Path, data_end: int) -> None:
    """Read the commitlog data once so every run starts from a warm page cache."""
    left = data_end
    for path in sorted((store / "commitlog").iterdir()):
        with open(path, "rb", buffering=0) as fh:
            while left > 0:
                got = fh.read(min(8 << 20, left))
                if not got:
                    break
                left -= len(got)


def run_once(cmd: list[str]) -> dict:
    """Run cmd with stdout on /dev/null; wall time, exit code and that child's rusage."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return {"wall": wall, "code": proc.returncode, "stderr": stderr,
            "rss": usage.ru_maxrss * 1024,  # KiB on Linux
            "user": usage.ru_utime, "sys": usage.ru_stime}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help=f"commitlog data sizes, comma separated (default {DEFAULT_SIZES})")
    parser.add_argument("--file-size", type=storegen.parse_size, default=storegen.DEFAULT_FILE_SIZE,
                        help="mappedFileSizeCommitLog of the generated stores (default 1G)")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"which of {', '.join(VARIANTS)} to run (default all)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs per measurement: best wall time, highest peak RSS (default 1)")
    parser.add_argument("--mqtool", metavar="COMMAND",
                        help="how to run mqtool, e.g. 'python -m mqtool' with another PYTHONPATH to "
                             "compare versions (default: this interpreter's mqtool)")
    parser.add_argument("--runs", type=int, default=7,
                        help="interleaved runs for the records/s medians (default 7; 0: leave them out)")
    parser.add_argument("--baseline", metavar="COMMAND",
                        help="another mqtool to run the same way, interleaved, for ratios (e.g. "
                             "'env PYTHONPATH=/path/to/old python -m mqtool')")
    args = parser.parse_args(argv)
    sizes = sorted(storegen.parse_size(s) for s in args.sizes.split(","))
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}")

    stores = {size: storegen.ensure_store(size, args.file_size) for size in sizes}
    mqtool = shlex.split(args.mqtool) if args.mqtool else mqtool_command()
    print(f"bench_dump: {' '.join(mqtool)} dump STORE commitlog --json [--no-body] > /dev/null, "
          f"best of {args.repeat}, warm page cache")
    header = (f"{'variant':<8} {'store':>6} {'files':>5} {'records':>9} {'wall s':>7} {'msgs/s':>9} "
              f"{'MB/s':>7} {'peak RSS MB':>11} {'user s':>7} {'sys s':>6}")
    print(header)
    print("-" * len(header))
    results: dict[tuple[str, int], dict] = {}
    failed = False
    for variant in variants:
        for size in sizes:
            store, manifest = stores[size]
            warm(store, manifest["data_end"])
            cmd = mqtool + ["dump", str(store), "commitlog", "--json", *VARIANTS[variant]]
            runs = [run_once(cmd) for _ in range(args.repeat)]
            bad = [r for r in runs if r["code"] != 0]
            if bad:
                failed = True
                print(f"{variant:<8} {storegen.format_size(size):>6}  dump exited {bad[0]['code']}: "
                      f"{bad[0]['stderr'].strip()[-500:]}")
                continue
            best = min(runs, key=lambda r: r["wall"])
            r = results[variant, size] = {
                "wall": best["wall"], "rss": max(run["rss"] for run in runs),
                "msgs": manifest["records"] / best["wall"], "mbs": manifest["data_end"] / MB / best["wall"],
                "user": best["user"], "sys": best["sys"]}
            print(f"{variant:<8} {storegen.format_size(size):>6} {manifest['files']:>5} "
                  f"{manifest['records']:>9} {r['wall']:>7.2f} {r['msgs']:>9,.0f} {r['mbs']:>7.1f} "
                  f"{r['rss'] / MB:>11.1f} {r['user']:>7.2f} {r['sys']:>6.2f}", flush=True)

    print()
    verdicts = []
    small, big = sizes[0], sizes[-1]
    for variant in variants:
        if (variant, small) not in results or (variant, big) not in results:
            continue
        peaks = [results[variant, s]["rss"] for s in sizes if (variant, s) in results]
        ratio = results[variant, big]["rss"] / results[variant, small]["rss"]
        ok = max(peaks) < RSS_LIMIT_MB * MB and (len(sizes) == 1 or ratio <= FLAT_RATIO)
        verdicts.append(ok)
        print(f"{variant:<8} peak RSS {storegen.format_size(big)}/{storegen.format_size(small)} = "
              f"{ratio:.2f}, highest {max(peaks) / MB:.1f} MB: {'PASS' if ok else 'FAIL'}")
    overall = "PASS" if verdicts and all(verdicts) and not failed else "FAIL"
    print(f"target: peak RSS < {RSS_LIMIT_MB} MB and ratio <= {FLAT_RATIO} (memory flat as the "
          f"store grows): {overall}")
    if args.runs > 0:
        store, manifest = stores[sizes[0]]
        builds = {"this": mqtool, **({"baseline": shlex.split(args.baseline)} if args.baseline else {})}
        failed = speed(store, manifest, builds, args.runs) or failed
    return 1 if failed else 0


def median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def speed(store: Path, manifest: dict, builds: dict, runs: int) -> bool:
    """records/s of dump --json --no-body, whole process and without start-up, medians of
    interleaved runs; True when a dump failed."""
    records = manifest["records"]
    warm(store, manifest["data_end"])
    cmd = ["dump", str(store), "commitlog", "--json", "--no-body"]
    kinds = {"whole": cmd, "start-up": cmd + ["--limit", "1"]}
    walls: dict = {(b, k): [] for b in builds for k in kinds}
    cpu: dict = {b: [] for b in builds}
    load = os.getloadavg()[0]
    for _ in range(runs):
        for build, mqtool in builds.items():
            for kind, args in kinds.items():
                r = run_once(mqtool + args)
                if r["code"] != 0:
                    print(f"{build}: dump exited {r['code']}: {r['stderr'].strip()[-500:]}")
                    return True
                walls[build, kind].append(r["wall"])
                if kind == "whole":
                    cpu[build].append(r["user"] + r["sys"])
    print()
    print(f"dump --json --no-body, {storegen.format_size(manifest['size'])} store ({records:,} records), "
          f"medians of {runs} interleaved runs; load average {load:.1f} before, "
          f"{os.getloadavg()[0]:.1f} after, {os.cpu_count()} cores")
    figures = {}
    for build in builds:
        whole, start = median(walls[build, "whole"]), median(walls[build, "start-up"])
        walk = whole - start
        figures[build] = (records / whole, records / walk if walk > 0 else float("inf"))
        print(f"  {build:<8} whole {whole:.3f} s (CPU {median(cpu[build]):.2f} s): {figures[build][0]:>9,.0f} "
              f"records/s, {figures[build][0] / TARGET_RECORDS_S:.2f} of the target "
              f"({TARGET_RECORDS_S:,}: {'PASS' if figures[build][0] >= TARGET_RECORDS_S else 'FAIL'}); "
              f"start-up {start:.3f} s; walk and render {walk:.3f} s: {figures[build][1]:>9,.0f} records/s")
    if "baseline" in figures:
        this, base = figures["this"], figures["baseline"]
        print(f"  this / baseline: whole process {this[0] / base[0]:.2f}, walk and render {this[1] / base[1]:.2f}")
    return False


if __name__ == "__main__":
    sys.exit(main())
