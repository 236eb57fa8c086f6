"""Index files on disk: header, slots and entries, and RocketMQ's key lookup.

`lookup` walks a slot's chain exactly as IndexFile.selectPhyOffset does
(hash match only, time window from the header's beginTimestamp plus each
entry's timeDiff in seconds, stop on a bad or self-referencing link), so its
answers are the broker's, collisions included; callers re-check the keys
against the commitlog.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from mqtool.errors import NotAStoreError
from mqtool.formats import index as fmt
from mqtool.formats.javastr import index_key_hash
from mqtool.storage import fsutil
from mqtool.storage.mappedfile import PAGE_SIZE, drop_pages

_I32 = struct.Struct(">i")


@dataclass(slots=True)
class Header:
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int

    def to_json(self) -> dict:
        return {"beginTimestamp": self.begin_timestamp, "endTimestamp": self.end_timestamp,
                "beginPhyOffset": self.begin_phy_offset, "endPhyOffset": self.end_phy_offset,
                "hashSlotCount": self.hash_slot_count, "indexCount": self.index_count}


@dataclass(slots=True)
class Entry:
    number: int
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


class IndexFile:
    """One index file, mapped read-only (the engine maps it writable)."""

    def __init__(self, path, hash_slot_num: int, index_num: int, *, writable: bool = False,
                 create: bool = False):
        self.path = Path(path)
        self.name = self.path.name
        self.hash_slot_num = hash_slot_num
        self.index_num = index_num
        self.expected_size = fmt.file_size(hash_slot_num, index_num)
        self.writable = writable or create
        self._fd = -1
        try:
            fd = fsutil.open_store_file(self.path, create_size=self.expected_size if create else None,
                                        writable=self.writable)
        except OSError as exc:
            raise NotAStoreError(f"cannot open: {exc.strerror}", path=self.path) from None
        keep = False
        try:
            self.size = os.fstat(fd).st_size
            if self.size < fmt.HEADER_SIZE:
                raise NotAStoreError(f"index file of {self.size} bytes is shorter than its "
                                     f"{fmt.HEADER_SIZE}-byte header", path=self.path, offset=0)
            if self.writable and self.size != self.expected_size:
                raise NotAStoreError(f"index file is {self.size} bytes, expected {self.expected_size}",
                                     path=self.path)
            access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
            self.buf = mmap.mmap(fd, self.size, access=access)
            if self.writable:
                self._fd = fd
                keep = True
        finally:
            if not keep:
                os.close(fd)
        # the header as IndexHeader keeps it: indexCount starts at 1 (entry 0 is never used)
        h = self.header()
        self.begin_timestamp, self.end_timestamp = h.begin_timestamp, h.end_timestamp
        self.begin_phy_offset, self.end_phy_offset = h.begin_phy_offset, h.end_phy_offset
        self.hash_slot_count = h.hash_slot_count
        self.index_count = h.index_count if h.index_count > 0 else 1
        self._entries_dropped = 0      # drop_written_entries: unmapped up to here

    @property
    def size_ok(self) -> bool:
        return self.size == self.expected_size

    def header(self) -> Header:
        return Header(*fmt.HEADER_STRUCT.unpack_from(self.buf, 0))

    def header_problems(self, newest: bool = False) -> list[tuple[int, str, object, object]]:
        """Header fields that are wrong whatever the entries hold: (byte offset, what,
        expected, found).

        The newest file may be one a broker rolled to and never put a key into: a 4.9.8
        broker writes the times and offsets it starts from straight into the header (all
        zero in a new store) but indexCount only with the first entry, so it reads 0 (1 if
        mqtool rolled it).  No used slot is counted and entry 1 is empty there; anywhere
        else, or with an entry, such a header is damage.  The times are not checked here:
        beginTimestamp after endTimestamp is what a store clock that stepped back leaves
        (verify-crc checks both against the entries)."""
        h = self.header()
        if newest and self.never_put(h):
            return []
        at = fmt.HEADER_FIELD_AT
        problems = []
        if not 1 <= h.index_count <= self.index_num:
            problems.append((at["indexCount"], "indexCount is out of range", f"1..{self.index_num}", h.index_count))
        if not 0 <= h.hash_slot_count <= self.hash_slot_num:
            problems.append((at["hashSlotCount"], "hashSlotCount is out of range", f"0..{self.hash_slot_num}",
                             h.hash_slot_count))
        if h.index_count > 1 and h.begin_phy_offset > h.end_phy_offset:
            problems.append((at["beginPhyOffset"], "beginPhyOffset is after endPhyOffset", f"<= {h.end_phy_offset}",
                             h.begin_phy_offset))
        return problems

    def never_put(self, h: Header) -> bool:
        """No key was ever put into this file (see header_problems)."""
        first = fmt.entry_position(self.hash_slot_num, 1)
        return (h.index_count in (0, 1) and h.hash_slot_count == 0
                and first + fmt.ENTRY_SIZE <= self.size and not any(self.buf[first:first + fmt.ENTRY_SIZE]))

    def slot(self, number: int) -> int:
        pos = fmt.slot_position(number)
        if pos + 4 > self.size:
            return 0
        return int.from_bytes(self.buf[pos:pos + 4], "big", signed=True)

    def entry(self, number: int) -> Entry | None:
        pos = fmt.entry_position(self.hash_slot_num, number)
        if number < 0 or pos + fmt.ENTRY_SIZE > self.size:
            return None
        return Entry(number, *fmt.ENTRY_STRUCT.unpack_from(self.buf, pos))

    def entries(self):
        """Entries 1 .. indexCount-1, in the order they were written."""
        count = min(self.header().index_count, self.index_num)
        for number in range(1, count):
            entry = self.entry(number)
            if entry is None:
                return
            yield entry

    def lookup(self, key: str, max_num: int, begin: int, end: int, key_hash: int | None = None) -> list[int]:
        """IndexFile.selectPhyOffset for one index key (`topic#key`); key_hash saves hashing
        the key again for every file of a query."""
        header = self.header()
        if key_hash is None:
            key_hash = index_key_hash(key)
        slot = self.slot(key_hash % self.hash_slot_num)
        found: list[int] = []
        if slot <= fmt.INVALID_INDEX or slot > header.index_count or header.index_count <= 1:
            return found
        number = slot
        while len(found) < max_num:
            entry = self.entry(number)
            if entry is None:
                break
            if entry.time_diff < 0:
                break
            time_read = header.begin_timestamp + entry.time_diff * 1000
            if entry.key_hash == key_hash and begin <= time_read <= end:
                found.append(entry.phy_offset)
            prev = entry.prev_index
            # entries only ever link back to older ones: a link forward is damage, and following
            # it could go round in a circle (the broker's own walk would never end)
            if prev <= fmt.INVALID_INDEX or prev >= number or time_read < begin:
                break
            number = prev
        return found

    def time_matched(self, begin: int, end: int) -> bool:
        """IndexFile.isTimeMatched: does the file's time span touch [begin, end]?"""
        h = self.header()
        return ((begin < h.begin_timestamp and end > h.end_timestamp)
                or (h.begin_timestamp <= begin <= h.end_timestamp)
                or (h.begin_timestamp <= end <= h.end_timestamp))

    # ------------------------------------------------------------------ writing
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    def start_after(self, end_phy_offset: int, end_timestamp: int) -> None:
        """A new file continues where the full one ended (IndexFile's constructor)."""
        if end_phy_offset > 0:
            self.begin_phy_offset = self.end_phy_offset = end_phy_offset
            self._write_header()
        if end_timestamp > 0:
            self.begin_timestamp = self.end_timestamp = end_timestamp
            self._write_header()

    def put_key(self, key: str, phy_offset: int, store_timestamp: int, key_hash: int | None = None,
                write_header: bool = True) -> bool:
        """IndexFile.putKey: add one entry at the head of its slot's chain; False when full.

        Batches pass write_header=False and call write_header() once at the end."""
        if self.index_count >= self.index_num:
            return False
        if key_hash is None:
            key_hash = index_key_hash(key)
        slot_pos = fmt.slot_position(key_hash % self.hash_slot_num)
        buf = self.buf
        (slot_value,) = _I32.unpack_from(buf, slot_pos)
        if slot_value <= fmt.INVALID_INDEX or slot_value > self.index_count:
            slot_value = fmt.INVALID_INDEX
        # seconds since the file's first entry, clamped to 0 .. Integer.MAX_VALUE
        time_diff = 0
        if self.begin_timestamp > 0:
            time_diff = min(max((store_timestamp - self.begin_timestamp) // 1000, 0), 0x7FFFFFFF)
        pos = fmt.entry_position(self.hash_slot_num, self.index_count)
        fmt.ENTRY_STRUCT.pack_into(buf, pos, key_hash, phy_offset, time_diff, slot_value)
        _I32.pack_into(buf, slot_pos, self.index_count)
        if self.index_count <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if slot_value == fmt.INVALID_INDEX:
            self.hash_slot_count += 1
        self.index_count += 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        if write_header:
            self._write_header()
        return True

    def write_header(self) -> None:
        self._write_header()

    def drop_written_entries(self, step: int = 1 << 20) -> None:
        """Unmap from this process the entries written so far (once `step` bytes of them are
        behind), so that a long append keeps a flat resident set: an entry is never read back
        while keys are put (the page cache keeps it; a later read faults it back in)."""
        if not self.writable:
            return
        start = fmt.HEADER_SIZE + self.hash_slot_num * fmt.SLOT_SIZE      # the slots' pages stay
        since = max(self._entries_dropped, -(-start // PAGE_SIZE) * PAGE_SIZE)
        self._entries_dropped = drop_pages(self.buf, since, start + self.index_count * fmt.ENTRY_SIZE, step)

    def _write_header(self) -> None:
        fmt.HEADER_STRUCT.pack_into(self.buf, 0, self.begin_timestamp, self.end_timestamp,
                                    self.begin_phy_offset, self.end_phy_offset,
                                    self.hash_slot_count, self.index_count)

    def flush(self) -> None:
        """IndexFile.flush: write the header and force the file to disk."""
        if self.writable:
            self._write_header()
            os.fdatasync(self._fd)

    def close(self) -> None:
        try:
            self.buf.close()
        except BufferError:
            pass
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def query_offsets(files, key: str, max_num: int, begin: int, end: int) -> list[int]:
    """IndexService.queryOffset's walk over index files (given oldest first) for one index
    key (`topic#key`): newest file first, until a file starts before `begin` or max_num
    offsets are found.  Raw answers, in the order found: collisions and duplicates included.
    The one implementation of the walk: the engine's IndexService.query and the read-only
    lookups (mqtool.forensics.lookup) both call it."""
    found: list[int] = []
    key_hash = index_key_hash(key)
    for f in reversed(files):
        if f.time_matched(begin, end):
            found.extend(f.lookup(key, max_num - len(found), begin, end, key_hash))
        if f.begin_timestamp < begin or len(found) >= max_num:
            break
    return found


def open_all(layout):
    slots, entries = layout.index_geometry()
    for info in layout.index_files():
        yield IndexFile(info.path, slots, entries)
