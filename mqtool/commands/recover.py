"""`mqtool recover STORE`: a broker's recovery, run by an operator, with a plan and a quarantine.

The recovery is the store's own (mqtool/engine/recovery.py, what `append` runs on
open); the command adds the operator's safety: --dry-run shows the plan and
changes nothing, every cut byte and removed file is kept in the quarantine
first, and a clean close leaves a store a broker opens without recovering.  Pending timer units
(5.x timer store) whose records the cut removes are reported and listed in the quarantine
(timer-units.jsonl); the timerlog and wheel are left as they are (see mqtool/engine/recovery.py).
"""

from __future__ import annotations

import click

from mqtool.cli import options, output, requires
from mqtool.cli.timershow import pending_text
from mqtool.errors import ProblemsFound
from mqtool.forensics import remedies
from mqtool.storage.layout import discover
from mqtool.storage.settings import open_layout


@click.command("recover")
@options.store_argument
@options.config_option
@options.json_option
@click.option("--mode", type=click.Choice(["auto", "normal", "abnormal"]), default="auto", show_default=True,
              help="auto: abnormal when the abort file says the last run crashed, as a broker decides.")
@click.option("--dry-run", is_flag=True, help="Print the plan; change nothing (exit 1 if it would change something).")
@click.option("--no-quarantine", is_flag=True, help="Do not keep the cut bytes and removed files.")
@click.option("--quarantine-dir", type=click.Path(file_okay=False, path_type=str),
              help="Keep cut bytes here instead of STORE/quarantine/ (another disk, when this one is full).")
@requires.run
def cli(run, store, config_path, settings, as_json, mode, dry_run, no_quarantine, quarantine_dir):
    """Recover a store as a broker's start would.

    It cuts what is not valid and rebuilds what is missing.

    Normal recovery (no abort file) checks the last three commitlog files; abnormal recovery
    starts where the checkpoint says everything was safe and dispatches everything after it
    again.  Cut bytes are zero-filled (files keep their size) and later files removed, all of
    it kept in the quarantine first.  Refused (exit 3) while a broker holds the lock; the lock
    is held while recovering.
    """
    config = run.write_config(store, config_path, settings)
    layout = discover(config, config_given=True, must_exist=True)   # recover never creates a store
    engine = run.message_store(config, writer="recover", quarantine_dir=quarantine_dir,
                               keep_cut_bytes=not no_quarantine, start_services=False)
    if dry_run:
        run.reading([layout], say=False)   # the dry run is refused (exit 3), naming the holder
        with remedies.cannot_load(layout, store):
            engine.open(recovery_mode=mode, dry_run=True)
        plan = engine.recovery_plan
        _show(plan, as_json, applied=False, quarantine=None, notes=engine.notes)
        if plan.changes_anything:
            raise ProblemsFound("the store needs recovery (see the plan above); run without --dry-run")
        return
    with remedies.cannot_load(layout, store):
        engine.open(recovery_mode=mode)
    plan = engine.recovery_plan
    quarantine = engine.quarantine.dir
    engine.close()
    left = remedies.left_after_recovery(open_layout(store, config_path, settings))   # as verify-crc reads it
    _show(plan, as_json, applied=True, quarantine=quarantine, notes=engine.notes, left=left)
    if left:
        raise ProblemsFound(f"recovery left {len(left)} problem(s) it does not mend (see above); "
                            f"next: {'; then '.join(remedies.next_steps(left, store, layout))}")


LEFT_SHOWN = 20   # findings listed after recovery; the count says how many there are


def _timer_lines(tp, verb: str) -> list[str]:
    """What the broker's timer recovery does (the plan's timerRecovery), and who it delivers twice."""
    if tp is None:
        return []
    rec, lines = tp.recovery, []
    if tp.summary is not None:
        lines.append(f"  timer store: {pending_text(tp.summary)}")
    if rec.revised_slots:
        lines.append(f"  {verb}write {len(rec.revised_slots)} timerwheel slot(s) as the broker's timer recovery "
                     f"revises them: {rec.put_back} timer unit(s) written after the last wheel flush go back on "
                     f"their slots' chains ({rec.put_back_pending} not due yet; the slots keep their counts, as the "
                     "broker's do)")
    for path in rec.removed_files:
        lines.append(f"  {verb}remove timerlog file {path} (after the timerlog's end at {rec.process_offset})")
    if tp.tail is not None:
        lines.append(f"  {verb}zero timerlog bytes {tp.tail[1]}..{tp.tail[2]} of {tp.tail[0]} (not units: the "
                     f"timerlog ends at {rec.process_offset})")
    for index in rec.dangling_slots[:10]:
        lines.append(f"  timerwheel slot {index} points past the timerlog's end at {rec.process_offset}: its "
                     "messages are lost")
    if rec.requeued_count:
        keys = ", ".join(str(r["uniqKey"]) for r in rec.requeued[:10])
        more = f" and {rec.requeued_count - 10} more" if rec.requeued_count > 10 else ""
        lines.append(f"  WARNING: the timer store restarts rmq_sys_wheel_timer at queue offset {rec.queue_offset}, "
                     f"behind {rec.requeued_count} message(s) it had enqueued already: a restarted broker enqueues "
                     f"them again and DELIVERS THEM TWICE ({keys}{more}; --json lists every key)")
    return lines


