"""The store's checkpoint while the store is open: three (4.x) or five (5.x) longs in one page.

physicMsgTimestamp moves after each thorough commitlog flush, logicsMsgTimestamp
with each consume-queue unit, indexMsgTimestamp when an index file fills up.
flush() writes them and forces the page to disk (at shutdown, on index rolls
and with the consume-queue flush), as StoreCheckpoint does.
"""

from __future__ import annotations

import mmap
import os

from mqtool.formats import checkpoint as fmt
from mqtool.storage import fsutil

_LONGS = ">5q"


class StoreCheckpoint:
    def __init__(self, path, *, five_longs: bool = False, read_only: bool = False):
        """read_only: read the values (a recovery's dry run) and never write."""
        self.path = path
        self.five_longs = five_longs
        self.read_only = read_only
        existed = os.path.exists(path)
        if read_only:
            data = fsutil.read_small(path, fmt.FILE_SIZE) if existed else b""
            self._fd = -1
            self.buf = None
            data = data.ljust(fmt.FILE_SIZE, b"\0")
        else:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            if os.fstat(self._fd).st_size < fmt.FILE_SIZE:
                os.ftruncate(self._fd, fmt.FILE_SIZE)
            self.buf = mmap.mmap(self._fd, fmt.FILE_SIZE)
            data = self.buf[:fmt.FILE_SIZE]
        parsed = fmt.CHECKPOINT.parse(data) if existed else None
        self.physic_msg_timestamp = parsed.physicMsgTimestamp if parsed else 0
        self.logics_msg_timestamp = parsed.logicsMsgTimestamp if parsed else 0
        self.index_msg_timestamp = parsed.indexMsgTimestamp if parsed else 0
        self.master_flushed_offset = parsed.masterFlushedOffset if parsed else 0
        self.confirm_phy_offset = parsed.confirmPhyOffset if parsed else 0

    def as_dict(self) -> dict:
        return {"physicMsgTimestamp": self.physic_msg_timestamp,
                "logicsMsgTimestamp": self.logics_msg_timestamp,
                "indexMsgTimestamp": self.index_msg_timestamp,
                "masterFlushedOffset": self.master_flushed_offset,
                "confirmPhyOffset": self.confirm_phy_offset}

    def min_timestamp(self, index_safe: bool = False) -> int:
        return fmt.min_timestamp(self.as_dict(), index_safe=index_safe)

    def flush(self) -> None:
        if self.read_only:
            return
        values = self.as_dict()
        names = fmt.FIELDS_5X if self.five_longs else fmt.FIELDS_4X
        data = fmt.CHECKPOINT.build({**{n: 0 for n in fmt.FIELDS_5X}, **{n: values[n] for n in names}})
        self.buf[:len(data)] = data
        self.buf.flush()

    def close(self) -> None:
        if self.buf is not None:
            self.buf.close()
        if self._fd >= 0:
            os.close(self._fd)
