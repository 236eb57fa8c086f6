"""`mqtool clean STORE`: reclaim disk space by RocketMQ's rules (mqtool/engine/reclaim/), from cron.

Opens the store as `append` does (the lock held throughout; exit 3 while a broker
holds it), runs one reclaim run and explains every decision.  Quiet when there is
nothing to do, so cron mails only on news.  --dry-run plans on a read-only view and
changes nothing (not even a recovery).  Commitlog files that pending timer units (5.x timer
store) point into are staged in the trash even with --delete-delay 0, and the run warns how many
units it leaves dangling (mqtool/engine/reclaim/reclaimer.py).
"""

from __future__ import annotations

import sys

import click
import humanize

from mqtool.cli import metrics, options, output, requires
from mqtool.engine import reclaim
from mqtool.engine.clock import SystemClock
from mqtool.engine.diskusage import DiskUsage
from mqtool.engine.reclaim.policy import parse_duration, parse_size, retention_ms
from mqtool.errors import ProblemsFound, UsageError
from mqtool.storage import census
from mqtool.storage.layout import discover

SHOWN_LINES = 20   # queue and consumer-group lines in text output before "... and N more"

@click.command("clean")
@options.store_argument
@options.config_option
@options.json_option
@options.prometheus_option
@click.option("--now", "ignore_window", is_flag=True,
              help="Act outside the deleteWhen hours too (by default expired files go only in those hours, "
                   "or when the disk is above diskMaxUsedSpaceRatio).")
@click.option("--force", is_flag=True,
              help="Also delete files that have not expired, oldest first (never the active file), until the "
                   "disk is at or below diskMaxUsedSpaceRatio, or the commitlog within --retention-bytes. "
                   "Says how many unread messages go.")
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option("--retention-ms", "retention_ms_", type=int, metavar="MS",
              help="Files older than this are expired (instead of fileReservedTime hours); -1: no time limit.")
@click.option("--retention-minutes", type=int, metavar="MIN", help="As --retention-ms, in minutes.")
@click.option("--retention-hours", type=int, metavar="H",
              help="As --retention-ms, in hours (the most precise option given wins, as in Kafka).")
@click.option("--retention-bytes", metavar="SIZE",
              help="Delete the oldest commitlog files while the commitlog is larger than SIZE (e.g. 50G).")
@click.option("--delete-delay", default="60s", show_default=True, metavar="DURATION",
              help="Stage files in STORE/trash/ and remove them this long after (a later run does); "
                   "0 deletes at once.")
@click.option("--max-files", type=click.IntRange(1, None), metavar="N",
              help="At most N commitlog files a run (default deleteFileBatchMax, 10), also with --force.")
@click.option("--undo", is_flag=True, help="Put the files staged in STORE/trash/ back, newest first.")
@click.option("--verbose", "-v", is_flag=True, help="Explain the decisions even when there is nothing to do.")
@requires.run
def cli(run, store, config_path, settings, as_json, prometheus, ignore_window, force, dry_run, retention_ms_,
        retention_minutes, retention_hours, retention_bytes, delete_delay, max_files, undo, verbose):
    """Delete expired commitlog files by RocketMQ's rules.

    By default only inside the deleteWhen hours and only expired files (fileReservedTime
    hours since last modified), at most 10 a run, oldest first, never the file being
    written; then consume queue and index files whose entries all point below the
    commitlog's new minimum offset, and each queue's minimum offset is corrected.
    Files go to STORE/trash/ first and are removed a --delete-delay later.

    Exit 0 done or nothing to do; 1 when a file could not be deleted or staged (kept, reported),
    --undo could not put every staged file back, or the trash manifest cannot be read; 2 usage
    error; 3 a broker holds the store's lock; 4 not a store.
    """
    policy = reclaim.Policy(
        retention_ms=retention_ms(retention_ms_, retention_minutes, retention_hours),
        retention_bytes=parse_size(retention_bytes, "--retention-bytes") if retention_bytes is not None else None,
        ignore_window=ignore_window, force=force, max_files=max_files,
        delete_delay_ms=parse_duration(delete_delay, "--delete-delay"), dry_run=dry_run)
    if undo and (force or ignore_window or max_files or retention_bytes is not None or policy.retention_ms is not None):
        raise UsageError("--undo puts staged files back; it takes no clean options (only --dry-run and --json)")
    config = run.write_config(store, config_path, settings, say=False)   # noted below, with the levels'
    layout = discover(config, config_given=True, must_exist=True)
    census.take(layout).refuse_unsafe("clean")   # dry runs too: they show what the real run does
    reclaim.parse_delete_when(config.deleteWhen)   # a bad deleteWhen is a usage error before anything happens
    run.note_settings(config, reclaim.Levels.from_config(config).notes, prefix="note")
    clock, disk = SystemClock(), DiskUsage()
    if dry_run:
        from mqtool.engine.store import reclaim_dry_run

        report = reclaim_dry_run(config, layout, policy, undo=undo, clock=clock, disk_usage=disk)
        if layout.abort_path.exists():
            output.note("note: the store was not shut down cleanly; a real run recovers it first")
    else:
        with run.open_store(config, writer="clean", clock=clock, disk_usage=disk, start_services=False) as engine:
            report = engine.undo_reclaim() if undo else engine.reclaim(policy)
    render(report, as_json=as_json, verbose=verbose or dry_run)
    if prometheus:
        metrics.write(prometheus, metrics.clean_metrics(layout.root, report))
    if report.incomplete:
        raise ProblemsFound(f"{report.count(actions={reclaim.NOT_RESTORED})} staged file(s) could not be put back")
    if report.failed:
        raise ProblemsFound(f"{report.failed} file(s) could not be deleted or staged; they are kept (see above)")




