"""dump's walk of the timer store: timerlog units, BLANKs and damage, the wheel's slots, the timer
checkpoint and config/timermetrics against the timerlog, as plain events
(mqtool/cli/timershow.py renders them).

Filters that mean something here: --since/--until on a unit's delivery time (a slot's time),
--offset-from/--offset-to on a unit's offsetPy, --topic on a unit's realTopicHash (the
String.hashCode of REAL_TOPIC the broker stores in it, so no commitlog read is needed).
"""

from __future__ import annotations

from contextlib import contextmanager

from mqtool.errors import NotAStoreError
from mqtool.formats import timer as fmt
from mqtool.formats.javastr import java_hash
from mqtool.storage import commitlog, timerstore

# timerview (numpy's) is imported where a timer file is dumped: dump loads this module for its
# table of kinds, and a dump of any other kind needs no numpy
from mqtool.storage.commitlog import Problem


def _unit_ok(unit, filters, hashes) -> bool:
    return (filters.time_ok(unit.delivery_ms) and filters.offset_ok(unit.offset_py)
            and (hashes is None or unit.topic_hash in hashes))


def unit_state(unit, pending: bool, recalled) -> str:
    """What a broker does with a unit: delivered (its slot was read), delete (a recall),
    recalled (a recall of its slot cancels it), roll (put back into the timer topic at its slot
    time), deliver."""
    if not pending:
        return "delivered"
    if unit.is_delete:
        return "delete"
    if unit.pos in recalled:
        return "recalled"
    return "roll" if unit.magic & fmt.MAGIC_ROLL else "deliver"


def walk_timerlog(ts, filters, tally, display, recalled=frozenset()):
    """("unit", Unit, pending, state) for each unit, ("blank", path, file offset, size),
    ("problem", Problem) for damage, ("end", timerlog offset) where the units end: the shared
    walk (timerstore.walk) with dump's filters and --limit.  recalled: positions of the units
    recalls cancel (timerview)."""
    hashes = None if filters.topics is None else {java_hash(t) for t in filters.topics}
    for event in timerstore.walk(ts):
        what = event[0]
        if what == "problem":
            _, kind, path, file_offset, offset, message, expected, found = event
            if expected is not None or found is not None:
                message = f"{message}: expected {expected}, found {found}"
            tally.problems += 1
            tally.note_problem(display(path), file_offset, kind)
            yield "problem", Problem(kind, display(path), file_offset or 0, offset or 0, message)
        elif what == "units":
            for unit in event[2]:
                if tally.full():
                    tally.stopped_at = unit.pos
                    return
                tally.records += 1
                if _unit_ok(unit, filters, hashes):
                    tally.shown += 1
                    pending = ts.is_pending(unit)
                    yield "unit", unit, pending, unit_state(unit, pending, recalled)
        elif what == "blank":
            mf, scan = event[1], event[2]
            tally.blanks += 1
            yield "blank", display(mf.path), scan.stop_at, scan.blank_size
        elif what == "end":
            tally.end_offset = event[1]
            yield "end", event[1]


def wheel_slots(view, filters, tally):
    """(slot number, slot dict, pending) for every slot a broker ever wrote (non-zero), as the
    broker's timer recovery leaves the wheel (timerview): the slot dict has the chain the
    dequeue walks (timerlog offsets from lastPos through prevPos) and whether the recovery
    revised the slot."""
    for i, time_slot, first, last, num, magic in view.slots():
        slot = {"timeSlot": time_slot, "firstPos": first, "lastPos": last, "num": num, "magic": magic,
                "timeMs": time_slot * view.precision}
        if not filters.time_ok(slot["timeMs"]):
            continue
        if tally.full():     # --limit: the slots from this one on are not read
            tally.stopped_at = i
            return
        tally.shown += 1
        units, ok = view.chain(last)
        slot["chain"] = [u.pos for u in units]
        slot["chainComplete"] = ok
        slot["revised"] = view.is_revised(i)
        yield i, slot, slot["timeMs"] >= view.read_time_ms


def wheel_size_problem(ts) -> str | None:
    size = ts.wheel_size()
    if size is None:
        return None
    return None if size == fmt.WHEEL_SIZE else f"timerwheel is {size} bytes, expected {fmt.WHEEL_SIZE}"


@contextmanager
def store_view(layout):
    """The store's timer store as a broker's timer recovery leaves it (timerview)."""
    from mqtool.storage import timerview

    queue = commitlog.open_queue(layout)
    try:
        with timerview.open_view(layout, queue) as view:
            yield view
    finally:
        queue.close()


