"""Damage for the robustness tests: seeded mutations of a store copy, each a kind an operator
meets (a lost or zeroed file, a flipped field, a file renamed, a hostile file system entry).

Each mutation takes the store root and a random.Random, changes the copy, and returns a short
description (None when the store has nothing it applies to).  The layouts are RocketMQ's (the
Java source: CommitLog, ConsumeQueue, IndexFile), written down here independently of mqtool.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
from pathlib import Path

CQ_UNIT = 20
INDEX_HEADER, INDEX_SLOT, INDEX_ENTRY = 40, 4, 20
# a commitlog record's fixed fields (4.9.8, IPv4 hosts): name -> (position, size)
RECORD_FIELDS = {"totalSize": (0, 4), "magic": (4, 4), "bodyCRC": (8, 4), "queueId": (12, 4), "flag": (16, 4),
                 "queueOffset": (20, 8), "physicalOffset": (28, 8), "sysFlag": (36, 4), "bornTimestamp": (40, 8),
                 "storeTimestamp": (56, 8), "reconsumeTimes": (72, 4), "preparedTransactionOffset": (76, 8),
                 "bodyLength": (84, 4)}
MAGIC = (0xDAA320A7, 0xDAA320A8)   # MESSAGE_MAGIC_CODE v1, v2


def files(root: Path, sub: str) -> list[Path]:
    return sorted(p for p in (root / sub).rglob("*") if p.is_file() and not p.is_symlink())


def cq_files(root):
    return [p for p in files(root, "consumequeue") if p.stat().st_size]


def commitlog_files(root):
    return [p for p in files(root, "commitlog") if p.stat().st_size]


def records(path: Path) -> list[tuple[int, int]]:
    """(position, size) of each record of a commitlog file, walked by totalSize and magic."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 8 <= len(data):
        size, magic = struct.unpack_from(">iI", data, pos)
        if magic not in MAGIC or size <= 0 or pos + size > len(data):
            break
        out.append((pos, size))
        pos += size
    return out


def _poke(path: Path, pos: int, data: bytes) -> None:
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def _pick(rng, items):
    return rng.choice(items) if items else None


# --------------------------------------------------------------------------- mutations
def delete_cq_file(root, rng):
    path = _pick(rng, cq_files(root))
    if path:
        path.unlink()
        return f"deleted {path.relative_to(root)}"


def empty_cq_file(root, rng):
    path = _pick(rng, cq_files(root))
    if path:
        os.truncate(path, 0)
        return f"emptied {path.relative_to(root)}"


def cq_unit_field(root, rng):
    path = _pick(rng, cq_files(root))
    if not path:
        return None
    units = path.stat().st_size // CQ_UNIT
    data = path.read_bytes()
    written = [i for i in range(units) if data[i * CQ_UNIT:(i + 1) * CQ_UNIT] != bytes(CQ_UNIT)]
    if not written:
        return None
    unit = rng.choice(written)
    field, (at, size) = rng.choice([("offset", (0, 8)), ("size", (8, 4)), ("tagsCode", (12, 8))])
    value = rng.choice([0, 1, rng.randrange(1 << 20), (1 << (8 * size - 1)) - 1])
    _poke(path, unit * CQ_UNIT + at, value.to_bytes(size, "big", signed=True))
    return f"{path.relative_to(root)} unit {unit}: {field} = {value}"


def record_field(root, rng):
    path = _pick(rng, commitlog_files(root))
    found = records(path) if path else []
    if not found:
        return None
    pos, size = rng.choice(found)
    name = rng.choice(sorted(RECORD_FIELDS))
    at, width = RECORD_FIELDS[name]
    old = int.from_bytes(path.read_bytes()[pos + at:pos + at + width], "big")
    new = old ^ (1 << rng.randrange(8 * width))
    _poke(path, pos + at, new.to_bytes(width, "big"))
    return f"{path.relative_to(root)} record at {pos}: {name} bit flipped"


def flip_byte(root, rng):
    candidates = [p for p in files(root, "") if p.stat().st_size and p.name != "lock"]
    path = _pick(rng, candidates)
    if not path:
        return None
    pos = rng.randrange(path.stat().st_size)
    data = path.read_bytes()
    _poke(path, pos, bytes([data[pos] ^ (1 << rng.randrange(8))]))
    return f"{path.relative_to(root)} byte {pos} flipped"


def zero_commitlog_tail(root, rng):
    path = _pick(rng, commitlog_files(root))
    found = records(path) if path else []
    if not found:
        return None
    pos, _ = rng.choice(found)
    end = found[-1][0] + found[-1][1]
    _poke(path, pos, bytes(end - pos))
    return f"{path.relative_to(root)} zeroed from {pos}"


