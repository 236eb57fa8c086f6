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
from mqtool.storage.layout import list_store_files


def directory(layout) -> Path:
    return Path(layout.root) / "batchconsumequeue"


def queues(layout) -> list[tuple[str, int, Path]]:
    """(topic, queueId, directory) of every batch consume queue on disk."""
    root = directory(layout)
    found = []
    try:
        topics = fsutil.scandir(root)
    except (FileNotFoundError, NotADirectoryError):
        return []
    for topic, _, is_dir, _ in sorted(topics):
        if not is_dir:
            continue
        for queue, _, queue_is_dir, _ in sorted(fsutil.scandir(root / topic)):
            if queue_is_dir and queue.isdigit():
                found.append((topic, int(queue), root / topic / queue))
    return sorted(found, key=lambda t: (t[0], t[1]))


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
