"""How `dump` shows the timer store: timerlog units, wheel slots and the timer checkpoint
(the walking is mqtool/forensics/timerwalk.py)."""

from __future__ import annotations

from contextlib import contextmanager

from mqtool.cli import output
from mqtool.forensics import storeinfo, timerwalk
from mqtool.errors import NotAStoreError
from mqtool.storage import timerstore, timerview


@contextmanager
def store_view(layout):
    """The store's timer store as a broker's timer recovery leaves it (timerview)."""
    from mqtool.storage import commitlog

    queue = commitlog.open_queue(layout)
    try:
        with timerview.open_view(layout, queue) as view:
            yield view
    finally:
        queue.close()


def dump_timerlog(ts, filters, ctx, display, view=None) -> None:
    """view: the broker's view of the store (timerview.TimerView; None for one file on its own)."""
    tally = ctx["tally"]
    pending = view.pending(want_units=True) if view is not None else None
    recalled = frozenset(u.pos for u, state, _ in pending.units if state == "recalled") if pending else frozenset()
    if pending is not None:
        pending.units = []
    table = None if ctx["json"] else output.TableStream("timerlog", [
        ("pos", {"justify": "right"}), ("prevPos", {"justify": "right"}), ("magic", {"justify": "right"}),
        ("delivery (UTC)", {}), ("offsetPy", {"justify": "right"}), ("sizePy", {"justify": "right"}),
        ("topic hash", {"justify": "right"}), ("state", {})])
    for event in timerwalk.walk_timerlog(ts, filters, tally, display, recalled):
        what = event[0]
        if what == "unit":
            unit, is_pending, state = event[1], event[2], event[3]
            if ctx["json"]:
                output.emit_json({"type": "timer_unit", "file": display(unit.path), "fileOffset": unit.file_offset,
                                  **unit.to_json(), "deliveryIso": storeinfo.iso(unit.delivery_ms),
                                  "pending": is_pending, "state": state})
            else:
                table.add(unit.pos, unit.prev_pos, unit.magic, storeinfo.iso(unit.delivery_ms), unit.offset_py,
                          unit.size_py, unit.topic_hash, state)
        elif what == "blank":
            if ctx["json"]:
                output.emit_json({"type": "timer_blank", "file": event[1], "fileOffset": event[2], "size": event[3]})
        elif what == "problem":
            problem = event[1]
            if ctx["json"]:
                output.emit_json(problem.to_json())
            else:
                table.add(problem.offset, "", "", "", "", "", "", f"[{problem.kind}] {problem.message}")
        elif ctx["json"]:
            output.emit_json({"type": "end", "offset": event[1]})
    summary = {"type": "summary", "kind": "timerlog", "units": tally.records, "blanks": tally.blanks,
               "problems": tally.problems, "shown": tally.shown, "endOffset": tally.end_offset,
               "lastReadTimeMs": ts.read_time_ms, "complete": tally.stopped_at is None}
    if view is not None:
        summary.update(_pending_fields(view, pending))
    if ctx["json"]:
        output.emit_json(summary)
    else:
        table.flush()
        where = (f"stopped at timerlog offset {tally.stopped_at} (--limit)" if tally.stopped_at is not None
                 else f"units end at {tally.end_offset}")
        output.note(f"{tally.records} units, {tally.blanks} blanks, {tally.problems} problems; {where}; pending "
                    f"from {storeinfo.iso(ts.read_time_ms) or 0} (config/timercheck's lastReadTimeMs)")
        if view is not None:
            output.note(pending_text(summary))


def _pending_fields(view, pending) -> dict:
    rec = view.recovery
    return {"pending": pending.all_congest_num, "deliverable": pending.deliverable, "recalled": pending.recalled,
            "rolled": pending.rolled, "deleteMarkers": pending.delete_markers, "lost": pending.lost,
            "putBack": rec.put_back, "putBackPending": rec.put_back_pending, "deliveredTwice": rec.requeued_count,
            "deliveredTwiceKeys": [r["uniqKey"] for r in rec.requeued]}


def pending_text(t: dict) -> str:
    """One line: what a broker will deliver, and beside it what recalls cancel, roll units, and
    what its recovery does (info, dump, recover)."""
    line = (f"pending {t['pending']} (what a broker will deliver: the wheel's counts from the read time on); "
            f"{t['recalled']} recalled, {t['rolled']} roll unit(s), {t['deleteMarkers']} delete unit(s)")
    if t["deliverable"] != t["pending"]:
        line += f"; {t['deliverable']} on the slots' chains"
    if t.get("lost"):
        line += f"; {t['lost']} whose record cannot be read (skipped)"
    if t.get("putBack"):
        line += (f"; {t['putBack']} unit(s) written after the last wheel flush put back on their slots by the "
                 f"broker's timer recovery ({t['putBackPending']} not due yet)")
    if t.get("skippedOnRestart"):
        line += (f"; {t['skippedOnRestart']} message(s) a broker starting now skips (its read time is more than "
                 "7 days old: the wheel holds 7 days)")
    if t.get("deliveredTwice"):
        line += (f"; {t['deliveredTwice']} message(s) a restarted broker enqueues again and DELIVERS TWICE "
                 "(the timer recovery restarts rmq_sys_wheel_timer behind them)")
    return line