def render(report: reclaim.Report, *, as_json: bool, verbose: bool) -> None:
    """Decisions on stdout, then warnings on stderr; nothing at all when nothing happened and
    nothing needs a look (unless verbose)."""
    if as_json:
        for d in report.decisions:
            output.emit_json(d.to_json())
        for q in report.queues:
            output.emit_json(q.to_json())
        for loss in report.losses:
            output.emit_json(loss.to_json())
        output.emit_json(report.to_json())
    elif report.changed or verbose:
        _render_text(report)
    sys.stdout.flush()   # a cron mail or log reads the report, then its warnings
    for warning in report.warnings:
        output.note(f"WARNING: {warning}")


def _render_text(report: reclaim.Report) -> None:
    console = output.stdout()

    def line(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    title = "mqtool clean --undo" if report.operation == "undo" else "mqtool clean"
    window = "inside" if report.window_open else "outside"
    line(f"{title}{' (dry run: nothing changed)' if report.dry_run else ''}: disk {reclaim.pct(report.disk.ratio)}"
         f" ({report.disk.path or 'unknown'}); diskMaxUsedSpaceRatio {reclaim.pct(report.levels.max_used)}, "
         f"force-clean {reclaim.pct(report.levels.force)}, warning {reclaim.pct(report.levels.warning)}; "
         f"{window} the deleteWhen hours ({report.delete_when})")
    verb = {reclaim.DELETE: "DELETE", reclaim.STAGE: "STAGE", reclaim.KEEP: "KEEP",
            reclaim.REMOVE_STAGED: "REMOVE", reclaim.RESTORE: "RESTORE", reclaim.NOT_RESTORED: "NOT RESTORED"}
    for d in report.decisions:
        size = humanize.naturalsize(d.size, binary=True) if d.size else ""
        line(f"  {verb[d.action]:<8} {d.file}  {size}  {d.why}"
             + (f" -> {d.details['trash']}" if "trash" in d.details else ""))
    if report.min_offset_after != report.min_offset_before:
        line(f"  commitlog minimum offset {report.min_offset_before} -> {report.min_offset_after}")
    changed = [q for q in report.queues if q.min_after != q.min_before or q.files_removed]
    for q in changed[:SHOWN_LINES]:
        line(f"  queue {q.topic}/{q.queue_id}: minimum offset {q.min_before} -> {q.min_after}"
             f" ({abs(q.min_after - q.min_before)} message(s) {'back' if q.min_after < q.min_before else 'removed'}"
             f"{f', {q.files_removed} file(s)' if q.files_removed else ''})")
    if len(changed) > SHOWN_LINES:
        line(f"  ... and {len(changed) - SHOWN_LINES} more queues (--json lists them all)")
    for loss in report.losses[:SHOWN_LINES]:
        line(f"  UNREAD  group {loss.group} loses {loss.unread} message(s) of {loss.topic}/{loss.queue_id} "
             f"(it had read up to offset {loss.consumer_offset})")
    if len(report.losses) > SHOWN_LINES:
        line(f"  ... and {len(report.losses) - SHOWN_LINES} more (--json lists them all)")
    if report.operation == "clean" and report.changed:
        unread = report.unread_removed
        line(f"  {report.count('commitlog')} commitlog, {report.count('consumequeue')} consume queue and "
             f"{report.count('index')} index file(s); {report.messages_removed} message(s) removed"
             + ("" if unread is None else f", {unread} of them unread by a consumer group"))
