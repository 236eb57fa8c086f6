"""Consume queue units: 20 bytes each, pointing into the commitlog.

    commitLogOffset i64 | size i32 | tagsCode i64

Files live in consumequeue/<topic>/<queueId>/ and are named by the byte
offset of their first unit (queue offset x 20), as 20 digits.  A unit of all
zeros is unwritten space; the broker's recovery stops at the first unit
whose offset is negative or whose size is not positive.
"""

from __future__ import annotations

from construct import Int32sb, Int64sb, Struct

from mqtool.formats.fixedfields import fixed_struct, numpy_dtype, offsets

UNIT_SIZE = 20
PRE_BLANK = (0, 0x7FFFFFFF, 0)   # ConsumeQueue.fillPreBlank's unit: (0, Integer.MAX_VALUE, 0)

UNIT = Struct(
    "commitLogOffset" / Int64sb,
    "size" / Int32sb,
    "tagsCode" / Int64sb,
)

# the layout, from the schema above: what the compiled kernels (forensics/verify/kernels.py) read
# units by
UNIT_FIELD_AT = offsets(UNIT)
COMMIT_LOG_OFFSET_AT = UNIT_FIELD_AT["commitLogOffset"]
SIZE_AT = UNIT_FIELD_AT["size"]
TAGS_CODE_AT = UNIT_FIELD_AT["tagsCode"]
assert UNIT.sizeof() == UNIT_SIZE

UNIT_STRUCT = fixed_struct(UNIT)
"""Fast decoder for UNIT, checked against it in the round-trip tests."""


def unit_dtype():
    """UNIT as a numpy dtype, for reading a file's units at once (numpy loaded only when asked)."""
    return numpy_dtype(UNIT)


def is_valid_unit(offset, size):
    """ConsumeQueue.recover: a unit counts when offset >= 0 and size > 0.  Of numbers or, unit
    by unit, of numpy columns (and compiled into verify's kernels)."""
    return (offset >= 0) & (size > 0)


def is_pre_blank(offset, size, tags):
    """ConsumeQueue.fillPreBlank's unit, which counts (is_valid_unit) but points at nothing.  Of
    numbers or numpy columns, as is_valid_unit."""
    return (offset == PRE_BLANK[0]) & (size == PRE_BLANK[1]) & (tags == PRE_BLANK[2])


def decode_units(buf, start: int = 0, end: int | None = None):
    """Yield (commitLogOffset, size, tagsCode) for each whole unit of buf[start:end]."""
    end = len(buf) if end is None else end
    end -= (end - start) % UNIT_SIZE
    yield from UNIT_STRUCT.iter_unpack(memoryview(buf)[start:end])
