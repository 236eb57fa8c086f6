"""A batch consume queue unit (5.x BatchConsumeQueue, topics with queue.type=BatchCQ): 46 bytes.

One unit per stored record, which may be an inner batch of several messages: the unit names the
record (commitlog offset and size), its tags code and store time, the queue offset of its first
message (msgBaseOffset, the record's INNER_BASE property) and how many messages it holds
(batchSize, INNER_NUM).  compactedOffset is always INVALID_POS (-1) as the broker writes it, and
four reserved bytes are zero.  Files live under batchconsumequeue/<topic>/<queueId>/, named by
their first byte's logical offset, 300000 units each by default (mapperFileSizeBatchConsumeQueue).
Facts: store/.../queue/BatchConsumeQueue.java at rocketmq-all-5.3.3.
"""

from __future__ import annotations

from construct import Int16sb, Int32sb, Int64sb, Struct

from mqtool.formats.fixedfields import numpy_dtype

UNIT_SIZE = 46
INVALID_POS = -1
DEFAULT_FILE_SIZE = 300000 * UNIT_SIZE

UNIT = Struct(
    "offset" / Int64sb,            # commitlog offset of the record
    "size" / Int32sb,
    "tagsCode" / Int64sb,
    "storeTime" / Int64sb,
    "msgBaseOffset" / Int64sb,     # queue offset of the record's first message
    "batchSize" / Int16sb,
    "compactedOffset" / Int32sb,   # INVALID_POS as written
    "reserved" / Int32sb,
)
assert UNIT.sizeof() == UNIT_SIZE

# the same layout for whole files at once (tested against UNIT): UNIT_DTYPE, made with numpy when
# first asked for (module __getattr__), so that reading the schema does not load numpy


def __getattr__(name):
    if name == "UNIT_DTYPE":
        dtype = globals()["UNIT_DTYPE"] = numpy_dtype(UNIT)
        assert dtype.itemsize == UNIT_SIZE
        return dtype
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
