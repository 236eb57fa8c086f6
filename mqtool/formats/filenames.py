"""File names: 20-digit offsets for commitlog and consume queue, timestamps for index files."""

from __future__ import annotations

import re
from datetime import datetime

# ASCII digits only, and the whole name: `\d` would accept other scripts' digits and `$`
# a trailing newline, neither of which a broker ever writes.
OFFSET_NAME_RE = re.compile(r"[0-9]{20}")
INDEX_NAME_RE = re.compile(r"[0-9]{17}")


def offset_to_name(offset: int) -> str:
    """UtilAll.offset2FileName: the offset as 20 zero-padded digits."""
    if offset < 0:
        raise ValueError(f"file offsets are never negative ({offset})")
    return f"{offset:020d}"


def name_to_offset(name: str) -> int:
    """The start offset a commitlog or consume-queue file name encodes."""
    if not OFFSET_NAME_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not a 20-digit offset file name")
    return int(name)


def is_offset_name(name: str) -> bool:
    return bool(OFFSET_NAME_RE.fullmatch(name))


def index_name(millis: int, tz=None) -> str:
    """An index file's name: its creation time, yyyyMMddHHmmssSSS, in the broker's zone."""
    seconds = millis // 1000
    moment = datetime.fromtimestamp(seconds, tz) if tz is not None else datetime.fromtimestamp(seconds)
    return moment.strftime("%Y%m%d%H%M%S") + f"{millis % 1000:03d}"


def index_name_time(name: str) -> datetime:
    """The creation time an index file name records (zone unknown: naive)."""
    if not INDEX_NAME_RE.fullmatch(name):
        raise ValueError(f"{name!r} is not an index file name (yyyyMMddHHmmssSSS)")
    return datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(microsecond=int(name[14:]) * 1000)


def is_index_name(name: str) -> bool:
    return bool(INDEX_NAME_RE.fullmatch(name))
