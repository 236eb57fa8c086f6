"""verify-crc's timer scope: the 5.x timer store against itself and against the commitlog.

- timerlog: every file holds 52-byte units from byte 0 up to a BLANK or the end of the data
  (damage is where a broker's recovery truncates the timerlog); each unit's prevPos is -1 or
  an earlier unit of the same delivery slot.
- units: a unit pointing into the commitlog's range points at a record of rmq_sys_wheel_timer
  of its sizePy whose REAL_TOPIC hashes to its realTopicHash; a pending unit (delivery slot at
  or after the timercheck's lastReadTimeMs) must point inside the commitlog (below its first
  file is normal for delivered units: the broker deleted those files).
- wheel, as the broker's timer recovery leaves it (mqtool/storage/timerview.py: units written
  after the last wheel flush are put back on their slots, which is no damage): 7 x 86400 x 2
  slots of 32 bytes; each slot not read yet has firstPos/lastPos on units inside the timerlog's
  end, its chain from lastPos through prevPos holds units of its time only, ends at firstPos,
  and counts num (+1 per unit, -1 per delete unit: a recall); every pending unit is on its
  slot's chain.  A slot the recovery revised keeps its old num (the broker does not recount).
- timercheck: one 4096-byte page; lastTimerLogFlushPos not past the timerlog's units.
"""

from __future__ import annotations

import numpy as np

from mqtool.forensics.verify.findings import Finding, TaskResult
from mqtool.formats import timer as fmt
from mqtool.formats.commitlog import Record
from mqtool.formats.javastr import java_hash
from mqtool.storage import commitlog, timerstore, timerview
from mqtool.storage.fsutil import relative_paths


def timer_task(layout) -> TaskResult:
    """Check the whole timer store (one task: its files are small next to the commitlog)."""
    result = TaskResult()
    display = relative_paths(layout.root)
    queue = commitlog.open_queue(layout)
    try:
        with timerview.open_view(layout, queue) as view:
            _Check(view, queue, display, result).run()
    finally:
        queue.close()
    return result


