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
        if tally.full():
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
