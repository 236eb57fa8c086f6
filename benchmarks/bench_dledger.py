"""Benchmark reading a DLedger store against the same messages in a plain commitlog.

    python benchmarks/bench_dledger.py [--size 256M] [--file-size 64M]

The plain store is storegen's (cached under benchmarks/.work).  Its DLedger twin holds the same
records, each the body of one DLedger entry (formats/dledger.py: the 48-byte header, a blank
where the next entry does not fit with 8 bytes to spare), each record's physicalOffset field
rewritten to its entry's pos + 48 (and its body CRC kept: the body is unchanged), in
`dledger-n0/data/`, with a `checkpoint` saying every entry is committed.  Both measured from a
warm page cache, each command's own JSON time where it reports one:

- `verify-crc --scope commitlog` (the compiled walk and CRCs; on DLedger also every entry against
  the one before and its index unit): its `seconds`;
- `stats` (the compiled walk and per-queue aggregation): its `seconds`;
- `dump commitlog --json --no-body` wall time (the columnar path for big stores).

A third twin is a broker switched to DLedger mode (issue 32): the first half of the plain files kept
in `commitlog/` (hard links), the rest as DLedger entries from dividedCommitlogOffset on, so every
read crosses the division.

Each command runs --runs times (5), plain and DLedger interleaved; medians and ranges are printed.
Target (issues 26, 32): the DLedger and switched stores no slower to read than the plain one; the
ratios of the medians are printed, not asserted (figures in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import storegen  # noqa: E402

from mqtool.formats import dledger as fmt  # noqa: E402
from mqtool.formats.commitlog import Record  # noqa: E402
from mqtool.storage import commitlog  # noqa: E402
from mqtool.storage.mappedfilequeue import MappedFileQueue  # noqa: E402

PHYSICAL_OFFSET_AT = 28   # the record's physicalOffset field (MessageDecoder.PHY_POS_POSITION)
WRITE_BUFFER = 16 << 20


def convert(plain: Path, target: Path, file_size: int, keep: int = 0) -> int:
    """Write plain's records as DLedger entries under target/dledger-n0/; returns the entry count.
    keep: the first files stay plain commitlog files (hard links in target/commitlog/), the entries
    start where they end (a broker switched to DLedger mode; they end with a BLANK already)."""
    data = target / "dledger-n0" / "data"
    data.mkdir(parents=True)
    (target / "dledger-n0" / "index").mkdir()
    (target / "checkpoint").write_bytes(bytes(4096))
    paths = sorted((plain / "commitlog").iterdir())
    if keep:
        (target / "commitlog").mkdir()
        for path in paths[:keep]:
            os.link(path, target / "commitlog" / path.name)
        paths = paths[keep:]
    queue = MappedFileQueue(paths, paths[0].stat().st_size, strict=False)
    out, out_start, pos, index = None, -file_size, int(paths[0].name), 0
    # written in big blocks, as a broker's flushes and a copy write them: entry-sized writes leave
    # the page cache holding the files in small pages, which alone makes mapping and reading
    # them measurably slower than the plain store's (storegen writes in big blocks)
    units = open(target / "dledger-n0" / "index" / f"{0:020d}", "wb", buffering=WRITE_BUFFER)

    def roll(start):
        nonlocal out, out_start
        if out is not None:
            out.truncate(file_size)
            out.close()
        out, out_start = open(data / f"{start:020d}", "wb", buffering=WRITE_BUFFER), start

    roll(pos)
    try:
        for entry in commitlog.walk(queue, check_crc=False):
            if not isinstance(entry, Record):
                continue
            mf = queue.find_by_offset(entry.offset)
            body = bytearray(mf.buf[entry.offset - mf.file_from_offset:entry.offset - mf.file_from_offset
                                    + entry.total_size])
            size = fmt.HEADER_SIZE + len(body)
            if pos + size + fmt.MIN_BLANK_LEN > out_start + file_size:
                out.write(struct.pack(">ii", fmt.BLANK_MAGIC, out_start + file_size - pos))
                pos = out_start + file_size
                roll(pos)
            struct.pack_into(">q", body, PHYSICAL_OFFSET_AT, pos + fmt.HEADER_SIZE)
            out.write(fmt.encode_header(fmt.EntryHeader(fmt.MAGIC_1, size, index, 0, pos, 0, 0, 0, len(body))))
            out.write(body)
            units.write(struct.pack(">iqiqq", fmt.MAGIC_1, pos, size, index, 0))
            pos += size
            index += 1
    finally:
        out.truncate(file_size)
        out.close()
        queue.close()
    units.truncate(fmt.INDEX_FILE_SIZE)
    units.close()
    (target / "dledger-n0" / "checkpoint").write_text(f"committedIndex={index - 1}\nendIndex={index - 1}\n")
    (target / "dledger-n0" / "currterm").write_text("voteLeader=n0\ncurrTerm=0\n")
    return index


def mqtool() -> list[str]:
    script = Path(sys.executable).with_name("mqtool")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mqtool"]


def warm(folder: Path) -> None:
    for path in sorted(folder.iterdir()):
        with open(path, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass


def run(args: list[str]) -> tuple[float, dict | None]:
    started = time.perf_counter()
    done = subprocess.run(mqtool() + args, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    try:
        return wall, json.loads(last)
    except ValueError:
        return wall, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=storegen.parse_size, default=storegen.parse_size("256M"))
    parser.add_argument("--file-size", type=storegen.parse_size, default=storegen.parse_size("64M"))
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (plain and DLedger interleaved)")
    args = parser.parse_args(argv)
    plain, manifest = storegen.ensure_store(args.size, args.file_size)
    twin = storegen.WORK / (plain.name + "-dledger3")
    if not (twin / "dledger-n0" / "checkpoint").exists():
        shutil.rmtree(twin, ignore_errors=True)
        entries = convert(plain, twin, args.file_size)
        print(f"bench_dledger: {entries} entries written to {twin}", flush=True)
    mixed = storegen.WORK / (plain.name + "-mixed")
    if not (mixed / "dledger-n0" / "checkpoint").exists():
        shutil.rmtree(mixed, ignore_errors=True)
        keep = len(list((plain / "commitlog").iterdir())) // 2
        entries = convert(plain, mixed, args.file_size, keep=keep)
        print(f"bench_dledger: {keep} plain files and {entries} entries written to {mixed}", flush=True)
    stores = {"plain": (plain, plain / "commitlog"), "dledger": (twin, twin / "dledger-n0" / "data"),
              "mixed": (mixed, mixed / "dledger-n0" / "data")}
    times = {name: {"verify": [], "stats": [], "dump": []} for name in stores}
    records, files = {}, {}
    for _ in range(args.runs):
        for name, (store, folder) in stores.items():     # interleaved: a load change hits both alike
            warm(folder)
            files[name] = sum(1 for p in folder.iterdir() if p.is_file())
            if (store / "commitlog").is_dir() and folder != store / "commitlog":   # the switched store's old part
                warm(store / "commitlog")
                files[name] += sum(1 for p in (store / "commitlog").iterdir() if p.is_file())
            _, verify = run(["verify-crc", str(store), "--scope", "commitlog", "--json"])
            _, stats = run(["stats", str(store), "--json"])
            dump_wall, _ = run(["dump", str(store), "commitlog", "--json", "--no-body"])
            records[name] = verify["records"]
            for what, value in (("verify", verify["seconds"]), ("stats", stats["seconds"]), ("dump", dump_wall)):
                times[name][what].append(value)
    print(f"medians of {args.runs} runs (min-max)")
    print(f"{'store':<8} {'files':>5} {'records':>9} {'verify s':>17} {'stats s':>17} {'dump s':>17}")
    for name in stores:
        cells = [f"{statistics.median(v):.3f} ({min(v):.2f}-{max(v):.2f})" for v in times[name].values()]
        print(f"{name:<8} {files[name]:>5} {records[name]:>9} " + " ".join(f"{c:>17}" for c in cells))
    for name in ("dledger", "mixed"):
        ratios = ", ".join(f"{what} {statistics.median(times[name][what]) / statistics.median(times['plain'][what]):.2f}x"
                           for what in ("verify", "stats", "dump"))
        print(f"{name} / plain: {ratios}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MQTOOL_PROGRESS", "0")
    sys.exit(main())