def garbage_after_data(root, rng):
    paths = commitlog_files(root)
    if not paths:
        return None
    path = paths[-1]
    found = records(path)
    end = found[-1][0] + found[-1][1] if found else 0
    size = path.stat().st_size
    if end + 64 > size:
        return None
    _poke(path, end, bytes(rng.randrange(256) for _ in range(64)))
    return f"{path.relative_to(root)}: garbage at {end}"


def misname_commitlog_file(root, rng):
    path = _pick(rng, commitlog_files(root))
    if not path:
        return None
    path.rename(path.with_name(f"{int(path.name) + rng.choice([1, -1 if int(path.name) else 1]):020d}"))
    return f"{path.relative_to(root)} renamed one byte off"


def delete_index_file(root, rng):
    path = _pick(rng, files(root, "index"))
    if path:
        path.unlink()
        return f"deleted {path.relative_to(root)}"


def index_field(root, rng):
    path = _pick(rng, [p for p in files(root, "index") if p.stat().st_size > INDEX_HEADER])
    if not path:
        return None
    size = path.stat().st_size
    part = rng.choice(["header", "slot", "entry"])
    if part == "header":
        pos = rng.randrange(INDEX_HEADER)
    else:
        # the geometry is read off the size with maxIndexNum = 4 x maxHashSlotNum, as the fixtures are
        slots = (size - INDEX_HEADER) // (INDEX_SLOT + 4 * INDEX_ENTRY)
        pos = (INDEX_HEADER + rng.randrange(slots) * INDEX_SLOT if part == "slot"
               else INDEX_HEADER + slots * INDEX_SLOT + rng.randrange(4 * slots) * INDEX_ENTRY + rng.randrange(20))
    data = path.read_bytes()
    _poke(path, pos, bytes([data[pos] ^ (1 << rng.randrange(8))]))
    return f"{path.relative_to(root)} {part} byte {pos} flipped"


def checkpoint_damage(root, rng):
    path = root / "checkpoint"
    if not path.exists():
        return None
    if rng.random() < 0.3:
        path.unlink()
        return "checkpoint deleted"
    pos = rng.randrange(24)
    data = path.read_bytes()
    _poke(path, pos, bytes([data[pos] ^ 0xFF]))
    return f"checkpoint byte {pos} changed"


def crash_marker(root, rng):
    (root / "abort").write_bytes(b"")
    return "abort file added (the last run crashed)"


BCQ_UNIT = 46     # BatchConsumeQueue: offset 8, size 4, tagsCode 8, storeTime 8, msgBaseOffset 8, batchSize 2, ...
BCQ_FIELDS = {"offset": (0, 8), "size": (8, 4), "tagsCode": (12, 8), "storeTime": (20, 8), "msgBaseOffset": (28, 8),
              "batchSize": (36, 2), "compactedOffset": (38, 4)}


def bcq_files(root):
    return [p for p in files(root, "batchconsumequeue") if p.stat().st_size]


def delete_bcq_file(root, rng):
    path = _pick(rng, bcq_files(root))
    if path:
        path.unlink()
        return f"deleted {path.relative_to(root)}"


