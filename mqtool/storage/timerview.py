"""The timer store as a broker sees it once TimerMessageStore.load() has run its recover().

Facts from rocketmq-all-5.3.3 (TimerMessageStore.recover / recoverAndRevise / reviseQueueOffset,
TimerWheel.reviseSlot / checkPhyPos / getAllNum, the dequeue, TimerMetrics):

- The recovery runs on every load, clean shutdown or not.  It scans the timerlog from the file
  holding lastTimerLogFlushPos - fileSize (the timercheck's value minus one file) to the first
  thing that is not a unit (a BLANK moves on to the next file), and for each unit revises its
  slot: a slot already holding the unit's time gets lastPos = the unit, any other slot becomes
  (the unit's time, the unit, the unit) with num and magic left as they were.  So units a broker
  appended after its last wheel flush (a crash: the wheel is a private buffer, the timerlog is in
  the page cache) are put back on their slots' chains; num is not revised.  Where the scan stops
  the timerlog ends (later files are deleted).  When a slot from the read time on still points
  past that end, the scan runs again from that slot's firstPos without stopping at bad units.
- The timer store's read offset in rmq_sys_wheel_timer queue 0 restarts after the message of
  the timerlog's last unit (found in the consume queue from its QUEUEOFFSET down), at most the
  timercheck's masterTimerQueueOffset, within the queue's range; without a readable last unit,
  the timercheck's lastTimerQueueOffset.  Messages from there on that were enqueued already (a
  unit holds them, or they lie below lastTimerQueueOffset: delivered at once because they were
  due) are enqueued again, and delivered twice.
- Pending: getAllCongestNum, the num of every slot from the read time on over two wheel rounds.
  The dequeue walks each slot's chain from lastPos through prevPos; delete units (MAGIC_DELETE
  without MAGIC_ROLL, RecallMessageProcessor's recalls) cancel the chain's messages whose
  REAL_TOPIC+UNIQ_KEY is their TIMER_DEL_UNIQKEY; roll units (MAGIC_ROLL) are put back into the
  timer topic at their slot time, to be delivered later.
- config/timermetrics (TimerMetrics, fastjson BrowserCompatible, .bak fallback): timingCount per
  REAL_TOPIC, +1 per unit enqueued, -1 per delete unit enqueued, -1 per message put back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from mqtool.formats import properties as props
from mqtool.formats import timer as fmt
from mqtool.formats.commitlog import Record
from mqtool.formats.javastr import java_hash
from mqtool.storage import commitlog, fsutil, metafiles, timerstore

RESTART_BLANK_SLOTS = 60        # TimerMessageStore.TIMER_BLANK_SLOTS
REVISE_QUEUE_STEPS = 20000       # reviseQueueOffset's maxCount
LISTED = 1000                    # messages listed one by one (all are counted)
CHAIN_LIMIT_SLACK = 2            # a chain longer than the units written is a loop


@dataclass
class TimerRecovery:
    """What TimerMessageStore.recover() computes, and what it changes in memory."""

    begin: int                          # where the revision scan starts (its file's start)
    process_offset: int                 # where the timerlog ends (flushedWhere)
    removed_files: list = field(default_factory=list)    # timerlog files after the end (deleted)
    put_back: int = 0                   # units not on their slot's chain on disk, put back
    put_back_pending: int = 0           # of them, units whose slot is not read yet
    revised_slots: dict = field(default_factory=dict)    # slot index -> (timeSlot, first, last, num, magic)
    rescan_from: int | None = None      # minFirst, when a slot pointed past the end
    queue_offset: int = 0               # currQueueOffset after recovery
    queue_offset_source: str = "timerlog"   # "timerlog" (the last unit's message) or "timercheck"
    last_unit_queue_offset: int | None = None
    requeued: list = field(default_factory=list)    # (queueOffset, uniqKey, why) listed
    requeued_count: int = 0
    dangling_slots: list = field(default_factory=list)   # slot indexes still pointing past the end

    def checkpoint(self, cp: dict) -> dict:
        """The timercheck prepareTimerCheckPoint leaves in memory (a running broker's flush
        service, or its shutdown, writes it)."""
        out = dict(cp)
        out["lastTimerLogFlushPos"] = self.process_offset
        out["lastTimerQueueOffset"] = min(self.queue_offset, cp["masterTimerQueueOffset"])
        return out

    def to_json(self) -> dict:
        return {"begin": self.begin, "processOffset": self.process_offset,
                "removedFiles": [str(p) for p in self.removed_files], "putBack": self.put_back,
                "putBackPending": self.put_back_pending, "revisedSlots": len(self.revised_slots),
                "rescanFrom": self.rescan_from, "queueOffset": self.queue_offset,
                "queueOffsetSource": self.queue_offset_source,
                "lastUnitQueueOffset": self.last_unit_queue_offset, "deliveredTwice": self.requeued_count,
                "deliveredTwiceKeys": [r["uniqKey"] for r in self.requeued],
                "deliveredTwiceMessages": self.requeued, "danglingSlots": self.dangling_slots}


class TimerView:
    """The timer store after the broker's timer recovery (nothing is written).

    ts: an open timerstore.TimerStore; queue: the commitlog's MappedFileQueue; lost(offset,
    size): records a commitlog recovery is about to cut (they read as missing); timer_queue:
    the ConsumeQueue of rmq_sys_wheel_timer/0 (None: there is none); queue_end: its max offset
    when a recovery is about to cut it."""

    def __init__(self, ts, queue, *, lost=None, timer_queues=None, queue_end=None):
        self.ts, self.queue, self.lost = ts, queue, lost
        self.precision = ts.precision
        self.cp = ts.checkpoint
        self.read_time_ms = ts.read_time_ms
        disk = ts.wheel()
        self.disk_wheel = disk if disk is not None and len(disk) == fmt.SLOT_COUNT else None
        self.wheel = None if self.disk_wheel is None else np.array(self.disk_wheel)
        self.files = list(ts.timerlog.files)
        self.file_size = ts.file_size
        self._queues = timer_queues or {}
        self._queue_end = queue_end
        self.kept = list(self.files)
        self.recovery = self._recover()

    # ------------------------------------------------------------------ recovery
    def _file_index(self, offset: int, files) -> int:
        for i in range(len(files) - 1, -1, -1):
            if offset >= files[i].file_from_offset:
                return i
        return 0

    def _recover(self) -> TimerRecovery:
        files = self.files
        flush_pos = self.cp["lastTimerLogFlushPos"] if self.cp else 0
        begin = max(0, flush_pos - (files[-1].file_size if files else 0))
        if not files:
            return TimerRecovery(begin, 0, queue_offset=self.cp["lastTimerQueueOffset"] if self.cp else 0,
                                 queue_offset_source="timercheck")
        index = self._file_index(begin, files)
        rec = TimerRecovery(files[index].file_from_offset, files[index].file_from_offset)
        end = files[index].file_from_offset
        for mf in files[index:]:
            scan = self.ts.scan(mf)
            self._revise(mf, 0, scan.units, count=True, rec=rec)
            end = mf.file_from_offset + scan.stop_at
            if scan.stop in (timerstore.END, timerstore.DAMAGE):
                break
        rec.process_offset = end
        rec.removed_files = [mf.path for mf in files if mf.file_from_offset > end]
        self.kept = [mf for mf in files if mf.file_from_offset <= end]
        self._revise_queue_offset(rec)
        self._recheck(rec)
        if self.wheel is not None:
            changed = np.flatnonzero((self.wheel != self.disk_wheel))
            rec.revised_slots = {int(i): tuple(int(self.wheel[i][k]) for k in fmt.SLOT_DTYPE.names) for i in changed}
        self._requeued(rec)
        return rec

    def _revise(self, mf, start: int, stop: int, *, count: bool, rec, valid=None, chunk: int = 65536) -> None:
        """TimerWheel.reviseSlot(delivery, IGNORE, unit, force) for units start..stop-1 of mf, in
        order: a slot holding the unit's time gets lastPos = the unit; any other slot becomes
        (its time, the unit, the unit), num and magic untouched.  Done a chunk at a time, each
        slot's outcome at once (its last unit; firstPos from where its last run of one time
        starts).  count: tally the units the wheel on disk did not hold (put back)."""
        if self.wheel is None or stop <= start:
            return
        wheel, disk, precision = self.wheel, self.disk_wheel, self.precision
        for lo in range(start, stop, chunk):
            hi = min(stop, lo + chunk)
            arr = fmt.units(mf.buf, hi - lo, lo * fmt.UNIT_SIZE)
            delivery = arr["currWriteTime"].astype(np.int64) + arr["delayedTime"].astype(np.int64)
            pos = mf.file_from_offset + (lo + np.arange(hi - lo, dtype=np.int64)) * fmt.UNIT_SIZE
            keep = delivery >= 0 if valid is None else valid[lo - start:hi - start] & (delivery >= 0)
            times, pos = delivery[keep] // precision, pos[keep]
            if not len(times):
                continue
            idx = times % fmt.SLOT_COUNT
            if count:
                covered = ((disk["timeSlot"][idx].astype(np.int64) == times)
                           & (pos <= disk["lastPos"][idx].astype(np.int64)))
                rec.put_back += int((~covered).sum())
                rec.put_back_pending += int((~covered & (times * precision >= self.read_time_ms)).sum())
            order = np.argsort(idx, kind="stable")
            g_idx, g_time, g_pos = idx[order], times[order], pos[order]
            n = len(g_idx)
            starts = np.flatnonzero(np.r_[True, g_idx[1:] != g_idx[:-1]])
            ends = np.r_[starts[1:], n] - 1
            group = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, n]))
            last_time = g_time[ends]
            other = np.where(g_time != last_time[group], np.arange(n), -1)
            last_other = np.maximum.reduceat(other, starts)
            had_other = last_other >= starts
            run_start = np.where(had_other, last_other + 1, starts)
            slots = g_idx[starts]
            same = ~had_other & (wheel["timeSlot"][slots].astype(np.int64) == last_time)
            first = np.where(same, wheel["firstPos"][slots].astype(np.int64), g_pos[run_start])
            wheel["timeSlot"][slots] = last_time
            wheel["firstPos"][slots] = first
            wheel["lastPos"][slots] = g_pos[ends]

    def _recheck(self, rec) -> None:
        """checkPhyPos from the read time: a slot pointing past the end makes the scan run again
        from the smallest such firstPos, up to the end, skipping what is not a unit."""
        if self.wheel is None:
            return
        pending = self._pending_mask()
        past = pending & (self.wheel["lastPos"].astype(np.int64) > rec.process_offset)
        if not past.any():
            return
        min_first = int(self.wheel["firstPos"].astype(np.int64)[past].min())
        if min_first >= rec.process_offset:
            rec.dangling_slots = np.flatnonzero(past).tolist()[:LISTED]
            return
        rec.rescan_from = min_first
        kept = self.kept
        for mf in kept[self._file_index(min_first, kept):]:
            limit = self.read_limit_for(mf, rec.process_offset)
            arr = fmt.units(mf.buf, limit // fmt.UNIT_SIZE)
            magics = arr["magic"].astype(np.int64)
            blank = np.flatnonzero(magics == fmt.BLANK_MAGIC_SIGNED)
            n = int(blank[0]) if len(blank) else len(arr)
            valid = fmt.valid_units(arr[:n])
            self._revise(mf, 0, n, count=False, rec=rec, valid=valid)
        still = pending & (self.wheel["lastPos"].astype(np.int64) > rec.process_offset)
        rec.dangling_slots = np.flatnonzero(still).tolist()[:LISTED]

    @staticmethod
    def read_limit_for(mf, end: int) -> int:
        if mf.file_from_offset <= end < mf.file_from_offset + mf.file_size:
            return end - mf.file_from_offset
        return mf.file_size

    def _pending_mask(self):
        """getAllNum's slots: those holding a time from the read time on, two rounds ahead."""
        start = _jdiv(self.read_time_ms, self.precision)
        times = self.wheel["timeSlot"].astype(np.int64)
        index = np.arange(fmt.SLOT_COUNT, dtype=np.int64)
        return (times >= start) & (times < start + fmt.SLOT_COUNT) & (times % fmt.SLOT_COUNT == index)

    # ----------------------------------------------------------- queue offset
    def record(self, offset: int, size: int):
        """getMessageByCommitOffset: the record at offset read in size bytes, or None."""
        if size <= 0 or (self.lost is not None and self.lost(offset, size)):
            return None
        mf = self.queue.find_by_offset(offset)
        if mf is None or offset - mf.file_from_offset + size > mf.file_size:
            return None
        rec = commitlog.record_at(self.queue, offset)
        if not isinstance(rec, Record) or rec.total_size > size:
            return None
        return rec

    def timer_queue(self, queue_id: int = 0):
        return self._queues.get(queue_id)

    def _queue_range(self, cq) -> tuple[int, int]:
        high = cq.max_offset() if self._queue_end is None else min(cq.max_offset(), self._queue_end)
        return cq.min_offset(), high

    def _revise_queue_offset(self, rec) -> None:
        cp = self.cp or {"lastTimerQueueOffset": 0, "masterTimerQueueOffset": 0}
        found = self._last_unit_queue_offset(rec.process_offset)
        rec.last_unit_queue_offset = found
        if found is None:
            offset, rec.queue_offset_source = cp["lastTimerQueueOffset"], "timercheck"
        else:
            offset = found + 1
        offset = min(offset, cp["masterTimerQueueOffset"])
        cq = self.timer_queue(0)
        if cq is not None:
            low, high = self._queue_range(cq)
            offset = low if offset < low else high if offset > high else offset
        rec.queue_offset = offset

    def _last_unit_queue_offset(self, end: int) -> int | None:
        at = end - (fmt.UNIT_SIZE - fmt.UNIT_OFFSET_PY_AT)
        mf = next((m for m in self.kept if m.file_from_offset <= at < m.file_from_offset + m.file_size), None)
        if mf is None or at < 0:
            return None
        pos = at - mf.file_from_offset
        if pos + fmt.MESSAGE_FIELDS.size > self.read_limit_for(mf, end):
            return None
        offset_py, size_py = fmt.MESSAGE_FIELDS.unpack_from(mf.buf, pos)
        record = self.record(offset_py, size_py)
        if record is None:
            return None
        cq = self.timer_queue(record.queue_id)
        if cq is None:
            return record.queue_offset
        low, high = self._queue_range(cq)
        tmp = record.queue_offset
        for _ in range(REVISE_QUEUE_STEPS):
            if tmp < 0:
                break
            unit = cq.raw_unit_at(tmp) if low <= tmp < high else None
            if unit is not None and (unit.commitlog_offset, unit.size) == (offset_py, size_py):
                return tmp
            tmp -= 1
        return record.queue_offset

    def _requeued(self, rec) -> None:
        """Messages of rmq_sys_wheel_timer/0 from the restart offset on that were enqueued
        already: a unit holds them, or the timercheck had committed past them."""
        cq = self.timer_queue(0)
        if cq is None or self.cp is None:
            return
        low, high = self._queue_range(cq)
        committed = min(self.cp["lastTimerQueueOffset"], high)
        last = rec.last_unit_queue_offset
        stop = max(committed, (last + 1) if last is not None else 0)
        stop = min(stop, high)
        if rec.queue_offset >= stop:
            return
        with_units = set()
        first = cq.raw_unit_at(rec.queue_offset)
        if first is not None:
            for arr in self.ts.unit_arrays():
                offsets, sizes = arr["offsetPy"].astype(np.int64), arr["sizePy"].astype(np.int64)
                after = offsets >= first.commitlog_offset
                with_units.update(zip(offsets[after].tolist(), sizes[after].tolist()))
        for qo in range(rec.queue_offset, stop):
            unit = cq.raw_unit_at(qo)
            if unit is None:
                continue
            record = self.record(unit.commitlog_offset, unit.size)
            if record is None or props.TIMER_DEL_UNIQKEY in record.properties:
                continue                # unreadable: skipped again; a recall is never put back
            has_unit = (unit.commitlog_offset, unit.size) in with_units
            if not has_unit and qo >= committed:
                continue                # not enqueued before the crash: enqueued once now
            rec.requeued_count += 1
            if len(rec.requeued) < LISTED:
                rec.requeued.append({"queueOffset": qo, "uniqKey": record.properties.get("UNIQ_KEY"),
                                     "realTopic": record.properties.get("REAL_TOPIC"),
                                     "commitlogOffset": unit.commitlog_offset,
                                     "why": "its unit is in the timerlog" if has_unit else
                                     "delivered when enqueued (due), below lastTimerQueueOffset"})

    # ------------------------------------------------------------- the wheel
    def slots(self):
        """(index, timeSlot, firstPos, lastPos, num, magic) of every written slot, as recovered."""
        if self.wheel is None:
            return
        w = self.wheel
        written = (w["timeSlot"] != 0) | (w["firstPos"] != 0) | (w["lastPos"] != 0) | (w["num"] != 0)
        for i in np.flatnonzero(written).tolist():
            row = w[i]
            yield (i, int(row["timeSlot"]), int(row["firstPos"]), int(row["lastPos"]), int(row["num"]),
                   int(row["magic"]))

    def pending_slots(self):
        if self.wheel is None:
            return
        w = self.wheel
        mask = self._pending_mask()
        idx = np.flatnonzero(mask)
        order = np.argsort(w["timeSlot"][idx].astype(np.int64), kind="stable")
        for i in idx[order].tolist():
            row = w[i]
            yield (i, int(row["timeSlot"]), int(row["firstPos"]), int(row["lastPos"]), int(row["num"]),
                   int(row["magic"]))

    def restart_skips(self, now_ms: int | None = None) -> int:
        """TimerMessageStore.recover moves the read time up to now minus the wheel's 7 days (less
        60 slots) when the timercheck's is older: the num of the slots a broker starting now
        skips (their messages are never delivered)."""
        if self.wheel is None:
            return 0
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        floor = (now_ms // self.precision * self.precision - fmt.SLOTS_TOTAL * self.precision
                 + RESTART_BLANK_SLOTS * self.precision)
        if floor <= self.read_time_ms:
            return 0
        times = self.wheel["timeSlot"].astype(np.int64)
        skipped = self._pending_mask() & (times * self.precision < floor)
        return int(self.wheel["num"].astype(np.int64)[skipped].sum())

    def all_congest_num(self) -> int:
        if self.wheel is None:
            return 0
        return int(self.wheel["num"].astype(np.int64)[self._pending_mask()].sum())

    def is_revised(self, index: int) -> bool:
        return index in self.recovery.revised_slots

    def unit_at(self, pos: int):
        """The 52 bytes a broker's dequeue reads at pos (any content), or None where it reads
        nothing (no kept file holds them)."""
        end = self.recovery.process_offset
        for mf in self.kept:
            if mf.file_from_offset <= pos < mf.file_from_offset + mf.file_size:
                at = pos - mf.file_from_offset
                if at < 0 or at + fmt.UNIT_SIZE > self.read_limit_for(mf, end):
                    return None
                return timerstore.unit_from(mf, at)
        return None

    def chain(self, last_pos: int):
        """The units the dequeue reads for a slot, from lastPos through prevPos; (units, ok):
        ok is False when the chain loops or leaves the timerlog before reaching -1."""
        out, pos = [], last_pos
        limit = self.recovery.process_offset // fmt.UNIT_SIZE + CHAIN_LIMIT_SLACK
        while pos != -1:
            unit = self.unit_at(pos)
            if unit is None or len(out) > limit:
                return out, False
            out.append(unit)
            pos = unit.prev_pos
        return out, True

    def unit_in_wheel(self, unit) -> bool:
        """Whether a unit's slot (as recovered) holds its time and its chain can reach the unit
        (lastPos at or after it: the dequeue walks from lastPos back through prevPos; firstPos
        plays no part in it)."""
        if self.wheel is None:
            return False
        time_slot = _jdiv(unit.delivery_ms, self.precision)
        row = self.wheel[time_slot % fmt.SLOT_COUNT]
        return int(row["timeSlot"]) == time_slot and unit.pos <= int(row["lastPos"])

    # ------------------------------------------------------------- pending
    def pending(self, *, want_units: bool = False):
        """What the dequeue will do with every slot from the read time on: Pending counts, and
        with want_units the (unit, state) pairs (state: deliver, roll, recalled, delete, lost)."""
        result = Pending(read_time_ms=self.read_time_ms, all_congest_num=self.all_congest_num(),
                         timerlog_end=self.recovery.process_offset)
        for index, time_slot, first, last, num, magic in self.pending_slots():
            units, ok = self.chain(last)
            units.reverse()                       # oldest first, as the dequeue puts them back
            records = [self.record(u.offset_py, u.size_py) for u in units]
            deletes = set()
            for unit, rec in zip(units, records):
                if unit.is_delete:
                    result.delete_markers += 1
                    key = rec.properties.get(props.TIMER_DEL_UNIQKEY) if rec is not None else None
                    if key is not None:
                        deletes.add(key)
            for unit, rec in zip(units, records):
                if unit.is_delete:
                    state = "delete"
                elif rec is None:
                    state = "lost"
                    result.lost += 1
                else:
                    topic, uniq = rec.properties.get("REAL_TOPIC"), rec.properties.get("UNIQ_KEY")
                    if uniq is not None and f"{topic}+{uniq}" in deletes:
                        state = "recalled"
                        result.recalled += 1
                    else:
                        state = "roll" if unit.magic & fmt.MAGIC_ROLL else "deliver"
                        result.deliverable += 1
                        result.rolled += state == "roll"
                        key = topic if topic is not None else "?"
                        result.by_topic[key] = result.by_topic.get(key, 0) + 1
                if want_units:
                    result.units.append((unit, state, rec))
        result.by_topic = dict(sorted(result.by_topic.items()))
        return result


