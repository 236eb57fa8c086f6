"""A consume queue's extension file queue (consumequeue_ext/<topic>/<queueId>/): reading the unit
at an address, and appending units as ConsumeQueueExt.put does (mqtool/formats/consumequeueext.py
has the layout)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqtool.errors import RefusedError
from mqtool.formats import consumequeueext as ext
from mqtool.formats.written import written_end
from mqtool.storage.layout import list_store_files
from mqtool.storage.mappedfilequeue import MappedFileQueue


@dataclass(slots=True)
class ExtUnit:
    size: int
    tags_code: int
    store_time: int
    bitmap: bytes


class ExtQueue:
    def __init__(self, directory: Path, file_size: int, *, writable: bool = False, on_create=None):
        self.directory = Path(directory)
        paths = [f.path for f in list_store_files(self.directory)] if self.directory.is_dir() else []
        self.files = MappedFileQueue(paths, file_size, writable=writable, strict=writable,
                                     directories=[self.directory], on_create=on_create)
        self.file_size = file_size

    def get(self, address: int) -> ExtUnit | None:
        """The unit at address, as ConsumeQueueExt.get reads it (None: no unit there)."""
        if not ext.is_ext_addr(address):
            return None
        offset = ext.undecorate(address)
        mf = self.files.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + ext.HEAD.size > len(mf.buf):
            return None
        size, tags, store_time, bitmap_size = ext.HEAD.unpack_from(mf.buf, pos)
        if size < 1:
            return None
        bitmap = bytes(mf.buf[pos + ext.HEAD.size:pos + ext.HEAD.size + max(bitmap_size, 0)])
        return ExtUnit(size, tags, store_time, bitmap)

    def put(self, tags_code: int, store_time: int) -> int:
        """Append a unit without a filter bitmap; its address (ConsumeQueueExt.put)."""
        data = ext.pack(tags_code, store_time)
        for _ in range(3):
            mf = self.files.get_last_mapped_file(0)
            room = mf.file_size - mf.wrote_position - ext.END_BLANK
            if len(data) > room:       # fullFillToEnd: a short -1, then the next file
                mf.buf[mf.wrote_position:mf.wrote_position + 2] = ext.FILL
                mf.wrote_position = mf.file_size
                continue
            where = mf.file_from_offset + mf.wrote_position
            mf.append(data)
            return ext.decorate(where)
        raise ValueError(f"consume queue extension files of {self.file_size} bytes cannot hold a unit")

    def unit_end(self, address: int) -> int | None:
        """The offset just past the unit at address (truncateByMaxAddress keeps up to there)."""
        unit = self.get(address)
        return None if unit is None else ext.undecorate(address) + unit.size

    def written_end(self, mf) -> int:
        """How far non-zero bytes reach in file mf (a queue offset): what a cut there zeroes."""
        return mf.file_from_offset + written_end(mf.buf, 0, mf.file_size)

    def has_bitmaps(self) -> bool:
        """Does any unit carry a filter bitmap (enableCalcFilterBitMap: not rebuilt by mqtool)?"""
        for mf in self.files:
            pos = 0
            while pos + ext.HEAD.size <= mf.file_size:
                size, _, _, bitmap_size = ext.HEAD.unpack_from(mf.buf, pos)
                if size < 1:
                    break
                if bitmap_size > 0:
                    return True
                pos += size
        return False

    def flush(self, least_pages: int = 0) -> None:
        self.files.flush(least_pages)

    def close(self) -> None:
        self.files.close()


def in_use(layout, writer: str) -> bool:
    """enableConsumeQueueExt: given, or the store has consumequeue_ext/ (a broker with it on wrote
    it).  Refused (exit 3) when units carry filter bitmaps (enableCalcFilterBitMap): they come from
    the consumers' SQL92 filters, which mqtool does not evaluate, so `writer` cannot write them."""
    root = layout.consumequeue_ext_dir
    if not (layout.config.enableConsumeQueueExt or root.is_dir()):
        return False
    why = (f"the consume queue extension units carry filter bitmaps (enableCalcFilterBitMap), computed from "
           f"the consumers' SQL92 filters, which {writer} cannot compute")
    if layout.config.enableCalcFilterBitMap:
        raise RefusedError(why, path=root)
    size = layout.consume_queue_ext_file_size()
    for topic in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        for directory in sorted(p for p in topic.iterdir() if p.is_dir()):
            queue = ExtQueue(directory, size)
            try:
                if queue.has_bitmaps():
                    raise RefusedError(why, path=directory)
            finally:
                queue.close()
    return True
