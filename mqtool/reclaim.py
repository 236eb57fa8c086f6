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

With a delete delay, files are staged in STORE/trash/ (mqtool/trash.py) rather
than deleted, a later run removes them once due, and `undo` puts them back.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.errors import MqError, UsageError
from mqtool.flush import ServiceThread
from mqtool.formats.consumequeue import UNIT_SIZE, UNIT_STRUCT
from mqtool.message import SERVICE_NOT_AVAILABLE, PutResult
from mqtool.trash import Trash

HOUR_MS = 3600 * 1000
CQ_DESTROY_INTERVAL_MS = 1000 * 60      # ConsumeQueue: mappedFile.destroy(1000 * 60)
FIRST_RUN_DELAY_MS = 1000 * 60          # a broker's first clean-up runs a minute after start
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

# decision actions
DELETE, STAGE, KEEP, REMOVE_STAGED, RESTORE, NOT_RESTORED = (
    "delete", "stage", "keep", "remove-staged", "restore", "not-restored")
ACTIONS_THAT_CHANGE = {DELETE, STAGE, REMOVE_STAGED, RESTORE}


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


# ---------------------------------------------------------------------- decisions and reports

@dataclass
class Decision:
    kind: str            # commitlog, consumequeue, index or trash
    file: str            # path relative to the store
    action: str          # delete, stage, keep, remove-staged, restore, not-restored
    reason: str          # a stable code (expired, outside-window, active, ...)
    why: str             # the same for people
    size: int = 0
    details: dict = field(default_factory=dict)
    target: object = field(default=None, repr=False)   # the MappedFile / IndexFile / Staged it is about

    def to_json(self) -> dict:
        return {"type": "decision", "kind": self.kind, "file": self.file, "action": self.action,
                "reason": self.reason, "why": self.why, "size": self.size, **self.details}


@dataclass
class QueueChange:
    topic: str
    queue_id: int
    min_before: int
    min_after: int
    files_removed: int = 0

    def to_json(self) -> dict:
        return {"type": "queue", "topic": self.topic, "queueId": self.queue_id,
                "minOffsetBefore": self.min_before, "minOffsetAfter": self.min_after,
                "messagesRemoved": max(0, self.min_after - self.min_before), "filesRemoved": self.files_removed}


@dataclass
class Loss:
    """Messages a consumer group had not read when they were removed."""

    group: str
    topic: str
    queue_id: int
    consumer_offset: int
    unread: int

    def to_json(self) -> dict:
        return {"type": "loss", "group": self.group, "topic": self.topic, "queueId": self.queue_id,
                "consumerOffset": self.consumer_offset, "unreadRemoved": self.unread}


@dataclass
class Report:
    """What a run did (or, dry, would do), and why."""

    operation: str                      # clean or undo
    dry_run: bool
    now_ms: int
    disk: DiskState
    levels: Levels
    delete_when: str
    window_open: bool
    min_offset_before: int
    min_offset_after: int = 0
    decisions: list[Decision] = field(default_factory=list)
    queues: list[QueueChange] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    offsets_known: bool = False         # consumerOffset.json was there to tell consumed from not
    warnings: list[str] = field(default_factory=list)
    incomplete: bool = False            # undo: staged files that could not go back
    failed: int = 0                     # files that could not be deleted or staged (kept, reported)
    offsets_unreadable: bool = False    # consumerOffset.json is there but cannot be read

    def count(self, kind: str | None = None, actions=ACTIONS_THAT_CHANGE) -> int:
        return sum(1 for d in self.decisions if d.action in actions and (kind is None or d.kind == kind))

    @property
    def changed(self) -> bool:
        return self.count() > 0 or any(q.min_after != q.min_before for q in self.queues)

    @property
    def messages_removed(self) -> int:
        return sum(max(0, q.min_after - q.min_before) for q in self.queues)

    @property
    def unread_removed(self) -> int | None:
        return sum(l.unread for l in self.losses) if self.offsets_known else None

    def to_json(self) -> dict:
        return {"type": "summary", "operation": self.operation, "dryRun": self.dry_run, "now": self.now_ms,
                "disk": self.disk.to_json(),
                "levels": {"diskMaxUsedSpaceRatio": self.levels.max_used,
                           "diskSpaceWarningLevelRatio": self.levels.warning,
                           "diskSpaceCleanForciblyRatio": self.levels.force},
                "deleteWhen": self.delete_when, "inDeleteWhenHours": self.window_open,
                "commitlogMinOffset": {"before": self.min_offset_before, "after": self.min_offset_after},
                "deleted": self.count(actions={DELETE}), "staged": self.count(actions={STAGE}),
                "removedStaged": self.count(actions={REMOVE_STAGED}), "restored": self.count(actions={RESTORE}),
                "notRestored": self.count(actions={NOT_RESTORED}),
                "messagesRemoved": self.messages_removed, "unreadMessagesRemoved": self.unread_removed,
                "changed": self.changed, "warnings": self.warnings, "notes": self.levels.notes}


