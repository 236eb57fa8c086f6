"""How `dump` shows the timer store: timerlog units, wheel slots, the timer checkpoint and
timermetrics (the walking is mqtool/forensics/timerwalk.py), and the pending line info and
recover print too."""

from __future__ import annotations

from mqtool.cli import output
from mqtool.forensics import storeinfo


def timerlog(events, dump) -> None:
    as_json, display, tally = dump.options.json, dump.display, dump.tally
    table = None if as_json else output.TableStream("timerlog", [
        ("pos", {"justify": "right"}), ("prevPos", {"justify": "right"}), ("magic", {"justify": "right"}),
        ("delivery (UTC)", {}), ("offsetPy", {"justify": "right"}), ("sizePy", {"justify": "right"}),
        ("topic hash", {"justify": "right"}), ("state", {})])
    for event in events:
        what = event[0]
        if what == "unit":
            unit, is_pending, state = event[1], event[2], event[3]
            if as_json:
                output.emit_json({"type": "timer_unit", "file": display(unit.path), "fileOffset": unit.file_offset,
                                  **unit.to_json(), "deliveryIso": storeinfo.iso(unit.delivery_ms),
                                  "pending": is_pending, "state": state})
            else:
                table.add(unit.pos, unit.prev_pos, unit.magic, output.utc_time(unit.delivery_ms), unit.offset_py,
                          unit.size_py, unit.topic_hash, state)
        elif what == "blank":
            if as_json:
                output.emit_json({"type": "timer_blank", "file": event[1], "fileOffset": event[2], "size": event[3]})
        elif what == "problem":
            problem = event[1]
            if as_json:
                output.emit_json(problem.to_json())
            else:
                table.add(problem.offset, "", "", "", "", "", "", f"[{problem.kind}] {problem.message}")
        elif what == "end":
            if as_json:
                output.emit_json({"type": "end", "offset": event[1]})
        elif as_json:
            output.emit_json(event[1])
        else:
            summary = event[1]
            table.flush()
            where = (f"stopped at timerlog offset {tally.stopped_at} (--limit)" if tally.stopped_at is not None
                     else f"units end at {tally.end_offset}")
            output.note(f"{tally.records} units, {tally.blanks} blanks, {tally.problems} problems; {where}; pending "
                        f"from {output.utc_time(summary['lastReadTimeMs'])} (config/timercheck's lastReadTimeMs)")
            if "deliverable" in summary:     # the store's timer view, not one file on its own
                output.note(pending_text(summary))


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


def timerwheel(events, dump) -> None:
    as_json = dump.options.json
    table = None if as_json else output.TableStream("timerwheel", [
        ("slot", {"justify": "right"}), ("time (UTC)", {}), ("firstPos", {"justify": "right"}),
        ("lastPos", {"justify": "right"}), ("num", {"justify": "right"}), ("chain", {"justify": "right"}),
        ("state", {})])
    for event in events:
        what = event[0]
        if what == "wheel_size":
            if as_json:
                output.emit_json({"type": "problem", "kind": "bad-file-size", "file": event[1], "message": event[2]})
            else:
                output.note(f"{event[1]}: {event[2]}")
        elif what == "slot":
            number, slot, pending = event[1], event[2], event[3]
            if as_json:
                output.emit_json({"type": "timer_slot", "slot": number, **slot,
                                  "timeIso": storeinfo.iso(slot["timeMs"]), "pending": pending})
            else:
                state = ("pending" if pending else "read") + (" (revised by the timer recovery)" if slot["revised"]
                                                              else "")
                table.add(number, output.utc_time(slot["timeMs"]), slot["firstPos"], slot["lastPos"], slot["num"],
                          len(slot["chain"]), state)
        elif as_json:
            output.emit_json(event[1])
        else:
            summary = event[1]
            table.flush()
            shown = (f"{summary['slots']} slots shown; stopped at slot {summary['stoppedAtSlot']} (--limit): the "
                     "rest was not read" if summary.get("stoppedAtSlot") is not None
                     else f"{summary['slots']} slots written")
            output.note(f"{shown}; precision {summary['precisionMs']} ms")
            output.note(pending_text(summary))


def timermetrics(events, dump) -> None:
    for _, rows, summary in events:
        if dump.options.json:
            for row in rows:
                output.emit_json(row)
            output.emit_json(summary)
            continue
        table = output.TableStream(f"timermetrics {summary['file']}", [
            ("real topic", {}), ("count", {"justify": "right"}), ("timerlog", {"justify": "right"}), ("", {})])
        for row in rows:
            table.add(row["topic"], row["count"], row["timerlog"], "" if row["matches"] else "[timer-metric-mismatch]")
        table.flush()
        if summary["note"]:
            output.note(summary["note"])
        output.note(f"{summary['topics']} topic(s); dataVersion counter {summary['dataVersion'].get('counter')}; "
                    f"{summary['mismatches']} count(s) differ from the timerlog")


def timercheck(events, dump) -> None:
    for _, line, cp in events:
        if dump.options.json:
            output.emit_json(line)
            continue
        times = {"lastReadTimeMs": line["lastReadTimeIso"], "dataVersionTimestamp": line["dataVersionTimestampIso"]}
        fields_table(f"timercheck {line['file']}", cp, times,
                     ("lastReadTimeMs", "lastTimerLogFlushPos", "lastTimerQueueOffset", "masterTimerQueueOffset",
                      "stateVersion", "dataVersionTimestamp", "dataVersionCounter", "fileSize"))
        if "problem" in line:
            output.note(line["problem"])


def fields_table(title: str, fields: dict, times: dict, names) -> None:
    """A file of fixed fields (checkpoint, timercheck): one row per field, with its time in ISO form."""
    table = output.TableStream(title, [("field", {}), ("value", {"justify": "right"}), ("time (UTC)", {})])
    for name in names:
        table.add(name, fields[name], times.get(name) or "")
    table.flush()
