"""Benchmark `mqtool lag` over 10,000 queues and 1,000 consumer groups.

    python benchmarks/bench_lag.py [--topics 1000] [--queues 10] [--groups 1000] [--repeat 3]

The store (1,000 topics of 10 queues, 8 messages a queue, small consume queue files) is written
by mqtool's engine and cached under benchmarks/.work; its config/consumerOffset.json, written in
the broker's format, gives 1,000 groups two topics each (20,000 committed offsets, a few out of
range).  Measured: the whole command (`mqtool lag STORE --json > /dev/null`, Python start-up
included) from a warm page cache, best wall time of --repeat runs, its peak RSS, and the library
call alone (forensics.lag.compute) in process.  Target: the command under 2 s.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_dump import mqtool_command, run_once  # noqa: E402

TARGET_S = 2.0
PER_QUEUE = 8


def build(root: Path, topics: int, queues: int) -> None:
    from mqtool.engine.message import MessageInner
    from mqtool.engine.store import MessageStore
    from mqtool.storage.config import StoreConfig

    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=64 << 20,
                         mappedFileSizeConsumeQueue=20 * 64, messageIndexEnable=False)
    with MessageStore(config) as store:
        # topic by topic, and a finished topic's queues closed: the engine keeps each queue's files
        # open, and 10,000 queues pass the open-file limit
        for t in range(topics):
            store.put_many([MessageInner(topic=f"T{t:04d}", queue_id=q, body=b"x" * (100 + n * 10),
                                         born_host="10.0.0.9:9000")
                            for n in range(PER_QUEUE) for q in range(queues)])
            if t % 100 == 99:
                store.flush_all()
                for key in [k for k in store.dispatcher.queues if k[0] <= f"T{t:04d}"]:
                    store.dispatcher.queues.pop(key).close()
    root.with_name(root.name + ".complete").write_text("ok")


def write_offsets(root: Path, topics: int, queues: int, groups: int) -> int:
    from mqtool.formats import configjson

    rng = random.Random(7)
    table = {}
    for g in range(groups):
        for t in (g % topics, (g + 1) % topics):
            table[f"T{t:04d}@G{g:04d}"] = {q: rng.choice([0, 3, 5, PER_QUEUE, rng.randrange(PER_QUEUE + 1)])
                                           if rng.random() > 0.001 else PER_QUEUE + 5 for q in range(queues)}
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / "consumerOffset.json").write_text(configjson.dumps({"offsetTable": table}))
    return sum(len(v) for v in table.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args, _ = parser.parse_known_args()
    root = HERE / ".work" / f"lag-store-{args.topics}x{args.queues}"
    if not root.with_name(root.name + ".complete").exists():
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        print(f"writing a store of {args.topics * args.queues:,} queues into {root} ...", flush=True)
        started = time.perf_counter()
        build(root, args.topics, args.queues)
        print(f"  written in {time.perf_counter() - started:.1f} s")
    offsets = write_offsets(root, args.topics, args.queues, args.groups)

    from mqtool.forensics import lag
    from mqtool.storage.settings import open_layout

    lag.compute(open_layout(str(root), None, ()))       # warm: the files' pages in the cache
    started = time.perf_counter()
    report = lag.compute(open_layout(str(root), None, ()))
    in_process = time.perf_counter() - started
    runs = [run_once(mqtool_command() + ["lag", str(root), "--json"]) for _ in range(args.repeat)]
    bad = [r for r in runs if r["code"] not in (0, 1)]
    if bad:
        print(f"lag exited {bad[0]['code']}: {bad[0]['stderr'][-500:]}")
        return 1
    best = min(runs, key=lambda r: r["wall"])
    verdict = "PASS" if best["wall"] < TARGET_S else "FAIL"
    print(f"store of {args.topics * args.queues:,} queues, {args.groups:,} groups, {offsets:,} committed offsets "
          f"({len(report.queues):,} lines, {sum(q.out_of_range for q in report.queues)} out of range)")
    print(f"  lag.compute in process          {in_process:6.2f} s")
    print(f"  mqtool lag --json (whole command) {best['wall']:6.2f} s   peak RSS {best['rss'] / 1e6:6.1f} MB   "
          f"user {best['user']:.2f} s   target < {TARGET_S:g} s  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
