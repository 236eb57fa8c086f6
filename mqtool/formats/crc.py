"""RocketMQ's body CRC: CRC32 of the stored (possibly compressed) body, masked to 31 bits.

UtilAll.crc32 returns (int)(crc32 & 0x7FFFFFFF); an empty body is never
hashed and its stored CRC is 0.  isal's crc32 is used when installed (about
four times faster than zlib's on large buffers); both give the same value.
"""

from __future__ import annotations

import zlib

try:  # pragma: no cover - depends on the environment
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover
    _crc32 = zlib.crc32

CRC_MASK = 0x7FFFFFFF


def crc32(data, value: int = 0) -> int:
    """Plain (unmasked) CRC32, the fastest implementation available."""
    return _crc32(data, value)


def body_crc(body) -> int:
    """The bodyCRC field a broker stores for this body."""
    if len(body) == 0:
        return 0
    return _crc32(body) & CRC_MASK
