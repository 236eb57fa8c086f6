"""Consume queues on disk: one MappedFileQueue of 20-byte units per topic and queue.

Reading answers what ConsumeQueue answers: the units, the queue's min and max
offsets (max = one past the last valid unit), and which commitlog offset a
queue offset points at.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqtool.errors import NotAStoreError
from mqtool.formats.consumequeue import PRE_BLANK, UNIT_SIZE, UNIT_STRUCT, is_valid_unit, unit_dtype
from mqtool.formats.written import written_end
from mqtool.storage.layout import store_file_names
from mqtool.storage.mappedfilequeue import MappedFileQueue


@dataclass(slots=True)
class Unit:
    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    size: int
    tags_code: int
    path: Path
    file_offset: int


class ConsumeQueue:
    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int, *,
                 writable: bool = False, strict: bool = False, on_create=None):
        self.topic = topic
        self.queue_id = queue_id
        self.directory = directory if isinstance(directory, Path) else Path(directory)
        self.file_size = file_size
        paths = [self.directory / name for name in sorted(store_file_names(self.directory))]
        self.files = MappedFileQueue(paths, file_size, writable=writable, strict=strict,
                                     directories=[self.directory], on_create=on_create, read_small=True)
        self.max_physic_offset = -1   # end of the last dispatched record (offset + size)
        self.min_logic_offset = 0

    # ---------------------------------------------------------------- writing
    def put(self, commitlog_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """ConsumeQueue.putMessagePositionInfo: append one unit at queue_offset.

        A record already dispatched (offset + size <= max_physic_offset) is
        skipped, as is a unit below the write position.  The first file of a
        queue that starts above 0 is filled up to queue_offset with blank units
        (0, Integer.MAX_VALUE, 0), as fillPreBlank does.
        """
        if commitlog_offset + size <= self.max_physic_offset:
            return True
        expect = queue_offset * UNIT_SIZE
        mf = self.files.get_last_mapped_file(expect)
        if mf is None:
            return False
        if mf.first_create_in_queue and queue_offset != 0 and mf.wrote_position == 0:
            self.min_logic_offset = expect
            self.files.set_where(expect)
            blank = UNIT_STRUCT.pack(*PRE_BLANK)
            for _ in range(0, expect % self.files.file_size, UNIT_SIZE):
                mf.append(blank)
        if queue_offset != 0 and expect < mf.file_from_offset + mf.wrote_position:
            return True  # built before
        self.max_physic_offset = commitlog_offset + size
        return mf.append(UNIT_STRUCT.pack(commitlog_offset, size, tags_code))

    def put_many(self, units) -> bool:
        """put() for (commitlog offset, size, tagsCode, queue offset) units in order, with
        one write per file instead of one per unit (the append path's batches)."""
        pack = UNIT_STRUCT.pack
        pending: list[bytes] = []
        mf = None
        for offset, size, tags, queue_offset in units:
            if offset + size <= self.max_physic_offset:
                continue
            if mf is None or mf.wrote_position + (len(pending) + 1) * UNIT_SIZE > mf.file_size \
                    or mf.first_create_in_queue and mf.wrote_position == 0 and queue_offset != 0:
                if pending:
                    mf.append(b"".join(pending))
                    pending = []
                if not self.put(offset, size, tags, queue_offset):
                    return False
                mf = self.files.last_file
                continue
            if queue_offset != 0 and queue_offset * UNIT_SIZE < \
                    mf.file_from_offset + mf.wrote_position + len(pending) * UNIT_SIZE:
                continue  # built before
            self.max_physic_offset = offset + size
            pending.append(pack(offset, size, tags))
        if pending:
            mf.append(b"".join(pending))
        return True

    def put_arrays(self, offsets, sizes, tags, queue_offsets) -> None:
        """put() for numpy columns of consecutive units (the compiled append path's batches):
        the first through put() (it creates files, fills pre-blanks, skips what was dispatched
        before), the rest written as whole slices where they continue at the write position."""
        import numpy as np  # (here: commands that only read queues do not load numpy)

        fresh = offsets + sizes > self.max_physic_offset    # units already in the queue are skipped
        if not fresh.all():
            offsets, sizes, tags, queue_offsets = offsets[fresh], sizes[fresh], tags[fresh], queue_offsets[fresh]
        n = len(offsets)
        if not n or not self.put(int(offsets[0]), int(sizes[0]), int(tags[0]), int(queue_offsets[0])):
            return
        i = 1
        while i < n:
            mf = self.files.get_last_mapped_file(int(queue_offsets[i]) * UNIT_SIZE)
            at = (mf.file_from_offset + mf.wrote_position) // UNIT_SIZE
            room = (mf.file_size - mf.wrote_position) // UNIT_SIZE
            run = min(room, n - i)
            if at != queue_offsets[i] or queue_offsets[i + run - 1] - queue_offsets[i] != run - 1 or run <= 0:
                self.put(int(offsets[i]), int(sizes[i]), int(tags[i]), int(queue_offsets[i]))
                i += 1
                continue
            units = np.empty(run, dtype=unit_dtype())
            units["commitLogOffset"], units["size"], units["tagsCode"] = (offsets[i:i + run], sizes[i:i + run],
                                                                          tags[i:i + run])
            mf.append(units.tobytes())
            mf.drop_written_pages(1 << 20)    # a long append keeps a flat resident set
            self.max_physic_offset = int(offsets[i + run - 1] + sizes[i + run - 1])
            i += run

    def flush(self, least_pages: int) -> bool:
        return self.files.flush(least_pages)

    # ---------------------------------------------------------------- reading
    def units(self, start_queue_offset: int = 0, end_queue_offset: int | None = None,
              stop_at_invalid: bool = True):
        """Yield Units from start_queue_offset on.  With stop_at_invalid (the
        broker's view) the queue ends at the first unit that is not valid;
        without it every written (non-zero) unit is yielded, for forensics."""
        for mf in self.files:
            first_unit = mf.file_from_offset // UNIT_SIZE
            count = mf.file_size // UNIT_SIZE
            if end_queue_offset is not None and first_unit >= end_queue_offset:
                return
            if first_unit + count <= start_queue_offset:
                continue
            begin = max(0, start_queue_offset - first_unit)
            data_end = self.written_end(mf)
            stop = data_end // UNIT_SIZE
            for i, (offset, size, tags) in enumerate(
                    UNIT_STRUCT.iter_unpack(mf.buf[begin * UNIT_SIZE:stop * UNIT_SIZE]), start=begin):
                q = first_unit + i
                if end_queue_offset is not None and q >= end_queue_offset:
                    return
                if stop_at_invalid and not is_valid_unit(offset, size):
                    return
                yield Unit(self.topic, self.queue_id, q, offset, size, tags, mf.path, i * UNIT_SIZE)
            if stop < count and stop_at_invalid:
                return

    @staticmethod
    def written_end(mf) -> int:
        """Bytes up to and including the last whole unit that is not all zeros (a partial
        unit at the end of a cut-short file is left out; the load reports the file's size)."""
        end = len(mf.buf) - len(mf.buf) % UNIT_SIZE
        end = min(end, -(-mf.data_end // UNIT_SIZE) * UNIT_SIZE)   # past the last data: a hole, zeros
        return written_end(mf.buf, 0, end, UNIT_SIZE)

    def min_offset(self) -> int:
        """The first queue offset on disk (files before it were reclaimed)."""
        if not len(self.files):
            return 0
        return self.files.files[0].file_from_offset // UNIT_SIZE

    def max_offset(self) -> int:
        """One past the last valid unit, as ConsumeQueue.getMaxOffsetInQueue."""
        for mf in reversed(self.files.files):
            end = self.written_end(mf)
            if end == 0:
                continue
            # walk back over trailing invalid units
            units = list(UNIT_STRUCT.iter_unpack(mf.buf[:end]))
            count = len(units)
            while count and not is_valid_unit(units[count - 1][0], units[count - 1][1]):
                count -= 1
            if count:
                return mf.file_from_offset // UNIT_SIZE + count
        return self.min_offset()

    def raw_unit_at(self, queue_offset: int) -> Unit | None:
        """The unit at queue_offset as it is on disk, valid or not (None: in no file)."""
        mf = self.files.find_by_offset(queue_offset * UNIT_SIZE)
        if mf is None:
            return None
        pos = queue_offset * UNIT_SIZE - mf.file_from_offset
        if pos + UNIT_SIZE > mf.file_size:
            return None
        offset, size, tags = UNIT_STRUCT.unpack_from(mf.buf, pos)
        return Unit(self.topic, self.queue_id, queue_offset, offset, size, tags, mf.path, pos)

    def unit_at(self, queue_offset: int) -> Unit | None:
        """The valid unit at queue_offset, as ConsumeQueue.getIndexBuffer reads it."""
        unit = self.raw_unit_at(queue_offset)
        if unit is None or not is_valid_unit(unit.commitlog_offset, unit.size):
            return None
        return unit

    def close(self) -> None:
        self.files.close()


def require_files(layout) -> None:
    """Consume queues kept in RocksDB (storeType=defaultRocksDB) are not files mqtool reads: a
    command that must read them says so (exit 4) rather than finding no queue."""
    from mqtool.storage.census import rocksdb_consume_queues

    if rocksdb_consume_queues(layout):
        raise NotAStoreError("the consume queues are in RocksDB (storeType=defaultRocksDB), which mqtool "
                             "does not read", path=layout.consumequeue_dir)


def open_all(layout, *, topics=None, queue_ids=None):
    """ConsumeQueue objects for every queue on disk (optionally filtered)."""
    size = layout.consume_queue_file_size()
    for topic, queue_id, directory in layout.consume_queues():
        if topics and topic not in topics:
            continue
        if queue_ids is not None and queue_id not in queue_ids:
            continue
        yield ConsumeQueue(topic, queue_id, directory, size)


def _unit(cq, queue_offset: int) -> tuple[int, int] | None:
    """(commitlog offset, size) of the unit at queue_offset, read raw."""
    unit = cq.raw_unit_at(queue_offset)
    return None if unit is None else (unit.commitlog_offset, unit.size)


def queue_min_offset(cq, phy_min_offset: int) -> int:
    """A queue's minimum offset: its first unit pointing at or above the commitlog's minimum
    offset (ConsumeQueue.correctMinOffset), found by bisection since units point ever higher.
    The broker looks in the queue's first file only and keeps its old value when none there
    qualifies; here the search goes on, and a queue left with none is empty (min = max)."""
    files = cq.files.files
    if not files:
        return 0
    lo = files[0].file_from_offset // UNIT_SIZE
    hi = (files[-1].file_from_offset + files[-1].file_size) // UNIT_SIZE

    def at_or_above(queue_offset: int) -> bool:
        # valid units below the minimum come first, then valid units at or above it, then the
        # unwritten (all-zero) tail: true from the answer on
        unit = _unit(cq, queue_offset)
        return unit is None or unit[1] <= 0 or unit[0] >= phy_min_offset

    if at_or_above(lo):
        return lo
    while lo < hi:
        mid = (lo + hi) // 2
        if at_or_above(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def last_unit(mf, unit_size: int = UNIT_SIZE) -> tuple[int, int]:
    """The last unit's (offset, size) of a consume queue file, or of a batch consume queue file
    whose units start the same way (what deleteExpiredFileByOffset reads)."""
    pos = mf.file_size - unit_size
    if pos < 0 or pos + UNIT_SIZE > len(mf.buf):
        return -1, 0
    offset, size, _ = UNIT_STRUCT.unpack_from(mf.buf, pos)
    return offset, size
