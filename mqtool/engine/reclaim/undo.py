"""Undo: staged files put back, newest run first, only where they join their queues without a hole.
"""

from __future__ import annotations

from mqtool.engine.reclaim.policy import Levels, ago_text, in_window
from mqtool.engine.reclaim.report import NOT_RESTORED, RESTORE, Decision, QueueChange, Report
from mqtool.engine.trash import Trash
from mqtool.formats.consumequeue import UNIT_SIZE
from mqtool.storage.consumequeue import queue_min_offset


def undo(reclaimer, dry_run: bool) -> Report:
    """Reclaimer.undo's work (the caller holds its run lock): staged runs put back, newest first."""
    view = reclaimer.view
    now = view.clock.now_ms()
    trash = Trash(view.layout.root, adopt=view.adopt)
    levels = Levels.from_config(view.config)
    report = Report("undo", dry_run, now, reclaimer.disk_state(), levels, view.config.deleteWhen,
                    in_window(view.config.deleteWhen, now), min_offset_before=max(view.commitlog.min_offset, 0))
    cl_min = report.min_offset_before if view.commitlog.files else None
    queue_starts = {(kind, key): q.files.files[0].file_from_offset for kind, queues in _queues(view).items()
                    for key, q in queues.items() if q.files.files}
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
            if not _restore(reclaimer, e, report, trash, dry_run):   # the older ones would leave a hole
                blocked = (f"staged commitlog file {e.path} could not be put back, so the older ones "
                           "would leave a hole")
                break
            cl_min = e.start_offset
        if blocked:
            break
        queues = sorted((e for e in batch if e.kind in _queues(view)), key=lambda e: e.start_offset, reverse=True)
        for e in queues:
            key = (e.kind, (e.topic, e.queue_id))
            if key[1] not in _queues(view)[e.kind]:
                _not_restored(e, report, "no-queue", "its queue no longer exists")
            elif queue_starts.get(key) is not None and e.start_offset + e.size != queue_starts[key]:
                _not_restored(e, report, "hole", f"the queue now starts at byte {queue_starts[key]}, "
                                                      "not where this file ends")
            else:
                _restore(reclaimer, e, report, trash, dry_run)
                queue_starts[key] = e.start_offset
        for e in (e for e in batch if e.kind == "index"):
            _restore(reclaimer, e, report, trash, dry_run)
    if blocked:
        decided = {d.details.get("trashed") for d in report.decisions}
        for e in trash.entries:
            if e.shown not in decided:
                _not_restored(e, report, "hole", blocked)
    report.min_offset_after = cl_min if cl_min is not None else 0
    for (topic, queue_id), cq in sorted(view.queues.items()):
        before = queue_min_offset(cq, report.min_offset_before)
        after = queue_min_offset(cq, report.min_offset_after)
        if not dry_run:
            cq.min_logic_offset = after * UNIT_SIZE
        if before != after:
            report.queues.append(QueueChange(topic, queue_id, before, after))
    return report

def _queues(view) -> dict:
    """The queues staged files of each kind go back into."""
    return {"consumequeue": view.queues, "batchconsumequeue": view.batch_queues}


def _not_restored(entry, report, reason, why) -> None:
    report.decisions.append(Decision(entry.kind, entry.path, NOT_RESTORED, reason, why, entry.size,
                                     {"trashed": entry.shown}))
    report.incomplete = True

def _restore(reclaimer, entry, report, trash, dry_run) -> bool:
    why = f"staged {ago_text(report.now_ms - entry.staged_at)} ago ({entry.reason}); put back"
    try:
        if not dry_run:
            path = trash.restore(entry)
            _reload(reclaimer, entry, path)
    except OSError as exc:
        _not_restored(entry, report, "cannot-restore", f"cannot put it back: {exc.strerror or exc}")
        return False
    report.decisions.append(Decision(entry.kind, entry.path, RESTORE, "undo", why, entry.size,
                                     {"trashed": entry.shown}))
    return True

def _reload(reclaimer, entry, path) -> None:
    """Map a restored file into the open store's queues."""
    queues = _queues(reclaimer.view).get(entry.kind)
    cq = queues[(entry.topic, entry.queue_id)] if queues is not None else None
    reclaimer.map_back(entry.kind, path, cq)
