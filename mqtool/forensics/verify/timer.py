"""verify-crc's timer scope: the 5.x timer store against itself and against the commitlog.

- timerlog: every file holds 52-byte units from byte 0 up to a BLANK or the end of the data
  (damage is where a broker's recovery truncates the timerlog); each unit's prevPos is -1 or
  an earlier unit of the same delivery slot.
- units: a unit pointing into the commitlog's range points at a record of rmq_sys_wheel_timer
  of its sizePy whose REAL_TOPIC hashes to its realTopicHash; a pending unit (delivery slot at
  or after the timercheck's lastReadTimeMs) must point inside the commitlog (below its first
  file is normal for delivered units: the broker deleted those files).
- wheel: 7 x 86400 x 2 slots of 32 bytes; each slot not read yet has firstPos/lastPos on units
  inside the timerlog's written range, its chain from lastPos through prevPos holds units of
  its time only, ends at firstPos, and counts num (+1 per unit, -1 per delete marker); every
  pending unit is on its slot's chain.
- timercheck: one 4096-byte page; lastTimerLogFlushPos not past the timerlog's units.
"""

from __future__ import annotations

from mqtool.forensics.verify.findings import Finding, TaskResult, path_display
from mqtool.formats import timer as fmt
from mqtool.formats.commitlog import Record
from mqtool.formats.javastr import java_hash
from mqtool.storage import commitlog, timerstore


def timer_task(layout) -> TaskResult:
    """Check the whole timer store (one task: its files are small next to the commitlog)."""
    result = TaskResult()
    display = path_display(layout)
    queue = commitlog.open_queue(layout)
    try:
        with timerstore.TimerStore(layout) as ts:
            _Check(ts, queue, display, result).run()
    finally:
        queue.close()
    return result


class _Check:
    def __init__(self, ts, queue, display, result):
        self.ts, self.queue, self.display, self.result = ts, queue, display, result
        files = queue.files
        self.cl_low = files[0].file_from_offset if files else 0
        self.cl_high = max((mf.file_from_offset + mf.file_size for mf in files), default=0)

    def add(self, kind, file, file_offset, offset, message, expected=None, found=None) -> None:
        self.result.findings.append(Finding("timer", kind, file, file_offset, offset, message, expected, found))

    def run(self) -> None:
        ts = self.ts
        for problem in ts.problems:
            self.add(problem.kind, self.display(problem.path), None, problem.offset, problem.message)
        end = self._timerlog()
        self._units(end)
        self._wheel(end)
        self._checkpoint(end)

    # ------------------------------------------------------------------ timerlog
    def _timerlog(self) -> int:
        ts = self.ts
        for mf, scan, ended in ts.log_files():
            self.result.files += 1
            self.result.bytes += mf.file_size
            path = self.display(mf.path)
            if ended is not None:
                if ts.holds_data(scan):
                    self.add("data-after-end", path, 0, mf.file_from_offset,
                             f"units after the timerlog's end at {ended} (a broker's recovery drops them)")
                continue
            if scan.stop == timerstore.DAMAGE:
                size, magic = scan.found
                self.add("bad-timer-unit", path, scan.stop_at, mf.file_from_offset + scan.stop_at,
                         "not a timer unit (a broker's recovery truncates the timerlog here)",
                         expected=f"size {fmt.UNIT_SIZE}, magic 0..15, or a BLANK", found=f"size {size}, magic {magic}")
            elif scan.stop == timerstore.BLANK and scan.blank_size != mf.file_size - scan.stop_at:
                self.add("bad-blank", path, scan.stop_at, mf.file_from_offset + scan.stop_at,
                         "the BLANK's size is not the rest of the file",
                         expected=mf.file_size - scan.stop_at, found=scan.blank_size)
        return ts.written_end

    # --------------------------------------------------------------------- units
    def _units(self, end: int) -> None:
        """Each unit on its own, against its slot and its record; nothing is kept per unit, so
        memory stays flat however long the timerlog."""
        ts, low = self.ts, self.ts.timerlog.min_offset
        slots = ts.wheel()
        for unit in ts.units():
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
            if is_pending and slots is not None and len(slots) == fmt.SLOT_COUNT:
                slot = slots[slot_time % fmt.SLOT_COUNT]
                if int(slot["timeSlot"]) != slot_time or not int(slot["firstPos"]) <= unit.pos <= int(slot["lastPos"]):
                    self.add("timer-unit-not-in-wheel", path, unit.file_offset, unit.pos,
                             f"pending unit {unit.pos} is not on its slot's chain: a broker would never deliver it",
                             expected=f"slot {slot_time % fmt.SLOT_COUNT} of time {slot_time}, "
                                      f"firstPos <= {unit.pos} <= lastPos",
                             found=[int(slot["timeSlot"]), int(slot["firstPos"]), int(slot["lastPos"])])
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
        ts = self.ts
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
        low = ts.timerlog.min_offset
        times = slots["timeSlot"].astype("int64")
        for i in ((times * ts.precision >= ts.read_time_ms) & (times != 0)).nonzero()[0].tolist():
            row = slots[i]
            time_slot, first, last, num = (int(row[k]) for k in ("timeSlot", "firstPos", "lastPos", "num"))
            at = i * fmt.SLOT_SIZE
            if i != time_slot % fmt.SLOT_COUNT:
                self.add("timer-slot-misplaced", where, at, None, f"slot {i} holds time {time_slot}, whose slot "
                         f"is {time_slot % fmt.SLOT_COUNT}", expected=i, found=time_slot % fmt.SLOT_COUNT)
                continue
            bad = [p for p in (first, last) if not (max(low, 0) <= p < end and (p - low) % fmt.UNIT_SIZE == 0)]
            if bad:
                self.add("timer-slot-outside-timerlog", where, at, bad[0],
                         f"slot {i} points at timerlog offset {bad[0]}, where no unit is written",
                         expected=f"{max(low, 0)}..{end}", found=bad[0])
                continue
            count, pos, seen, chain_ok = 0, last, 0, True
            while pos != -1 and pos >= low:
                unit = ts.unit_at(pos)
                if unit is None or unit.delivery_ms // ts.precision != time_slot or seen > end // fmt.UNIT_SIZE:
                    self.add("timer-slot-chain-broken", where, at, pos,
                             f"slot {i}'s chain reaches timerlog offset {pos}, which is not a unit of its time")
                    chain_ok = False
                    break
                count += -1 if unit.is_delete else 1
                seen += 1
                if unit.prev_pos == -1 and pos != first:
                    self.add("timer-slot-chain-broken", where, at, pos,
                             f"slot {i}'s chain ends at {pos}, not at its firstPos", expected=first, found=pos)
                    chain_ok = False
                pos = unit.prev_pos
            if chain_ok and pos == -1 and count != num:
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
