"""Index files: a 40-byte header, hash slots, then 20-byte entries.

    header: beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64
            endPhyOffset i64 | hashSlotCount i32 | indexCount i32
    slot:   i32, the number of the newest entry of this slot (0: empty)
    entry:  keyHash i32 | phyOffset i64 | timeDiff i32 (seconds since
            beginTimestamp) | prevIndex i32 (the slot's previous entry, 0: none)

indexCount starts at 1: entry 0 is never used, so a file holds maxIndexNum - 1
keys.  The key is `topic#key`, hashed with abs(String.hashCode) (see
javastr.index_key_hash); the slot is hash % maxHashSlotNum.  Files are named
by their creation time in the broker's local time zone, yyyyMMddHHmmssSSS.
"""

from __future__ import annotations

import struct

from construct import Array, Int32sb, Int64sb, Struct, this

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
INVALID_INDEX = 0

HEADER = Struct(
    "beginTimestamp" / Int64sb,
    "endTimestamp" / Int64sb,
    "beginPhyOffset" / Int64sb,
    "endPhyOffset" / Int64sb,
    "hashSlotCount" / Int32sb,
    "indexCount" / Int32sb,
)

ENTRY = Struct(
    "keyHash" / Int32sb,
    "phyOffset" / Int64sb,
    "timeDiff" / Int32sb,
    "prevIndex" / Int32sb,
)


def index_file_schema(hash_slot_num: int, index_num: int) -> Struct:
    """The whole file for a given maxHashSlotNum / maxIndexNum."""
    return Struct(
        "header" / HEADER,
        "slots" / Array(hash_slot_num, Int32sb),
        "entries" / Array(index_num, ENTRY),
    )


INDEX_FILE = Struct(
    "hashSlotNum" / Int32sb,
    "indexNum" / Int32sb,
    "file" / Struct(
        "header" / HEADER,
        "slots" / Array(this._.hashSlotNum, Int32sb),
        "entries" / Array(this._.indexNum, ENTRY),
    ),
)
"""A parameterised view used by tests: the sizes come first, then the file bytes."""

HEADER_STRUCT = struct.Struct(">qqqqii")
ENTRY_STRUCT = struct.Struct(">iqii")


def entry_dtype():
    """ENTRY as a numpy dtype, for reading a file's entries at once (numpy loaded only when asked)."""
    import numpy as np

    return np.dtype([("keyHash", ">i4"), ("phyOffset", ">i8"), ("timeDiff", ">i4"), ("prevIndex", ">i4")])


def file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def slot_position(slot: int) -> int:
    return HEADER_SIZE + slot * SLOT_SIZE


def entry_position(hash_slot_num: int, entry: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + entry * ENTRY_SIZE


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"
