"""Java String semantics that leak into the on-disk format.

RocketMQ hashes tags (consume-queue tagsCode) and index keys with
java.lang.String.hashCode, which runs over UTF-16 code units, so characters
outside the BMP count twice.  Also how Java parses integers and java.util.Properties text
(broker.conf, DLedger's checkpoint and currterm files).
"""

from __future__ import annotations

import re
from functools import lru_cache

_MASK = 0xFFFFFFFF
_JAVA_INTEGER = re.compile(r"[+-]?\d+")     # \d: any Unicode decimal digit, as Character.digit takes


def parse_java_integer(text: str, bits: int = 64) -> int | None:
    """Long.parseLong (bits 64), Integer.parseInt (32), Short.parseShort (16): an optional sign
    and decimal digits (any script's: Java takes "\uff15" as 5), in range; None where Java would
    throw NumberFormatException (spaces, underscores and "+" alone, which int() would take or not)."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < 1 << (bits - 1) else None


def _signed32(value: int) -> int:
    value &= _MASK
    return value - (1 << 32) if value & 0x80000000 else value


def java_hash(text: str) -> int:
    """java.lang.String.hashCode(): s[0]*31^(n-1) + ... + s[n-1], as a signed int."""
    h = 0
    if not text or max(text) <= "\uffff":   # one UTF-16 unit per character
        for c in map(ord, text):
            h = (31 * h + c) & _MASK
        return _signed32(h)
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _MASK
    return _signed32(h)


def java_length(text: str) -> int:
    """String.length(): the number of UTF-16 code units."""
    return len(text.encode("utf-16-be", "surrogatepass")) // 2


@lru_cache(maxsize=4096)
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


def index_key_hashes(keys: list[str]) -> list[int]:
    """index_key_hash for many keys at once.

    Per character in Python a hash costs microseconds.  Here the hashCode
    s[0]*31^(n-1) + ... + s[n-1] is computed for all keys together in numpy:
    every UTF-16 code unit times its power of 31 (mod 2^32), summed per key.
    """
    if len(keys) < 32:
        return [index_key_hash(k) for k in keys]
    import numpy as np

    joined = "".join(keys).encode("utf-16-be", "surrogatepass")
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    if len(joined) != 2 * int(lengths.sum()):  # characters outside the BMP count twice
        lengths = np.fromiter((len(k.encode("utf-16-be", "surrogatepass")) >> 1 for k in keys),
                              dtype=np.int64, count=len(keys))
    if not lengths.all():
        return [index_key_hash(k) for k in keys]
    units = np.frombuffer(joined, dtype=">u2").astype(np.uint64)
    starts = np.cumsum(lengths) - lengths
    exponent = np.repeat(starts + lengths - 1, lengths) - np.arange(len(units))
    products = (units * _powers_of_31(int(lengths.max()))[exponent]) & 0xFFFFFFFF
    h = np.add.reduceat(products, starts) & 0xFFFFFFFF
    signed = h.astype(np.int64)
    signed[signed >= 1 << 31] -= 1 << 32
    result = np.abs(signed)
    result[signed == -(1 << 31)] = 0
    return result.tolist()


_POWERS = None


def _powers_of_31(n: int):
    """31^0 .. 31^(n-1) mod 2^32, as uint64 (grown on demand)."""
    global _POWERS
    import numpy as np

    if _POWERS is None or len(_POWERS) < n:
        size = max(n, 256)
        powers = np.empty(size, dtype=np.uint64)
        value = 1
        for i in range(size):
            powers[i] = value
            value = (value * 31) & 0xFFFFFFFF
        _POWERS = powers
    return _POWERS


def parse_properties(text: str) -> list[tuple[int, str, str]]:
    """java.util.Properties syntax: key=value / key:value / key value, # and ! comments,
    backslash line continuation.  Returns (line number, key, value)."""
    entries = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while line.endswith("\\") and not line.endswith("\\\\") and i < len(lines):
            line = line[:-1] + lines[i].lstrip()
            i += 1
        key_end = len(line)
        for pos, ch in enumerate(line):
            if ch in "=: \t":
                key_end = pos
                break
        key = line[:key_end]
        rest = line[key_end:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        entries.append((start + 1, key, rest))
    return entries
