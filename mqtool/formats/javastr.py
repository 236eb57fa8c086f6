"""Java String semantics that leak into the on-disk format.

RocketMQ hashes tags (consume-queue tagsCode) and index keys with
java.lang.String.hashCode, which runs over UTF-16 code units, so characters
outside the BMP count twice.
"""

from __future__ import annotations

_MASK = 0xFFFFFFFF


def _signed32(value: int) -> int:
    value &= _MASK
    return value - (1 << 32) if value & 0x80000000 else value


def java_hash(text: str) -> int:
    """java.lang.String.hashCode(): s[0]*31^(n-1) + ... + s[n-1], as a signed int."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK
    return _signed32(h)


def java_length(text: str) -> int:
    """String.length(): the number of UTF-16 code units."""
    return len(text.encode("utf-16-be", "surrogatepass")) // 2


def tags_code(tags: str | None) -> int:
    """The consume-queue tagsCode of a plain message: the tags' hashCode, 0 without tags."""
    if not tags:
        return 0
    return java_hash(tags)


def index_key_hash(index_key: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(hashCode), with Integer.MIN_VALUE mapped to 0."""
    h = java_hash(index_key)
    if h == -(1 << 31):
        return 0
    return abs(h)


def java_utf8_decode(data: bytes) -> str:
    """new String(bytes, UTF_8): malformed input becomes U+FFFD, as Java shows it."""
    return data.decode("utf-8", "replace")
