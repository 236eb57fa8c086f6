"""The 5.x timer store: timerwheel, timerlog/ units and config/timercheck (big-endian throughout).

Facts from rocketmq-all-5.3.3 (store/.../timer/: Slot, TimerWheel, TimerLog, TimerCheckpoint,
TimerMessageStore; MessageStoreConfig):

    slot (32 bytes):  timeSlot i64 (delivery time / timerPrecisionMs) | firstPos i64 | lastPos i64
                      | num i32 | magic i32 (unused)
    unit (52 bytes):  size i32 (52) | prevPos i64 (the slot's previous unit, -1: none) | magic i32
                      | currWriteTime i64 | delayedTime i32 (delivery time - currWriteTime)
                      | offsetPy i64 | sizePy i32 | realTopicHash i32 (String.hashCode) | reserved i64
    blank (16 bytes): size i32 (the rest of the file) | 0 i64 | BLANK_MAGIC i32
    timercheck (one 4096-byte page): lastReadTimeMs, lastTimerLogFlushPos, lastTimerQueueOffset,
                      masterTimerQueueOffset, dataVersion stateVersion, timestamp, counter (i64 each)

The wheel holds 7 x 86400 x 2 slots whatever the precision; a slot's index is
timeMs / precision % slots.  A unit's magic is MAGIC_DEFAULT, with MAGIC_ROLL (delivery beyond
the roll window: re-put when its slot is read) and MAGIC_DELETE (cancels a message by
TIMER_DEL_UNIQKEY); a broker takes a unit when (magic | 0xF) == 0xF.  Timer messages live in
the commitlog under topic rmq_sys_wheel_timer, queue 0, with REAL_TOPIC, REAL_QID and
TIMER_OUT_MS properties.
"""

from __future__ import annotations

import struct

from construct import Const, Int32sb, Int64sb, Padding, Struct

from mqtool.formats.fixedfields import fixed_struct, numpy_dtype, offsets, run, struct_format

from mqtool.formats.topicnames import TIMER_TOPIC  # noqa: F401 - the timer's topic, named here too
WHEEL_TTL_DAYS = 7
DAY_SECS = 24 * 3600
SLOTS_TOTAL = WHEEL_TTL_DAYS * DAY_SECS      # TimerMessageStore.slotsTotal
SLOT_COUNT = SLOTS_TOTAL * 2                  # the wheel holds two rounds
BLANK_MAGIC = 0xBBCCDDEE ^ (1880681586 + 8)   # Java's precedence: the sum first
BLANK_MAGIC_SIGNED = BLANK_MAGIC - (1 << 32) if BLANK_MAGIC >= 1 << 31 else BLANK_MAGIC
MAGIC_DEFAULT, MAGIC_ROLL, MAGIC_DELETE = 1, 2, 4
CHECK_FILE_SIZE = 4096
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024
PRECISIONS = (100, 200, 500, 1000)

SLOT = Struct(
    "timeSlot" / Int64sb,
    "firstPos" / Int64sb,
    "lastPos" / Int64sb,
    "num" / Int32sb,
    "magic" / Int32sb,
)

UNIT = Struct(
    "size" / Int32sb,
    "prevPos" / Int64sb,
    "magic" / Int32sb,
    "currWriteTime" / Int64sb,
    "delayedTime" / Int32sb,
    "offsetPy" / Int64sb,
    "sizePy" / Int32sb,
    "realTopicHash" / Int32sb,
    "reserved" / Int64sb,
)

BLANK = Struct(
    "size" / Int32sb,
    "zero" / Int64sb,
    "magic" / Const(BLANK_MAGIC_SIGNED, Int32sb),
)

CHECKPOINT_FIELDS = ("lastReadTimeMs", "lastTimerLogFlushPos", "lastTimerQueueOffset", "masterTimerQueueOffset",
                     "stateVersion", "dataVersionTimestamp", "dataVersionCounter")
CHECKPOINT = Struct(*[name / Int64sb for name in CHECKPOINT_FIELDS], Padding(CHECK_FILE_SIZE - 8 * len(CHECKPOINT_FIELDS)))

# the layout, from the schemas above: sizes, field offsets, and the numpy record types of whole
# files (SLOT_DTYPE, UNIT_DTYPE: made with numpy when first asked for, by the module's __getattr__,
# so that reading the schemas does not load numpy)
SLOT_SIZE = SLOT.sizeof()                     # 32
WHEEL_SIZE = SLOT_COUNT * SLOT_SIZE           # 38,707,200 bytes
UNIT_SIZE = UNIT.sizeof()                     # 52
UNIT_FIELD_AT = offsets(UNIT)
UNIT_OFFSET_PY_AT = UNIT_FIELD_AT["offsetPy"]   # 28: TimerLog.UNIT_PRE_SIZE_FOR_MSG
MIN_BLANK_LEN = BLANK.sizeof()                # 16
BLANK_STRUCT = fixed_struct(BLANK)
# a unit's message fields (offsetPy, sizePy), read together
MESSAGE_FIELDS = struct.Struct(struct_format({k: v for k, v in run(UNIT.subcons).items() if k in ("offsetPy", "sizePy")}))
_DTYPES = {"SLOT_DTYPE": SLOT, "UNIT_DTYPE": UNIT}


def __getattr__(name):
    if name in _DTYPES:
        return _dtype(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _dtype(name: str):
    if name not in globals():
        globals()[name] = numpy_dtype(_DTYPES[name])
    return globals()[name]


def is_delete(magic: int) -> bool:
    return bool(magic & MAGIC_DELETE) and not magic & MAGIC_ROLL


def valid_units(units_array):
    """Which units (a units() array) a broker's timerlog recovery takes: a whole 52-byte unit whose
    magic is a known one ((magic | 0xF) == 0xF)."""
    import numpy as np

    return ((units_array["size"].astype(np.int64) == UNIT_SIZE)
            & ((units_array["magic"].astype(np.int64) | 0xF) == 0xF))


def last_unit_offset(file_size: int) -> int:
    """TimerLog.getOffsetForLastUnit: where the last whole unit of a full file starts (the broker
    deletes a timerlog file once that unit's offsetPy is below the commitlog's minimum)."""
    return file_size - (file_size - MIN_BLANK_LEN) % UNIT_SIZE - MIN_BLANK_LEN - UNIT_SIZE


def units(buf, count: int | None = None, offset: int = 0):
    """The 52-byte units of buf as a numpy record array (a view, no copy)."""
    import numpy as np

    if count is None:
        count = (len(buf) - offset) // UNIT_SIZE
    return np.frombuffer(buf, dtype=_dtype("UNIT_DTYPE"), count=count, offset=offset)


def wheel(buf):
    """The wheel's slots as a numpy record array (a view, no copy)."""
    import numpy as np

    return np.frombuffer(buf, dtype=_dtype("SLOT_DTYPE"), count=len(buf) // SLOT_SIZE)
