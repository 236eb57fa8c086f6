"""Reading the 5.x timer store: the wheel, the timerlog's units and the timer checkpoint.

The timerlog is a mapped-file queue like the commitlog (files named by offset, 100 MiB by
default); each file holds 52-byte units from byte 0 up to the first thing that is not a unit,
as TimerMessageStore.recoverAndRevise reads it: a BLANK (the file's end, the next file goes
on), all-zero space (the written data ends) or damage.  A unit is pending while its delivery
slot is at or after the checkpoint's lastReadTimeMs: the broker reads slots one by one from
there, so earlier units have been delivered (or rolled into a new record) already.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mqtool.errors import NotAStoreError
from mqtool.formats import timer as fmt
from mqtool.formats.commitlog import Record
from mqtool.storage import commitlog, fsutil
from mqtool.storage.mappedfile import MappedFile, written_end
from mqtool.storage.mappedfilequeue import MappedFileQueue

END, BLANK, DAMAGE, FULL = "end", "blank", "damage", "full"


@dataclass
class Unit:
    """One timerlog unit; `pos` is its timerlog offset (what slots and prevPos hold)."""

    pos: int
    path: Path
    file_offset: int
    size: int
    prev_pos: int
    magic: int
    write_time: int
    delay: int
    offset_py: int
    size_py: int
    topic_hash: int

    @property
    def delivery_ms(self) -> int:
        return self.write_time + self.delay

    @property
    def is_delete(self) -> bool:
        return fmt.is_delete(self.magic)

    def to_json(self) -> dict:
        return {"pos": self.pos, "size": self.size, "prevPos": self.prev_pos, "magic": self.magic,
                "currWriteTime": self.write_time, "delayedTime": self.delay, "deliveryMs": self.delivery_ms,
                "offsetPy": self.offset_py, "sizePy": self.size_py, "realTopicHash": self.topic_hash,
                "roll": bool(self.magic & fmt.MAGIC_ROLL), "delete": bool(self.magic & fmt.MAGIC_DELETE)}


@dataclass
class FileScan:
    """How far one timerlog file holds units, and what stops them."""

    units: int          # whole units from byte 0
    stop: str           # END, BLANK, DAMAGE or FULL (no room for another unit)
    stop_at: int        # the file position where the units stop
    blank_size: int = 0
    found: tuple = ()   # DAMAGE: (size, magic) read there


def exists(layout) -> bool:
    return any(fsutil.exists(p) for p in (layout.timerwheel_path, layout.timerlog_dir, layout.timercheck_path))


def scan_file(mf: MappedFile) -> FileScan:
    """The units of one file, counted as the broker's recovery counts them."""
    arr = fmt.units(mf.buf, mf.file_size // fmt.UNIT_SIZE)
    sizes, magics = arr["size"].astype(np.int64), arr["magic"].astype(np.int64)
    good = (sizes == fmt.UNIT_SIZE) & ((magics | 0xF) == 0xF)
    bad = np.flatnonzero(~good)
    count = int(bad[0]) if len(bad) else len(arr)
    at = count * fmt.UNIT_SIZE
    remaining = mf.file_size - at
    if remaining == 0:
        return FileScan(count, FULL, at)
    head = bytes(mf.buf[at:at + min(fmt.MIN_BLANK_LEN, remaining)])
    size = int.from_bytes(head[:4], "big", signed=True)
    magic = int.from_bytes(head[12:16], "big", signed=True) if len(head) == fmt.MIN_BLANK_LEN else 0
    if magic == fmt.BLANK_MAGIC_SIGNED:
        return FileScan(count, BLANK, at, blank_size=size)
    if written_end(mf.buf, at, at + min(fmt.UNIT_SIZE, remaining)) == at:
        return FileScan(count, END, at)
    return FileScan(count, DAMAGE, at, found=(size, magic))


def unit_rows(mf: MappedFile, start: int, stop: int) -> list[Unit]:
    """Units start..stop-1 of a file as Unit objects."""
    arr = fmt.units(mf.buf, stop - start, start * fmt.UNIT_SIZE)
    cols = [arr[name].astype(np.int64).tolist() for name in
            ("size", "prevPos", "magic", "currWriteTime", "delayedTime", "offsetPy", "sizePy", "realTopicHash")]
    base = mf.file_from_offset
    return [Unit(base + (start + i) * fmt.UNIT_SIZE, mf.path, (start + i) * fmt.UNIT_SIZE, *row)
            for i, row in enumerate(zip(*cols))]


class TimerStore:
    """The timer files of one store, mapped read-only (a context manager)."""

    def __init__(self, layout, *, paths=None):
        """paths: only these timerlog files (dump of one file), sized as they are."""
        self.layout = layout
        self.precision = layout.timer_precision_ms()
        if paths is None:
            self.file_size = layout.timerlog_file_size()
            paths = [f.path for f in layout.timerlog_files()]
        else:
            self.file_size = Path(paths[0]).stat().st_size if paths else layout.timerlog_file_size()
        self.timerlog = MappedFileQueue(paths, self.file_size, writable=False, strict=False)
        self.problems = list(self.timerlog.problems)
        self.checkpoint = read_checkpoint(layout.timercheck_path)
        self._wheel = None
        self._scans: dict[int, FileScan] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self.timerlog.close()
        if self._wheel is not None:
            self._wheel.close()
            self._wheel = None

    # ------------------------------------------------------------------ the log
    def scan(self, mf: MappedFile) -> FileScan:
        key = mf.file_from_offset
        if key not in self._scans:
            self._scans[key] = scan_file(mf)
        return self._scans[key]

    def log_files(self):
        """(file, its scan, ended) for each timerlog file, oldest first; ended: the timerlog's
        offset where an earlier file's units stopped (END or DAMAGE), else None.  A broker's
        recovery truncates there and drops every later file, so a later file holding anything
        (a unit, a BLANK, damage) is data after the end."""
        ended = None
        for mf in self.timerlog.files:
            s = self.scan(mf)
            yield mf, s, ended
            if ended is None and s.stop in (END, DAMAGE):
                ended = mf.file_from_offset + s.stop_at

    @staticmethod
    def holds_data(scan: FileScan) -> bool:
        return bool(scan.units) or scan.stop != END

    @property
    def written_end(self) -> int:
        """Where the timerlog's units end (a broker's recovery truncates there)."""
        for mf, s, _ in self.log_files():
            if s.stop in (END, DAMAGE):
                return mf.file_from_offset + s.stop_at
        last = self.timerlog.last_file
        return last.file_end_offset if last is not None else 0

    def units(self, *, chunk: int = 65536):
        """Every unit up to the written end, file by file, oldest first (read in chunks, so
        memory stays flat)."""
        for mf, s, ended in self.log_files():
            if ended is not None:
                return
            for start in range(0, s.units, chunk):
                yield from unit_rows(mf, start, min(start + chunk, s.units))

    def unit_at(self, pos: int) -> Unit | None:
        """The unit at timerlog offset pos, or None when none is written there."""
        mf = self.timerlog.find_by_offset(pos)
        if mf is None or (pos - mf.file_from_offset) % fmt.UNIT_SIZE:
            return None
        i = (pos - mf.file_from_offset) // fmt.UNIT_SIZE
        if i >= self.scan(mf).units or pos >= self.written_end:
            return None
        return unit_rows(mf, i, i + 1)[0]

    # ---------------------------------------------------------------- pending
    @property
    def read_time_ms(self) -> int:
        """The checkpoint's lastReadTimeMs: slots from here on have not been read."""
        return self.checkpoint["lastReadTimeMs"] if self.checkpoint else 0

    def is_pending(self, unit: Unit) -> bool:
        return unit.delivery_ms // self.precision * self.precision >= self.read_time_ms

    def pending_units(self):
        for unit in self.units():
            if self.is_pending(unit):
                yield unit

    # ---------------------------------------------------------------- the wheel
    def wheel(self):
        """The slots as a numpy array (None when there is no timerwheel file)."""
        if self._wheel is None:
            path = self.layout.timerwheel_path
            if not fsutil.exists(path):
                return None
            self._wheel = _WheelFile(path)
        return fmt.wheel(self._wheel.buf) if self._wheel.buf else fmt.wheel(b"")

    def wheel_size(self) -> int | None:
        return None if self.wheel() is None else self._wheel.size


class _WheelFile:
    def __init__(self, path: Path):
        import mmap
        import os

        fd = fsutil.open_read(path)
        try:
            size = os.fstat(fd).st_size
            self.size = size
            self.buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else b""
        finally:
            os.close(fd)

    def close(self) -> None:
        if hasattr(self.buf, "close"):
            self.buf.close()


def read_checkpoint(path) -> dict | None:
    """config/timercheck's fields (None when there is none), with the file's size."""
    try:
        data = fsutil.read_small(path, fmt.CHECK_FILE_SIZE + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotAStoreError(f"cannot read the timer checkpoint: {exc.strerror}", path=path) from None
    parsed = fmt.CHECKPOINT.parse(data[:fmt.CHECK_FILE_SIZE].ljust(fmt.CHECK_FILE_SIZE, b"\x00"))
    out = {name: parsed[name] for name in fmt.CHECKPOINT_FIELDS}
    out["fileSize"] = len(data)
    return out


# -------------------------------------------------------- what a cut or deletion leaves dangling

LISTED = 1000   # dangling units listed one by one in a report (all are counted)


def real_topic(queue, unit: Unit) -> str | None:
    """REAL_TOPIC of the record a unit points at, when that record can be read."""
    record = commitlog.record_at(queue, unit.offset_py)
    return record.properties.get("REAL_TOPIC") if isinstance(record, Record) else None


def dangling_units(ts: TimerStore, queue, lost):
    """Pending units whose record `lost(offset_py, size_py)` says goes (a recovery's cut, a
    deletion), as report rows; a generator, so a big cut is streamed, never held."""
    for unit in ts.pending_units():
        if lost(unit.offset_py, unit.size_py):
            row = {"timerlog": str(unit.path.relative_to(ts.layout.root)) if unit.path.is_relative_to(
                ts.layout.root) else str(unit.path), "fileOffset": unit.file_offset, **unit.to_json()}
            row["realTopic"] = real_topic(queue, unit)
            yield row


@dataclass
class Dangling:
    """How many pending timer units a change leaves pointing at commitlog bytes it removes."""

    count: int
    by_topic: dict
    listed: list
    by_file: dict        # commitlog file start offset -> how many of the units point into it

    def to_json(self) -> dict:
        return {"count": self.count, "byTopic": self.by_topic, "units": self.listed,
                "listed": len(self.listed)}

    def text(self, dry_run: bool = False) -> str:
        topics = ", ".join(f"{t or '?'}: {n}" for t, n in sorted(self.by_topic.items(), key=lambda kv: str(kv[0])))
        return f"{self.count} timer unit(s) {'would be ' if dry_run else ''}left dangling ({topics})"


def find_dangling(layout, queue, lost) -> Dangling | None:
    """The pending units `lost` leaves dangling (None without a timer store, or none dangling)."""
    if not exists(layout):
        return None
    count, by_topic, listed, by_file = 0, {}, [], {}
    with TimerStore(layout) as ts:
        for row in dangling_units(ts, queue, lost):
            count += 1
            by_topic[row["realTopic"]] = by_topic.get(row["realTopic"], 0) + 1
            mf = queue.find_by_offset(row["offsetPy"])
            if mf is not None:
                by_file[mf.file_from_offset] = by_file.get(mf.file_from_offset, 0) + 1
            if len(listed) < LISTED:
                listed.append(row)
    return Dangling(count, by_topic, listed, by_file) if count else None


def pending_counts(layout, queue) -> dict | None:
    """Pending timer messages per real topic (REAL_TOPIC of the record each unit points at; '?'
    when the record cannot be read); delete markers (MAGIC_DELETE) are counted on their own.
    None without a timer store."""
    if not exists(layout):
        return None
    by_topic, deletes, total = {}, 0, 0
    with TimerStore(layout) as ts:
        for unit in ts.pending_units():
            if unit.is_delete:
                deletes += 1
                continue
            topic = real_topic(queue, unit) or "?"
            by_topic[topic] = by_topic.get(topic, 0) + 1
            total += 1
        return {"pending": total, "byTopic": dict(sorted(by_topic.items())), "deleteMarkers": deletes,
                "lastReadTimeMs": ts.read_time_ms, "timerlogEnd": ts.written_end}