@dataclass
class Pending:
    read_time_ms: int
    all_congest_num: int
    timerlog_end: int
    deliverable: int = 0        # normal and roll units on pending chains, not recalled, record readable
    rolled: int = 0             # of them, roll units (put back into the timer topic first)
    recalled: int = 0           # cancelled by a delete unit of their slot
    delete_markers: int = 0
    lost: int = 0               # their record cannot be read: the broker skips them
    by_topic: dict = field(default_factory=dict)
    units: list = field(default_factory=list)


def _jdiv(a: int, b: int) -> int:
    """Java's long division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ------------------------------------------------------------------ metrics

def read_metrics(layout):
    """config/timermetrics as TimerMetrics.load reads it (ConfigManager: the file, else its .bak).
    Returns (doc or None, path read or None, note or None)."""
    path = layout.config_dir / "timermetrics"
    if not fsutil.exists(path) and not fsutil.exists(path.with_name(path.name + ".bak")):
        return None, None, None
    return metafiles.load_config_json(path)


def metric_counts(doc) -> dict:
    """timingCount as {topic: count}; BrowserCompatible writes big longs as strings."""
    out = {}
    for topic, metric in ((doc or {}).get("timingCount") or {}).items():
        count = metric.get("count") if isinstance(metric, dict) else metric
        try:
            out[str(topic)] = int(count)
        except (TypeError, ValueError):
            out[str(topic)] = None
    return out


def timerlog_counts(view: TimerView, topics=()) -> dict:
    """Per REAL_TOPIC, what TimerMetrics counts for the units not read yet: +1 per unit, -1 per
    delete unit (on the recovered chains from the read time on).  A unit whose record cannot be
    read counts for the topic of `topics` its realTopicHash names (as checkAndReviseMetrics
    maps hashes to topics)."""
    by_hash = {java_hash(t): t for t in topics}
    out = {}
    for unit, state, rec in view.pending(want_units=True).units:
        topic = rec.properties.get("REAL_TOPIC") if rec is not None else by_hash.get(unit.topic_hash)
        if topic is None:
            continue
        out[topic] = out.get(topic, 0) + (-1 if state == "delete" else 1)
    return dict(sorted(out.items()))


# ------------------------------------------------------------------ opening

class _Opened:
    """A TimerView over a layout's files (a context manager)."""

    def __init__(self, layout, queue, **kwargs):
        from mqtool.storage.consumequeue import ConsumeQueue

        self.ts = timerstore.TimerStore(layout)
        size = layout.consume_queue_file_size()
        self.queues = {qid: ConsumeQueue(topic, qid, directory, size)
                       for topic, qid, directory in layout.consume_queues() if topic == fmt.TIMER_TOPIC}
        try:
            self.view = TimerView(self.ts, queue, timer_queues=self.queues, **kwargs)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> TimerView:
        return self.view

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if hasattr(self, "view"):
            self.view.disk_wheel = None       # a view of the mapped wheel: gone before the unmap
        for cq in self.queues.values():
            cq.close()
        self.ts.close()


