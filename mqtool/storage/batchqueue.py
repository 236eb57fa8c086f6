"""Batch consume queues read (5.x, topics with queue.type=BatchCQ): batchconsumequeue/<topic>/<queueId>/.

Units are read a file at a time as numpy records; a file's written units end where its bytes do
(mappedfile.written_end: the never-written rest of a preallocated file is zeros), the valid ones
where the broker's recover stops (valid_units).  Offsets in a batch queue count messages: a unit
holds batchSize of them from msgBaseOffset on.  The file size is read off the files (the broker's
mapperFileSizeBatchConsumeQueue, 300000 units by default).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from mqtool.formats import batchconsumequeue as fmt
from mqtool.formats.filenames import is_offset_name
from mqtool.formats.written import written_end
from mqtool.storage import fsutil
from mqtool.storage.layout import list_store_files, queue_dirs, queue_file_size
from mqtool.storage.mappedfilequeue import MappedFileQueue

if TYPE_CHECKING:
    import numpy as np   # imported where used: reading a store's listing needs no numpy (mqtool info)


def directory(layout) -> Path:
    return Path(layout.root) / "batchconsumequeue"


def queues(layout) -> list[tuple[str, int, Path]]:
    """(topic, queueId, directory) of every batch consume queue on disk."""
    return queue_dirs(directory(layout))


def files(queue_dir: Path) -> list:
    """The queue's files (FileInfo), by name; a name that is no offset is skipped by the caller."""
    return sorted(list_store_files(queue_dir), key=lambda f: f.name)


def read_units(path: Path) -> np.ndarray:
    """The written units of one file (up to the last one not all zeros), without touching atime."""
    import numpy as np

    fd = fsutil.open_read(path)
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, size - size % fmt.UNIT_SIZE, 0)
    finally:
        os.close(fd)
    return np.frombuffer(data[:written_end(data, unit=fmt.UNIT_SIZE)], dtype=fmt.UNIT_DTYPE)


def queue_units(queue_dir: Path):
    """(file, units) for each file of a queue whose name is an offset, in order."""
    for info in files(queue_dir):
        if is_offset_name(info.name):
            yield info, read_units(info.path)


def file_size(layout) -> int:
    """mapperFileSizeBatchConsumeQueue: as given (--set/--config), else the size of the files on
    disk, else the broker's default (300000 units)."""
    if layout.config.mapperFileSizeBatchConsumeQueue is not None:
        return layout.config.mapperFileSizeBatchConsumeQueue
    return queue_file_size(directory(layout), fmt.DEFAULT_FILE_SIZE)


def topic_names(layout) -> set[str]:
    """The topics a broker dispatches into batch consume queues: declared BatchCQ in topics.json,
    or holding a batch consume queue already."""
    from mqtool.storage.census import batch_topics

    return set(batch_topics(layout)) | {topic for topic, _, _ in queues(layout)}


