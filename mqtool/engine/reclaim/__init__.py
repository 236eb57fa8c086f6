"""Reclaiming disk space: RocketMQ's expiry rules, Kafka-style retention, forced cleaning.

The rules live here and only here.  The store runs them on its own schedule
(ReclaimService, every cleanResourceInterval ms, as a broker's
CleanCommitLogService and CleanConsumeQueueService do), and `mqtool clean` runs
them from cron with more options (Policy).

Commitlog (MappedFileQueue.deleteExpiredFileByTime): files oldest first, never the
last one (the file being written), stopping at the first file that may not go, so
the commitlog never gets a hole; at most deleteFileBatchMax (10) files a run,
deleteCommitLogFilesInterval ms between two.  A file may go when

- it is expired (last modified fileReservedTime hours ago or earlier, or
  --retention-*), or the commitlog is larger than --retention-bytes; and it is
  time: the hour is one of deleteWhen's, or the disk is above
  diskMaxUsedSpaceRatio (clamped to 10..95), or above the force-clean level, or
  --now / --force;
- the disk is above diskSpaceCleanForciblyRatio with cleanFileForciblyEnable:
  unexpired files go too, while the disk stays above that level;
- --force: unexpired files go while the disk is above diskMaxUsedSpaceRatio (or,
  with --retention-bytes, while the commitlog is larger).

A broker deletes a whole batch once a rule fires and looks at the disk again 10 s
later; mqtool projects the disk after each file and stops as soon as the level is
met, so it never deletes more than a broker would.  A file a reader still holds is
shut down (no new reader can take it) and removed once released, or forcibly
destroyMapedFileIntervalForcibly ms after the first attempt.

Then consume queues and the index (ConsumeQueue.deleteExpiredFile,
IndexService.deleteExpiredFile): files whose last entry points below the
commitlog's new minimum offset go, oldest first, never a queue's or the index's
last file, and each queue's minimum offset becomes its first unit at or above
that offset (correctMinOffset).

With a delete delay, files are staged in STORE/trash/ (mqtool/engine/trash.py) rather
than deleted, a later run removes them once due, and `undo` puts them back.

policy (options, levels, deleteWhen), report (decisions and the Report), view (the store as reclaim
sees it), reclaimer (planning and applying a run), undo, service (the store's own thread).
"""

from mqtool.engine.reclaim.policy import Levels, Policy, in_window, parse_delete_when, pct  # noqa: F401
from mqtool.engine.reclaim.reclaimer import Reclaimer  # noqa: F401
from mqtool.engine.reclaim.report import DELETE, KEEP, NOT_RESTORED, REMOVE_STAGED, RESTORE, STAGE, Report  # noqa: F401
from mqtool.engine.reclaim.service import ReclaimService  # noqa: F401
from mqtool.engine.reclaim.view import StoreView, readonly_view  # noqa: F401
