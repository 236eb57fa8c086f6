"""Batch consume queues read (5.x, topics with queue.type=BatchCQ): batchconsumequeue/<topic>/<queueId>/.

Units are read a file at a time as numpy records; a file's written units end at the first unit of
size 0 (the never-written rest of a preallocated file).  The file size is read off the files
(the broker's mapperFileSizeBatchConsumeQueue, 300000 units by default).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from mqtool.formats import batchconsumequeue as fmt
from mqtool.formats.filenames import is_offset_name
from mqtool.storage import fsutil
from mqtool.storage.layout import list_store_files, queue_dirs, queue_file_size
from mqtool.storage.mappedfilequeue import MappedFileQueue


def directory(layout) -> Path:
    return Path(layout.root) / "batchconsumequeue"


def queues(layout) -> list[tuple[str, int, Path]]:
    """(topic, queueId, directory) of every batch consume queue on disk."""
    return queue_dirs(directory(layout))


def files(queue_dir: Path) -> list:
    """The queue's files (FileInfo), by name; a name that is no offset is skipped by the caller."""
    return sorted(list_store_files(queue_dir), key=lambda f: f.name)


def read_units(path: Path) -> np.ndarray:
    """The written units of one file (up to the first unit of size 0), without touching atime."""
    fd = fsutil.open_read(path)
    try:
        size = os.fstat(fd).st_size
        data = os.pread(fd, size - size % fmt.UNIT_SIZE, 0)
    finally:
        os.close(fd)
    units = np.frombuffer(data, dtype=fmt.UNIT_DTYPE)
    empty = np.flatnonzero(units["size"] == 0)
    return units[:empty[0]] if len(empty) else units


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
        end = mf.file_size if end is None else min(end, mf.file_size)
        return np.frombuffer(mf.buf[:end - end % fmt.UNIT_SIZE], dtype=fmt.UNIT_DTYPE)

    def scan(self) -> tuple[int, int, int]:
        """BatchConsumeQueue.recover: (end in logical bytes, the end of the last unit's record or -1,
        how far non-zero units reach), scanning from the third-last file to the first invalid unit."""
        loaded = self.files.files
        if not loaded:
            return 0, -1, 0
        written = loaded[-1].file_from_offset + _written_units(self.units(loaded[-1])) * fmt.UNIT_SIZE
        end, max_physic = loaded[max(len(loaded) - 3, 0)].file_from_offset, -1
        for mf in loaded[max(len(loaded) - 3, 0):]:
            units = self.units(mf)
            bad = np.flatnonzero(~_valid(units))
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
        for mf in reversed([mf for mf in self.files.files if mf.file_from_offset < end] or self.files.files[:1]):
            units = self.units(mf, end - mf.file_from_offset)
            keep = np.flatnonzero(_valid(units) & (units["offset"] < phy_offset))
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
    last = 0
    for mf in queue.files.files:
        units = queue.units(mf)
        units = units[_valid(units)]
        above = np.flatnonzero(units["offset"] >= phy_min_offset)
        if len(above):
            return int(units["msgBaseOffset"][above[0]])
        if len(units):
            last = int(units["msgBaseOffset"][-1] + units["batchSize"][-1])
    return last


def _valid(units: np.ndarray) -> np.ndarray:
    return (units["offset"] >= 0) & (units["size"] > 0) & (units["msgBaseOffset"] >= 0) & (units["batchSize"] > 0)


def _written_units(units: np.ndarray) -> int:
    """How many units up to the last one that is not all zeros."""
    written = np.flatnonzero(units.view(np.uint8).reshape(len(units), fmt.UNIT_SIZE).any(axis=1))
    return int(written[-1]) + 1 if len(written) else 0


def valid_units(units: np.ndarray) -> np.ndarray:
    """The units a broker reads (offset, size, msgBaseOffset and batchSize in range)."""
    return units[_valid(units)]
