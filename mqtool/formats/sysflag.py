"""Bits of a message's sysFlag (MessageSysFlag in rocketmq-common)."""

from __future__ import annotations

COMPRESSED = 0x1
MULTI_TAGS = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED = 0x1 << 2
TRANSACTION_COMMIT = 0x2 << 2
TRANSACTION_ROLLBACK = 0x3 << 2
TRANSACTION_MASK = TRANSACTION_ROLLBACK
BORNHOST_V6 = 0x1 << 4
STOREHOST_V6 = 0x1 << 5
NEED_UNWRAP = 0x1 << 6
INNER_BATCH = 0x1 << 7
COMPRESSION_TYPE_MASK = 0x7 << 8

COMPRESSION_TYPES = {1: "LZ4", 2: "ZSTD", 3: "ZLIB"}
COMPRESSION_FLAGS = {name: value << 8 for value, name in COMPRESSION_TYPES.items()}

TRANSACTION_NAMES = {
    TRANSACTION_NOT_TYPE: "none",
    TRANSACTION_PREPARED: "prepared",
    TRANSACTION_COMMIT: "commit",
    TRANSACTION_ROLLBACK: "rollback",
}


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_MASK


def is_dispatched_to_consume_queue(sys_flag):
    """Prepared and rollback records never get a consume-queue unit (sys_flag: an int, or a
    numpy column of them: the answer is a bool, or a column of them)."""
    tx = transaction_type(sys_flag)
    return (tx != TRANSACTION_PREPARED) & (tx != TRANSACTION_ROLLBACK)


def is_indexed(sys_flag):
    """IndexService.buildIndex skips rollback records only (an int or a numpy column, as above)."""
    return transaction_type(sys_flag) != TRANSACTION_ROLLBACK


def compression_type(sys_flag: int) -> str | None:
    """The body's codec, or None when the body is not compressed.

    Producers before 4.9.x set only COMPRESSED (the codec bits 0): that means ZLIB.
    """
    if not sys_flag & COMPRESSED:
        return None
    value = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if value == 0:
        return "ZLIB"
    return COMPRESSION_TYPES.get(value, f"unknown({value})")


def describe(sys_flag: int) -> str:
    """A short human form, e.g. `compressed(ZLIB)|multi-tags|born-v6`."""
    parts = []
    codec = compression_type(sys_flag)
    if codec:
        parts.append(f"compressed({codec})")
    if sys_flag & MULTI_TAGS:
        parts.append("multi-tags")
    tx = transaction_type(sys_flag)
    if tx:
        parts.append("tx-" + TRANSACTION_NAMES[tx])
    if sys_flag & BORNHOST_V6:
        parts.append("born-v6")
    if sys_flag & STOREHOST_V6:
        parts.append("store-v6")
    if sys_flag & NEED_UNWRAP:
        parts.append("need-unwrap")
    if sys_flag & INNER_BATCH:
        parts.append("inner-batch")
    return "|".join(parts) or "-"