class BatchQueue:
    """One batch consume queue as a broker writes it (putBatchMessagePositionInfo): units appended
    in commitlog order, a record whose offset is not past the last unit's skipped."""

    def __init__(self, topic: str, queue_id: int, directory: Path, size: int, *, writable: bool = False,
                 on_create=None):
        self.topic, self.queue_id, self.directory = topic, queue_id, Path(directory)
        paths = [info.path for info in files(self.directory) if is_offset_name(info.name)]
        self.files = MappedFileQueue(paths, size, writable=writable, strict=True, directories=[self.directory],
                                     on_create=on_create)
        self.max_physic_offset = -1     # maxMsgPhyOffsetInCommitLog: the last unit's record offset

    def put(self, offset: int, size: int, tags_code: int, store_time: int, base: int, batch: int) -> bool:
        if offset <= self.max_physic_offset:
            return True
        mf = self.files.get_last_mapped_file(self.files.max_wrote_offset)
        if mf is None:
            return False
        self.max_physic_offset = offset
        return mf.append(fmt.UNIT.build(dict(offset=offset, size=size, tagsCode=tags_code, storeTime=store_time,
                                             msgBaseOffset=base, batchSize=batch,
                                             compactedOffset=fmt.INVALID_POS, reserved=0)))

    def units(self, mf, end: int | None = None) -> np.ndarray:
        """The units of one loaded file up to byte `end` of it (all of it by default)."""
        import numpy as np

        end = mf.file_size if end is None else min(end, mf.file_size)
        return np.frombuffer(mf.buf[:end - end % fmt.UNIT_SIZE], dtype=fmt.UNIT_DTYPE)

    def scan(self) -> tuple[int, int, int]:
        """BatchConsumeQueue.recover: (end in logical bytes, the end of the last unit's record or -1,
        how far non-zero units reach), scanning from the third-last file to the first invalid unit."""
        import numpy as np

        loaded = self.files.files
        if not loaded:
            return 0, -1, 0
        last = loaded[-1]
        written = last.file_from_offset + written_end(last.buf, 0, last.file_size - last.file_size % fmt.UNIT_SIZE,
                                                      fmt.UNIT_SIZE)
        end, max_physic = loaded[max(len(loaded) - 3, 0)].file_from_offset, -1
        for mf in loaded[max(len(loaded) - 3, 0):]:
            units = self.units(mf)
            bad = np.flatnonzero(~valid_units(units))
            count = int(bad[0]) if len(bad) else len(units)
            end = mf.file_from_offset + count * fmt.UNIT_SIZE
            if count:
                max_physic = int(units["offset"][count - 1] + units["size"][count - 1])
            if count != len(units):
                break
        return end, max_physic, max(written, end)

    def cut_for(self, phy_offset: int, end: int) -> tuple[int, int]:
        """truncateDirtyLogicFiles: where the queue ends keeping only units below phy_offset (at most
        `end`), and the end of the last kept unit's record (-1: none kept)."""
        import numpy as np

        for mf in reversed([mf for mf in self.files.files if mf.file_from_offset < end] or self.files.files[:1]):
            units = self.units(mf, end - mf.file_from_offset)
            keep = np.flatnonzero(valid_units(units) & (units["offset"] < phy_offset))
            count = 0 if not len(keep) else int(keep[-1]) + 1
            if count:
                return mf.file_from_offset + count * fmt.UNIT_SIZE, int(units["offset"][count - 1]
                                                                        + units["size"][count - 1])
            end = mf.file_from_offset
        return end, -1

    def set_end(self, end: int) -> None:
        """Positions as recovery leaves them: everything below `end` written."""
        for mf in self.files.files:
            mf.set_positions(max(0, min(mf.file_size, end - mf.file_from_offset)))
        self.files.set_where(end)
        mf = self.files.find_by_offset(end - fmt.UNIT_SIZE) if end > 0 else None
        if mf is not None:
            self.max_physic_offset = int(self.units(mf)[(end - mf.file_from_offset) // fmt.UNIT_SIZE - 1]["offset"])

    def flush(self, least_pages: int) -> bool:
        return self.files.flush(least_pages)

    def close(self) -> None:
        self.files.close()


def min_offset(queue: BatchQueue, phy_min_offset: int) -> int:
    """correctMinOffset: the msgBaseOffset of the queue's first unit pointing at or above
    phy_min_offset (the end, msgBaseOffset + batchSize of the last unit, when none does)."""
    import numpy as np

    last = 0
    for mf in queue.files.files:
        units = queue.units(mf)
        units = units[valid_units(units)]
        above = np.flatnonzero(units["offset"] >= phy_min_offset)
        if len(above):
            return int(units["msgBaseOffset"][above[0]])
        if len(units):
            last = int(units["msgBaseOffset"][-1] + units["batchSize"][-1])
    return last


def max_offset(queue: BatchQueue) -> int:
    """getMaxOffsetInQueue after the broker's recover (reviseMaxOffsetInQueue): the msgBaseOffset
    plus batchSize of the last valid unit, in messages (0 for a queue without one)."""
    end = queue.scan()[0]
    if end <= 0:
        return 0
    mf = queue.files.find_by_offset(end - fmt.UNIT_SIZE)
    if mf is None:
        return 0
    unit = queue.units(mf)[(end - mf.file_from_offset) // fmt.UNIT_SIZE - 1]
    return int(unit["msgBaseOffset"]) + int(unit["batchSize"])


def unit_holding(queue: BatchQueue, queue_offset: int, end: int | None = None):
    """The unit whose messages hold queue_offset (msgBaseOffset <= queue_offset < msgBaseOffset +
    batchSize), found by bisection on msgBaseOffset as BatchConsumeQueue.iterateFrom finds it, as
    (mapped file, byte in it, the unit); None when no valid unit below `end` (logical bytes, the
    recovered end by default) holds it."""
    import numpy as np

    end = queue.scan()[0] if end is None else end
    for mf in reversed(queue.files.files):
        if mf.file_from_offset >= end:
            continue
        units = queue.units(mf, end - mf.file_from_offset)
        valid = valid_units(units)
        if not valid.all():
            units = units[:int(np.argmin(valid))]        # up to the first invalid unit
        if not len(units) or int(units["msgBaseOffset"][0]) > queue_offset:
            continue
        n = int(np.searchsorted(units["msgBaseOffset"], queue_offset, side="right")) - 1
        unit = units[n]
        if queue_offset >= int(unit["msgBaseOffset"]) + int(unit["batchSize"]):
            return None
        return mf, n * fmt.UNIT_SIZE, unit
    return None


def units_from(queue: BatchQueue, queue_offset: int, end: int | None = None):
    """The valid units from the one holding queue_offset on, in order (BatchConsumeQueue.iterateFrom),
    as (mapped file, byte in it, the unit); they end at the first invalid unit or at `end`."""
    end = queue.scan()[0] if end is None else end
    held = unit_holding(queue, queue_offset, end)
    if held is None:
        return
    first_file, first_pos, _ = held
    for mf in queue.files.files:
        if mf.file_from_offset < first_file.file_from_offset or mf.file_from_offset >= end:
            continue
        units = queue.units(mf, end - mf.file_from_offset)
        valid = valid_units(units)
        for n in range(first_pos // fmt.UNIT_SIZE if mf is first_file else 0, len(units)):
            if not valid[n]:
                return
            yield mf, n * fmt.UNIT_SIZE, units[n]


def open_all(layout):
    """Every batch consume queue on disk, loaded read-only (the caller closes each)."""
    size = file_size(layout)
    for topic, queue_id, queue_dir in queues(layout):
        yield BatchQueue(topic, queue_id, queue_dir, size)


def valid_units(units: np.ndarray) -> np.ndarray:
    """Which units are valid as BatchConsumeQueue.recover judges them."""
    return (units["offset"] >= 0) & (units["size"] > 0) & (units["msgBaseOffset"] >= 0) & (units["batchSize"] > 0)

