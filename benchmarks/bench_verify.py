"""Benchmark `mqtool verify-crc` (all checks) against a bare zlib.crc32 loop over the same files.

    python benchmarks/bench_verify.py [--size 1G] [--jobs 1,2] [--runs 5] [--baseline COMMAND]
                                      [--page-cache as-is|from-disk|small-pages]

The store is written by mqtool's own engine (commitlog, consume queues and
index, 1 KiB messages with one key each) and cached under benchmarks/.work.
Both measurements start from a warm page cache.  The bare loop reads each
commitlog file in 64 KiB chunks and runs zlib.crc32 over them: the speed of
doing nothing but a CRC over every byte.  Target: verify-crc with every check
on (commitlog structure and CRCs, consume queue units and index entries
against their records) at least as fast as that loop.  verify-crc's speed is
its own measured checking time (its JSON summary's `seconds`), comparable to
the loop's; the loading of its compiled kernels (`loadSeconds`) and the whole
command's time, Python start-up included, are printed beside it.  The machine is shared:
`--runs` rounds of the loop and each verify-crc, interleaved (a change of load hits them
alike), and the ratio of the medians is the figure (each round's ratio's range beside it).
`--baseline COMMAND` (another build's mqtool, e.g. 'env PYTHONPATH=/old python -m mqtool')
runs in the same rounds.  How the page cache holds the commitlog is printed first: in 4 KiB
folios, copying or mapping a GiB costs several times what it costs in large ones, for the loop
and verify-crc alike.  `--page-cache from-disk` or `small-pages` puts the store in one state
or the other before the rounds.
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


def refill_page_cache(root: Path, how: str) -> None:
    """Drop the store's files from the page cache and read them back: "from-disk" as a
    sequential read leaves them (mostly large folios, with readahead), "small-pages" 4 KiB at a
    time without readahead (4 KiB folios).  The kernel's folio sizes otherwise depend on the
    machine's history, and they move both the loop's and verify-crc's figures."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        fd = os.open(path, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            step = 1 << 20
            if how == "small-pages":
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                step = 4096
            for position in range(0, size, step):
                os.pread(fd, step, position)
        finally:
            os.close(fd)


def page_cache_state(files: list[Path]) -> str:
    """How the page cache holds the commitlog: the share a mapping of it gets in 2 MiB pages
    (large folios), and the time to fill such a mapping.  Both mapped and copied reads cost
    several times more a GiB in 4 KiB folios; a file read from disk is mostly in large ones."""
    import mmap
    import re

    if not Path("/proc/self/smaps").exists():
        return "page cache: not known on this system"
    pmd = rss = 0
    seconds = 0.0
    for path in files:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            mapped = mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)
            try:
                started = time.perf_counter()
                mapped.madvise(getattr(mmap, "MADV_POPULATE_READ", 22))
                seconds += time.perf_counter() - started
                block = Path("/proc/self/smaps").read_text().split(f" {path.resolve()}\n", 1)[1]
                rss += int(re.search(r"^Rss:\s+(\d+)", block, re.M).group(1))
                pmd += int(re.search(r"^FilePmdMapped:\s+(\d+)", block, re.M).group(1))
            finally:
                mapped.close()
    return (f"page cache: {100 * pmd / max(rss, 1):.0f}% of the commitlog in 2 MiB pages "
            f"(a mapping of it filled in {seconds:.3f} s)")


def verify(root: Path, jobs: int, mqtool: list[str] | None = None) -> tuple[float, dict]:
    import json

    mqtool = mqtool or [str(Path(sys.executable).with_name("mqtool"))]
    start = time.perf_counter()
    proc = subprocess.run([*mqtool, "verify-crc", str(root), "--json", "--jobs", str(jobs)],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    lines = [json.loads(l) for l in proc.stdout.splitlines() if l.strip()]
    if proc.returncode != 0:
        raise SystemExit(f"verify-crc failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed, lines[-1]


def median(values: list[float]) -> float:
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def main() -> int:
    import shlex

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1G")
    parser.add_argument("--jobs", default="1,2")
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--baseline", metavar="COMMAND", help="another build's mqtool, run in the same rounds")
    parser.add_argument("--page-cache", choices=("as-is", "from-disk", "small-pages"), default="as-is",
                        help="first drop the store from the page cache and read it back, sequentially or 4 KiB at a "
                             "time (reproducible folio sizes)")
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
    builds = {"this": None, **({"baseline": shlex.split(args.baseline)} if args.baseline else {})}
    jobs_list = [int(j) for j in args.jobs.split(",")]
    if args.page_cache != "as-is":
        refill_page_cache(root, args.page_cache)
    bare_crc_loop(files, data)                       # warm the page cache
    for mqtool in builds.values():
        verify(root, 1, mqtool)                      # and the kernels' first load
    load = os.getloadavg()[0]
    loops, runs = [], {(b, j): [] for b in builds for j in jobs_list}
    for _ in range(args.runs):
        loops.append(data / MB / bare_crc_loop(files, data))      # seconds of the loop
        for build, mqtool in builds.items():
            for jobs in jobs_list:
                runs[build, jobs].append(verify(root, jobs, mqtool))
    bare = median(loops)
    print(f"commitlog data: {data / MB:,.0f} MB in {len(files)} file(s); cores: {os.cpu_count()}; "
          f"load average {load:.1f} before, {os.getloadavg()[0]:.1f} after; medians of {args.runs} interleaved rounds")
    print(f"  {page_cache_state(files)}")
    print(f"  bare zlib.crc32 loop, 64 KiB reads  {data / MB / bare:>9,.0f} MB/s  ({bare:.3f} s)")
    medians = {}
    for (build, jobs), got in runs.items():
        seconds = [summary["seconds"] for _, summary in got]
        own = medians[build, jobs] = median(seconds)
        ratios = [loop / s for loop, s in zip(loops, seconds)]
        summary = got[0][1]
        verdict = "PASS" if bare / own >= 1 else "FAIL"
        print(f"  {build:<8} verify-crc --jobs {jobs:<2} (all checks) {data / MB / own:>9,.0f} MB/s  ratio {bare / own:.2f} "
              f"{verdict}  (rounds {min(ratios):.2f}-{max(ratios):.2f}; {summary['records']:,} records, "
              f"{summary['units']:,} units, {summary['entries']:,} entries in {own:.3f} s, after "
              f"{summary['loadSeconds']:.2f} s loading the kernels; the whole command "
              f"{median([wall for wall, _ in got]):.2f} s with interpreter start-up)")
    if "baseline" in builds:
        for jobs in jobs_list:
            print(f"  this / baseline, --jobs {jobs}: {medians['baseline', jobs] / medians['this', jobs]:.2f}x as fast")
    return 0


if __name__ == "__main__":
    sys.exit(main())
