"""What the walkers of a store's logs yield besides records, and the zero-run searches they share
(the commitlog walker, storage/commitlog.py, and DLedger's entry walk, storage/dledger.py)."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field

from mqtool.storage import fsutil
from mqtool.storage.mappedfile import MappedFile

_ZERO_CHUNK = 1 << 20


@dataclass
class Problem:
    """Something wrong at a byte offset of a file."""

    kind: str
    path: str
    file_offset: int
    offset: int          # absolute commitlog offset (file start + file_offset)
    message: str
    skipped: int = 0     # bytes the walk skipped past because of this problem
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        out = {"type": "problem", "kind": self.kind, "file": self.path, "fileOffset": self.file_offset,
               "offset": self.offset, "message": self.message}
        if self.skipped:
            out["skippedBytes"] = self.skipped
        out.update(self.details)
        return out


@dataclass
class EndOfData:
    """Where the written part of the commitlog ends (the next append would go here)."""

    offset: int
    path: str


def _next_data(mf: MappedFile, pos: int) -> int:
    """The first position >= pos of mf's file that may hold data.

    The file system knows the holes of a sparse file (the never-written tail of a
    preallocated commitlog file), and holes read as zeros.  Answers the file size
    when only holes follow, and pos itself when the file system cannot tell.
    """
    if not hasattr(os, "SEEK_DATA"):
        return pos
    try:
        fd = fsutil.open_read(mf.path)
    except OSError:
        return pos
    try:
        return os.lseek(fd, pos, os.SEEK_DATA)
    except OSError as exc:
        return mf.file_size if exc.errno == errno.ENXIO else pos
    finally:
        os.close(fd)


def first_nonzero(buf, start: int, end: int, mf: MappedFile | None = None) -> int:
    """The position of the first non-zero byte of buf[start:end], or -1.

    With mf (the file buf maps) holes are skipped unread and the pages the scan
    has passed are dropped, so a long zero tail costs neither time nor memory.
    """
    pos = start
    while pos < end:
        if mf is not None:
            pos = max(pos, _next_data(mf, pos))
            mf.drop_pages_before(pos)
            if pos >= end:
                break
        stop = min(end, pos + _ZERO_CHUNK)
        chunk = buf[pos:stop]
        if chunk.count(0) != len(chunk):
            return pos + (len(chunk) - len(chunk.lstrip(b"\x00")))
        pos = stop
    return -1
