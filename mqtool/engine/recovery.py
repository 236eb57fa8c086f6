"""Recovering a store on open, as DefaultMessageStore.load/recover/start do.

First a plan is computed without changing anything; then `apply` carries it
out.  The `recover` command prints the plan for --dry-run, and the store's
open applies it.

Normal recovery (no abort file): each consume queue is scanned from its
third-last file to its first invalid unit; the commitlog is walked from its
third-last file (checkCRCOnRecover honoured) up to the first entry that is
not a valid record; that point is the cut.

Abnormal recovery (abort file present): the walk starts at the newest file
whose first record was stored at or before the checkpoint's safe time
(min(physic, logics) - 3 s; with messageIndexEnable and messageIndexSafe also
the index time), at file 0 if none qualifies, and everything from there to the
cut is dispatched again into consume queues and the index.  Index files that
ended after the checkpoint's index time are dropped first, as the broker does.

Both: consume-queue units pointing at or beyond the cut are cut; the commitlog
bytes after the cut (in the cut's file) are zeroed and later files removed,
every byte kept in the quarantine first; files keep their mapped size.
Batch consume queues (BatchConsumeQueue.recover + truncateDirtyLogicFiles) are cut the same way:
units whose records are at or past the cut go; records of BatchCQ topics are dispatched into
batchconsumequeue/, never consumequeue/.
Consume queue extensions (ConsumeQueueExt.recover + truncateByMaxAddress): each queue's ext
files end just past the ext unit its last kept unit points at; the rest is cut like the queues.
Finally the records between the consume queues' end and the cut are
dispatched (the broker's reput at start), ext units first.

The 5.x timer store gets what TimerMessageStore.load()'s recover() does, and what a running
broker then persists (mqtool/storage/timerview.py): units written after the last wheel flush
are put back on their slots' chains (the revised slots are written to the timerwheel) and the
timerlog ends where its units end (later files removed, a damaged tail zeroed); the timercheck
is left as it is (each load recovers from it again, to the same state).  Where the recovery's
restart offset moves rmq_sys_wheel_timer's read position back behind messages already enqueued, the
plan lists them (`timerRecovery.deliveredTwice`): a restarted broker delivers them twice.
Pending units pointing at or past the cut are listed in the plan
(`timer`), and their records, being cut bytes, are in the quarantine with a list of the
units (timer-units.jsonl) written before anything is zeroed, so each message can be
put back.  A broker skips a unit whose record it cannot read (TimerMessageStore's
dequeue_get_msg_miss); the report is the operator's warning that those messages are lost
from the store until put back.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mqtool.errors import RefusedError
from mqtool.formats import batchconsumequeue as batch_format
from mqtool.formats import dledger as dledger_format
from mqtool.formats import consumequeueext as ext_format
from mqtool.formats import sysflag
from mqtool.formats import timer as timer_format
from mqtool.formats.commitlog import (
    BORN_HOST_AT,
    HOST_V4_SIZE,
    HOST_V6_SIZE,
    MAGIC_AT,
    MAGIC_V1,
    MAGIC_V2,
    SYS_FLAG_AT,
    Blank,
    Record,
    decode_entry,
)
from mqtool.formats.consumequeue import UNIT_SIZE, UNIT_STRUCT, is_valid_unit
from mqtool.formats.filenames import name_to_offset
from mqtool.formats.written import written_end
from mqtool.storage import commitlog, dledger, timerstore
from mqtool.storage.commitlog import EndOfData, Problem

if TYPE_CHECKING:
    # timerview (numpy's) is imported where a timer store is recovered: info walks the commitlog
    # through walk_for_recovery, and a store without a timer store never needs it
    from mqtool.storage import timerview


@dataclass
class QueueCut:
    topic: str
    queue_id: int
    keep_bytes: int          # logical byte offset the queue ends at after the cut
    written_end: int         # logical byte offset of the last non-zero byte (+1) before the cut
    reason: str

    def to_json(self, unit_size: int) -> dict:
        return {"topic": self.topic, "queueId": self.queue_id, "keepBytes": self.keep_bytes,
                "keepUnits": self.keep_bytes // unit_size,
                "unitsCut": max(0, (self.written_end - self.keep_bytes) // unit_size), "reason": self.reason}


@dataclass
class ExtCut:
    """Where a consume queue's extension files end after recovery (truncateByMaxAddress): just
    past the unit its last kept unit points at.  Bytes from there to written_end are zeroed and
    later files removed, all kept in the quarantine first."""
    topic: str
    queue_id: int
    keep: int                # ext queue offset the files end at after the cut
    written_end: int         # how far non-zero bytes reach in the file holding keep
    removed_files: list[Path] = field(default_factory=list)

    @property
    def cuts(self) -> bool:
        return self.written_end > self.keep or bool(self.removed_files)

    def to_json(self) -> dict:
        return {"topic": self.topic, "queueId": self.queue_id, "keepBytes": self.keep,
                "bytesCut": max(0, self.written_end - self.keep), "removedFiles": [str(p) for p in self.removed_files]}


@dataclass
class TimerPlan:
    """What the broker's timer recovery changes (timerview.TimerRecovery), as bytes to write."""

    recovery: timerview.TimerRecovery
    checkpoint_before: dict | None
    checkpoint_after: dict | None
    tail: tuple | None = None        # (timerlog file, start, end): bytes after the units' end, zeroed
    summary: dict | None = None      # timerview.summary: what the timer store will deliver

    @property
    def checkpoint_changes(self) -> dict:
        if self.checkpoint_before is None:
            return {}
        return {k: [self.checkpoint_before[k], v] for k, v in self.checkpoint_after.items()
                if k in timer_format.CHECKPOINT_FIELDS and self.checkpoint_before[k] != v}

    @property
    def changes_anything(self) -> bool:
        r = self.recovery
        return bool(r.revised_slots or r.removed_files or self.tail)

    def to_json(self) -> dict:
        out = self.recovery.to_json()
        out["checkpointInMemory"] = self.checkpoint_changes     # what the recovery computes; not written
        out["pending"] = self.summary
        out["tailZeroed"] = None if self.tail is None else {"file": str(self.tail[0]), "start": self.tail[1],
                                                            "end": self.tail[2]}
        return out


