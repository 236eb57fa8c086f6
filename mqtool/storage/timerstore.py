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

from mqtool.errors import NotAStoreError
from mqtool.formats import timer as fmt
from mqtool.formats.written import written_end
from mqtool.storage import fsutil
from mqtool.storage.mappedfile import MappedFile
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
    import numpy as np

    arr = fmt.units(mf.buf, mf.file_size // fmt.UNIT_SIZE)
    good = fmt.valid_units(arr)
    bad = np.flatnonzero(~good)
    count = int(bad[0]) if len(bad) else len(arr)
    at = count * fmt.UNIT_SIZE
    remaining = mf.file_size - at
    if remaining == 0:
        return FileScan(count, FULL, at)
    head = bytes(mf.buf[at:at + min(fmt.MIN_BLANK_LEN, remaining)])
    size, _, magic = fmt.BLANK_STRUCT.unpack(head.ljust(fmt.MIN_BLANK_LEN, b"\0"))
    if len(head) < fmt.MIN_BLANK_LEN:      # cut short: no magic
        magic = 0
    if magic == fmt.BLANK_MAGIC_SIGNED:
        return FileScan(count, BLANK, at, blank_size=size)
    if written_end(mf.buf, at, at + min(fmt.UNIT_SIZE, remaining)) == at:
        return FileScan(count, END, at)
    return FileScan(count, DAMAGE, at, found=(size, magic))


def unit_rows(mf: MappedFile, start: int, stop: int) -> list[Unit]:
    """Units start..stop-1 of a file as Unit objects."""
    import numpy as np

    arr = fmt.units(mf.buf, stop - start, start * fmt.UNIT_SIZE)
    cols = [arr[name].astype(np.int64).tolist() for name in
            ("size", "prevPos", "magic", "currWriteTime", "delayedTime", "offsetPy", "sizePy", "realTopicHash")]
    base = mf.file_from_offset
    return [Unit(base + (start + i) * fmt.UNIT_SIZE, mf.path, (start + i) * fmt.UNIT_SIZE, *row)
            for i, row in enumerate(zip(*cols))]


def unit_from(mf: MappedFile, at: int) -> Unit:
    """The 52 bytes at byte `at` of a file read as a unit (whatever they hold)."""
    row = fmt.units(mf.buf, 1, at)[0]
    return Unit(mf.file_from_offset + at, mf.path, at, *(int(row[name]) for name in (
        "size", "prevPos", "magic", "currWriteTime", "delayedTime", "offsetPy", "sizePy", "realTopicHash")))


def walk(ts, *, chunk: int = 65536, arrays: bool = False):
    """The one walk of the timerlog up to its end, as a broker's recovery reads it; events:

    ("file", mf, scan, ended)   every file, oldest first (ended: None, or the timerlog offset
                                where an earlier file's units stopped: this file is after the end)
    ("units", mf, [Unit, ...])  the file's units, in chunks (arrays: as fmt.units record arrays)
    ("blank", mf, scan)         the BLANK that ends a file
    ("problem", kind, path, file_offset, offset, message, expected, found)
    ("end", offset)             where the units end
    """
    for problem in ts.problems:
        yield "problem", problem.kind, problem.path, None, problem.offset, problem.message, None, None
    for mf, scan, ended in ts.log_files():
        yield "file", mf, scan, ended
        if ended is not None:
            if ts.holds_data(scan):
                yield ("problem", "data-after-end", mf.path, 0, mf.file_from_offset,
                       f"units after the timerlog's end at {ended} (a broker's recovery drops them)", None, None)
            continue
        for start in range(0, scan.units, chunk):
            stop = min(start + chunk, scan.units)
            yield "units", mf, (fmt.units(mf.buf, stop - start, start * fmt.UNIT_SIZE) if arrays
                                else unit_rows(mf, start, stop))
        if scan.stop == BLANK:
            yield "blank", mf, scan
            if scan.blank_size != mf.file_size - scan.stop_at:
                yield ("problem", "bad-blank", mf.path, scan.stop_at, mf.file_from_offset + scan.stop_at,
                       "the BLANK's size is not the rest of the file", mf.file_size - scan.stop_at, scan.blank_size)
        elif scan.stop == DAMAGE:
            size, magic = scan.found
            yield ("problem", "bad-timer-unit", mf.path, scan.stop_at, mf.file_from_offset + scan.stop_at,
                   "not a timer unit (a broker's recovery truncates the timerlog here)",
                   f"size {fmt.UNIT_SIZE}, magic 0..15, or a BLANK", f"size {size}, magic {magic:#x}")
    yield "end", ts.written_end


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
        for event in walk(self, chunk=chunk):
            if event[0] == "units":
                yield from event[2]

    def unit_arrays(self, *, chunk: int = 65536):
        """units() as numpy record arrays (fmt.units), a chunk at a time: for a pass over every
        unit that needs a column or two, not a Unit object each."""
        for event in walk(self, chunk=chunk, arrays=True):
            if event[0] == "units":
                yield event[2]

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
