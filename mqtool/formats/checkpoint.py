"""The checkpoint file: one OS page (4096 bytes) holding big-endian longs.

4.x: physicMsgTimestamp @0, logicsMsgTimestamp @8, indexMsgTimestamp @16.
5.x adds masterFlushedOffset @24 and confirmPhyOffset @32.  The rest of the
page is zero.  Abnormal recovery starts from min(physic, logics) - 3 s (the
index time, without the margin, joins the min only with messageIndexEnable
and messageIndexSafe).
"""

from __future__ import annotations

from construct import Int64sb, Padding, Struct

FILE_SIZE = 4096
RECOVERY_MARGIN_MS = 3000

CHECKPOINT = Struct(
    "physicMsgTimestamp" / Int64sb,
    "logicsMsgTimestamp" / Int64sb,
    "indexMsgTimestamp" / Int64sb,
    "masterFlushedOffset" / Int64sb,
    "confirmPhyOffset" / Int64sb,
    Padding(FILE_SIZE - 40),
)
"""The whole 4096-byte page; the two 5.x fields are 0 in a 4.x store."""

FIELDS_4X = ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp")
FIELDS_5X = FIELDS_4X + ("masterFlushedOffset", "confirmPhyOffset")

def min_timestamp(cp, *, index_safe: bool = False) -> int:
    """StoreCheckpoint.getMinTimestamp(/Index): where abnormal recovery may start.

    The 3 s margin applies to min(physic, logics) only; getMinTimestampIndex
    takes the min of that and the raw index time.
    """
    low = max(min(cp["physicMsgTimestamp"], cp["logicsMsgTimestamp"]) - RECOVERY_MARGIN_MS, 0)
    if index_safe:
        low = min(low, cp["indexMsgTimestamp"])
    return low