# ---------------------------------------------------------------------- the store as reclaim sees it

@dataclass
class StoreView:
    """What the rules need of a store: its files (live objects of an open store, or read-only
    maps for a dry run), its clock and disk probe, and the lock appends take."""

    config: object
    layout: object
    clock: object
    disk_usage: object
    commitlog: object                    # MappedFileQueue
    queues: dict                         # (topic, queueId) -> ConsumeQueue
    index_files: list                    # IndexFile, oldest first
    lock: object = field(default_factory=contextlib.nullcontext)
    adopt: object = None                 # gives new trash directories the store's owner
    writable: bool = True


@contextlib.contextmanager
def readonly_view(layout, config, *, clock, disk_usage, leave_out=()):
    """A view over a store nobody has open, mapped read-only: for plans (--dry-run) that must
    change nothing, not even by recovering.  leave_out: commitlog files a recovery would remove
    (beyond its cut), which a real run never sees."""
    from mqtool import commitlog, consumequeue
    from mqtool.indexfile import IndexFile

    queue = commitlog.open_queue(layout)
    for mf in [mf for mf in queue.files if mf.path in leave_out]:
        queue.files.remove(mf)
        mf.close()
    queues, index_files = {}, []
    try:
        for cq in consumequeue.open_all(layout):
            queues[(cq.topic, cq.queue_id)] = cq
        slots, entries = layout.index_geometry()
        for info in layout.index_files():
            try:
                index_files.append(IndexFile(info.path, slots, entries))
            except MqError:
                continue
        yield StoreView(config=config, layout=layout, clock=clock, disk_usage=disk_usage, commitlog=queue,
                        queues=queues, index_files=index_files, writable=False)
    finally:
        queue.close()
        for cq in queues.values():
            cq.close()
        for f in index_files:
            f.close()


# ---------------------------------------------------------------------- queue offsets

def _unit(cq, queue_offset: int) -> tuple[int, int] | None:
    """(commitlog offset, size) of the unit at queue_offset, read raw."""
    unit = cq.raw_unit_at(queue_offset)
    return None if unit is None else (unit.commitlog_offset, unit.size)


