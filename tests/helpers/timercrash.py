"""Crashed timer stores made from timer5 (the real 5.3.3 timer store) and what the broker's
timer recovery gives for them, derived from the fixture's expected-read and the Java source
(rocketmq-all-5.3.3 TimerMessageStore.doEnqueue / recover / reviseQueueOffset, TimerWheel.
putSlot / reviseSlot, the flush service) -- never from mqtool's timer code.

A broker writes a unit to the timerlog (mapped: in the page cache at once) and the slot to the
wheel's private buffer; the flush service writes the wheel and then the timercheck, whose
lastTimerLogFlushPos and timer queue offsets are those of the flush before.  A kill after
units were appended but before the next flush leaves: every unit in the timerlog, a wheel
holding only the units before some position P (doEnqueue's putSlot replayed up to P), and a
timercheck at P with the queue offset of the first message not enqueued by then.
"""

from __future__ import annotations

import struct
from pathlib import Path

from conftest import expected_read

SLOTS = 7 * 86400 * 2
PRECISION = 1000


def facts() -> dict:
    lines = expected_read("timer5")
    messages = {m["commitLogOffset"]: m for m in lines if m["type"] == "message"}
    units = [u for u in lines if u["type"] == "timerlog_unit"]
    for u in units:
        u["queueOffset"] = messages[u["offsetPy"]]["queueOffset"]    # its message in rmq_sys_wheel_timer/0
    return {"units": units, "slots": {s["slotIndex"]: s for s in lines if s["type"] == "timer_slot"},
            "open": next(x for x in lines if x["type"] == "timer_open"),
            "summary": next(x for x in lines if x["type"] == "timer_summary"),
            "pre": next(x for x in lines if x["type"] == "timer_pre"),
            "end": next(x for x in lines if x["type"] == "timerlog_end"),
            "blank": next(x for x in lines if x["type"] == "timerlog_blank")}


def replay(units) -> dict:
    """TimerMessageStore.doEnqueue's putSlot for units in timerlog order: {index: [timeSlot,
    firstPos, lastPos, num, magic]} (a delete unit counts -1)."""
    slots: dict = {}
    for u in units:
        t = u["delayedTimeMs"] // PRECISION
        i = t % SLOTS
        slot = slots.get(i)
        if slot is None or slot[0] != t:
            slot = [t, u["offset"], u["offset"], 0, 0]
        slot[2] = u["offset"]
        slot[3] += -1 if u["delete"] else 1
        slots[i] = slot
    return slots


def crash(store: Path, f: dict, at: int, *, wheel_lags: bool = True, abort: bool = True) -> dict:
    """Make store (a copy of timer5) look like a broker killed when its last flush had reached
    timerlog offset `at`: the wheel without the later units (unless not wheel_lags: the wheel
    was flushed, only the timercheck lags), timercheck lastTimerLogFlushPos = at and both queue
    offsets = the queue offset of the first later unit's message.  Returns the wheel written."""
    before = [u for u in f["units"] if u["offset"] < at]
    full = replay(f["units"])
    wheel = replay(before) if wheel_lags else full
    with open(store / "timerwheel", "r+b") as fh:
        for i in full:
            fh.seek(i * 32)
            fh.write(struct.pack(">qqqii", *wheel[i]) if i in wheel else bytes(32))
    later = [u for u in f["units"] if u["offset"] >= at]
    queue_offset = later[0]["queueOffset"] if later else f["open"]["currQueueOffset"]
    path = store / "config" / "timercheck"
    page = bytearray(path.read_bytes())
    struct.pack_into(">qqq", page, 8, at, queue_offset, queue_offset)
    path.write_bytes(bytes(page))
    if abort:
        (store / "abort").write_text("31337")
    return {"wheel": wheel, "queueOffset": queue_offset, "later": later}


def read_wheel(store: Path, indexes) -> dict:
    out = {}
    with open(store / "timerwheel", "rb") as fh:
        for i in indexes:
            fh.seek(i * 32)
            out[i] = list(struct.unpack(">qqqii", fh.read(32)))
    return out
