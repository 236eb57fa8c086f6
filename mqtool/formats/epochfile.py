"""The controller's epoch file (epochFileCheckpoint): which epoch wrote which commitlog offsets.

A text file (CheckpointFile in rocketmq-all-5.3.3): the number of entries, the CRC32 of the
entry lines (java.util.zip.CRC32 & 0x7FFFFFFF; 0 means unchecked), then one line
"<epoch>-<startOffset>" per entry, each line ended by the platform's separator ("\\n").  An
entry ends where the next one starts; the last one never ends.  The broker writes the previous
content to epochFileCheckpoint.bak before each write, and reads the .bak when the file is
missing, empty or does not check.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

NOT_CHECKED = 0


@dataclass(frozen=True)
class EpochEntry:
    epoch: int
    start_offset: int


class EpochFileError(ValueError):
    """The text is not an epoch file; `line` is the 1-based line that says so."""

    def __init__(self, reason: str, line: int):
        super().__init__(f"line {line}: {reason}")
        self.reason, self.line = reason, line


def crc_of(body: str) -> int:
    return zlib.crc32(body.encode("utf-8")) & 0x7FFFFFFF


def parse(text: str) -> list[EpochEntry]:
    """The entries of an epoch file, checked as the broker checks them (count and CRC)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        raise EpochFileError("needs a count and a CRC line", len(lines) + 1)
    try:
        count, crc = int(lines[0]), int(lines[1])
    except ValueError:
        raise EpochFileError("the count and the CRC must be numbers", 1 if not lines[0].strip("-").isdigit() else 2) \
            from None
    entries = []
    for number, line in enumerate(lines[2:], start=3):
        epoch, sep, start = line.partition("-")
        if not sep or not epoch.isdigit() or not start.isdigit():
            raise EpochFileError(f"{line!r} is not <epoch>-<startOffset>", number)
        entries.append(EpochEntry(int(epoch), int(start)))
    if len(entries) != count:
        raise EpochFileError(f"says {count} entries, holds {len(entries)}", 1)
    body = "".join(line + "\n" for line in lines[2:])
    if crc != NOT_CHECKED and crc != crc_of(body):
        raise EpochFileError(f"CRC {crc} does not match the entries' {crc_of(body)}", 2)
    return entries


def render(entries: list[EpochEntry]) -> str:
    body = "".join(f"{e.epoch}-{e.start_offset}\n" for e in entries)
    return f"{len(entries)}\n{crc_of(body)}\n{body}"
