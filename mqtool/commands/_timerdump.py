"""How `dump` shows the timer store: timerlog units, wheel slots and the timer checkpoint
(the walking is mqtool/forensics/timerwalk.py)."""

from __future__ import annotations

from mqtool.cli import output
from mqtool.forensics import storeinfo, timerwalk
from mqtool.storage import timerstore


def dump_timerlog(ts, filters, ctx, display) -> None:
    tally = ctx["tally"]
    table = None if ctx["json"] else output.TableStream("timerlog", [
        ("pos", {"justify": "right"}), ("prevPos", {"justify": "right"}), ("magic", {"justify": "right"}),
        ("delivery (UTC)", {}), ("offsetPy", {"justify": "right"}), ("sizePy", {"justify": "right"}),
        ("topic hash", {"justify": "right"}), ("state", {})])
    for event in timerwalk.walk_timerlog(ts, filters, tally, display):
        what = event[0]
        if what == "unit":
            unit, pending = event[1], event[2]
            state = "pending" if pending else "delivered"
            if ctx["json"]:
                output.emit_json({"type": "timer_unit", "file": display(unit.path), "fileOffset": unit.file_offset,
                                  **unit.to_json(), "deliveryIso": storeinfo.iso(unit.delivery_ms),
                                  "pending": pending})
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
    if ctx["json"]:
        output.emit_json(summary)
    else:
        table.flush()
        where = (f"stopped at timerlog offset {tally.stopped_at} (--limit)" if tally.stopped_at is not None
                 else f"units end at {tally.end_offset}")
        output.note(f"{tally.records} units, {tally.blanks} blanks, {tally.problems} problems; {where}; pending "
                    f"from {storeinfo.iso(ts.read_time_ms) or 0} (config/timercheck's lastReadTimeMs)")


def dump_timerwheel(ts, filters, ctx, display) -> None:
    tally = ctx["tally"]
    problem = timerwalk.wheel_size_problem(ts)
    if problem:
        tally.problems += 1
        tally.note_problem(display(ts.layout.timerwheel_path), None, "bad-file-size")
        if ctx["json"]:
            output.emit_json({"type": "problem", "kind": "bad-file-size",
                              "file": display(ts.layout.timerwheel_path), "message": problem})
        else:
            output.note(f"{display(ts.layout.timerwheel_path)}: {problem}")
    table = None if ctx["json"] else output.TableStream("timerwheel", [
        ("slot", {"justify": "right"}), ("time (UTC)", {}), ("firstPos", {"justify": "right"}),
        ("lastPos", {"justify": "right"}), ("num", {"justify": "right"}), ("state", {})])
    for number, slot, pending in timerwalk.wheel_slots(ts, filters, tally):
        if ctx["json"]:
            output.emit_json({"type": "timer_slot", "slot": number, **slot, "timeIso": storeinfo.iso(slot["timeMs"]),
                              "pending": pending})
        else:
            table.add(number, storeinfo.iso(slot["timeMs"]), slot["firstPos"], slot["lastPos"], slot["num"],
                      "pending" if pending else "read")
    if ctx["json"]:
        output.emit_json({"type": "summary", "kind": "timerwheel", "slots": tally.shown,
                          "precisionMs": ts.precision, "lastReadTimeMs": ts.read_time_ms})
    else:
        table.flush()
        output.note(f"{tally.shown} slots written; precision {ts.precision} ms")


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
