"""Consume queue extension units (enableConsumeQueueExt): a queue's tags field then holds an
address into consumequeue_ext/<topic>/<queueId>/ instead of the tags code.

    size i16 | tagsCode i64 | msgStoreTime i64 | bitMapSize i16 | filterBitMap (bitMapSize bytes)

Units follow each other in files of mappedFileSizeConsumeQueueExt bytes (48 MiB by default) named
by their first byte's offset; a unit that does not fit before the last 4 bytes of a file is
written at the start of the next, after a short -1 where the unused space begins.  An address is
the unit's offset plus Long.MIN_VALUE, so every address is at most MAX_ADDR (Integer.MIN_VALUE
- 1) and no tags code is one.  Facts from ConsumeQueueExt.java (4.9.8 and 5.3.3 alike).
"""

from __future__ import annotations

import struct

from construct import Bytes, Int16sb, Int64sb, Struct

from mqtool.formats.fixedfields import run, struct_format

MAX_ADDR = -(1 << 31) - 1
MIN_LONG = -(1 << 63)
MIN_UNIT_SIZE = 20
END_BLANK = 4
FILL = struct.pack(">h", -1)
DEFAULT_FILE_SIZE = 48 * 1024 * 1024

UNIT = Struct(
    "size" / Int16sb,
    "tagsCode" / Int64sb,
    "msgStoreTime" / Int64sb,
    "bitMapSize" / Int16sb,
    "filterBitMap" / Bytes(lambda ctx: max(ctx.bitMapSize, 0)),
)
HEAD = struct.Struct(struct_format(run(UNIT.subcons), through="bitMapSize"))
"""Fast decoder for UNIT's fixed part, checked against it in the tests."""


def is_ext_addr(value: int) -> bool:
    return value <= MAX_ADDR


def decorate(offset: int) -> int:
    """The address of the unit at offset."""
    return offset + MIN_LONG if not is_ext_addr(offset) else offset


def undecorate(address: int) -> int:
    """The offset of the unit at address."""
    return address - MIN_LONG if is_ext_addr(address) else address


def pack(tags_code: int, store_time: int, bitmap: bytes = b"") -> bytes:
    return HEAD.pack(MIN_UNIT_SIZE + len(bitmap), tags_code, store_time, len(bitmap)) + bitmap
