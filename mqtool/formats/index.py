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

from construct import Array, Int32sb, Int64sb, Struct, this

from mqtool.formats.fixedfields import fixed_struct, numpy_dtype, offsets

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


SLOT = Int32sb


# the layout, from the schemas above: what the compiled kernels (native/appendkernels.py,
# forensics/verify/kernels.py) read and write fields by
HEADER_SIZE = HEADER.sizeof()
SLOT_SIZE = SLOT.sizeof()
ENTRY_SIZE = ENTRY.sizeof()
HEADER_NAMES = tuple(sub.name for sub in HEADER.subcons)    # the order of the header's fields
ENTRY_FIELD_AT = offsets(ENTRY)
KEY_HASH_AT = ENTRY_FIELD_AT["keyHash"]
PHY_OFFSET_AT = ENTRY_FIELD_AT["phyOffset"]
TIME_DIFF_AT = ENTRY_FIELD_AT["timeDiff"]
PREV_INDEX_AT = ENTRY_FIELD_AT["prevIndex"]


def index_file_schema(hash_slot_num: int, index_num: int) -> Struct:
    """The whole file for a given maxHashSlotNum / maxIndexNum."""
    return Struct(
        "header" / HEADER,
        "slots" / Array(hash_slot_num, SLOT),
        "entries" / Array(index_num, ENTRY),
    )


INDEX_FILE = Struct(
    "hashSlotNum" / Int32sb,
    "indexNum" / Int32sb,
    "file" / Struct(
        "header" / HEADER,
        "slots" / Array(this._.hashSlotNum, SLOT),
        "entries" / Array(this._.indexNum, ENTRY),
    ),
)
"""A parameterised view used by tests: the sizes come first, then the file bytes."""

HEADER_STRUCT = fixed_struct(HEADER)     # the fast decoders'
ENTRY_STRUCT = fixed_struct(ENTRY)


def entry_dtype():
    """ENTRY as a numpy dtype, for reading a file's entries at once (numpy loaded only when asked)."""
    return numpy_dtype(ENTRY)


def file_size(hash_slot_num: int, index_num: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + index_num * ENTRY_SIZE


def geometry_for_size(size: int) -> tuple[int, int] | None:
    """(maxHashSlotNum, maxIndexNum) of an index file of this size at the broker's ratio,
    maxIndexNum = 4 x maxHashSlotNum (None: no such geometry gives this size)."""
    slots, rest = divmod(size - HEADER_SIZE, SLOT_SIZE + 4 * ENTRY_SIZE)
    return None if rest or slots <= 0 else (slots, 4 * slots)


def slot_position(slot: int) -> int:
    return HEADER_SIZE + slot * SLOT_SIZE


def entry_position(hash_slot_num: int, entry: int) -> int:
    return HEADER_SIZE + hash_slot_num * SLOT_SIZE + entry * ENTRY_SIZE


def index_key(topic: str, key: str) -> str:
    return f"{topic}#{key}"
