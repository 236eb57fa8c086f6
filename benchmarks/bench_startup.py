"""Benchmark what a command costs before it does its work: start-up, against Python importing click.

    python benchmarks/bench_startup.py [--runs 11] [--size 256M] [--mqtool COMMAND]

Every figure is the median of --runs whole-process runs, the variants interleaved run by run (a
change of load hits them alike), stdout on /dev/null, from a warm page cache:

- `python -c "import click"`: the floor, measured in the same run (the same interpreter);
- `mqtool --version`, and a shell completion request (`_MQTOOL_COMPLETE=bash_complete`, the
  command names after `mqtool `): what a shell user pays on every TAB;
- `mqtool info` of a small store (examples/store, a 4.9.8 broker's);
- `mqtool verify-crc --scope commitlog --json` of storegen's store of --size, against its own
  reported `seconds` (the checking): the difference is the command's start-up, its kernels'
  loading and its report.

Targets (issue 31): --version and completion within 0.10 s of importing click, info within
0.25 s of it, verify-crc within 0.30 s of its own seconds.  The load average is printed first:
the machine is shared, and wall times mean little above its 2 cores.  The exit status is
non-zero when a command fails or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from storegen import ensure_store, parse_size  # noqa: E402

VERSION_BUDGET = 0.10     # s over `import click`: mqtool --version, a completion request
INFO_BUDGET = 0.25        # s over `import click`: mqtool info of a small store
VERIFY_BUDGET = 0.30      # s over verify-crc's own seconds


def default_mqtool() -> list[str]:
    script = Path(sys.executable).with_name("mqtool")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mqtool"]


def timed(argv, env=None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))}: exit {done.returncode}: {done.stderr[-500:]}")
    return seconds, done.stdout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11, help="runs of each variant (the median is reported)")
    parser.add_argument("--size", default="256M", help="commitlog data of verify-crc's generated store")
    parser.add_argument("--mqtool", help="the command to time (default: the venv's mqtool script)")
    args, _ = parser.parse_known_args(argv)
    mqtool = shlex.split(args.mqtool) if args.mqtool else default_mqtool()
    print(f"load average {os.getloadavg()[0]:.2f} (2 cores: wall times mean little above 2); "
          f"medians of {args.runs} runs; mqtool = {' '.join(mqtool)}")
    store, _ = ensure_store(parse_size(args.size))
    complete = {**os.environ, "_MQTOOL_COMPLETE": "bash_complete", "COMP_WORDS": "mqtool ", "COMP_CWORD": "1"}
    variants = {
        "python -c 'import click'": ([sys.executable, "-c", "import click"], None),
        "mqtool --version": ([*mqtool, "--version"], None),
        "completion (mqtool <TAB>)": (mqtool, complete),
        "mqtool info examples/store": ([*mqtool, "info", str(ROOT / "examples" / "store")], None),
        f"verify-crc --scope commitlog ({args.size})": ([*mqtool, "verify-crc", str(store), "--scope", "commitlog",
                                                          "--json"], None),
    }
    walls = {name: [] for name in variants}
    own = []
    subprocess.run([*mqtool, "verify-crc", str(store), "--scope", "commitlog", "--json"],
                   stdout=subprocess.DEVNULL)                 # the page cache warm, the kernels' files read once
    for _ in range(args.runs):
        for name, (command, env) in variants.items():
            seconds, out = timed(command, env)
            walls[name].append(seconds)
            if name.startswith("verify-crc"):
                own.append(json.loads(out.splitlines()[-1])["seconds"])
    median = {name: statistics.median(times) for name, times in walls.items()}
    floor = median["python -c 'import click'"]
    failed = False
    print(f"{'variant':<42} {'median':>8} {'range':>15}  {'over click':>10}  target")
    for name, times in walls.items():
        line = f"{name:<42} {median[name]:7.3f}s {min(times):6.3f}-{max(times):6.3f}s"
        if name == "python -c 'import click'":
            print(line)
            continue
        over = median[name] - floor
        line += f"  {over:+9.3f}s"
        if name.startswith("verify-crc"):
            print(line)
            continue
        budget = INFO_BUDGET if name.startswith("mqtool info") else VERSION_BUDGET
        ok = over <= budget
        failed |= not ok
        print(f"{line}  <= +{budget:.2f}s  {'PASS' if ok else 'FAIL'} (ratio to click {median[name] / floor:.1f}x)")
    name = next(n for n in walls if n.startswith("verify-crc"))
    own_median = statistics.median(own)
    over = median[name] - own_median
    ok = over <= VERIFY_BUDGET
    failed |= not ok
    print(f"{'verify-crc: whole command against its own seconds':<42} {median[name]:7.3f}s against "
          f"{own_median:.3f}s: {over:+.3f}s  <= +{VERIFY_BUDGET:.2f}s  {'PASS' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