@dataclass
class RecoveryPlan:
    mode: str                                  # "normal" or "abnormal"
    walk_from: int                             # commitlog offset the walk started at
    cut: int                                   # commitlog offset where valid data ends
    data_end: int                              # how far non-zero bytes reach (>= cut)
    removed_files: list[Path] = field(default_factory=list)   # commitlog files beyond the cut
    queue_cuts: list[QueueCut] = field(default_factory=list)
    batch_cuts: list[QueueCut] = field(default_factory=list)  # batch consume queues (46-byte units)
    ext_ends: list[ExtCut] = field(default_factory=list)     # every extension file queue's end
    dropped_index_files: list[Path] = field(default_factory=list)    # newer than the checkpoint (crash)
    rebuilt_index_files: list[Path] = field(default_factory=list)    # hold entries at or past the cut
    empty_files: list[Path] = field(default_factory=list)   # 0-byte newest files a crash left (5.x deletes them)
    redispatch_from: int = 0
    dispatch_end: int | None = None            # DLedger: the committed entries' end (normal), or the
                                               # first entry whose record is not valid (< cut)
    dispatch_end_why: str | None = None        # what ends the dispatch at dispatch_end
    stop: Problem | None = None                # why the walk stopped, when it was damage
    # DLedger: its index units as DLedgerMmapFileStore.recover leaves them: rewritten from the data
    # from the first kept entry they disagree with ((index, pos) of that entry), and none past the
    # kept entries' (units_end: their end in the index; units_written: how far written units reach)
    units_from: tuple | None = None
    units_end: int | None = None
    units_written: int = 0
    records_checked: int = 0
    timer: timerview.Dangling | None = None   # pending timer units pointing at or past the cut
    timer_recovery: TimerPlan | None = None     # the broker's timer recovery (5.x timer store)

    @property
    def changes_anything(self) -> bool:
        return bool(self.data_end > self.cut or self.removed_files or self.queue_cuts or self.ext_cuts
                    or self.batch_cuts
                    or self.empty_files
                    or self.dropped_index_files or self.rebuilt_index_files or self.redispatch_from < self._dispatch_to
                    or self.rewrites_units
                    or (self.timer_recovery is not None and self.timer_recovery.changes_anything))

    @property
    def rewrites_units(self) -> bool:
        return self.units_end is not None and (self.units_from is not None or self.units_written > self.units_end)

    @property
    def _dispatch_to(self) -> int:
        return self.cut if self.dispatch_end is None else self.dispatch_end

    @property
    def ext_cuts(self) -> list[ExtCut]:
        return [e for e in self.ext_ends if e.cuts]

    def to_json(self) -> dict:
        return {
            "type": "plan", "mode": self.mode, "walkFrom": self.walk_from, "cut": self.cut,
            "bytesCut": self.data_end - self.cut, "removedFiles": [str(p) for p in self.removed_files],
            "queueCuts": [q.to_json(UNIT_SIZE) for q in self.queue_cuts],
            "batchQueueCuts": [q.to_json(batch_format.UNIT_SIZE) for q in self.batch_cuts],
            "extCuts": [e.to_json() for e in self.ext_cuts],
            "droppedIndexFiles": [str(p) for p in self.dropped_index_files],
            "emptyFiles": [str(p) for p in self.empty_files],
            "rebuiltIndexFiles": [str(p) for p in self.rebuilt_index_files],
            "redispatchFrom": self.redispatch_from, "redispatchBytes": max(0, self._dispatch_to - self.redispatch_from),
            "dispatchEnd": self.dispatch_end,
            "dledgerIndex": None if not self.rewrites_units else {
                "rewriteFromIndex": self.units_from[0] if self.units_from else None,
                "endIndex": self.units_end // dledger_format.INDEX_UNIT_SIZE,
                "unitsCut": max(0, self.units_written - self.units_end) // dledger_format.INDEX_UNIT_SIZE},
            "stop": self.stop.to_json() if self.stop else None, "recordsChecked": self.records_checked,
            "timerDangling": self.timer.to_json() if self.timer else None,
            "timerRecovery": self.timer_recovery.to_json() if self.timer_recovery else None,
        }


# ------------------------------------------------------------------ scanning

def scan_consume_queue(cq) -> tuple[int, int, int]:
    """ConsumeQueue.recover: (end in logical bytes, max physic offset, written end).

    Scans from the third-last file up to the first invalid unit."""
    files = cq.files.files
    if not files:
        return 0, -1, 0
    index = max(len(files) - 3, 0)
    end = files[index].file_from_offset
    max_physic = -1
    written_end = files[-1].file_from_offset + cq.written_end(files[-1])
    for mf in files[index:]:
        count = 0
        for offset, size, _ in UNIT_STRUCT.iter_unpack(mf.buf[:mf.file_size - mf.file_size % UNIT_SIZE]):
            if not is_valid_unit(offset, size):
                break
            count += 1
            max_physic = offset + size
        end = mf.file_from_offset + count * UNIT_SIZE
        if count * UNIT_SIZE != mf.file_size:
            break
    return end, max_physic, max(written_end, end)


def queue_cut_for(cq, phy_offset: int, end: int) -> int:
    """ConsumeQueue.truncateDirtyLogicFiles: keep units pointing below phy_offset."""
    files = [mf for mf in cq.files.files if mf.file_from_offset < end] or cq.files.files[:1]
    keep = end
    for mf in reversed(files):
        units = list(UNIT_STRUCT.iter_unpack(mf.buf[:min(mf.file_size, end - mf.file_from_offset)
                                                    - (min(mf.file_size, end - mf.file_from_offset) % UNIT_SIZE)]))
        count = len(units)
        while count and (units[count - 1][0] >= phy_offset or not is_valid_unit(*units[count - 1][:2])):
            count -= 1
        keep = mf.file_from_offset + count * UNIT_SIZE
        if count:
            break
    return keep


def ext_end(cq, keep: int, ext) -> ExtCut:
    """ConsumeQueueExt.recover + truncateByMaxAddress: the extension files end just past the unit
    the last kept unit with an ext address points at (all of them cut when none does).  A unit
    missing there is left for verify-crc to report: nothing is cut, as the broker logs and goes on."""
    end = ext.files.min_offset
    for mf in reversed([mf for mf in cq.files.files if mf.file_from_offset < keep]):
        count = min(mf.file_size, keep - mf.file_from_offset) // UNIT_SIZE
        tags = [t for _, _, t in UNIT_STRUCT.iter_unpack(mf.buf[:count * UNIT_SIZE]) if ext_format.is_ext_addr(t)]
        if tags:
            end = ext.unit_end(tags[-1])
            break
    files = ext.files.files
    holder = ext.files.find_by_offset(end) if end is not None else None
    if holder is None:           # a unit not there, or the end is past the files: nothing to cut
        last = files[-1]
        return ExtCut(cq.topic, cq.queue_id, max(ext.written_end(last), last.file_from_offset),
                      ext.written_end(last))
    return ExtCut(cq.topic, cq.queue_id, end, max(ext.written_end(holder), end),
                  [mf.path for mf in files if mf.file_from_offset > holder.file_from_offset])


def _first_store_time(mf) -> int | None:
    """The store time of the file's first record, if it starts with one (isMappedFileMatchedRecover;
    in a DLedger data file the record of the first entry, past the entry's header: DLedgerCommitLog's)."""
    buf = mf.buf
    at = dledger_format.HEADER_SIZE if commitlog.is_dledger_file(mf) else 0
    if mf.file_size < at + 64:
        return None
    magic = int.from_bytes(buf[at + MAGIC_AT:at + MAGIC_AT + 4], "big")
    if magic not in (MAGIC_V1, MAGIC_V2):
        return None
    flag = int.from_bytes(buf[at + SYS_FLAG_AT:at + SYS_FLAG_AT + 4], "big", signed=True)
    pos = at + BORN_HOST_AT + (HOST_V6_SIZE if flag & sysflag.BORNHOST_V6 else HOST_V4_SIZE)   # storeTimestamp
    value = int.from_bytes(buf[pos:pos + 8], "big", signed=True)
    return value or None


def abnormal_start_index(files, safe_time: int) -> int:
    """The newest file whose first record's store time is <= safe_time; 0 if none."""
    for index in range(len(files) - 1, -1, -1):
        stored = _first_store_time(files[index])
        if stored is not None and stored <= safe_time:
            return index
    return 0


def walk_for_recovery(queue, start_index: int, check_crc: bool, *, dispatch_stop: list | None = None,
                      units=None, ledger: list | None = None, last_stored: list | None = None,
                      compiled: bool = True):
    """Walk from file start_index to the first entry that is not a valid record (a record whose
    body CRC fails counts as not valid, with checkCRCOnRecover), with the compiled walk.

    A DLedger store's data ends where DLedgerMmapFileStore.recover ends it (ledger_cut): there a
    record that is not valid is kept in its entry (DLedger reads no record), and only ends the
    broker's dispatch: its entry's offset is appended to dispatch_stop, when given.  units (the
    store's dledger.IndexUnits): the entries are checked against them too, and ledger_cut's
    LedgerCut is appended to ledger, when given.  last_stored: the store time of the last record
    before the cut is appended to it (when there is one).  compiled=False: the reference walk
    (a record at a time, no compiled kernel loaded), for a few megabytes where loading the kernels
    would cost more than the walk.

    Returns (cut, data_end, stop problem or None, records)."""
    files = queue.files
    if not files:
        return 0, 0, None, 0
    if commitlog.is_dledger_file(files[0]):
        found = ledger_cut(queue, start_index, check_crc, units, compiled=compiled)
        if last_stored is not None and found.last_stored is not None:
            last_stored.append(found.last_stored)
        if dispatch_stop is not None and found.bad_record is not None:
            dispatch_stop.append(found.bad_record)
        if ledger is not None:
            ledger.append(found)
        return _with_data_end(queue, found.cut, found.stop, found.records)
    fastscan, chunk = None, ()     # the compiled walk and its Chunk type (none with the reference walk)
    if compiled:
        import numpy as np  # here, not at the top: commands that never recover

        from mqtool.native import fastscan
        chunk = fastscan.Chunk
    cut = files[start_index].file_from_offset
    records = 0
    stop = last_time = None
    for i in range(start_index, len(files)):
        mf = files[i]
        is_last = i == len(files) - 1
        blank = False
        for entry in commitlog.walk_file(mf, check_crc=check_crc, is_last=True, resync_after_damage=False,
                                         scanner=fastscan):
            if isinstance(entry, Record):      # the reference walk's (compiled=False)
                if check_crc and not entry.crc_ok():
                    stop = _crc_problem(mf, entry.offset)
                    cut = entry.offset
                    break
                records += 1
                cut = entry.offset + entry.total_size
                last_time = entry.store_timestamp
            elif isinstance(entry, chunk):
                c = entry.columns
                bad = np.flatnonzero(~c["crc_ok"]) if check_crc else []
                if len(bad):
                    j = int(bad[0])
                    offset = int(c["offset"][j])
                    stop = _crc_problem(mf, offset)
                    records += j
                    cut = offset
                    if j:
                        last_time = int(c["store_ts"][j - 1])
                    break
                records += entry.count
                cut = int(c["offset"][-1] + c["size"][-1])
                last_time = int(c["store_ts"][-1])
            elif isinstance(entry, Blank):
                blank = True
                cut = entry.offset
                break
            elif isinstance(entry, Problem):
                stop = entry
                break
            elif isinstance(entry, EndOfData):
                break
        if stop is not None or not blank or is_last:
            break
        cut = files[i + 1].file_from_offset
    if last_stored is not None and last_time is not None:
        last_stored.append(last_time)
    return _with_data_end(queue, cut, stop, records)


def _crc_problem(mf, offset: int) -> Problem:
    record = decode_entry(mf.buf, offset - mf.file_from_offset, mf.file_size, mf.file_from_offset)
    return Problem("crc-mismatch", str(mf.path), offset - mf.file_from_offset, offset,
                   f"body CRC {record.body_crc} stored, {record.computed_body_crc()} computed")


@dataclass
class LedgerCut:
    """What DLedgerMmapFileStore.recover makes of a DLedger store's data (ledger_cut)."""

    cut: int                          # where the data ends
    stop: Problem | None = None       # the entry it does not accept there, if any
    records: int = 0                  # entries walked
    bad_record: int | None = None     # the first kept entry whose record is not valid
    last_index: int = -1              # the last kept entry's index
    last_term: int = -1               # and its term
    last_end: int = -1                # and where it ends (pos + size)
    last_stored: int | None = None    # the store time of the last kept entry's record
    unit_mismatch: tuple | None = None   # (index, pos) of the first kept entry its index unit disagrees with

    @property
    def end(self) -> tuple | None:
        """(index, term, end) of the last kept entry, as dledger.read_ledger and dispatch_end take
        what a walk already found; None when no entry was kept."""
        return (self.last_index, self.last_term, self.last_end) if self.last_index >= 0 else None


def ledger_cut(queue, start_index: int, check_crc: bool, units=None, compiled: bool = True) -> LedgerCut:
    """Where DLedgerMmapFileStore.recover ends a DLedger store's data, walking from file
    start_index: at the first entry it does not accept (walk_entries' checks: magic, size, pos
    field, body length; a blank moves on to the next file, zeros end the data) and, from its own
    first file (the third-last) on, at the first entry whose index is not the one before's + 1
    or whose term is lower.  Entries are kept whatever their bodies hold.  units (IndexUnits):
    from that file on, the first kept entry its unit disagrees with (DLedger rewrites the units
    from there).  compiled=False: the reference walk (see walk_for_recovery)."""
    import numpy as np  # here, not at the top: commands that never recover

    fastscan, chunk = None, ()     # the compiled walk and its Chunk type (none with the reference walk)
    if compiled:
        from mqtool.native import fastscan
        chunk = fastscan.Chunk
    files = queue.files
    ledger_from = max(len(files) - 3, 0)
    found = LedgerCut(files[start_index].file_from_offset)
    cut, records, stop, bad_record, prev = found.cut, 0, None, None, None
    for i in range(start_index, len(files)):
        mf = files[i]
        blank = False
        for item in commitlog.walk_file(mf, check_crc=check_crc, is_last=True, resync_after_damage=False,
                                        scanner=fastscan):
            if isinstance(item, (chunk, Record)) or (isinstance(item, Problem)
                                                     and item.kind == "bad-entry-body"):
                if isinstance(item, chunk):
                    c = item.columns
                    pos, index, term = c["offset"] - dledger_format.HEADER_SIZE, c["entry_index"], c["entry_term"]
                    ends, crc_ok = c["offset"] + c["size"], c["crc_ok"] if check_crc else np.ones(item.count, bool)
                else:      # a record the reference walk read, or an entry whose body is not one record
                    body = item.offset
                    at = np.array([body - dledger_format.HEADER_SIZE - mf.file_from_offset], dtype=np.int64)
                    fields = dledger.read_fields(mf.buf, at, dledger_format.HEADER_FIELDS)
                    pos, index, term = fields["pos"], fields["index"], fields["term"]
                    ends = pos + fields["size"]
                    crc_ok = np.array([isinstance(item, Record) and (not check_crc or item.crc_ok())])
                broken = dledger.chain_problems(index, term, prev) if i >= ledger_from else []
                rows = min(broken)[0] if broken else len(index)    # the entries DLedger keeps
                if rows:
                    prev = (int(index[rows - 1]), int(term[rows - 1]))
                    cut = found.last_end = int(ends[rows - 1])
                    if isinstance(item, chunk):
                        found.last_stored = int(c["store_ts"][rows - 1])
                    elif isinstance(item, Record):
                        found.last_stored = item.store_timestamp
                    records += rows
                    bad = np.flatnonzero(~crc_ok[:rows])
                    if bad_record is None and len(bad):
                        bad_record = int(pos[bad[0]])
                    if units is not None and found.unit_mismatch is None and i >= ledger_from:
                        found.unit_mismatch = _unit_mismatch(units, pos[:rows], ends[:rows], index[:rows],
                                                             term[:rows])
                if broken:
                    _, kind, message, _, _ = min(broken)
                    cut = int(pos[rows])
                    stop = Problem(kind, str(mf.path), cut - mf.file_from_offset, cut,
                                   f"DLedger's recovery ends the data here: {message}")
                    break
            elif isinstance(item, Blank):
                blank = True
                cut = item.offset
                break
            elif isinstance(item, Problem):
                stop = item
                break
            elif isinstance(item, EndOfData):
                break
        if stop is not None or not blank or i == len(files) - 1:
            break
        cut = files[i + 1].file_from_offset
    found.cut, found.stop, found.records, found.bad_record = cut, stop, records, bad_record
    found.last_index, found.last_term = prev if prev else (-1, -1)
    return found


def _unit_mismatch(units, pos, ends, index, term):
    """(index, pos) of the first of these entries whose index unit is missing or disagrees with
    it (magic, pos, size, index, term: what DLedgerMmapFileStore.recover compares), or None."""
    import numpy as np

    unit = dledger.gather_units(units, index)
    ok = unit["present"] & (unit["magic"] == dledger_format.MAGIC_1) & (unit["pos"] == pos) & \
        (unit["size"] == ends - pos) & (unit["index"] == index) & (unit["term"] == term)
    bad = np.flatnonzero(~ok)
    return (int(index[bad[0]]), int(pos[bad[0]])) if len(bad) else None


def _with_data_end(queue, cut: int, stop, records: int):
    """(cut, how far written bytes reach from the cut in its file, stop, records)."""
    files = queue.files
    # how far written bytes reach in the cut's file (what a cut zeroes)
    mf = queue.find_by_offset(cut) or (files[-1] if cut >= files[-1].file_end_offset else None)
    if mf is not None and cut < mf.file_end_offset:
        # past data_end (a read-only map's: where the file's last data extent ends) is a hole, zeros:
        # not read, so a preallocated file's untouched gigabyte is not paged in to find nothing
        data_end = mf.file_from_offset + written_end(mf.buf, cut - mf.file_from_offset,
                                                                min(mf.file_size, mf.data_end))
    else:
        data_end = cut
    return cut, max(data_end, cut), stop, records


# ------------------------------------------------------------------- planning

def plan(store, *, abnormal: bool) -> RecoveryPlan:
    """What recovery would do to this open store; changes nothing."""
    config = store.config
    queue = store.commitlog_queue
    # a store switched to DLedger: DLedgerCommitLog.recover walks DLedger's files only, once it has
    # any (the old commitlog was recovered, and ended with a BLANK, when DLedger started)
    part = dledger.recovered_part(queue)
    files = part.files
    # ... and with no DLedger data yet it recovers the old commitlog normally, even after a crash
    abnormal = abnormal and not dledger.switch_pending(store.layout, queue)
    mode = "abnormal" if abnormal else "normal"
    if abnormal:
        safe = store.checkpoint.min_timestamp(
            index_safe=config.messageIndexEnable and config.messageIndexSafe)
        start_index = abnormal_start_index(files, safe) if files else 0
    else:
        start_index = max(len(files) - 3, 0)
    bad_record, ledger = [], []    # a DLedger store: the first kept entry whose record is not valid; LedgerCut
    units = dledger.IndexUnits(store.layout.dledger_index_files()) if store.layout.is_dledger() else None
    try:
        cut, data_end, stop, records = walk_for_recovery(part, start_index, config.checkCRCOnRecover,
                                                         dispatch_stop=bad_record, units=units, ledger=ledger)
        written = _units_written(units) if units is not None else 0
    finally:
        if units is not None:
            units.close()
    walk_from = files[start_index].file_from_offset if files else 0
    result = RecoveryPlan(mode, walk_from, cut, data_end, stop=stop, records_checked=records)
    if ledger:
        result.units_from = ledger[0].unit_mismatch
        result.units_end = (ledger[0].last_index + 1) * dledger_format.INDEX_UNIT_SIZE
        result.units_written = written
    cut_file = queue.find_by_offset(cut)
    if cut_file is not None:
        result.removed_files = [mf.path for mf in files if mf.file_from_offset > cut_file.file_from_offset]
    # where the queues end: the cut, or (a crashed DLedger store) the first kept entry whose record
    # is not valid, where DLedgerCommitLog's abnormal recovery stops dispatching and truncates the
    # queues (truncateDirtyLogicFiles)
    queue_end = bad_record[0] if abnormal and bad_record else cut
    max_cq_physic = -1
    pointed = -1             # the furthest any consume queue unit reaches into the commitlog
    for (topic, queue_id), cq in sorted(store.dispatcher.queues.items()):
        end, max_physic, written_end = scan_consume_queue(cq)
        pointed = max(pointed, max_physic)
        keep = end
        if max_physic >= queue_end:
            keep = queue_cut_for(cq, queue_end, end)
            max_physic = _max_physic_below(cq, keep)
        if keep < written_end:
            reason = "units beyond the commitlog's end" if keep < end else "invalid units after the last valid one"
            result.queue_cuts.append(QueueCut(topic, queue_id, keep, written_end, reason))
        max_cq_physic = max(max_cq_physic, max_physic)
        ext = store.dispatcher.ext_queues.get((topic, queue_id))
        if ext is not None and ext.files.files:
            result.ext_ends.append(ext_end(cq, keep, ext))
    for (topic, queue_id), bq in sorted(store.dispatcher.batch_queues.items()):   # BatchConsumeQueue.recover
        end, max_physic, written_end = bq.scan()
        pointed = max(pointed, max_physic)
        keep = end
        if max_physic > queue_end:                 # truncateDirtyLogicFiles: units of records at/past the cut
            keep, max_physic = bq.cut_for(queue_end, end)
        if keep < written_end:
            reason = "units beyond the commitlog's end" if keep < end else "invalid units after the last valid one"
            result.batch_cuts.append(QueueCut(topic, queue_id, keep, written_end, reason))
        max_cq_physic = max(max_cq_physic, max_physic)
    result.dropped_index_files = list(store.dropped_index_files)
    queues = ([store.commitlog_queue] + [cq.files for _, cq in sorted(store.dispatcher.queues.items())]
              + [bq.files for _, bq in sorted(store.dispatcher.batch_queues.items())])
    result.empty_files = [q.empty_file for q in queues + [store.index] if q.empty_file is not None]
    lost = queue.empty_file
    if lost is not None and pointed > name_to_offset(lost.name):
        raise RefusedError("this 0-byte commitlog file held messages (consume queue units point into it): "
                           "they are lost, this is not a crash while the file was being created; "
                           "`mqtool salvage` copies every intact message into a new store", path=lost)
    min_offset = queue.files[0].file_from_offset if queue.files else 0
    if not abnormal:     # a DLedger store: a broker's reput dispatches the committed entries only
        end = dledger.dispatch_end(store.layout, queue, ledger[0].end if ledger else None)   # as walked above
        if end is not None and end < cut:
            result.dispatch_end = end
            result.dispatch_end_why = f"the committed DLedger entries; {cut - end:,} bytes of uncommitted ones follow"
    if bad_record and bad_record[0] < result._dispatch_to:   # and no record past one that is not valid
        result.dispatch_end = bad_record[0]
        result.dispatch_end_why = (f"the DLedger entry at {bad_record[0]} holds no valid record: the broker's "
                                   "dispatch stops there, DLedger keeps the entry")
    if abnormal:
        result.redispatch_from = walk_from
        if dledger.division(queue) is not None:
            # a switched store: DLedgerCommitLog.recover walks DLedger's files only, and the broker's
            # reput starts at the queues' furthest offset, which may lie in the old part
            result.redispatch_from = min(walk_from, max(max_cq_physic, min_offset))
    else:
        result.redispatch_from = min(max(max_cq_physic, min_offset), cut)
    if cut < data_end or result.removed_files:
        from mqtool.storage import timerview
        result.timer = timerview.find_dangling(store.layout, queue, lambda offset, size: offset + size > cut)
    result.timer_recovery = timer_plan(store, cut, result.queue_cuts)
    # index files holding entries for records at or past the cut are rebuilt from their first record
    stale = [f for f in store.index.files if f.index_count > 1 and f.end_phy_offset >= cut]
    if stale:
        result.rebuilt_index_files = [f.path for f in stale]
        first = max(min(f.begin_phy_offset for f in stale), min_offset)
        result.redispatch_from = min(result.redispatch_from, _record_boundary_at_or_before(queue, first))
    return result


def timer_plan(store, cut: int, queue_cuts) -> TimerPlan | None:
    """The broker's timer recovery, on the store as its commitlog recovery leaves it: records at
    or past the cut cannot be read, rmq_sys_wheel_timer's queue ends where it is cut."""
    layout = store.layout
    if not timerstore.exists(layout) or layout.is_dledger():
        return None
    queues = {qid: cq for (topic, qid), cq in store.dispatcher.queues.items() if topic == timer_format.TIMER_TOPIC}
    qc = next((q for q in queue_cuts if q.topic == timer_format.TIMER_TOPIC and q.queue_id == 0), None)
    from mqtool.storage import timerview
    with timerstore.TimerStore(layout) as ts:
        view = timerview.TimerView(ts, store.commitlog_queue, lost=lambda offset, size: offset + size > cut,
                                   timer_queues=queues, queue_end=None if qc is None else qc.keep_bytes // UNIT_SIZE)
        try:
            rec = view.recovery
            cp = ts.checkpoint
            tail = None
            mf = next((m for m in view.kept if m.file_from_offset <= rec.process_offset < m.file_end_offset), None)
            if mf is not None:
                start = rec.process_offset - mf.file_from_offset
                end = written_end(mf.buf, start)    # a megabyte at a time, not the file's rest copied
                if end > start:
                    tail = (mf.path, start, end)
            return TimerPlan(rec, cp, rec.checkpoint(cp) if cp is not None else None, tail, timerview.summary(view))
        finally:
            view.disk_wheel = None


def _apply_timer(store, tp: TimerPlan, quarantine) -> None:
    """Write what the broker's timer recovery leaves in memory and a running broker's flush
    service persists: the revised slots (num as it was: the recovery does not recount); drop
    what the recovery drops (everything kept first).  The timercheck is left as it is: every
    load recovers from it again and arrives at the same wheel and the same restart offset, and
    its lastTimerLogFlushPos and masterTimerQueueOffset are what tells which units the wheel's
    counts may miss and which messages a broker delivers twice."""
    layout, rec = store.layout, tp.recovery
    for path in rec.removed_files:
        quarantine.move_file(path, f"timerlog file after the timerlog's end at {rec.process_offset} "
                                   "(a broker's timer recovery deletes it)")
    if tp.tail is not None:
        path, start, end = tp.tail
        with open(path, "r+b") as fh:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                quarantine.save_range(path, data, start, end, f"timerlog bytes after its units' end at "
                                      f"{rec.process_offset} (not units: a broker's timer recovery ends the log here)")
            fh.seek(start)
            fh.write(bytes(end - start))
            fh.flush()
            os.fsync(fh.fileno())
    if rec.revised_slots:
        path = layout.timerwheel_path
        low, high = min(rec.revised_slots), max(rec.revised_slots) + 1
        with open(path, "r+b") as fh:
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
                quarantine.save_range(path, data, low * timer_format.SLOT_SIZE, high * timer_format.SLOT_SIZE,
                                      f"timerwheel slots {low}..{high - 1} before the broker's timer recovery "
                                      f"revised {len(rec.revised_slots)} of them")
            for index, values in sorted(rec.revised_slots.items()):
                fh.seek(index * timer_format.SLOT_SIZE)
                fh.write(timer_format.SLOT.build(dict(zip(timer_format.SLOT_DTYPE.names, values))))
            fh.flush()
            os.fsync(fh.fileno())

def _record_boundary_at_or_before(queue, offset: int) -> int:
    """An index file's beginPhyOffset is a record's offset; recovery re-dispatches from the
    start of that record's file, the nearest point a walk can start from."""
    mf = queue.find_by_offset(offset)
    return mf.file_from_offset if mf is not None else offset


def _max_physic_below(cq, keep: int) -> int:
    if keep <= 0:
        return -1
    mf = cq.files.find_by_offset(keep - UNIT_SIZE)
    if mf is None:
        return -1
    offset, size, _ = UNIT_STRUCT.unpack_from(mf.buf, keep - UNIT_SIZE - mf.file_from_offset)
    return offset + size


# ------------------------------------------------------------------- applying

def apply(store, p: RecoveryPlan, quarantine) -> None:
    """Carry out a plan on the open store: cut, quarantine, re-dispatch."""
    queue = store.commitlog_queue
    # timer units left dangling: listed in the quarantine while their records can still be read
    if p.timer is not None:
        from mqtool.storage import timerview
        with timerview.open_view(store.layout, queue) as view:
            quarantine.save_rows("timer-units.jsonl", timerview.dangling_units(
                view, lambda offset, size: offset + size > p.cut),
                f"pending timer units whose records are at or past the recovery cut at {p.cut} (the timerlog "
                "and wheel are left as they are; the records are among the cut bytes kept here)")
    # 0. empty files a crash left while creating them: out of the way before anything is written
    for path in p.empty_files:
        quarantine.move_file(path, "0-byte file left by a crash while it was being created")
    for q in ([queue] + [cq.files for cq in store.dispatcher.queues.values()] + [store.index]
              + [bq.files for bq in store.dispatcher.batch_queues.values()]):
        q.empty_file = None
    # 1. commitlog: keep cut bytes, zero them, move later files out
    mf = queue.find_by_offset(p.cut)
    if mf is not None and p.data_end > p.cut:
        start = p.cut - mf.file_from_offset
        end = p.data_end - mf.file_from_offset
        quarantine.save_range(mf.path, mf.buf, start, end, f"commitlog bytes after the recovery cut at {p.cut}")
        mf.buf[start:end] = bytes(end - start)
    queue.truncate_dirty_files(p.cut, remove=lambda f: quarantine.move_file(
        f.path, f"commitlog file beyond the recovery cut at {p.cut}"))
    queue.set_where(p.cut)
    if p.rewrites_units:     # a DLedger store's index units, as its recovery leaves them
        _apply_units(store, p, quarantine)
    # 2. consume queues
    for qc in p.queue_cuts:
        _cut_files(store.dispatcher.queue(qc.topic, qc.queue_id, create=False).files, qc, UNIT_SIZE,
                   "consume queue", quarantine)
    for cq in store.dispatcher.queues.values():
        end, max_physic, _ = scan_consume_queue(cq)
        if not any(q.topic == cq.topic and q.queue_id == cq.queue_id for q in p.queue_cuts):
            _set_queue_end(cq, end)
        cq.max_physic_offset = max_physic
    for ec in p.ext_ends:
        _cut_ext(store.dispatcher.ext_queue(ec.topic, ec.queue_id), ec, quarantine)
    for qc in p.batch_cuts:
        _cut_files(store.dispatcher.batch_queues[(qc.topic, qc.queue_id)].files, qc, batch_format.UNIT_SIZE,
                   "batch consume queue", quarantine)
    for bq in store.dispatcher.batch_queues.values():
        bq.set_end(bq.scan()[0])
    # 3. index files: the broker's crash rule, and files with entries past the cut
    index = store.index
    for path in p.dropped_index_files:
        quarantine.move_file(path, "index file newer than the checkpoint after a crash")
    stale = set(p.rebuilt_index_files)
    for f in [f for f in index.files if f.path in stale]:
        f.close()
        index.files.remove(f)
        quarantine.move_file(f.path, f"index file with entries at or past the recovery cut at {p.cut}; rebuilt")
    # 4. the timer store, as the broker's timer recovery leaves it
    if p.timer_recovery is not None and p.timer_recovery.changes_anything:
        _apply_timer(store, p.timer_recovery, quarantine)
    # 5. re-dispatch
    if p.redispatch_from < p._dispatch_to:
        from mqtool.engine.redispatch import redispatch

        redispatch(queue, store.dispatcher, p.redispatch_from, p._dispatch_to, store.config.delay_levels_ms())


def _units_written(units) -> int:
    """How far written (non-zero) index units reach in a DLedger store's index files."""
    for mf in reversed(units.queue.files):
        end = written_end(mf.buf, 0, min(mf.file_size, mf.data_end), dledger_format.INDEX_UNIT_SIZE)
        if end:
            return mf.file_from_offset + end
    return 0


def _apply_units(store, p: RecoveryPlan, quarantine) -> None:
    """DLedgerMmapFileStore.recover's index: from the first kept entry its unit disagrees with on,
    each kept entry's unit written from its header; units past the kept entries zeroed, and index
    files past them moved out (DLedger deletes them).  The bytes replaced go to the quarantine."""
    size = dledger_format.INDEX_UNIT_SIZE
    with dledger.IndexUnits(store.layout.dledger_index_files(), writable=True) as units:
        index_files = units.queue
        if p.units_from is not None:
            first_index, pos = p.units_from
            low, high = first_index * size, p.units_end
            for mf in index_files.files:
                start, end = max(low, mf.file_from_offset), min(high, mf.file_end_offset, p.units_written)
                if end > start:
                    quarantine.save_range(mf.path, mf.buf, start - mf.file_from_offset, end - mf.file_from_offset,
                                          f"DLedger index units from entry {first_index} on, rewritten from the data")
            for entry in _kept_entries(store.commitlog_queue, pos, p.cut):
                h = entry.header
                mf = index_files.find_by_offset(h.index * size)
                if mf is None:       # no index file holds it (DLedger would create one): left to it
                    break
                at = h.index * size - mf.file_from_offset
                mf.buf[at:at + size] = dledger_format.encode_index_unit(
                    dledger_format.IndexUnit(h.magic, entry.offset, h.size, h.index, h.term))
        mf = index_files.find_by_offset(p.units_end)
        if mf is not None and p.units_written > p.units_end:
            start, end = p.units_end - mf.file_from_offset, min(p.units_written, mf.file_end_offset) - mf.file_from_offset
            quarantine.save_range(mf.path, mf.buf, start, end, f"DLedger index units past the last kept entry")
            mf.buf[start:end] = bytes(end - start)
        index_files.truncate_dirty_files(p.units_end, remove=lambda f: quarantine.move_file(
            f.path, "DLedger index file past the last kept entry"))
        for mf in index_files.files:
            mf.flush(0)


def _kept_entries(queue, pos: int, cut: int):
    """The DLedger entries from offset pos (an entry's) to the cut, in order."""
    for mf in queue.files:
        if mf.file_end_offset <= pos or mf.file_from_offset >= cut:
            continue
        start = max(pos - mf.file_from_offset, 0)
        for item in dledger.walk_entries(mf, start=start, stop=min(cut - mf.file_from_offset, mf.file_size),
                                         resync_after_damage=False, aligned=True):
            if isinstance(item, dledger.Entry):
                yield item


def _set_queue_end(cq, end: int) -> None:
    files = cq.files
    for mf in files.files:
        if mf.file_from_offset + mf.file_size <= end:
            mf.set_positions(mf.file_size)
        elif mf.file_from_offset <= end:
            mf.set_positions(end - mf.file_from_offset)
    files.set_where(end)


def _cut_files(files, qc: QueueCut, unit_size: int, what: str, quarantine) -> None:
    """Zero the cut part of the (consume or batch consume) queue file holding the new end (kept in
    the quarantine first) and move whole files after it out of the queue."""
    keep = qc.keep_bytes
    mf = files.find_by_offset(keep)
    if mf is not None:
        start = keep - mf.file_from_offset
        end = min(qc.written_end, mf.file_end_offset) - mf.file_from_offset
        if end > start:
            quarantine.save_range(mf.path, mf.buf, start, end, f"{what} units from queue offset {keep // unit_size} on")
            mf.buf[start:end] = bytes(end - start)
    files.truncate_dirty_files(keep, remove=lambda f: quarantine.move_file(
        f.path, f"{what} file beyond queue offset {keep // unit_size}"))
    files.set_where(keep)


def _cut_ext(ext, ec: ExtCut, quarantine) -> None:
    """An extension file queue cut where its consume queue's units stop pointing (ExtCut)."""
    mf = ext.files.find_by_offset(ec.keep)
    if mf is not None and ec.written_end > ec.keep:
        start, end = ec.keep - mf.file_from_offset, ec.written_end - mf.file_from_offset
        quarantine.save_range(mf.path, mf.buf, start, end,
                              f"consume queue extension units no unit points at, from ext offset {ec.keep} on")
        mf.buf[start:end] = bytes(end - start)
    ext.files.truncate_dirty_files(ec.keep, remove=lambda f: quarantine.move_file(
        f.path, f"consume queue extension file beyond ext offset {ec.keep}"))
    ext.files.set_where(ec.keep)