def dump_timerwheel(view, filters, ctx, display) -> None:
    tally = ctx["tally"]
    ts = view.ts
    problem = timerwalk.wheel_size_problem(ts)
    if problem:
        tally.problems += 1
        tally.note_problem(display(ts.layout.timerwheel_path), None, "bad-file-size")
        if ctx["json"]:
            output.emit_json({"type": "problem", "kind": "bad-file-size",
                              "file": display(ts.layout.timerwheel_path), "message": problem})
        else:
            output.note(f"{display(ts.layout.timerwheel_path)}: {problem}")
        return
    table = None if ctx["json"] else output.TableStream("timerwheel", [
        ("slot", {"justify": "right"}), ("time (UTC)", {}), ("firstPos", {"justify": "right"}),
        ("lastPos", {"justify": "right"}), ("num", {"justify": "right"}), ("chain", {"justify": "right"}),
        ("state", {})])
    for number, slot, pending in timerwalk.wheel_slots(view, filters, tally):
        if ctx["json"]:
            output.emit_json({"type": "timer_slot", "slot": number, **slot, "timeIso": storeinfo.iso(slot["timeMs"]),
                              "pending": pending})
        else:
            state = ("pending" if pending else "read") + (" (revised by the timer recovery)" if slot["revised"] else "")
            table.add(number, storeinfo.iso(slot["timeMs"]), slot["firstPos"], slot["lastPos"], slot["num"],
                      len(slot["chain"]), state)
    p = view.pending()
    summary = {"type": "summary", "kind": "timerwheel", "slots": tally.shown, "precisionMs": ts.precision,
               "lastReadTimeMs": ts.read_time_ms, "allCongestNum": p.all_congest_num,
               "revisedSlots": len(view.recovery.revised_slots), **_pending_fields(view, p)}
    if ctx["json"]:
        output.emit_json(summary)
    else:
        table.flush()
        output.note(f"{tally.shown} slots written; precision {ts.precision} ms")
        output.note(pending_text(summary))


def dump_timermetrics(layout, view, ctx, display) -> None:
    """config/timermetrics (TimerMetrics' timingCount per real topic, read as a broker loads it,
    .bak when the file cannot be read), each count against what the timerlog holds: +1 per unit,
    -1 per delete unit, on the chains of the slots not read yet.  A count that differs is a
    problem (after a crash the file lags: a broker persists it once a second)."""
    doc, path, note = timerview.read_metrics(layout)
    if doc is None and path is None and note is None:
        raise NotAStoreError("no config/timermetrics here (timerWheelEnable is off, or a 4.x store)",
                             path=layout.config_dir / "timermetrics")
    tally = ctx["tally"]
    counts = timerview.metric_counts(doc)
    held = timerview.timerlog_counts(view, counts) if view is not None else {}
    where = display(path) if path is not None else display(layout.config_dir / "timermetrics")
    version = (doc or {}).get("dataVersion") or {}
    rows = []
    for topic in sorted(set(counts) | set(held)):
        metric = ((doc or {}).get("timingCount") or {}).get(topic)
        row = {"type": "timer_metric", "file": where, "topic": topic, "count": counts.get(topic),
               "timeStamp": metric.get("timeStamp") if isinstance(metric, dict) else None,
               "timerlog": held.get(topic, 0)}
        row["matches"] = row["count"] == row["timerlog"]
        if not row["matches"]:
            tally.problems += 1
            tally.note_problem(where, None, "timer-metric-mismatch")
        rows.append(row)
    summary = {"type": "summary", "kind": "timermetrics", "file": where, "note": note, "topics": len(rows),
               "dataVersion": version, "mismatches": sum(not r["matches"] for r in rows)}
    if ctx["json"]:
        for row in rows:
            output.emit_json(row)
        output.emit_json(summary)
        return
    table = output.TableStream(f"timermetrics {where}", [("real topic", {}), ("count", {"justify": "right"}),
                                                        ("timerlog", {"justify": "right"}), ("", {})])
    for row in rows:
        table.add(row["topic"], row["count"], row["timerlog"], "" if row["matches"] else "[timer-metric-mismatch]")
    table.flush()
    if note:
        output.note(note)
    output.note(f"{len(rows)} topic(s); dataVersion counter {version.get('counter')}; "
                f"{summary['mismatches']} count(s) differ from the timerlog")


def dump_timercheck(path, ctx, display) -> None:
    cp = timerstore.read_checkpoint(path)
    if cp is None:
        from mqtool.errors import NotAStoreError

        raise NotAStoreError("no timer checkpoint here", path=path)
    line = {"type": "timercheck", "file": display(path), **cp,
            "lastReadTimeIso": storeinfo.iso(cp["lastReadTimeMs"]),
            "dataVersionTimestampIso": storeinfo.iso(cp["dataVersionTimestamp"])}
    if cp["fileSize"] != 4096:
        ctx["tally"].problems += 1
        ctx["tally"].note_problem(display(path), None, "bad-file-size")
        line["problem"] = f"timercheck is {cp['fileSize']} bytes, expected 4096"
    if ctx["json"]:
        output.emit_json(line)
        return
    table = output.TableStream(f"timercheck {display(path)}", [("field", {}), ("value", {"justify": "right"}),
                                                              ("time (UTC)", {})])
    for name in ("lastReadTimeMs", "lastTimerLogFlushPos", "lastTimerQueueOffset", "masterTimerQueueOffset",
                 "stateVersion", "dataVersionTimestamp", "dataVersionCounter", "fileSize"):
        table.add(name, cp[name], line["lastReadTimeIso"] if name == "lastReadTimeMs" else
                  line["dataVersionTimestampIso"] if name == "dataVersionTimestamp" else "")
    table.flush()
    if "problem" in line:
        output.note(line["problem"])
