"""Timer stores built from the Java source's facts (rocketmq-all-5.3.3, store/.../timer/), in the
fixtures' shape: a spec (the timer messages), the files, and what a broker would read.

The commitlog records are put by `mqtool append` as the broker's HookUtils.transformTimerMessage
leaves them (topic rmq_sys_wheel_timer, queue 0, REAL_TOPIC / REAL_QID / TIMER_OUT_MS); the
timerlog, wheel and timercheck are written here with struct, as TimerMessageStore.doEnqueue,
TimerLog.append, TimerWheel.putSlot and TimerCheckpoint.flush write them.  Nothing here uses
mqtool's timer code, so the tests check it against an independent writer.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

TOPIC = "rmq_sys_wheel_timer"
UNIT = struct.Struct(">iqiqiqiiq")          # size prevPos magic currWriteTime delayedTime offsetPy sizePy hash reserved
SLOT = struct.Struct(">qqqii")              # timeMs/precision firstPos lastPos num magic
BLANK_MAGIC = (0xBBCCDDEE ^ (1880681586 + 8)) - (1 << 32)   # Java: + binds before ^; as a signed int
SLOTS = 7 * 86400 * 2
WRITE_TIME = 1795300000000                  # currWriteTimeMs of every unit (a whole second)
MIN_BLANK = 16


def string_hash(text: str) -> int:
    """java.lang.String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@dataclass
class Timed:
    """One timer message: its real topic and delivery time; where append stored it."""

    real_topic: str
    delivery_ms: int
    body: str = "timer message"
    magic: int = 1
    offset: int = -1
    size: int = 0
    pos: int = -1            # its unit's timerlog offset


def append_timer_messages(run_cli, store: Path, messages: list[Timed], tmp: Path) -> None:
    """Put the records through `mqtool append` (5.x format) and note where each one went."""
    spec = tmp / "timer-spec.jsonl"
    with open(spec, "w") as fh:
        for m in messages:
            fh.write(json.dumps({"topic": TOPIC, "queueId": 0, "body": m.body, "properties": {
                "REAL_TOPIC": m.real_topic, "REAL_QID": "0", "TIMER_OUT_MS": str(m.delivery_ms)}}) + "\n")
    result = run_cli("append", store, "--set", "storeFormat=5", "--input", spec, "--json")
    assert result.code == 0, result.err
    for m, line in zip(messages, result.json_lines()):
        assert line["status"] == "PUT_OK"
        m.offset, m.size = line["wroteOffset"], line["wroteBytes"]


def write_timer_store(store: Path, messages: list[Timed], *, read_time_ms: int, file_size: int = 1040,
                      precision: int = 1000, queue_offset: int | None = None) -> dict:
    """timerlog/, timerwheel and config/timercheck for the messages, enqueued in order.
    Returns the slots written: {index: (timeSlot, firstPos, lastPos, num)}."""
    files: list[bytearray] = [bytearray(file_size)]
    wrote = 0
    slots: dict[int, list] = {}
    for m in messages:
        if UNIT.size + MIN_BLANK > file_size - wrote:          # TimerLog.append: a BLANK, then a new file
            files[-1][wrote:wrote + MIN_BLANK] = struct.pack(">iqi", file_size - wrote, 0, BLANK_MAGIC)
            files.append(bytearray(file_size))
            wrote = 0
        index = m.delivery_ms // precision % SLOTS
        slot = slots.get(index)
        fresh = slot is None or slot[0] != m.delivery_ms // precision
        prev = -1 if fresh else slot[2]
        pos = (len(files) - 1) * file_size + wrote
        files[-1][wrote:wrote + UNIT.size] = UNIT.pack(52, prev, m.magic, WRITE_TIME, m.delivery_ms - WRITE_TIME,
                                                       m.offset, m.size, string_hash(m.real_topic), 0)
        m.pos = pos
        wrote += UNIT.size
        delete = m.magic & 4 and not m.magic & 2
        num = (0 if fresh else slot[3]) + (-1 if delete else 1)
        slots[index] = [m.delivery_ms // precision, pos if fresh else slot[1], pos, num]
    (store / "timerlog").mkdir(exist_ok=True)
    for i, data in enumerate(files):
        (store / "timerlog" / f"{i * file_size:020d}").write_bytes(bytes(data))
    with open(store / "timerwheel", "wb") as fh:
        fh.truncate(SLOTS * SLOT.size)
        for index, (time_slot, first, last, num) in slots.items():
            fh.seek(index * SLOT.size)
            fh.write(SLOT.pack(time_slot, first, last, num, 0))
    (store / "config").mkdir(exist_ok=True)
    end = (len(files) - 1) * file_size + wrote
    enqueued = len(messages) if queue_offset is None else queue_offset
    page = struct.pack(">7q", read_time_ms, end, enqueued, enqueued, 0, WRITE_TIME, 1).ljust(4096, b"\0")
    (store / "config" / "timercheck").write_bytes(page)
    return {k: tuple(v) for k, v in slots.items()}
