"""How full a store's disk is: the probe the reclaim rules read, injectable like the clock.

A broker asks UtilAll.getDiskPartitionSpaceUsedPercent, which is
(File.getTotalSpace - File.getFreeSpace) / File.getTotalSpace: free space
counts the blocks reserved for root as free, so it is statvfs' f_bfree, not
the f_bavail that `df` and shutil.disk_usage report.  DiskUsage does the same.
Tests (and what-if tools) pass their own DiskUsage subclass to MessageStore;
nothing else in mqtool calls statvfs for the reclaim rules.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Usage:
    """One file system: total and used bytes, as the broker counts them."""

    total: int
    used: int

    @property
    def ratio(self) -> float:
        """The used fraction, 0.0 .. 1.0 (-1.0 when the size is unknown, as the broker's -1)."""
        return self.used / self.total if self.total > 0 else -1.0


class DiskUsage:
    """The real disks, through statvfs."""

    def usage(self, path) -> Usage | None:
        """The file system holding path (or its nearest existing parent); None if none exists."""
        path = Path(path)
        while not path.exists():
            if path.parent == path:
                return None
            path = path.parent
        try:
            st = os.statvfs(path)
        except OSError:
            return None
        total = st.f_blocks * st.f_frsize
        return Usage(total=total, used=total - st.f_bfree * st.f_frsize)
