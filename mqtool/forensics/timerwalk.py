"""dump's walk of the timer store: timerlog units, BLANKs and damage, and the wheel's slots, as
plain events (mqtool/commands/_timerdump.py renders them).

Filters that mean something here: --since/--until on a unit's delivery time (a slot's time),
--offset-from/--offset-to on a unit's offsetPy, --topic on a unit's realTopicHash (the
String.hashCode of REAL_TOPIC the broker stores in it, so no commitlog read is needed).
"""

from __future__ import annotations

from mqtool.formats import timer as fmt
from mqtool.formats.javastr import java_hash
from mqtool.storage import timerstore
from mqtool.storage.commitlog import Problem


def _unit_ok(unit, filters, hashes) -> bool:
    return (filters.time_ok(unit.delivery_ms) and filters.offset_ok(unit.offset_py)
            and (hashes is None or unit.topic_hash in hashes))


def walk_timerlog(ts, filters, tally, display):
    """("unit", Unit, pending) for each unit, ("blank", path, file offset, size), ("problem",
    Problem) for damage, ("end", timerlog offset) where the units end."""
    hashes = None if filters.topics is None else {java_hash(t) for t in filters.topics}
    for problem in ts.problems:
        tally.problems += 1
        tally.note_problem(display(problem.path), problem.offset, problem.kind)
        yield "problem", Problem(problem.kind, display(problem.path), 0, problem.offset or 0, problem.message)
    for mf, scan, ended in ts.log_files():
        path = display(mf.path)
        if ended is not None:
            if ts.holds_data(scan):
                tally.problems += 1
                tally.note_problem(path, 0, "data-after-end")
                yield "problem", Problem("data-after-end", path, 0, mf.file_from_offset,
                                         f"units after the timerlog's end at {ended} (a broker's recovery drops them)")
            continue
        for start in range(0, scan.units, 65536):
            for unit in timerstore.unit_rows(mf, start, min(start + 65536, scan.units)):
                if tally.full():
                    tally.stopped_at = unit.pos
                    return
                tally.records += 1
                if _unit_ok(unit, filters, hashes):
                    tally.shown += 1
                    yield "unit", unit, ts.is_pending(unit)
        if scan.stop == timerstore.BLANK:
            tally.blanks += 1
            yield "blank", path, scan.stop_at, scan.blank_size
        elif scan.stop == timerstore.DAMAGE:
            size, magic = scan.found
            tally.problems += 1
            tally.note_problem(path, scan.stop_at, "bad-timer-unit")
            yield "problem", Problem("bad-timer-unit", path, scan.stop_at, mf.file_from_offset + scan.stop_at,
                                     f"not a timer unit: size {size}, magic {magic:#x} (a broker's recovery "
                                     "truncates the timerlog here)")
    tally.end_offset = ts.written_end
    yield "end", ts.written_end


def wheel_slots(ts, filters, tally):
    """(slot number, slot dict, pending) for every slot a broker ever wrote (non-zero)."""
    slots = ts.wheel()
    if slots is None:
        return
    written = (slots["timeSlot"] != 0) | (slots["firstPos"] != 0) | (slots["lastPos"] != 0) | (slots["num"] != 0)
    for i in written.nonzero()[0].tolist():
        row = slots[i]
        slot = {name: int(row[name]) for name in ("timeSlot", "firstPos", "lastPos", "num", "magic")}
        slot["timeMs"] = slot["timeSlot"] * ts.precision
        if not filters.time_ok(slot["timeMs"]):
            continue
        if tally.full():
            return
        tally.shown += 1
        yield i, slot, slot["timeMs"] >= ts.read_time_ms


def wheel_size_problem(ts) -> str | None:
    size = ts.wheel_size()
    if size is None:
        return None
    return None if size == fmt.WHEEL_SIZE else f"timerwheel is {size} bytes, expected {fmt.WHEEL_SIZE}"