def timerlog_events(source, dump):
    """source: (TimerStore, the broker's view of the store: timerview.TimerView, or None for one
    file on its own).  walk_timerlog's events, then ("summary", dict)."""
    ts, view = source
    tally = dump.tally
    pending = view.pending(want_units=True) if view is not None else None
    recalled = frozenset(u.pos for u, state, _ in pending.units if state == "recalled") if pending else frozenset()
    if pending is not None:
        pending.units = []
    yield from walk_timerlog(ts, dump.options.filters, tally, dump.display, recalled)
    summary = {"type": "summary", "kind": "timerlog", "units": tally.records, "blanks": tally.blanks,
               "problems": tally.problems, "shown": tally.shown, "endOffset": tally.end_offset,
               "lastReadTimeMs": ts.read_time_ms, "complete": tally.stopped_at is None}
    if view is not None:
        summary.update(_pending_fields(view, pending))
    yield "summary", summary


def _pending_fields(view, pending) -> dict:
    rec = view.recovery
    return {"pending": pending.all_congest_num, "deliverable": pending.deliverable, "recalled": pending.recalled,
            "rolled": pending.rolled, "deleteMarkers": pending.delete_markers, "lost": pending.lost,
            "putBack": rec.put_back, "putBackPending": rec.put_back_pending, "deliveredTwice": rec.requeued_count,
            "deliveredTwiceKeys": [r["uniqKey"] for r in rec.requeued]}


def timerwheel_events(view, dump):
    """("wheel_size", file, message) when the wheel is not of its size (and nothing more), or
    ("slot", number, slot dict, pending) for each slot wheel_slots keeps, then ("summary", dict)."""
    tally, ts = dump.tally, view.ts
    problem = wheel_size_problem(ts)
    if problem:
        tally.problems += 1
        tally.note_problem(dump.display(ts.layout.timerwheel_path), None, "bad-file-size")
        yield "wheel_size", dump.display(ts.layout.timerwheel_path), problem
        return
    for number, slot, pending in wheel_slots(view, dump.options.filters, tally):
        yield "slot", number, slot, pending
    p = view.pending()
    yield "summary", {"type": "summary", "kind": "timerwheel", "slots": tally.shown, "stoppedAtSlot": tally.stopped_at,
                      "precisionMs": ts.precision,
                      "lastReadTimeMs": ts.read_time_ms, "allCongestNum": p.all_congest_num,
                      "revisedSlots": len(view.recovery.revised_slots), **_pending_fields(view, p)}


def timermetrics_events(source, dump):
    """source: (layout, its timer view or None).  config/timermetrics (TimerMetrics' timingCount
    per real topic, read as a broker loads it, .bak when the file cannot be read), each count
    against what the timerlog holds: +1 per unit, -1 per delete unit, on the chains of the slots
    not read yet.  A count that differs is a problem (after a crash the file lags: a broker
    persists it once a second).  One event: ("metrics", rows, summary)."""
    from mqtool.storage import timerview

    layout, view = source
    doc, path, note = timerview.read_metrics(layout)
    if doc is None and path is None and note is None:
        raise NotAStoreError("no config/timermetrics here (timerWheelEnable is off, or a 4.x store)",
                             path=layout.config_dir / "timermetrics")
    tally, display = dump.tally, dump.display
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
    yield "metrics", rows, {"type": "summary", "kind": "timermetrics", "file": where, "note": note,
                            "topics": len(rows), "dataVersion": version,
                            "mismatches": sum(not r["matches"] for r in rows)}


def timercheck_events(path, dump):
    """("timercheck", JSON line, fields as read) for config/timercheck."""
    from mqtool.forensics import storeinfo

    cp = timerstore.read_checkpoint(path)
    if cp is None:
        raise NotAStoreError("no timer checkpoint here", path=path)
    line = {"type": "timercheck", "file": dump.display(path), **cp,
            "lastReadTimeIso": storeinfo.iso(cp["lastReadTimeMs"]),
            "dataVersionTimestampIso": storeinfo.iso(cp["dataVersionTimestamp"])}
    if cp["fileSize"] != 4096:
        dump.tally.problems += 1
        dump.tally.note_problem(dump.display(path), None, "bad-file-size")
        line["problem"] = f"timercheck is {cp['fileSize']} bytes, expected 4096"
    yield "timercheck", line, cp