def _written_bcq_unit(root, rng):
    """A batch queue file and one of its written (not all-zero) units, or None."""
    path = _pick(rng, bcq_files(root))
    if not path:
        return None
    data = path.read_bytes()
    written = [i for i in range(len(data) // BCQ_UNIT) if data[i * BCQ_UNIT:(i + 1) * BCQ_UNIT] != bytes(BCQ_UNIT)]
    return (path, len(data), rng.choice(written)) if written else None


def zero_bcq_tail(root, rng):
    picked = _written_bcq_unit(root, rng)
    if not picked:
        return None
    path, length, unit = picked
    _poke(path, unit * BCQ_UNIT, bytes(length - unit * BCQ_UNIT))
    return f"{path.relative_to(root)} zeroed from unit {unit}"


def bcq_unit_field(root, rng):
    picked = _written_bcq_unit(root, rng)
    if not picked:
        return None
    path, length, unit = picked
    field = rng.choice(sorted(BCQ_FIELDS))
    at, size = BCQ_FIELDS[field]
    value = rng.choice([0, 1, -1, rng.randrange(1 << 15), (1 << (8 * size - 1)) - 1])
    _poke(path, unit * BCQ_UNIT + at, value.to_bytes(size, "big", signed=True))
    return f"{path.relative_to(root)} unit {unit}: {field} = {value}"


BATCH_MUTATIONS = [delete_bcq_file, zero_bcq_tail, bcq_unit_field]


def timer_crash(root, rng):
    """A broker killed after appending timer units but before flushing its wheel (5.x timer
    store): the timerlog keeps every unit (page cache), the wheel only the slots as they were
    after the units before a point P (TimerMessageStore.doEnqueue's putSlot replayed), the
    timercheck is at P with the queue offset of the first message enqueued after it."""
    logs = sorted(files(root, "timerlog"))
    if not logs or not (root / "timerwheel").exists():
        return None
    units = []                       # (pos, delivery second, delete) in timerlog order
    for path in logs:
        data = path.read_bytes()
        for at in range(0, len(data) - 51, 52):
            size, _, magic, write_time, delay = struct.unpack_from(">iqiqi", data, at)
            if size != 52 or (magic | 0xF) != 0xF:
                break
            units.append((int(path.name) + at, (write_time + delay) // 1000, bool(magic & 4) and not magic & 2))
    if not units:
        return None
    cut = rng.randrange(len(units) + 1)
    slots_total = 7 * 86400 * 2

    def replay(part):
        slots = {}
        for pos, second, delete in part:
            slot = slots.get(second % slots_total)
            if slot is None or slot[0] != second:
                slot = [second, pos, pos, 0, 0]
            slot[2] = pos
            slot[3] += -1 if delete else 1
            slots[second % slots_total] = slot
        return slots

    before = replay(units[:cut])
    with open(root / "timerwheel", "r+b") as fh:
        for index in replay(units):
            fh.seek(index * 32)
            fh.write(struct.pack(">qqqii", *before[index]) if index in before else bytes(32))
    at = units[cut][0] if cut < len(units) else units[-1][0] + 52
    check = root / "config" / "timercheck"
    page = bytearray(check.read_bytes())
    struct.pack_into(">qqq", page, 8, at, cut, cut)
    check.write_bytes(bytes(page))
    (root / "abort").write_text("31337")
    return f"timer store crashed with {len(units) - cut} unit(s) after its last wheel flush"


MUTATIONS = [delete_cq_file, empty_cq_file, cq_unit_field, record_field, flip_byte, zero_commitlog_tail,
             garbage_after_data, misname_commitlog_file, delete_index_file, index_field, checkpoint_damage,
             crash_marker]
# what recover mends on a timer store: the crashes, and damage that does not cut timer messages
TIMER_MUTATIONS = [timer_crash, timer_crash, crash_marker, delete_cq_file, cq_unit_field, delete_index_file,
                   index_field]


# hostile file-system entries: a store file that cannot be read, or is not a file
def dangling_link(root, rng):
    path = _pick(rng, commitlog_files(root) + cq_files(root) + files(root, "index"))
    if not path:
        return None
    path.unlink()
    path.symlink_to("/nonexistent/mqtool-test")
    return f"{path.relative_to(root)} -> a dangling link"


def directory_instead(root, rng):
    path = _pick(rng, commitlog_files(root) + cq_files(root) + files(root, "index"))
    if not path:
        return None
    path.unlink()
    path.mkdir()
    return f"{path.relative_to(root)} -> a directory"


def fifo_instead(root, rng):
    path = _pick(rng, commitlog_files(root) + cq_files(root) + files(root, "index") + [root / "checkpoint"])
    if not path or not path.exists():
        return None
    path.unlink()
    os.mkfifo(path)
    return f"{path.relative_to(root)} -> a FIFO"


def odd_name(root, rng):
    directory = rng.choice(["commitlog", "index", "consumequeue", "config", ""])
    if not (root / directory).is_dir():
        return None
    name = rng.choice(["09223372036854775807", "99999999999999999999", "00000000000000000001", "x\x1b[31m",
                       "%LMQ%x", "\u00e9t\u00e9", "a" * 250])
    (root / directory / name).write_bytes(bytes(rng.randrange(256) for _ in range(rng.choice([0, 20, 100]))))
    return f"{directory}/{name!r} added"


HOSTILE = [dangling_link, directory_instead, fifo_instead, odd_name]


def damage(root: Path, rng, kinds=MUTATIONS, count: int = 1) -> list[str]:
    """Apply count mutations drawn from kinds; the descriptions of those that applied."""
    done = []
    for _ in range(count * 4):
        if len(done) >= count:
            break
        said = rng.choice(kinds)(root, rng)
        if said:
            done.append(said)
    return done


def state(root) -> dict:
    """Bytes, type and times of everything under root, without following links or opening
    anything but regular files (a FIFO would block a reader), and without touching atimes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [""] + dirnames + filenames:
            path = os.path.join(dirpath, name) if name else dirpath
            st = os.lstat(path)
            digest = None
            if stat.S_ISREG(st.st_mode):
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOATIME", 0))
                try:
                    digest = hashlib.sha256(os.read(fd, st.st_size + 1)).hexdigest()
                finally:
                    os.close(fd)
            atime = st.st_atime_ns
            if stat.S_ISLNK(st.st_mode):
                # the kernel sets a link's own atime whenever a path through it is resolved or
                # it is read (readlink has no O_NOATIME): no reader can avoid it (README says so)
                digest, atime = os.readlink(path), None
            out[path] = (stat.S_IFMT(st.st_mode), digest, st.st_mtime_ns, atime)
    return out
