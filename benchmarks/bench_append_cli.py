"""Benchmark `mqtool append` as a whole process, from JSON lines, against a broker's put rate.

    python benchmarks/bench_append_cli.py [--lines 300000,1000000] [--repeat 1] [--mqtool COMMAND]

Inputs: JSON lines of 1 KiB bodies (topic, queueId over 8 queues, tags, one key, born host and
time, a 1 KiB text body), generated once into benchmarks/.work/append-<lines>.jsonl.  Each run is
a fresh process writing a new store (RocketMQ's default 1 GiB commitlog files), stdout on
/dev/null, with and without --json (--input FILE), and with --json from a pipe fed as fast as
it is read (stdin: a fast producer, whose batches must stay full: an idle pipe closes a batch); the report gives wall time, msgs/s, the ratio to the
reference, user and system CPU seconds and the child's peak RSS (os.wait4), then the peak RSS
ratio of the largest input to the smallest (memory flat in the number of lines: <= 1.15).

The reference: RocketMQ 4.9.8's DefaultMessageStore.putMessage from one thread, 1 KiB messages,
measured on this 2-core machine with the real broker's store: about 165,000 msgs/s.  Nothing
that builds RocketMQ can be committed here, so it is a documented constant, not a run.

The machine is shared: the 1-minute load average is printed first; wall times mean little
when it is above the core count (the CPU seconds still do).  Nothing is asserted; the exit
status is non-zero only when a run fails.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from bench_dump import mqtool_command, run_once   # the same child runs and rusage

REFERENCE = 165_000          # msgs/s: RocketMQ 4.9.8 putMessage, one thread, 1 KiB (see above)
BODY = "0123456789abcdef" * 64


def make_input(path: Path, lines: int) -> None:
    """JSON lines of 1 KiB messages (written once, then reused)."""
    if path.exists():
        return
    part = path.with_suffix(".part")
    with open(part, "w") as fh:
        for i in range(lines):
            number = str(i)
            fh.write(json.dumps({"topic": "BenchTopic", "queueId": i % 8, "tags": "TagA", "keys": f"key-{i}",
                                 "bornHost": "10.0.0.1:40000", "bornTimestamp": 1700000000000 + i,
                                 "body": BODY[:-len(number)] + number}, separators=(",", ":")) + "\n")
    part.rename(path)


def run_piped(cmd: list[str], source: Path) -> dict:
    """run_once, with the input written into the child's stdin (a pipe) as fast as it reads it."""
    with tempfile.TemporaryFile() as err, open(source, "rb") as data:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err)

        def feed():
            try:
                while chunk := data.read(1 << 20):
                    proc.stdin.write(chunk)
                proc.stdin.close()
            except BrokenPipeError:
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        feeder.join()
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    return {"wall": wall, "code": os.waitstatus_to_exitcode(status), "stderr": stderr,
            "rss": usage.ru_maxrss * 1024, "user": usage.ru_utime, "sys": usage.ru_stime}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", default="300000,1000000", help="input sizes, comma separated")
    parser.add_argument("--repeat", type=int, default=1, help="runs per variant (best wall, highest RSS)")
    parser.add_argument("--mqtool", metavar="COMMAND", help="how to run mqtool (default: this venv's)")
    parser.add_argument("--dir", default=None, help="where to write (default: benchmarks/.work)")
    args, _ = parser.parse_known_args(argv)
    base = Path(args.dir) if args.dir else Path(__file__).resolve().parent / ".work"
    base.mkdir(parents=True, exist_ok=True)
    mqtool = args.mqtool.split() if args.mqtool else mqtool_command()
    sizes = sorted(int(n) for n in args.lines.split(","))
    print(f"load average (1 min) {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"reference {REFERENCE:,} msgs/s (RocketMQ 4.9.8 putMessage, one thread, 1 KiB)")
    print(f"  {'lines':>9} {'variant':<8} {'wall':>7} {'msgs/s':>9} {'ratio':>6}      {'user':>6} {'sys':>6} "
          f"{'peak RSS':>9}")
    failed = 0
    peaks: dict[str, dict[int, int]] = {}
    for lines in sizes:
        source = base / f"append-{lines}.jsonl"
        make_input(source, lines)
        for variant, extra in (("--json", ["--json"]), ("table", []), ("pipe", ["--json"])):
            best = None
            for _ in range(args.repeat):
                store = Path(tempfile.mkdtemp(prefix="append-cli-", dir=base)) / "store"
                try:
                    if variant == "pipe":
                        run = run_piped(mqtool + ["append", str(store), "--no-progress"] + extra, source)
                    else:
                        run = run_once(mqtool + ["append", str(store), "--input", str(source), "--no-progress"]
                                       + extra)
                finally:
                    shutil.rmtree(store.parent, ignore_errors=True)
                if run["code"] != 0:
                    failed += 1
                    print(f"  {lines:>9,} {variant:<8} failed (exit {run['code']}): {run['stderr'].strip()[-300:]}")
                    break
                if best is None or run["wall"] < best["wall"]:
                    best = {**run, "rss": max(run["rss"], best["rss"] if best else 0)}
            if best is None:
                continue
            rate = lines / best["wall"]
            verdict = "PASS" if rate >= REFERENCE else "FAIL"
            print(f"  {lines:>9,} {variant:<8} {best['wall']:6.2f}s {rate:>9,.0f} {rate / REFERENCE:6.2f} {verdict}  "
                  f"{best['user']:5.2f}s {best['sys']:5.2f}s {best['rss'] / 1e6:7.0f} MB")
            peaks.setdefault(variant, {})[lines] = best["rss"]
    for variant, by_size in peaks.items():
        if len(by_size) > 1:
            ratio = by_size[max(by_size)] / by_size[min(by_size)]
            print(f"peak RSS {max(by_size):,} / {min(by_size):,} lines, {variant}: {ratio:.2f} "
                  f"({'PASS' if ratio <= 1.15 else 'FAIL'}, target <= 1.15)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
