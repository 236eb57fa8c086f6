"""Benchmark lookup-by-key on a store with 1,000,000 indexed keys.

    python benchmarks/bench_lookup.py [--keys 1000000] [--lookups 2000]

The store (small messages with one key each, RocketMQ's default index
geometry: 5,000,000 slots and 20,000,000 entries per index file) is written
by mqtool's engine and cached under benchmarks/.work.  Measured: the time of
one lookup in process with warm caches (StoreReader.by_key: hash slot, chain
walk, then the re-check of every hit against its record), averaged over
random keys, with its 99th percentile; and, separately, the whole command's
time (Python start-up included).  Target: under 5 ms a lookup in process.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TOPIC = "LookupTopic"


def build(root: Path, keys: int) -> None:
    from mqtool.engine.message import MessageInner
    from mqtool.engine.store import MessageStore
    from mqtool.storage.config import StoreConfig

    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 30)
    with MessageStore(config) as store:
        for start in range(0, keys, 8192):
            store.put_many([MessageInner(topic=TOPIC, queue_id=i % 4, body=b"lookup-%d" % i,
                                         properties={"KEYS": f"order-{i}"}, born_host="10.0.0.9:9000")
                            for i in range(start, min(keys, start + 8192))])
    root.with_name(root.name + ".complete").write_text(str(keys))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--lookups", type=int, default=2000)
    args, _ = parser.parse_known_args()
    root = HERE / ".work" / f"lookup-store-{args.keys}"
    if not root.with_name(root.name + ".complete").exists():
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        print(f"writing a store with {args.keys:,} keys into {root} ...", flush=True)
        started = time.perf_counter()
        build(root, args.keys)
        print(f"  written in {time.perf_counter() - started:.1f} s")
    from mqtool.forensics.lookup import StoreReader
    from mqtool.storage.settings import open_layout

    rng = random.Random(1)
    keys = [f"order-{rng.randrange(args.keys)}" for _ in range(args.lookups)]
    with StoreReader(open_layout(str(root), None, ())) as reader:
        for key in keys[:50]:                               # warm: files mapped, pages in
            reader.by_key(TOPIC, key)
        times = []
        for key in keys:
            started = time.perf_counter()
            result = reader.by_key(TOPIC, key)
            times.append(time.perf_counter() - started)
            assert len(result.messages) == 1, (key, result.summary())
    mean = statistics.mean(times) * 1e3
    p99 = sorted(times)[int(len(times) * 0.99)] * 1e3
    verdict = "PASS" if mean < 5 else "FAIL"
    print(f"store with {args.keys:,} indexed keys; {args.lookups:,} lookups of random keys")
    print(f"  lookup-by-key in process   mean {mean:7.3f} ms   p99 {p99:7.3f} ms   target < 5 ms  {verdict}")
    mqtool = str(Path(sys.executable).with_name("mqtool"))
    started = time.perf_counter()
    subprocess.run([mqtool, "lookup-by-key", str(root), "--topic", TOPIC, keys[0], "--json"], check=True,
                   capture_output=True)
    print(f"  the whole command, one lookup, Python start-up included: {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