def _show(plan, as_json: bool, *, applied: bool, quarantine, notes=(), left=()) -> None:
    data = plan.to_json()
    data["notes"] = list(notes)
    data["applied"] = applied
    data["quarantine"] = str(quarantine) if quarantine else None
    if applied:
        data["left"] = [finding.to_json() for finding in left[:LEFT_SHOWN]]
        data["leftCount"] = len(left)
    if as_json:
        output.emit_json(data)
        return
    verb = "" if applied else "would "
    lines = [f"{plan.mode} recovery: walked the commitlog from offset {plan.walk_from}, "
             f"{plan.records_checked:,} records valid; the data ends at {plan.cut}"]
    if plan.stop is not None:
        lines.append(f"  stopped by {plan.stop.kind} at {plan.stop.path} byte {plan.stop.file_offset}: "
                     f"{plan.stop.message}")
    if plan.data_end > plan.cut:
        lines.append(f"  {verb}zero {plan.data_end - plan.cut:,} bytes after the cut "
                     f"(offsets {plan.cut}..{plan.data_end})")
    for path in plan.empty_files:
        lines.append(f"  {verb}set aside empty file {path} (a crash while it was being created)")
    for path in plan.removed_files:
        lines.append(f"  {verb}remove commitlog file {path} (beyond the cut)")
    for cut in plan.queue_cuts:
        lines.append(f"  {verb}cut consume queue {cut.topic}/{cut.queue_id} to {cut.keep_bytes // 20} units "
                     f"({cut.reason})")
    for ext in plan.ext_cuts:
        lines.append(f"  {verb}cut consume queue extension {ext.topic}/{ext.queue_id} at ext offset {ext.keep} "
                     f"({ext.written_end - ext.keep:,} bytes, {len(ext.removed_files)} later file(s); "
                     "no unit points there)")
    for path in plan.dropped_index_files:
        lines.append(f"  {verb}drop index file {path} (newer than the checkpoint)")
    for path in plan.rebuilt_index_files:
        lines.append(f"  {verb}rebuild index file {path} (entries at or past the cut)")
    units = data["dledgerIndex"]
    if units is not None:
        if units["rewriteFromIndex"] is not None:
            lines.append(f"  {verb}write the DLedger index units of entries {units['rewriteFromIndex']}.."
                         f"{units['endIndex'] - 1} from their headers (missing or not what the entries say)")
        if units["unitsCut"]:
            lines.append(f"  {verb}zero {units['unitsCut']:,} DLedger index units past the last kept entry")
    end = plan.cut if plan.dispatch_end is None else plan.dispatch_end
    if plan.redispatch_from < end:
        lines.append(f"  {verb}dispatch commitlog offsets {plan.redispatch_from}..{end} again "
                     f"({end - plan.redispatch_from:,} bytes) into consume queues and index"
                     + ("" if plan.dispatch_end_why is None else f" ({plan.dispatch_end_why})"))
    if plan.timer is not None:
        kept = ("kept in the quarantine with timer-units.jsonl" if applied and quarantine else
                "kept in the quarantine" if not applied else "NOT kept (--no-quarantine)")
        lines.append(f"  {plan.timer.text(not applied)}: their records are among the cut bytes, {kept}; the timerlog "
                     "and wheel are left as they are (a broker skips a unit whose record it cannot read)")
        for unit in plan.timer.listed[:10]:
            lines.append(f"    timer unit {unit['timerlog']} byte {unit['fileOffset']}: {unit['realTopic'] or '?'} "
                         f"due {unit['deliveryMs']}, commitlog offset {unit['offsetPy']} ({unit['sizePy']} bytes)")
    lines.extend(_timer_lines(plan.timer_recovery, verb))
    lines.extend(f"  {note}" for note in notes)
    if not plan.changes_anything:
        lines.append("  nothing to do: the store is consistent" if not left else "  nothing recovery mends")
    if applied and quarantine:
        lines.append(f"  everything cut or removed is kept in {quarantine} (see its manifest.json)")
    if left:
        lines.append(f"  left after recovery ({len(left)} problem(s) verify-crc finds):")
        lines.extend(f"    {f.scope} {f.kind} {f.file} byte {f.file_offset}: {f.message}" for f in left[:LEFT_SHOWN])
    console = output.stdout()
    for line in lines:
        console.print(line, highlight=False, markup=False)