def open_view(layout, queue, **kwargs) -> _Opened:
    return _Opened(layout, queue, **kwargs)


# -------------------------------------------------------- what a cut or deletion leaves dangling

def _row(view, unit, state) -> dict:
    root = view.ts.layout.root
    path = unit.path
    row = {"timerlog": fsutil.shown_path(path, root),
           "fileOffset": unit.file_offset, **unit.to_json(), "state": state}
    rec = view.record(unit.offset_py, unit.size_py)
    row["realTopic"] = rec.properties.get("REAL_TOPIC") if rec is not None else None
    return row


def dangling_units(view: TimerView, lost):
    """Units a broker would still act on (on the chains of slots not read yet: messages to
    deliver or roll, delete units; not messages a recall cancels) whose record `lost(offset_py,
    size_py)` says goes (a recovery's cut, a deletion), as report rows; a generator."""
    for unit, state, _ in view.pending(want_units=True).units:
        if state != "recalled" and lost(unit.offset_py, unit.size_py):
            yield _row(view, unit, state)


@dataclass
class Dangling:
    """How many pending timer units a change leaves pointing at commitlog bytes it removes."""

    count: int
    by_topic: dict
    listed: list
    by_file: dict        # commitlog file start offset -> how many of the units point into it

    def to_json(self) -> dict:
        return {"count": self.count, "byTopic": self.by_topic, "units": self.listed,
                "listed": len(self.listed)}

    def text(self, dry_run: bool = False) -> str:
        topics = ", ".join(f"{t or '?'}: {n}" for t, n in sorted(self.by_topic.items(), key=lambda kv: str(kv[0])))
        return f"{self.count} timer unit(s) {'would be ' if dry_run else ''}left dangling ({topics})"


