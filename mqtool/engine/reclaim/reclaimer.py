"""The reclaimer: plans a run by RocketMQ's rules and applies it (commitlog oldest first, then
consume queues and the index), marks the disk full; undo is undo.py's.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from mqtool.engine import epochfile
from mqtool.engine.message import SERVICE_NOT_AVAILABLE, PutResult
from mqtool.engine.reclaim.policy import (
    CQ_DESTROY_INTERVAL_MS,
    HOUR_MS,
    SCHEDULE_TOPIC,
    DiskState,
    Levels,
    Policy,
    ago_text,
    clock_text,
    hours_text,
    in_window,
    parse_delete_when,
    pct,
    size_text,
)
from mqtool.engine.reclaim.report import DELETE, KEEP, REMOVE_STAGED, STAGE, Decision, Loss, QueueChange, Report
from mqtool.engine.reclaim.undo import undo as undo_staged
from mqtool.engine.reclaim.view import StoreView
from mqtool.engine.trash import Trash
from mqtool.errors import UsageError
from mqtool.formats import batchconsumequeue as batch_format
from mqtool.formats.consumequeue import UNIT_SIZE
from mqtool.storage import batchqueue, dledger, timerstore, timerview
from mqtool.storage.consumequeue import last_unit, queue_min_offset
from mqtool.storage.fsutil import shown_path

# ---------------------------------------------------------------------- the reclaimer

# commitlog files pending timer units point into stay in the trash at least this long: a pending
# timer message is due within timerMaxDelaySec (3 days by default), and `clean --undo` can put them back
TIMER_HOLD_MS = 3 * 24 * 3600 * 1000


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
                "trash", entry.shown, REMOVE_STAGED, "due",
                f"staged {ago_text(now - entry.staged_at)} ago ({entry.reason}); its delete delay has passed",
                entry.size, {"original": entry.path}))
            if not policy.dry_run:
                trash.remove(entry)
        pending = sum(e.size for e in trash.entries if e.due_at > now)
        report.disk = disk = self.check_disk() if not policy.dry_run else self.disk_state()

        chosen = self._plan_commitlog(policy, report, pending)
        self._timer_units(chosen, report)
        if policy.dry_run:
            remaining = [mf for mf in view.commitlog.files if mf not in {d.target for d in chosen}]
            new_min = remaining[0].file_from_offset if remaining else report.min_offset_before
        else:
            self._apply_commitlog(chosen, policy, report, trash, run=now)
            new_min = max(view.commitlog.min_offset, 0)
        report.min_offset_after = new_min
        if new_min > report.min_offset_before:
            note = epochfile.after_deletion(view.layout, new_min, dry_run=policy.dry_run)
            if note:
                report.warnings.append(note)
        self._clean_queues(new_min, report.min_offset_before, policy, report, trash, run=now)
        self._clean_index(new_min, policy, report, trash, run=now)
        self._losses(report)
        self._warn(report, policy, disk, levels)
        return report

    def _timer_units(self, chosen, report) -> None:
        """Pending timer units pointing into the commitlog files chosen: reported, and the files
        staged in the trash whatever --delete-delay says (the timerlog and wheel are left as they
        are; the broker itself deletes commitlog files without asking its timer store)."""
        report.timer_pending = timerview.pending_counts(self.view.layout, self.view.commitlog)
        gone = {d.target.file_from_offset: d for d in chosen}
        if not gone:
            return
        size = self.view.commitlog.file_size
        report.timer = timerview.find_dangling(self.view.layout, self.view.commitlog,
                                                lambda offset, _: offset - offset % size in gone)
        if report.timer is None:
            return
        for start, count in report.timer.by_file.items():
            decision = gone.get(start)
            if decision is not None:
                decision.action = STAGE
                decision.hold_ms = TIMER_HOLD_MS
                decision.details["timerUnits"] = count
                decision.why += f"; {count} pending timer unit(s) point into it: staged in the trash, not deleted"
        report.warnings.append(report.timer.text(report.dry_run) + ": their records are in commitlog files "
                               "staged in the trash (`clean --undo` puts them back); the timerlog and wheel are "
                               "left as they are")

    def _plan_commitlog(self, policy: Policy, report: Report, pending: int) -> list[Decision]:
        view, config, levels, disk = self.view, self.view.config, report.levels, report.disk
        files = list(view.commitlog.files)
        # a broker switched to DLedger: while old commitlog files exist, DLedgerCommitLog.deleteExpiredFile
        # expires them by these rules and turns DLedger's own cleaner off (disableDeleteDledger)
        old, entries = dledger.parts(view.commitlog)
        switched = bool(entries.files)      # never a DLedger file (census lets clean at them only so)
        if switched:
            files = list(old.files)
        mtimes = {Path(f.path): f.mtime for f in view.layout.commitlog_files()}   # the store's listing
        # the broker's values as the broker reads them: it checks the batch limit after a deletion
        # (0 still deletes one file a run), and a negative fileReservedTime has every file expired
        max_files = policy.max_files if policy.max_files is not None else max(1, config.deleteFileBatchMax)
        retention_ms = (policy.retention_ms if policy.retention_ms is not None
                        else max(0, config.fileReservedTime * HOUR_MS))
        retention_text = (f"--retention {hours_text(retention_ms)}" if policy.retention_ms is not None
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

        # a switched store's last old file: CommitLog.deleteExpiredFile keeps it as it keeps every
        # queue's last file; DLedgerCommitLog.deleteExpiredFile then lets it go in a run where it is the
        # only old file, by the checks every file goes through (a hanged file, readers holding it)
        only_old = files[0] if switched and len(files) == 1 else None

        def decide(mf, act, reason, why, **details):
            if mf is only_old:       # the rule that decided stays the reason, unless it lets the file go
                if act != KEEP and reason != "hanged":
                    reason, why = "last-old-file", f"DLedgerCommitLog.deleteExpiredFile deletes it too: {why}"
                why = f"the old commitlog's last file, the only one left: {why}"
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
            if i == len(files) - 1 and switched and mf is not only_old:
                decide(mf, KEEP, "last-old-file", (
                    "the old commitlog's last file: DLedgerCommitLog.deleteExpiredFile deletes it only once it "
                    f"is the only old file left and expired ({retention_text}; last modified "
                    f"{hours_text(age)} ago)"), **info)
                break
            if i == len(files) - 1 and not switched:
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
                    reason, why = "expired", (f"expired: last modified {hours_text(age)} ago, "
                                              f"{retention_text} (expired by {hours_text(age - retention_ms)})")
                else:
                    reason, why = "retention-bytes", (f"the commitlog is {size_text(commitlog_bytes)}, over "
                                                      f"--retention-bytes {size_text(policy.retention_bytes)}")
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
                    f"not expired (last modified {hours_text(age)} ago), deleted by --force: " +
                    (f"the commitlog is {size_text(commitlog_bytes)}, over --retention-bytes"
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
        for mf in entries.files:
            decide(mf, KEEP, "dledger-off", "a DLedger data file: while old commitlog files exist, "
                   "DLedgerCommitLog.deleteExpiredFile turns DLedger's own cleaner off (disableDeleteDledger: no "
                   "forced disk clean, files kept 10 years)" if old.files else
                   "a DLedger data file: with no old commitlog file left DLedger's own cleaner deletes these "
                   "(refreshConfig), not clean", startOffset=mf.file_from_offset)
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
            why = (f"not expired: last modified {hours_text(age)} ago, {retention_text} "
                   f"(expires in {hours_text(retention_ms - age)})")
        if policy.retention_bytes is not None:
            why += f"; the commitlog is within --retention-bytes {size_text(policy.retention_bytes)}"
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
                                f"{clock_text(mf.first_shutdown_timestamp)}")
                at = report.decisions.index(decision)   # oldest first, no holes: the rest wait
                report.decisions[at + 1:] = [d for d in report.decisions[at + 1:] if d.kind != "commitlog"]
                return
            with view.lock:
                view.commitlog.files.remove(mf)
            if not self._dispose(mf.path, decision, policy, trash, now, run, report,
                                 start_offset=mf.file_from_offset):
                self.map_back("commitlog", mf.path)
                at = report.decisions.index(decision)   # oldest first, no holes: the rest wait
                report.decisions[at + 1:] = [d for d in report.decisions[at + 1:] if d.kind != "commitlog"]
                return

    def _clean_queues(self, new_min, old_min, policy, report, trash, run) -> None:
        """CleanConsumeQueueService: per queue, files whose last unit points below new_min go
        (never the last file), then the queue's minimum offset is corrected.  Batch consume
        queues the same way (BatchConsumeQueue.deleteExpiredFile + correctMinOffset), their
        minimum offsets being message offsets (msgBaseOffset)."""
        view = self.view
        action = STAGE if policy.delete_delay_ms > 0 else DELETE
        interval = view.config.deleteConsumeQueueFilesInterval
        kinds = [("consumequeue", cq, UNIT_SIZE, queue_min_offset) for _, cq in sorted(view.queues.items())]
        kinds += [("batchconsumequeue", bq, batch_format.UNIT_SIZE, batchqueue.min_offset)
                  for _, bq in sorted(view.batch_queues.items())]
        for kind, cq, unit_size, min_offset in kinds:
            topic, queue_id = cq.topic, cq.queue_id
            files = list(cq.files.files)
            if not files:
                continue
            before = min_offset(cq, old_min)
            after = min_offset(cq, new_min)
            victims = []
            for mf in files[:-1]:
                offset, size = last_unit(mf, unit_size)
                if size <= 0 or offset >= new_min:
                    break
                victims.append(mf)
            for mf in victims:
                first_queue_offset = mf.file_from_offset // unit_size
                decision = Decision(
                    kind, self._rel(mf.path), action, "below-min-offset",
                    f"every unit points below the commitlog's minimum offset {new_min} "
                    f"(the last one at {last_unit(mf, unit_size)[0]})", mf.file_size,
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
                    self.map_back(kind, mf.path, cq)
                    break
            if victims and not policy.dry_run:
                self._pause(interval)
            if not policy.dry_run and kind == "consumequeue":
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
                self.map_back("index", f.path)
                break

    def _dispose(self, path, decision, policy, trash, now, run, report, **where) -> bool:
        """Delete a file that has left its queue, or stage it in the trash.  False when the file
        system refused: the file stays, the decision says why, the run goes on (and exits 1)."""
        from mqtool.storage import fsutil

        delay_ms = max(policy.delete_delay_ms, decision.hold_ms)
        try:
            if delay_ms > 0 or decision.action == STAGE:
                entry = trash.stage(path, kind=decision.kind, size=decision.size, now_ms=now,
                                    delay_ms=delay_ms, run=run, reason=decision.reason, **where)
                decision.details["trash"] = entry.shown
                decision.details["dueAt"] = entry.due_at
            else:
                Path(path).unlink(missing_ok=True)
                fsutil.fsync_dir(Path(path).parent)
        except OSError as exc:
            verb = "staged" if delay_ms > 0 or decision.action == STAGE else "deleted"
            decision.action, decision.reason = KEEP, "failed"
            decision.why = f"could not be {verb}: {exc.strerror or exc}; it stays where it is"
            report.failed += 1
            return False
        return True

    # ---------------------------------------------------------------- consumers
    def _losses(self, report: Report) -> None:
        """Which consumer groups lose messages they have not read (config/consumerOffset.json, or
        lmqConsumerOffset.json, read by storage/offsets.py; the delay service's progress in
        delayOffset.json counts as one more reader)."""
        from mqtool.storage import offsets as consumer_progress

        layout = self.view.layout
        names = consumer_progress.offset_files(layout)
        report.offsets_file = " and ".join(f"config/{name}" for name in names)
        if not report.queues:
            report.offsets_known = any((layout.config_dir / name).exists() for name in names)
            return
        found = consumer_progress.consumer_offsets(layout)
        for f in found.files:
            if f.note:
                report.warnings.append(f"config/{f.note}")
            if f.error:
                report.warnings.append(f"cannot read config/{f.name} ({f.error}): cannot tell consumed from unread")
        report.offsets_known, report.offsets_unreadable = found.known, found.unreadable
        readers = dict(found.table)
        levels, delay_file = consumer_progress.delay_offsets(layout)
        if delay_file.note:
            report.warnings.append(f"config/{delay_file.note}")
        if delay_file.error:
            report.warnings.append(f"cannot read config/delayOffset.json ({delay_file.error}): delayed messages' "
                                   "progress unknown")
        if levels:
            readers[(SCHEDULE_TOPIC, "(delayed delivery)")] = {consumer_progress.level_queue(level): offset
                                                               for level, offset in levels.items()}
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
                    f"{report.messages_removed} message(s) are removed; there is no {report.offsets_file}, "
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
            return undo_staged(self, dry_run)

    def map_back(self, kind, path, cq=None) -> None:
        """Map a file that is (again) in its folder into the open store: restored by undo, or
        kept because the file system refused its deletion after it had left its queue."""
        from mqtool.storage.indexfile import IndexFile
        from mqtool.storage.mappedfile import MappedFile

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
        return shown_path(path, self.view.layout.root)

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