def queue_min_offset(cq, phy_min_offset: int) -> int:
    """A queue's minimum offset: its first unit pointing at or above the commitlog's minimum
    offset (ConsumeQueue.correctMinOffset), found by bisection since units point ever higher.
    The broker looks in the queue's first file only and keeps its old value when none there
    qualifies; here the search goes on, and a queue left with none is empty (min = max)."""
    files = cq.files.files
    if not files:
        return 0
    lo = files[0].file_from_offset // UNIT_SIZE
    hi = (files[-1].file_from_offset + files[-1].file_size) // UNIT_SIZE

    def at_or_above(queue_offset: int) -> bool:
        # valid units below the minimum come first, then valid units at or above it, then the
        # unwritten (all-zero) tail: true from the answer on
        unit = _unit(cq, queue_offset)
        return unit is None or unit[1] <= 0 or unit[0] >= phy_min_offset

    if at_or_above(lo):
        return lo
    while lo < hi:
        mid = (lo + hi) // 2
        if at_or_above(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _last_unit(mf) -> tuple[int, int]:
    """The last unit of a consume queue file (what deleteExpiredFileByOffset reads)."""
    pos = mf.file_size - UNIT_SIZE
    if pos < 0 or pos + UNIT_SIZE > len(mf.buf):
        return -1, 0
    offset, size, _ = UNIT_STRUCT.unpack_from(mf.buf, pos)
    return offset, size


# ---------------------------------------------------------------------- the reclaimer

class Reclaimer:
    def __init__(self, view: StoreView):
        self.view = view
        self.disk_full = False
        self.disk_full_remark: str | None = None
        self.last_report: Report | None = None
        self._run_lock = threading.Lock()

    # ---------------------------------------------------------------- disk
    def disk_state(self) -> DiskState:
        probe, layout = self.view.disk_usage, self.view.layout
        physic = None
        for directory in layout.commitlog_dirs:
            usage = probe.usage(directory)
            if usage is not None and (physic is None or usage.ratio < physic[0].ratio):
                physic = (usage, directory)
        candidates = [physic] if physic else []
        logics = probe.usage(layout.consumequeue_dir)
        if logics is not None:
            candidates.append((logics, layout.consumequeue_dir))
        if not candidates:
            return DiskState()
        usage, path = max(candidates, key=lambda c: c[0].ratio)
        return DiskState(usage.ratio, usage.used, usage.total, str(path))

    def check_disk(self) -> DiskState:
        """Mark the store full (puts refused) above diskSpaceWarningLevelRatio, as the broker's
        runningFlags.getAndMakeDiskFull does, and clear the mark below it."""
        disk = self.disk_state()
        levels = Levels.from_config(self.view.config)
        self.disk_full = disk.known and disk.ratio > levels.warning
        self.disk_full_remark = (
            f"the disk is {pct(disk.ratio)} full ({disk.path}), above diskSpaceWarningLevelRatio "
            f"{pct(levels.warning)}: the store takes no new messages until space is reclaimed "
            "(mqtool clean)") if self.disk_full else None
        return disk

    def refuse_puts(self, count: int) -> list[PutResult] | None:
        """The puts' results while the disk is full (SERVICE_NOT_AVAILABLE, saying why), else None."""
        if not self.disk_full:
            return None
        return [PutResult(SERVICE_NOT_AVAILABLE, remark=self.disk_full_remark) for _ in range(count)]

    # ---------------------------------------------------------------- clean
    def run(self, policy: Policy | None = None) -> Report:
        """One reclaim run: remove staged files that are due, then commitlog files by the rules,
        then consume-queue and index files left pointing below the commitlog."""
        policy = policy or Policy()
        if not self.view.writable and not policy.dry_run:
            raise UsageError("a read-only view can only plan (dry run)")
        with self._run_lock:
            report = self._run(policy)
        self.last_report = report
        return report

    def _run(self, policy: Policy) -> Report:
        view, config = self.view, self.view.config
        now = view.clock.now_ms()
        trash = Trash(view.layout.root, adopt=view.adopt)
        levels = Levels.from_config(config)
        window = in_window(config.deleteWhen, now)
        report = Report("clean", policy.dry_run, now, DiskState(), levels, config.deleteWhen, window,
                        min_offset_before=max(view.commitlog.min_offset, 0))
        bad_hours = [h for h in parse_delete_when(config.deleteWhen) if h > 23]
        if bad_hours:
            report.warnings.append(f"deleteWhen={config.deleteWhen}: hour(s) {bad_hours} never come")

        for entry in trash.due(now):
            report.decisions.append(Decision(
                "trash", f"trash/{entry.trash}", REMOVE_STAGED, "due",
                f"staged {_ago(now - entry.staged_at)} ago ({entry.reason}); its delete delay has passed",
                entry.size, {"original": entry.path}))
            if not policy.dry_run:
                trash.remove(entry)
        pending = sum(e.size for e in trash.entries if e.due_at > now)
        report.disk = disk = self.check_disk() if not policy.dry_run else self.disk_state()

        chosen = self._plan_commitlog(policy, report, pending)
        if policy.dry_run:
            remaining = [mf for mf in view.commitlog.files if mf not in {d.target for d in chosen}]
            new_min = remaining[0].file_from_offset if remaining else report.min_offset_before
        else:
            self._apply_commitlog(chosen, policy, report, trash, run=now)
            new_min = max(view.commitlog.min_offset, 0)
        report.min_offset_after = new_min
        self._clean_queues(new_min, report.min_offset_before, policy, report, trash, run=now)
        self._clean_index(new_min, policy, report, trash, run=now)
        self._losses(report)
        self._warn(report, policy, disk, levels)
        return report

    def _plan_commitlog(self, policy: Policy, report: Report, pending: int) -> list[Decision]:
        view, config, levels, disk = self.view, self.view.config, report.levels, report.disk
        files = list(view.commitlog.files)
        mtimes = {Path(f.path): f.mtime for f in view.layout.commitlog_files()}   # the store's listing
        # the broker's values as the broker reads them: it checks the batch limit after a deletion
        # (0 still deletes one file a run), and a negative fileReservedTime has every file expired
        max_files = policy.max_files if policy.max_files is not None else max(1, config.deleteFileBatchMax)
        retention_ms = (policy.retention_ms if policy.retention_ms is not None
                        else max(0, config.fileReservedTime * HOUR_MS))
        retention_text = (f"--retention {_hours(retention_ms)}" if policy.retention_ms is not None
                          else f"fileReservedTime {config.fileReservedTime} h")
        above_max = disk.known and disk.ratio > levels.max_used
        clean_immediately = disk.known and disk.ratio > levels.force   # above warning implies above force
        # 5.x treats the force level itself as a reason to clean now; 4.9.8 only once the disk is also
        # above diskMaxUsedSpaceRatio (isSpaceToDelete)
        space_to_delete = above_max or (clean_immediately and config.is_5x)
        clean_at_once = config.cleanFileForciblyEnable and clean_immediately
        time_to_delete = report.window_open or space_to_delete or policy.ignore_window or policy.force
        action = STAGE if policy.delete_delay_ms > 0 else DELETE
        commitlog_bytes = sum(mf.file_size for mf in files)
        freed = pending
        chosen: list[Decision] = []

        def decide(mf, act, reason, why, **details):
            d = Decision("commitlog", self._rel(mf.path), act, reason, why, mf.file_size,
                         {"startOffset": mf.file_from_offset, **details}, target=mf)
            report.decisions.append(d)
            return d

        now = report.now_ms
        for i, mf in enumerate(files):
            mtime = mtimes.get(Path(mf.path))
            mtime_ms = int(mtime * 1000) if mtime is not None else now   # not listed: never taken as old
            age = now - mtime_ms
            info = {"lastModified": mtime_ms, "ageHours": round(age / HOUR_MS, 2)}
            if i == len(files) - 1:
                decide(mf, KEEP, "active", "the file being written is never deleted", **info)
                break
            if len(chosen) >= max_files:
                decide(mf, KEEP, "batch-limit", f"at most {max_files} files a run "
                       "(deleteFileBatchMax, --max-files); the next run goes on", **info)
                break
            projected = disk.projected(freed)
            expired = retention_ms >= 0 and age >= retention_ms
            over_bytes = policy.retention_bytes is not None and commitlog_bytes > policy.retention_bytes
            if not mf.available:
                reason, why = "hanged", ("its deletion began in an earlier run while a reader held it "
                                         "(redeleteHangedFile)")
            elif expired or over_bytes:
                if expired:
                    reason, why = "expired", (f"expired: last modified {_hours(age)} ago, "
                                              f"{retention_text} (expired by {_hours(age - retention_ms)})")
                else:
                    reason, why = "retention-bytes", (f"the commitlog is {_size(commitlog_bytes)}, over "
                                                      f"--retention-bytes {_size(policy.retention_bytes)}")
                if not time_to_delete:
                    decide(mf, KEEP, "outside-window",
                           f"{why}, but it is not time: the hour is not in deleteWhen={config.deleteWhen} and "
                           f"the disk ({pct(disk.ratio)}) is not above diskMaxUsedSpaceRatio "
                           f"{pct(levels.max_used)} (--now cleans outside those hours)", **info)
                    break
                if not report.window_open and space_to_delete and not (policy.ignore_window or policy.force):
                    level = (f"diskMaxUsedSpaceRatio {pct(levels.max_used)}" if above_max
                             else f"the force-clean level {pct(levels.force)}")
                    why += f"; outside the deleteWhen hours, because the disk ({pct(disk.ratio)}) is above {level}"
            elif clean_at_once and time_to_delete and projected > levels.force:
                reason, why = "disk-force-level", (
                    f"not expired, but the disk is at {pct(projected)}, above diskSpaceCleanForciblyRatio "
                    f"{pct(levels.force)} with cleanFileForciblyEnable: oldest files go first")
            elif policy.force and self._force_target_missed(policy, commitlog_bytes, projected, levels):
                reason, why = "forced", (
                    f"not expired (last modified {_hours(age)} ago), deleted by --force: " +
                    (f"the commitlog is {_size(commitlog_bytes)}, over --retention-bytes"
                     if policy.retention_bytes is not None else
                     f"the disk is at {pct(projected)}, above diskMaxUsedSpaceRatio {pct(levels.max_used)}"))
            else:
                decide(mf, KEEP, "not-expired", self._why_kept(policy, age, retention_ms, retention_text,
                                                               projected, levels, clean_at_once), **info)
                break
            held = mf.refcount - 1 if mf.available else mf.refcount
            if held > 0:
                info["heldBy"] = held
                why += f" (held by {held} reader(s) now)"
            chosen.append(decide(mf, action, reason, why, **info))
            commitlog_bytes -= mf.file_size
            freed += mf.file_size
        return chosen

    @staticmethod
    def _force_target_missed(policy, commitlog_bytes, projected, levels) -> bool:
        if policy.retention_bytes is not None:
            return commitlog_bytes > policy.retention_bytes
        return projected > levels.max_used

    @staticmethod
    def _why_kept(policy, age, retention_ms, retention_text, projected, levels, clean_at_once) -> str:
        if retention_ms < 0:
            why = "no age limit (--retention-ms -1)"
        else:
            why = (f"not expired: last modified {_hours(age)} ago, {retention_text} "
                   f"(expires in {_hours(retention_ms - age)})")
        if policy.retention_bytes is not None:
            why += f"; the commitlog is within --retention-bytes {_size(policy.retention_bytes)}"
        if clean_at_once:
            why += f"; the disk will be at {pct(projected)}, not above the force-clean level {pct(levels.force)}"
        elif policy.force:
            why += f"; --force target met: the disk will be at {pct(projected)}" + (
                "" if policy.retention_bytes is not None else
                f", not above diskMaxUsedSpaceRatio {pct(levels.max_used)}")
        return why

    def _apply_commitlog(self, chosen, policy, report, trash, run) -> None:
        view, config = self.view, self.view.config
        for n, decision in enumerate(chosen):
            mf = decision.target
            if n:
                self._pause(config.deleteCommitLogFilesInterval)
            now = view.clock.now_ms()
            mf.shutdown(config.destroyMapedFileIntervalForcibly, now)
            if not mf.is_cleanup_over():
                decision.action, decision.reason = KEEP, "referenced"
                decision.why = (f"held by {mf.refcount} reader(s): shut down now (no new reader can take it); "
                                "deleted when released, or forcibly destroyMapedFileIntervalForcibly "
                                f"({config.destroyMapedFileIntervalForcibly // 1000} s) after "
                                f"{_clock_text(mf.first_shutdown_timestamp)}")
                at = report.decisions.index(decision)   # oldest first, no holes: the rest wait
                report.decisions[at + 1:] = [d for d in report.decisions[at + 1:] if d.kind != "commitlog"]
                return
            with view.lock:
                view.commitlog.files.remove(mf)
            if not self._dispose(mf.path, decision, policy, trash, now, run, report,
                                 start_offset=mf.file_from_offset):
                self._map_back("commitlog", mf.path)
                at = report.decisions.index(decision)   # oldest first, no holes: the rest wait
                report.decisions[at + 1:] = [d for d in report.decisions[at + 1:] if d.kind != "commitlog"]
                return

    def _clean_queues(self, new_min, old_min, policy, report, trash, run) -> None:
        """CleanConsumeQueueService: per queue, files whose last unit points below new_min go
        (never the last file), then the queue's minimum offset is corrected."""
        view = self.view
        action = STAGE if policy.delete_delay_ms > 0 else DELETE
        interval = view.config.deleteConsumeQueueFilesInterval
        for (topic, queue_id), cq in sorted(view.queues.items()):
            files = list(cq.files.files)
            if not files:
                continue
            before = queue_min_offset(cq, old_min)
            after = queue_min_offset(cq, new_min)
            victims = []
            for mf in files[:-1]:
                offset, size = _last_unit(mf)
                if size <= 0 or offset >= new_min:
                    break
                victims.append(mf)
            for mf in victims:
                first_queue_offset = mf.file_from_offset // UNIT_SIZE
                decision = Decision(
                    "consumequeue", self._rel(mf.path), action, "below-min-offset",
                    f"every unit points below the commitlog's minimum offset {new_min} "
                    f"(the last one at {_last_unit(mf)[0]})", mf.file_size,
                    {"topic": topic, "queueId": queue_id, "firstQueueOffset": first_queue_offset}, target=mf)
                report.decisions.append(decision)
                if policy.dry_run:
                    continue
                now = view.clock.now_ms()
                mf.shutdown(CQ_DESTROY_INTERVAL_MS, now)
                if not mf.is_cleanup_over():
                    decision.action, decision.reason = KEEP, "referenced"
                    decision.why = f"held by {mf.refcount} reader(s); the next run retries"
                    break
                with view.lock:
                    cq.files.files.remove(mf)
                if not self._dispose(mf.path, decision, policy, trash, now, run, report,
                                     start_offset=mf.file_from_offset, topic=topic, queue_id=queue_id):
                    self._map_back("consumequeue", mf.path, cq)
                    break
            if victims and not policy.dry_run:
                self._pause(interval)
            if not policy.dry_run:
                cq.min_logic_offset = after * UNIT_SIZE
            if before != after or victims:
                report.queues.append(QueueChange(topic, queue_id, before, after, len(victims)))

    def _clean_index(self, new_min, policy, report, trash, run) -> None:
        """IndexService.deleteExpiredFile: index files whose entries all point below new_min
        (endPhyOffset below it) go, oldest first, never the last one."""
        files = list(self.view.index_files)
        if not files or files[0].end_phy_offset >= new_min:
            return
        action = STAGE if policy.delete_delay_ms > 0 else DELETE
        for f in files[:-1]:
            if f.end_phy_offset >= new_min:
                break
            decision = Decision("index", self._rel(f.path), action, "below-min-offset",
                                f"its last entry (endPhyOffset {f.end_phy_offset}) points below the "
                                f"commitlog's minimum offset {new_min}", f.size,
                                {"endPhyOffset": f.end_phy_offset}, target=f)
            report.decisions.append(decision)
            if policy.dry_run:
                continue
            with self.view.lock:
                self.view.index_files.remove(f)
            f.close()
            if not self._dispose(f.path, decision, policy, trash, self.view.clock.now_ms(), run, report):
                self._map_back("index", f.path)
                break

    def _dispose(self, path, decision, policy, trash, now, run, report, **where) -> bool:
        """Delete a file that has left its queue, or stage it in the trash.  False when the file
        system refused: the file stays, the decision says why, the run goes on (and exits 1)."""
        from mqtool import fsutil

        try:
            if policy.delete_delay_ms > 0:
                entry = trash.stage(path, kind=decision.kind, size=decision.size, now_ms=now,
                                    delay_ms=policy.delete_delay_ms, run=run, reason=decision.reason, **where)
                decision.details["trash"] = f"trash/{entry.trash}"
                decision.details["dueAt"] = entry.due_at
            else:
                Path(path).unlink(missing_ok=True)
                fsutil.fsync_dir(Path(path).parent)
        except OSError as exc:
            verb = "staged" if policy.delete_delay_ms > 0 else "deleted"
            decision.action, decision.reason = KEEP, "failed"
            decision.why = f"could not be {verb}: {exc.strerror or exc}; it stays where it is"
            report.failed += 1
            return False
        return True

    # ---------------------------------------------------------------- consumers
    def _losses(self, report: Report) -> None:
        """Which consumer groups lose messages they have not read (config/consumerOffset.json;
        the delay service's progress in delayOffset.json counts as one more reader)."""
        if not report.queues:
            report.offsets_known = (self.view.layout.config_dir / "consumerOffset.json").exists()
            return
        from mqtool import metafiles
        from mqtool.formats import configjson

        config_dir = self.view.layout.config_dir
        readers, delayed = {}, {}
        try:
            doc = metafiles.read_config_json(config_dir / "consumerOffset.json")
            readers = configjson.consumer_offsets(doc) if doc is not None else {}
        except (MqError, ValueError, TypeError, AttributeError, OverflowError) as exc:
            report.warnings.append(f"cannot read config/consumerOffset.json ({exc}): cannot tell consumed "
                                   "from unread")
            doc = None
            report.offsets_unreadable = True
        report.offsets_known = doc is not None
        try:
            delay = metafiles.read_config_json(config_dir / "delayOffset.json") or {}
            delayed = {int(level) - 1: int(offset) for level, offset in (delay.get("offsetTable") or {}).items()}
        except (MqError, ValueError, TypeError, AttributeError, OverflowError) as exc:
            report.warnings.append(f"cannot read config/delayOffset.json ({exc}): delayed messages' progress "
                                   "unknown")
        if delayed:
            readers[(SCHEDULE_TOPIC, "(delayed delivery)")] = delayed
        for change in report.queues:
            for (topic, group), offsets in sorted(readers.items()):
                if topic != change.topic or change.queue_id not in offsets:
                    continue
                read_to = offsets[change.queue_id]
                unread = change.min_after - max(read_to, change.min_before)
                if unread > 0:
                    report.losses.append(Loss(group, topic, change.queue_id, read_to, unread))

    def _warn(self, report, policy, disk, levels) -> None:
        if disk.known and disk.ratio > levels.warning:
            report.warnings.append(
                f"the disk is {pct(disk.ratio)} full, above diskSpaceWarningLevelRatio {pct(levels.warning)}: "
                "brokers and mqtool append refuse new messages until space is freed")
        if policy.delete_delay_ms > 0 and disk.known and disk.ratio > levels.force and report.count():
            report.warnings.append(
                f"the disk is above the force-clean level ({pct(disk.ratio)} > {pct(levels.force)}), but staged "
                f"files free nothing until their delay ({policy.delete_delay_ms / 1000:g} s) passes: "
                "use --delete-delay 0 to free the space now")
        forced = [d for d in report.decisions if d.reason in ("forced", "disk-force-level") and d.action != KEEP]
        if forced:
            report.warnings.append(f"{len(forced)} commitlog file(s) that had not expired are removed ("
                                   + ("--force" if any(d.reason == "forced" for d in forced)
                                      else "disk above the force-clean level") + ")")
        referenced = [d for d in report.decisions if d.reason == "referenced"]
        for d in referenced:
            report.warnings.append(f"{d.file}: {d.why}")
        if report.messages_removed:
            if not report.offsets_known and not report.offsets_unreadable:
                report.warnings.append(
                    f"{report.messages_removed} message(s) are removed; there is no config/consumerOffset.json, "
                    "so mqtool cannot tell whether consumers had read them")
            elif report.losses:
                groups = sorted({l.group for l in report.losses})
                report.warnings.append(
                    f"{report.unread_removed} message(s) consumers had NOT read are removed "
                    f"({len(groups)} group(s): {', '.join(groups)})")

    # ---------------------------------------------------------------- undo
    def undo(self, dry_run: bool = False) -> Report:
        """Put staged files back, newest run first, as long as each run's commitlog files join
        the commitlog without a hole (a run removed meanwhile, or a later one kept, breaks that)."""
        with self._run_lock:
            return self._undo(dry_run)

    def _undo(self, dry_run: bool) -> Report:
        view = self.view
        now = view.clock.now_ms()
        trash = Trash(view.layout.root, adopt=view.adopt)
        levels = Levels.from_config(view.config)
        report = Report("undo", dry_run, now, self.disk_state(), levels, view.config.deleteWhen,
                        in_window(view.config.deleteWhen, now), min_offset_before=max(view.commitlog.min_offset, 0))
        cl_min = report.min_offset_before if view.commitlog.files else None
        queue_starts = {key: cq.files.files[0].file_from_offset for key, cq in view.queues.items() if cq.files.files}
        blocked = None
        for run in sorted({e.run for e in trash.entries}, reverse=True):
            batch = [e for e in trash.entries if e.run == run]
            logs = sorted((e for e in batch if e.kind == "commitlog"), key=lambda e: e.start_offset, reverse=True)
            end = cl_min
            for e in logs:
                if end is not None and e.start_offset + e.size != end:
                    blocked = (f"staged commitlog file {e.path} ends at {e.start_offset + e.size}, but the "
                               f"commitlog now starts at {end}: putting it back would leave a hole")
                    break
                end = e.start_offset
            if blocked:
                break
            for e in logs:
                if not self._restore(e, report, trash, dry_run):   # the older ones would leave a hole
                    blocked = (f"staged commitlog file {e.path} could not be put back, so the older ones "
                               "would leave a hole")
                    break
                cl_min = e.start_offset
            if blocked:
                break
            queues = sorted((e for e in batch if e.kind == "consumequeue"), key=lambda e: e.start_offset, reverse=True)
            for e in queues:
                key = (e.topic, e.queue_id)
                if key not in view.queues:
                    self._not_restored(e, report, "no-queue", "its queue no longer exists")
                elif queue_starts.get(key) is not None and e.start_offset + e.size != queue_starts[key]:
                    self._not_restored(e, report, "hole", f"the queue now starts at byte {queue_starts[key]}, "
                                                          "not where this file ends")
                else:
                    self._restore(e, report, trash, dry_run)
                    queue_starts[key] = e.start_offset
            for e in (e for e in batch if e.kind == "index"):
                self._restore(e, report, trash, dry_run)
        if blocked:
            decided = {d.details.get("trashed") for d in report.decisions}
            for e in trash.entries:
                if f"trash/{e.trash}" not in decided:
                    self._not_restored(e, report, "hole", blocked)
        report.min_offset_after = cl_min if cl_min is not None else 0
        for (topic, queue_id), cq in sorted(view.queues.items()):
            before = queue_min_offset(cq, report.min_offset_before)
            after = queue_min_offset(cq, report.min_offset_after)
            if not dry_run:
                cq.min_logic_offset = after * UNIT_SIZE
            if before != after:
                report.queues.append(QueueChange(topic, queue_id, before, after))
        return report

    def _not_restored(self, entry, report, reason, why) -> None:
        report.decisions.append(Decision(entry.kind, entry.path, NOT_RESTORED, reason, why, entry.size,
                                         {"trashed": f"trash/{entry.trash}"}))
        report.incomplete = True

    def _restore(self, entry, report, trash, dry_run) -> bool:
        why = f"staged {_ago(report.now_ms - entry.staged_at)} ago ({entry.reason}); put back"
        try:
            if not dry_run:
                path = trash.restore(entry)
                self._reload(entry, path)
        except OSError as exc:
            self._not_restored(entry, report, "cannot-restore", f"cannot put it back: {exc.strerror or exc}")
            return False
        report.decisions.append(Decision(entry.kind, entry.path, RESTORE, "undo", why, entry.size,
                                         {"trashed": f"trash/{entry.trash}"}))
        return True

    def _reload(self, entry, path) -> None:
        """Map a restored file into the open store's queues."""
        cq = self.view.queues[(entry.topic, entry.queue_id)] if entry.kind == "consumequeue" else None
        self._map_back(entry.kind, path, cq)

    def _map_back(self, kind, path, cq=None) -> None:
        """Map a file that is (again) in its folder into the open store: restored by undo, or
        kept because the file system refused its deletion after it had left its queue."""
        from mqtool.indexfile import IndexFile
        from mqtool.mappedfile import MappedFile

        view = self.view
        if kind == "index":
            f = IndexFile(path, view.config.maxHashSlotNum, view.config.maxIndexNum, writable=True)
            with view.lock:
                view.index_files.append(f)
                view.index_files.sort(key=lambda x: x.name)
            return
        files = view.commitlog if kind == "commitlog" else cq.files
        mf = MappedFile(path, files.file_size, writable=True)
        mf.set_positions(mf.file_size)
        with view.lock:
            files.files.insert(0, mf)

    # ---------------------------------------------------------------- helpers
    def _rel(self, path) -> str:
        try:
            return str(Path(path).relative_to(self.view.layout.root))
        except ValueError:
            return str(path)

    def _pause(self, ms: int) -> None:
        """The broker's pause between two deletions: a test's ManualClock is advanced instead
        of sleeping."""
        if ms <= 0:
            return
        clock = self.view.clock
        if hasattr(clock, "advance"):
            clock.advance(ms)
        else:
            time.sleep(ms / 1000)


class ReclaimService(ServiceThread):
    """The store's own reclaim, every cleanResourceInterval ms (a broker's cleanFilesPeriodically):
    the broker's rules, files deleted at once, and the disk-full mark refreshed."""

    name = "ReclaimService"

    def __init__(self, reclaimer: Reclaimer, interval_ms: int):
        super().__init__()
        self.reclaimer = reclaimer
        self.interval_ms = interval_ms
        self.runs = 0
        self.last_error: BaseException | None = None
        self.ran = threading.Event()

    def run(self) -> None:
        self.wait_for_running(FIRST_RUN_DELAY_MS)   # scheduleAtFixedRate(..., 1000 * 60, interval)
        while not self.stopped:
            try:
                self.reclaimer.run(Policy())
            except Exception as exc:  # noqa: BLE001 - the broker logs and tries again next time
                self.last_error = exc
            self.runs += 1
            self.ran.set()
            self.wait_for_running(self.interval_ms)


# ---------------------------------------------------------------------- text helpers

def _hours(ms: int) -> str:
    hours = ms / HOUR_MS
    if abs(hours) >= 1:
        return f"{hours:.1f} h"
    return f"{ms / 60000:.1f} min" if abs(ms) >= 60000 else f"{ms / 1000:.1f} s"


def _ago(ms: int) -> str:
    return _hours(max(ms, 0))


def _size(n: int) -> str:
    import humanize

    return f"{humanize.naturalsize(n, binary=True)} ({n} bytes)"


def _clock_text(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))