class _Check:
    def __init__(self, view, queue, display, result):
        self.view, self.ts, self.queue, self.display, self.result = view, view.ts, queue, display, result
        files = queue.files
        self.cl_low = files[0].file_from_offset if files else 0
        self.cl_high = max((mf.file_from_offset + mf.file_size for mf in files), default=0)

    def add(self, kind, file, file_offset, offset, message, expected=None, found=None) -> None:
        self.result.findings.append(Finding("timer", kind, file, file_offset, offset, message, expected, found))

    def run(self) -> None:
        end = self._timerlog()
        self._wheel(end)
        self._checkpoint(end)
        self.result.timer = timerview.summary(self.view)

    # ------------------------------------------------------------------ timerlog
    def _timerlog(self) -> int:
        """The shared walk (timerstore.walk): its problems, and each unit checked on its own
        against its slot and its record; nothing is kept per unit, so memory stays flat."""
        end = 0
        for event in timerstore.walk(self.ts):
            what = event[0]
            if what == "file":
                self.result.files += 1
                self.result.bytes += event[1].file_size
            elif what == "problem":
                _, kind, path, file_offset, offset, message, expected, found = event
                self.add(kind, self.display(path), file_offset, offset, message, expected, found)
            elif what == "units":
                for unit in event[2]:
                    self._unit(unit)
            elif what == "end":
                end = event[1]
        return end

    def _unit(self, unit) -> None:
        ts, view = self.ts, self.view
        low = ts.timerlog.min_offset
        self.result.timer_units += 1
        path = self.display(unit.path)
        slot_time = unit.delivery_ms // ts.precision
        prev = unit.prev_pos
        if prev != -1 and prev >= low:
            before = ts.unit_at(prev) if prev < unit.pos else None
            if before is None:
                self.add("timer-bad-prev", path, unit.file_offset, unit.pos,
                         f"unit {unit.pos}'s prevPos is not an earlier unit", expected="-1 or an earlier unit",
                         found=prev)
            elif before.delivery_ms // ts.precision != slot_time:
                self.add("timer-bad-prev", path, unit.file_offset, unit.pos,
                         f"unit {unit.pos}'s prevPos is a unit of another delivery time",
                         expected=slot_time * ts.precision, found=before.delivery_ms // ts.precision * ts.precision)
        is_pending = ts.is_pending(unit)
        if is_pending and view.wheel is not None and not view.unit_in_wheel(unit):
            row = view.wheel[slot_time % fmt.SLOT_COUNT]
            self.add("timer-unit-not-in-wheel", path, unit.file_offset, unit.pos,
                     f"pending unit {unit.pos} is not on its slot's chain: a broker would never deliver it",
                     expected=f"slot {slot_time % fmt.SLOT_COUNT} of time {slot_time}, lastPos >= {unit.pos}",
                     found=[int(row["timeSlot"]), int(row["firstPos"]), int(row["lastPos"])])
        self._target(unit, path, is_pending)

    def _target(self, unit, path, is_pending: bool) -> None:
        if unit.offset_py < self.cl_low and not is_pending:
            return                  # delivered, and its commitlog file deleted since: normal
        if self.queue.find_by_offset(unit.offset_py) is None:
            if is_pending:
                self.add("timer-unit-outside-commitlog", path, unit.file_offset, unit.offset_py,
                         f"pending unit {unit.pos} points at commitlog offset {unit.offset_py}, where the commitlog "
                         "has no file (the message is lost; a broker skips it)",
                         expected=f"{self.cl_low}..{self.cl_high}", found=unit.offset_py)
            return
        record = commitlog.record_at(self.queue, unit.offset_py)
        if not isinstance(record, Record):
            if not is_pending:
                return              # delivered: what it pointed at no longer matters
            self.add("timer-unit-not-a-record", path, unit.file_offset, unit.offset_py,
                     f"unit {unit.pos}: {record}")
            return
        if record.total_size != unit.size_py:
            self.add("timer-unit-size-mismatch", path, unit.file_offset, unit.offset_py,
                     f"unit {unit.pos}'s sizePy is not the record's size", expected=record.total_size,
                     found=unit.size_py)
        if record.topic != fmt.TIMER_TOPIC:
            self.add("timer-unit-wrong-topic", path, unit.file_offset, unit.offset_py,
                     f"unit {unit.pos} points at a record of another topic", expected=fmt.TIMER_TOPIC,
                     found=record.topic)
            return
        real = record.properties.get("REAL_TOPIC")
        if real is None or java_hash(real) != unit.topic_hash:
            self.add("timer-unit-wrong-real-topic", path, unit.file_offset, unit.offset_py,
                     f"unit {unit.pos}'s realTopicHash is not the hash of the record's REAL_TOPIC",
                     expected=None if real is None else java_hash(real), found=unit.topic_hash)

    # --------------------------------------------------------------------- wheel
    def _wheel(self, end: int) -> None:
        ts, view = self.ts, self.view
        slots = ts.wheel()
        if slots is None:
            if ts.timerlog.files:
                self.add("timerwheel-missing", "timerwheel", None, None,
                         "the timerlog holds units but there is no timerwheel")
            return
        where = self.display(ts.layout.timerwheel_path)
        self.result.files += 1
        self.result.bytes += ts.wheel_size()
        if ts.wheel_size() != fmt.WHEEL_SIZE:
            self.add("bad-file-size", where, None, None, "the timerwheel is not 7 x 86400 x 2 slots of 32 bytes",
                     expected=fmt.WHEEL_SIZE, found=ts.wheel_size())
            return
        times = view.wheel["timeSlot"].astype("int64")
        index = np.arange(fmt.SLOT_COUNT, dtype="int64")
        misplaced = (times * ts.precision >= ts.read_time_ms) & (times != 0) & (times % fmt.SLOT_COUNT != index)
        for i in np.flatnonzero(misplaced).tolist()[:timerview.LISTED]:
            time_slot = int(times[i])
            self.add("timer-slot-misplaced", where, i * fmt.SLOT_SIZE, None, f"slot {i} holds time {time_slot}, "
                     f"whose slot is {time_slot % fmt.SLOT_COUNT}", expected=i, found=time_slot % fmt.SLOT_COUNT)
        end = view.recovery.process_offset
        flush_pos = ts.checkpoint["lastTimerLogFlushPos"] if ts.checkpoint else 0
        for i, time_slot, first, last, num, _ in view.pending_slots():
            at = i * fmt.SLOT_SIZE
            bad = [p for p in (last, first) if view.unit_at(p) is None or not _aligned(view, p)]
            if bad:
                self.add("timer-slot-outside-timerlog", where, at, bad[0],
                         f"slot {i} points at timerlog offset {bad[0]}, where no unit is written "
                         "(its messages are lost)", expected=f"a unit below {end}", found=bad[0])
                continue
            revised = view.is_revised(i)
            units, ok = view.chain(last)
            count = 0
            for unit in units:
                if unit.delivery_ms // ts.precision != time_slot or not _aligned(view, unit.pos):
                    self.add("timer-slot-chain-broken", where, at, unit.pos,
                             f"slot {i}'s chain reaches timerlog offset {unit.pos}, which is not a unit of its time")
                    ok = False
                    break
                count += -1 if unit.is_delete else 1
            if not ok:
                if units and units[-1].delivery_ms // ts.precision == time_slot:
                    self.add("timer-slot-chain-broken", where, at, units[-1].prev_pos,
                             f"slot {i}'s chain leaves the timerlog at {units[-1].prev_pos} (a loop, or no unit there)")
                continue
            # units from the timercheck's lastTimerLogFlushPos on may be missing from a wheel a
            # crash left (the broker's recovery puts them back on the chain, and never recounts)
            unflushed = revised or any(u.pos >= flush_pos for u in units)
            if units[-1].pos != first and not unflushed:
                self.add("timer-slot-chain-broken", where, at, units[-1].pos,
                         f"slot {i}'s chain ends at {units[-1].pos}, not at its firstPos", expected=first,
                         found=units[-1].pos)
            elif count != num and not unflushed:
                self.add("timer-slot-count-mismatch", where, at, None,
                         f"slot {i} counts {num} messages, its chain holds {count}", expected=count, found=num)

    # ---------------------------------------------------------------- checkpoint
    def _checkpoint(self, end: int) -> None:
        ts = self.ts
        path = ts.layout.timercheck_path
        where = self.display(path)
        cp = ts.checkpoint
        if cp is None:
            if ts.timerlog.files:
                self.add("timercheck-missing", where, None, None,
                         "the timerlog holds units but there is no config/timercheck")
            return
        self.result.files += 1
        self.result.bytes += cp["fileSize"]
        if cp["fileSize"] != fmt.CHECK_FILE_SIZE:
            self.add("bad-file-size", where, None, None, "the timer checkpoint is not one 4096-byte page",
                     expected=fmt.CHECK_FILE_SIZE, found=cp["fileSize"])
        if cp["lastTimerLogFlushPos"] > end:
            self.add("timercheck-beyond-timerlog", where, 8, cp["lastTimerLogFlushPos"],
                     "lastTimerLogFlushPos is past the timerlog's units", expected=f"<= {end}",
                     found=cp["lastTimerLogFlushPos"])
        # (lastTimerQueueOffset past rmq_sys_wheel_timer's queue is no damage: a broker's timer
        # recovery clamps it to the queue's end, which is where a commitlog cut leaves it)


def _aligned(view, pos: int) -> bool:
    """Whether pos is where a unit can start: a whole number of units into its file."""
    mf = next((m for m in view.kept if m.file_from_offset <= pos < m.file_from_offset + m.file_size), None)
    return mf is not None and (pos - mf.file_from_offset) % fmt.UNIT_SIZE == 0