def find_dangling(layout, queue, lost) -> Dangling | None:
    """The pending units `lost` leaves dangling (None without a timer store, or none dangling)."""
    if not timerstore.exists(layout):
        return None
    count, by_topic, listed, by_file = 0, {}, [], {}
    with open_view(layout, queue) as view:
        for row in dangling_units(view, lost):
            count += 1
            by_topic[row["realTopic"]] = by_topic.get(row["realTopic"], 0) + 1
            mf = queue.find_by_offset(row["offsetPy"])
            if mf is not None:
                by_file[mf.file_from_offset] = by_file.get(mf.file_from_offset, 0) + 1
            if len(listed) < LISTED:
                listed.append(row)
    return Dangling(count, by_topic, listed, by_file) if count else None


def summary(view: TimerView, p: Pending | None = None) -> dict:
    """The numbers info, stats and dump show: what the broker will deliver, beside it what
    recalls cancel and how many are roll units, and the recovery's findings (p: view.pending()'s
    answer when the caller has it already)."""
    p = p if p is not None else view.pending()
    rec = view.recovery
    return {"pending": p.all_congest_num, "deliverable": p.deliverable, "recalled": p.recalled,
            "rolled": p.rolled, "deleteMarkers": p.delete_markers, "lost": p.lost, "byTopic": p.by_topic,
            "allCongestNum": p.all_congest_num, "lastReadTimeMs": view.read_time_ms,
            "timerlogEnd": rec.process_offset, "putBack": rec.put_back, "putBackPending": rec.put_back_pending,
            "queueOffset": rec.queue_offset, "skippedOnRestart": view.restart_skips(),
            "deliveredTwice": rec.requeued_count,
            "deliveredTwiceKeys": [r["uniqKey"] for r in rec.requeued]}


def deliverable_by_hour(p: Pending, hour_ms: int) -> dict:
    """summary()'s deliverable units (neither recalled, nor delete units, nor lost) by the hour
    they are due: {hour number since the epoch: units} (p: view.pending(want_units=True)'s answer)."""
    hours: dict = {}
    for unit, state, _ in p.units:
        if state in ("deliver", "roll"):
            hour = unit.delivery_ms // hour_ms
            hours[hour] = hours.get(hour, 0) + 1
    return dict(sorted(hours.items()))


def pending_counts(layout, queue) -> dict | None:
    """summary() of a layout's timer store (None without one)."""
    if not timerstore.exists(layout):
        return None
    with open_view(layout, queue) as view:
        return summary(view)
