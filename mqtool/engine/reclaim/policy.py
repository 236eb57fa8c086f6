"""What reclaim may do and when: Policy (a run's options), Levels (the disk ratios), DiskState,
deleteWhen's hours, and how times and sizes are said.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from mqtool.errors import UsageError
from mqtool.formats.topicnames import SCHEDULE_TOPIC

HOUR_MS = 3600 * 1000
CQ_DESTROY_INTERVAL_MS = 1000 * 60      # ConsumeQueue: mappedFile.destroy(1000 * 60)
FIRST_RUN_DELAY_MS = 1000 * 60          # a broker's first clean-up runs a minute after start

# ---------------------------------------------------------------------- policy and levels

@dataclass
class Policy:
    """What one run may do.  The store's own service runs the defaults (a broker's rules);
    `mqtool clean` fills in its options."""

    retention_ms: int | None = None     # None: fileReservedTime hours; negative: no age limit
    retention_bytes: int | None = None  # Kafka's retention.bytes, over the commitlog's size
    ignore_window: bool = False         # --now
    force: bool = False                 # --force
    max_files: int | None = None        # None: deleteFileBatchMax
    delete_delay_ms: int = 0            # 0: delete at once; more: stage in STORE/trash/
    dry_run: bool = False


@dataclass
class Levels:
    """The disk levels as fractions, after the broker's own clamping (and notes saying so)."""

    max_used: float
    warning: float
    force: float
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, config) -> "Levels":
        notes = []
        max_used = config.disk_max_used_space_ratio() / 100   # the clamp note is config.effective_warnings'
        warning = config.diskSpaceWarningLevelRatio / 100
        force = config.diskSpaceCleanForciblyRatio / 100
        if config.is_5x:   # 5.x clamps both (CleanCommitLogService.getDiskSpace*Ratio); 4.9.8 does not
            for name, value, low, high in (("diskSpaceWarningLevelRatio", warning, 0.35, 0.90),
                                           ("diskSpaceCleanForciblyRatio", force, 0.30, 0.85)):
                clamped = min(max(value, low), high)
                if clamped != value:
                    notes.append(f"{name}={value * 100:g} is clamped to {clamped * 100:g} "
                                 f"(a 5.x broker accepts {low * 100:g}..{high * 100:g})")
                    if name.startswith("diskSpaceWarning"):
                        warning = clamped
                    else:
                        force = clamped
        return cls(max_used, warning, force, notes)


@dataclass
class DiskState:
    """How full the store's disk is: the fuller of the commitlog's (the emptiest of its
    directories, as the broker takes) and the consume queues' file system."""

    ratio: float = -1.0     # -1: unknown
    used: int = 0
    total: int = 0
    path: str | None = None

    @property
    def known(self) -> bool:
        return self.total > 0

    def projected(self, freed: int) -> float:
        return (self.used - freed) / self.total if self.known else -1.0

    def to_json(self) -> dict:
        return {"ratio": round(self.ratio, 6), "usedBytes": self.used, "totalBytes": self.total,
                "path": self.path}


def pct(ratio: float) -> str:
    return f"{ratio * 100:.1f} %" if ratio >= 0 else "unknown"


def parse_delete_when(text: str) -> list[int]:
    """deleteWhen: hours of the day separated by ';' (UtilAll.isItTimeToDo), e.g. `04` or `03;04`."""
    words = [w.strip() for w in str(text).split(";")]
    while len(words) > 1 and not words[-1]:    # as Java's String.split: trailing empty parts dropped
        words.pop()
    hours = []
    for word in words:
        if not re.fullmatch(r"[0-9]+", word) or int(word) > 23:
            raise UsageError(f"deleteWhen={text!r}: expected hours of the day (0..23) separated by ';', "
                             "e.g. 04 or 03;04")
        hours.append(int(word))
    return hours


def in_window(delete_when: str, now_ms: int) -> bool:
    """Is the local hour (the broker's JVM zone) one of deleteWhen's?"""
    return time.localtime(now_ms / 1000).tm_hour in parse_delete_when(delete_when)


# ---------------------------------------------------------------------- text helpers

def hours_text(ms: int) -> str:
    hours = ms / HOUR_MS
    if abs(hours) >= 1:
        return f"{hours:.1f} h"
    return f"{ms / 60000:.1f} min" if abs(ms) >= 60000 else f"{ms / 1000:.1f} s"


def ago_text(ms: int) -> str:
    return hours_text(max(ms, 0))


def size_text(n: int) -> str:
    import humanize

    return f"{humanize.naturalsize(n, binary=True)} ({n} bytes)"


def clock_text(ms: int) -> str:
    from mqtool.storage.settings import iso

    return iso(ms) or str(ms)


# ---------------------------------------------------------------------- clean's options

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)?\s*$")
_DURATION_MS = {"ms": 1, "s": 1000, "": 1000, "m": 60000, "min": 60000, "h": 3600000, "d": 86400000}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)


def parse_duration(text: str, what: str) -> int:
    """Milliseconds from `60`, `60s`, `500ms`, `5m`, `1h`, `1d` (a bare number is seconds)."""
    match = _DURATION.match(text or "")
    if not match:
        raise UsageError(f"{what} {text!r}: expected a duration such as 60s, 500ms, 5m or 1h")
    return int(float(match.group(1)) * _DURATION_MS[match.group(2) or ""])


def parse_size(text: str, what: str) -> int:
    """Bytes from `1073741824`, `10G`, `10GiB`, `512M` (K, M, G, T, P are powers of 1024)."""
    match = _SIZE.match(text or "")
    if not match:
        raise UsageError(f"{what} {text!r}: expected bytes, or a size such as 512M or 10G")
    power = "kmgtp".find(match.group(2).lower()) + 1 if match.group(2) else 0
    return int(float(match.group(1)) * 1024 ** power)


def retention_ms(ms, minutes, hours) -> int | None:
    """Kafka's log.retention.ms / .minutes / .hours: the most precise one given wins; -1 is no limit."""
    for value, unit, name in ((ms, 1, "--retention-ms"), (minutes, 60000, "--retention-minutes"),
                              (hours, 3600000, "--retention-hours")):
        if value is not None:
            if value < -1:
                raise UsageError(f"{name} {value}: expected 0 or more, or -1 for no time limit")
            return -1 if value == -1 else value * unit
    return None
