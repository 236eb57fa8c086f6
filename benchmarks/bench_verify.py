"""Benchmark `mqtool verify-crc` (all checks) against a bare zlib.crc32 loop over the same files.

    python benchmarks/bench_verify.py [--size 1G] [--jobs 1,2]

The store is written by mqtool's own engine (commitlog, consume queues and
index, 1 KiB messages with one key each) and cached under benchmarks/.work.
Both measurements start from a warm page cache.  The bare loop reads each
commitlog file in 64 KiB chunks and runs zlib.crc32 over them: the speed of
doing nothing but a CRC over every byte.  Target: verify-crc with every check
on (commitlog structure and CRCs, consume queue units and index entries
against their records) at least as fast as that loop.  verify-crc's speed is
its own measured checking time (its JSON summary's `seconds`), comparable to
the loop's; the loading of its compiled kernels (`loadSeconds`) and the whole
command's time, Python start-up included, are printed beside it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
MB = 1e6


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def build_store(root: Path, size: int) -> None:
    """A store of `size` bytes of commitlog written through MessageStore.put_many."""
    from mqtool.engine.message import MessageInner
    from mqtool.engine.store import MessageStore
    from mqtool.storage.config import StoreConfig

    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=1 << 30, flushDiskType="ASYNC_FLUSH")
    body = bytes(range(256)) * 4
    record = 1024 + 160
    count = size // record
    with MessageStore(config) as store:
        for start in range(0, count, 4096):
            batch = [MessageInner(topic="VerifyTopic", queue_id=i % 8, body=body,
                                  properties={"TAGS": f"Tag{i % 5}", "KEYS": f"order-{i}"},
                                  born_host="10.1.2.3:40000", born_timestamp=1700000000000 + i)
                     for i in range(start, min(count, start + 4096))]
            store.put_many(batch)
    root.with_name(root.name + ".complete").write_text(str(count))


def commitlog_files(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


def data_bytes(root: Path) -> int:
    out = subprocess.run([str(Path(sys.executable).with_name("mqtool")), "info", str(root), "--json"],
                         capture_output=True, text=True, check=True).stdout
    import json

    info = json.loads(out)
    return info["commitlog"]["maxOffset"] - info["commitlog"]["minOffset"]


def bare_crc_loop(files: list[Path], limit: int) -> float:
    """MB/s of zlib.crc32 over the commitlog data, read in 64 KiB chunks."""
    start = time.perf_counter()
    left = limit
    for path in files:
        with open(path, "rb", buffering=0) as fh:
            while left > 0:
                chunk = fh.read(min(65536, left))
                if not chunk:
                    break
                zlib.crc32(chunk)
                left -= len(chunk)
    return (limit - left) / (time.perf_counter() - start) / MB


def verify(root: Path, jobs: int) -> tuple[float, dict]:
    import json

    mqtool = str(Path(sys.executable).with_name("mqtool"))
    start = time.perf_counter()
    proc = subprocess.run([mqtool, "verify-crc", str(root), "--json", "--jobs", str(jobs)],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    lines = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
    if proc.returncode != 0:
        raise SystemExit(f"verify-crc failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed, lines[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G")
    parser.add_argument("--jobs", default="1,2")
    args, _ = parser.parse_known_args()
    size = parse_size(args.size)
    root = HERE / ".work" / f"verify-store-{args.size}"
    if not root.with_name(root.name + ".complete").exists():
        print(f"writing a {args.size} store with mqtool's engine into {root} ...", flush=True)
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        build_store(root, size)
        print(f"  written in {time.perf_counter() - started:.1f} s")
    data = data_bytes(root)
    files = commitlog_files(root)
    bare_crc_loop(files, data)                       # warm the page cache
    bare = max(bare_crc_loop(files, data) for _ in range(2))
    print(f"commitlog data: {data / MB:,.0f} MB in {len(files)} file(s); cores: {os.cpu_count()}")
    print(f"  bare zlib.crc32 loop, 64 KiB reads  {bare:>9,.0f} MB/s")
    verify(root, 1)                                  # compile caches and page cache warm
    for jobs in [int(j) for j in args.jobs.split(",")]:
        elapsed, summary = verify(root, jobs)
        speed = data / summary["seconds"] / MB          # the checking itself, as the bare loop
        verdict = "PASS" if speed >= bare else "FAIL"
        print(f"  verify-crc --jobs {jobs:<2} (all checks)    {speed:>9,.0f} MB/s  ratio {speed / bare:.2f}  "
              f"{verdict}   ({summary['records']:,} records, {summary['units']:,} units, "
              f"{summary['entries']:,} entries in {summary['seconds']:.2f} s, after {summary['loadSeconds']:.2f} s "
              f"loading the kernels; the whole command {elapsed:.2f} s with interpreter start-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
