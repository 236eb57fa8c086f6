"""Generate a synthetic RocketMQ store for the benchmarks.

    python benchmarks/storegen.py --size 1G [--file-size 1G] [--out DIR] [--force]

The store has what `mqtool dump STORE commitlog` needs: commitlog/ with files
named by their 20-digit start offset, each exactly --file-size bytes (1 GiB by
default, like a broker's), and a `checkpoint` of 4096 zero bytes.  --size is
the amount of commitlog data; the last file is only partly written and its
tail left as a hole, as in a broker's preallocated file.  A file whose next
record does not fit (a record needs size + 8 <= the space left) ends with a
BLANK record.

Records are ~1 KiB messages on one topic, spread over a few queues, with TAGS,
KEYS and UNIQ_KEY properties.  Each shape (tags, body size) is built once with
the schema's build side (encode_record / BLANK.build); every record is a copy
of its template with the per-record fields patched in place: queueId,
queueOffset, physicalOffset (= its real offset), the timestamps, a sequence
number in the body, KEYS and UNIQ_KEY, and the bodyCRC of the patched body.
A sample of each template is parsed back with RECORD.parse to check the patch
positions.

Stores are cached under benchmarks/.work/ by size: a store whose manifest
(<name>.json beside it) matches is reused, so repeat runs skip generation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import sys
import time
from pathlib import Path

from mqtool.formats import commitlog as fmt
from mqtool.formats import properties as props
from mqtool.formats.crc import body_crc
from mqtool.formats.filenames import offset_to_name

GEN_VERSION = 1  # bump when the generated content changes: cached stores are then rebuilt
WORK = Path(__file__).resolve().parent / ".work"
DEFAULT_FILE_SIZE = 1 << 30
WRITE_CHUNK = 8 << 20  # bytes per write() call

TOPIC = "BenchTopic"
QUEUES = 4
SHAPES = [("TagA", 896), ("TagB", 1024), ("TagC", 1152)]  # (TAGS, body length): ~1 KiB messages
BORN_HOST = "10.0.0.1:52814"
STORE_HOST = "10.0.0.2:10911"
BASE_TIMESTAMP = 1_700_000_000_000
UNIQ_PREFIX = "0A000001CE4E12345678"  # producer ip, pid, class-loader hash; the last 12 hex digits vary

SEQ_WIDTH = 12
# Placeholders the templates carry where the sequence number goes (each found exactly once).
BODY_MARK = b"@B" + b"@" * (SEQ_WIDTH - 2)
KEYS_MARK = b"@K" + b"@" * (SEQ_WIDTH - 2)
UNIQ_MARK = b"@U" + b"@" * (SEQ_WIDTH - 2)

# Where the per-record header fields sit in a V1 record with IPv4 hosts (see
# mqtool/formats/commitlog.py): bodyCRC, queueId, flag, queueOffset, physicalOffset
# from byte 8; bornTimestamp at 40; storeTimestamp at 56 (after the 8-byte bornHost).
_IDS = struct.Struct(">iiiqq")
_IDS_AT = 8
_I64 = struct.Struct(">q")
_BORN_TS_AT = 40
_STORE_TS_AT = 56


class Template:
    """One record shape, built with the schema, and where its variable parts are."""

    def __init__(self, tags: str, body_length: int):
        head = b'{"seq":"' + BODY_MARK + b'","payload":"'
        tail = b'"}'
        filler = (b"lorem ipsum dolor sit amet " * (body_length // 27 + 1))
        body = head + filler[:body_length - len(head) - len(tail)] + tail
        properties = props.encode_properties([
            (props.KEYS, "order-" + KEYS_MARK.decode()),
            (props.TAGS, tags),
            (props.WAIT, "true"),
            (props.UNIQ_KEY, UNIQ_PREFIX + UNIQ_MARK.decode()),
            (props.CLUSTER, "DefaultCluster"),
        ])
        self.data = fmt.encode_record({
            "magicCode": fmt.MAGIC_V1, "queueId": 0, "flag": 0, "queueOffset": 0,
            "physicalOffset": 0, "sysFlag": 0, "bornTimestamp": 0, "bornHost": BORN_HOST,
            "storeTimestamp": 0, "storeHost": STORE_HOST, "reconsumeTimes": 0,
            "preparedTransactionOffset": 0, "body": body, "topic": TOPIC, "properties": properties,
        })
        self.size = len(self.data)
        self.body_start = self.data.index(body)
        self.body_end = self.body_start + len(body)
        self.marks = [_find_once(self.data, mark) for mark in (BODY_MARK, KEYS_MARK, UNIQ_MARK)]

    def put(self, buf: bytearray, pos: int, *, offset: int, queue_id: int, queue_offset: int,
            seq: int, store_ts: int) -> None:
        """Write this record into buf[pos:] with its per-record fields filled in."""
        end = pos + self.size
        buf[pos:end] = self.data
        body_mark, keys_mark, uniq_mark = self.marks
        decimal = b"%012d" % seq
        buf[pos + body_mark:pos + body_mark + SEQ_WIDTH] = decimal
        buf[pos + keys_mark:pos + keys_mark + SEQ_WIDTH] = decimal
        buf[pos + uniq_mark:pos + uniq_mark + SEQ_WIDTH] = b"%012X" % seq
        crc = body_crc(memoryview(buf)[pos + self.body_start:pos + self.body_end])
        _IDS.pack_into(buf, pos + _IDS_AT, crc, queue_id, 0, queue_offset, offset)
        _I64.pack_into(buf, pos + _BORN_TS_AT, store_ts - 3)
        _I64.pack_into(buf, pos + _STORE_TS_AT, store_ts)

    def self_check(self) -> None:
        """Patch a sample and parse it back with the schema: every field where it belongs."""
        buf = bytearray(self.size)
        seq = 123456789
        self.put(buf, 0, offset=987654321, queue_id=3, queue_offset=42, seq=seq, store_ts=BASE_TIMESTAMP + 7)
        rec = fmt.RECORD.parse(bytes(buf))
        assert rec.totalSize == self.size
        assert rec.physicalOffset == 987654321 and rec.queueId == 3 and rec.queueOffset == 42
        assert rec.storeTimestamp == BASE_TIMESTAMP + 7 and rec.bornTimestamp == BASE_TIMESTAMP + 4
        assert rec.bodyCRC == body_crc(rec.body) and b"%012d" % seq in rec.body
        fields = props.decode_properties(rec.properties)
        assert fields[props.KEYS] == "order-%012d" % seq
        assert fields[props.UNIQ_KEY] == UNIQ_PREFIX + "%012X" % seq


def _find_once(data: bytes, mark: bytes) -> int:
    at = data.find(mark)
    if at < 0 or data.find(mark, at + 1) >= 0:
        raise AssertionError(f"placeholder {mark!r} must occur exactly once in a template")
    return at


def generate(root: Path, size: int, file_size: int = DEFAULT_FILE_SIZE) -> dict:
    """Write a store with `size` bytes of commitlog data under root; return its manifest."""
    templates = [Template(tags, body_length) for tags, body_length in SHAPES]
    for t in templates:
        t.self_check()
    largest = max(t.size for t in templates)
    if file_size < largest + fmt.END_FILE_MIN_BLANK_LENGTH:
        raise ValueError(f"file size {file_size} is too small for a {largest}-byte record")
    (root / "commitlog").mkdir(parents=True)
    (root / "checkpoint").write_bytes(bytes(4096))

    chunk = bytearray(WRITE_CHUNK)
    view = memoryview(chunk)
    queue_offsets = [0] * QUEUES
    seq = blanks = files = 0
    offset = 0  # commitlog offset of the next record
    data_ends = False
    while not data_ends and offset < size:
        file_start = offset
        files += 1
        with open(root / "commitlog" / offset_to_name(file_start), "wb") as out:
            used = 0  # bytes of chunk waiting to be written
            while True:
                t = templates[seq % len(templates)]
                file_pos = offset - file_start
                fits = t.size + fmt.END_FILE_MIN_BLANK_LENGTH <= file_size - file_pos
                if fits and offset + t.size > size:  # the data ends here, inside this file
                    data_ends = True
                    break
                if used + t.size > WRITE_CHUNK:
                    out.write(view[:used])
                    used = 0
                if not fits:
                    blank = fmt.BLANK.build({"totalSize": file_size - file_pos})
                    chunk[used:used + len(blank)] = blank
                    used += len(blank)
                    blanks += 1
                    offset = file_start + file_size
                    break
                queue_id = seq % QUEUES
                t.put(chunk, used, offset=offset, queue_id=queue_id, queue_offset=queue_offsets[queue_id],
                      seq=seq, store_ts=BASE_TIMESTAMP + seq // 16)
                queue_offsets[queue_id] += 1
                used += t.size
                offset += t.size
                seq += 1
            out.write(view[:used])
            out.truncate(file_size)  # a partly written file keeps its unwritten tail as a hole
    return {"gen_version": GEN_VERSION, "size": size, "file_size": file_size, "records": seq,
            "blanks": blanks, "files": files, "data_end": offset}


def store_name(size: int, file_size: int) -> str:
    return f"store-{format_size(size)}-f{format_size(file_size)}"


def ensure_store(size: int, file_size: int = DEFAULT_FILE_SIZE, *, work: Path = WORK,
                 force: bool = False, log=print) -> tuple[Path, dict]:
    """The cached store of this size (generated first if missing or stale) and its manifest."""
    work.mkdir(parents=True, exist_ok=True)
    name = store_name(size, file_size)
    root = work / name
    manifest_path = work / f"{name}.json"
    if not force and root.is_dir() and manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("gen_version") == GEN_VERSION:
            return root, manifest
    free = shutil.disk_usage(work).free
    if free < size + (1 << 30):
        raise SystemExit(f"storegen: {format_size(free)} free under {work}, need {format_size(size)} "
                         f"plus 1G to spare")
    manifest_path.unlink(missing_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    tmp = work / f"{name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    log(f"storegen: generating {format_size(size)} of commitlog in {root} ...", flush=True)
    started = time.perf_counter()
    manifest = generate(tmp, size, file_size)
    os.rename(tmp, root)
    manifest["seconds"] = round(time.perf_counter() - started, 1)
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    log(f"storegen: {manifest['records']} records, {manifest['files']} file(s), "
        f"{manifest['blanks']} BLANK(s) in {manifest['seconds']} s", flush=True)
    return root, manifest


_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """`1073741824`, `256M`, `1G`, `1.5G` (binary units; a trailing `iB` or `B` is allowed)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}: expected e.g. 256M or 1G")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def format_size(n: int) -> str:
    for unit in ("T", "G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]}{unit}"
    return str(n)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=parse_size, required=True, help="commitlog data, e.g. 256M, 1G")
    parser.add_argument("--file-size", type=parse_size, default=DEFAULT_FILE_SIZE,
                        help="mappedFileSizeCommitLog (default 1G)")
    parser.add_argument("--work", type=Path, default=WORK, help=f"cache directory (default {WORK})")
    parser.add_argument("--force", action="store_true", help="regenerate even if cached")
    args = parser.parse_args(argv)
    root, manifest = ensure_store(args.size, args.file_size, work=args.work, force=args.force,
                                  log=lambda *a, **k: print(*a, file=sys.stderr, **k))
    print(root)
    print(json.dumps(manifest), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
