"""A DLedger store's entries checked as a ledger: what `dump STORE dledger` shows and what
`verify-crc` adds to the commitlog walk's own checks on a DLedger store.

The commitlog walk (storage/commitlog.walk_file over storage/dledger.walk_entries) already
reports entries DLedger's recovery would not accept and bodies that are not one valid record.
Here each entry is also checked against the ledger: its index follows the previous entry's by
one, its term never goes down, and its index unit (DLedger's index/ files) says the same magic,
pos, size, index and term (what DLedgerMmapFileStore.recover compares).  Entries past the
committed index (the checkpoint's committedIndex) are marked uncommitted: a leader that has not
had a quorum's answer yet, or a follower behind, holds them legitimately; they are no damage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.formats import dledger as dledger_format
from mqtool.formats.commitlog import Blank, Record
from mqtool.storage import commitlog, dledger
from mqtool.storage.commitlog import EndOfData, Problem


@dataclass
class Checked:
    """One entry and what is wrong with it as part of the ledger: (kind, message, expected, found)."""

    entry: dledger.Entry
    committed: bool
    problems: list = field(default_factory=list)


@dataclass
class LedgerScan:
    entries: int = 0
    blanks: int = 0
    uncommitted: int = 0
    problems: int = 0
    end_offset: int | None = None
    first_uncommitted: int | None = None   # the index of the first entry past the committed one
    # (topic, queueId) -> the first queue offset an uncommitted record holds: a broker's reput has
    # not dispatched it yet, so its queue may end before it
    uncommitted_queues: dict = field(default_factory=dict)


BATCH = 4096     # entries checked together (their Entry objects are in memory at once)


def scan(layout, tally: LedgerScan, display=None, *, offset_from: int | None = None, offset_to: int | None = None):
    """Yield Checked, Blank, Problem (the entry walk's own) and EndOfData for every entry of the
    DLedger store `layout` (offsets: entry pos in [offset_from, offset_to)), counting in tally:
    the reference walk, entry by entry (dump dledger)."""
    import numpy as np

    state = dledger.read_state(layout.dledger_dir)
    committed = -1 if state.committed_index is None else state.committed_index
    show = display or str
    prev = None
    with commitlog.open_queue(layout) as whole, dledger.IndexUnits(layout.dledger_index_files()) as units:
        queue = dledger.data_part(whole)     # a store switched to DLedger: its entries only

        def checked(batch):
            nonlocal prev
            headers = {name: np.array([getattr(e.header, name) for e in batch], dtype=np.int64)
                       for name in dledger_format.HEADER_FIELDS}
            found = dledger.check_entries(headers, units, prev)
            prev = (batch[-1].header.index, batch[-1].header.term)
            out = [Checked(e, e.header.index <= committed) for e in batch]
            for row, kind, message, expected, got in found:
                out[row].problems.append((kind, message, expected, got))
            for c in out:
                if not _inside(c.entry.offset, offset_from, offset_to):
                    continue
                tally.entries += 1
                tally.problems += len(c.problems)
                if not c.committed:
                    tally.uncommitted += 1
                    if tally.first_uncommitted is None:
                        tally.first_uncommitted = c.entry.header.index
                yield c

        for lp in whole.problems:
            tally.problems += 1
            yield Problem(lp.kind, show(lp.path), 0, lp.offset if lp.offset is not None else -1, lp.message)
        last_data = commitlog.last_data_file(queue)
        for i, mf in enumerate(queue.files):
            if offset_to is not None and mf.file_from_offset >= offset_to:
                break
            batch = []
            for item in dledger.walk_entries(mf, is_last=i >= last_data, display_path=show(mf.path)):
                if isinstance(item, dledger.Entry):
                    batch.append(item)
                    if len(batch) >= BATCH:
                        yield from checked(batch)
                        batch = []
                    continue
                if batch:
                    yield from checked(batch)
                    batch = []
                if isinstance(item, EndOfData):
                    tally.end_offset = item.offset
                elif isinstance(item, Problem):
                    tally.problems += 1
                elif isinstance(item, Blank):
                    tally.blanks += 1
                if _inside(getattr(item, "offset", None), offset_from, offset_to):
                    yield item
            if batch:
                yield from checked(batch)


@dataclass
class LedgerPart:
    """verify-crc's ledger checks of one commitlog part of a DLedger store, done in that part's
    own walk (LedgerChecker): the problems inside it, its first entry (checked against the part
    before it by chain()) and last, and its entries past the committed index."""

    first: tuple | None = None    # (file, file position, offset, index, term) of its first entry
    last: tuple | None = None     # (index, term) of its last entry
    found: list = field(default_factory=list)     # on_problem's arguments, in entry order
    entries: int = 0
    uncommitted: int = 0
    uncommitted_queues: dict = field(default_factory=dict)


class LedgerChecker:
    """The entries of every record a commitlog walk of a DLedger store's data file finds (entry
    pos = record offset - 48; the walk's own problems are the commitlog scope's), against each
    other and their index units, as the walk yields them: add() each Chunk and Record."""

    def __init__(self, layout):
        state = dledger.read_state(layout.dledger_dir)
        self.committed = -1 if state.committed_index is None else state.committed_index
        self.units = dledger.IndexUnits(layout.dledger_index_files())
        self.part = LedgerPart()

    def add(self, item, mf, scanner) -> None:
        import numpy as np

        if isinstance(item, scanner.Chunk):
            c = item.columns
            offsets, queue_ids, queue_offsets = c["offset"], c["queue_id"], c["queue_offset"]
            topic = item.topic
            positions = offsets - dledger_format.HEADER_SIZE - mf.file_from_offset
            # the compiled entry walk only takes entries of magic 1 whose pos field is their
            # offset and whose size is 48 + the one record's, and reads their index and term
            headers = dict(index=c["entry_index"], term=c["entry_term"],
                           magic=np.full(len(offsets), dledger_format.MAGIC_1, dtype=np.int64),
                           size=c["size"] + dledger_format.HEADER_SIZE, pos=offsets - dledger_format.HEADER_SIZE)
        elif isinstance(item, Record):
            offsets = np.array([item.offset], dtype=np.int64)
            queue_ids, queue_offsets = [item.queue_id], [item.queue_offset]
            topic = (lambda record: lambda _: record.topic)(item)
            positions = offsets - dledger_format.HEADER_SIZE - mf.file_from_offset
            headers = dledger.read_fields(mf.buf, positions, dledger_format.HEADER_FIELDS)
        else:
            return
        if not len(offsets):
            return
        part, path = self.part, str(mf.path)
        if part.first is None:
            part.first = (path, int(positions[0]), int(headers["pos"][0]), int(headers["index"][0]),
                          int(headers["term"][0]))
        for row, kind, message, expected, found in dledger.check_entries(headers, self.units, part.last):
            part.found.append((path, int(positions[row]), int(headers["pos"][row]), kind, message, expected, found))
        part.last = (int(headers["index"][-1]), int(headers["term"][-1]))
        part.entries += len(offsets)
        for row in np.flatnonzero(headers["index"] > self.committed):
            part.uncommitted += 1
            key = (topic(int(row)), int(queue_ids[row]))
            part.uncommitted_queues.setdefault(key, int(queue_offsets[row]))

    def close(self) -> None:
        self.units.close()


def chain(parts, on_problem) -> LedgerScan:
    """The ledger checks of a whole store from its parts' (LedgerPart or None, in offset order):
    each part's first entry against the last entry before it, then the part's own problems.
    on_problem(file, file position, offset, kind, message, expected, found).  The tally's
    uncommitted_queues: per queue, the first queue offset of a record past the committed index."""
    import numpy as np

    tally = LedgerScan()
    prev = None
    for part in parts:
        if part is None or part.first is None:
            continue
        path, file_pos, offset, index, term = part.first
        for _, kind, message, expected, found in dledger.chain_problems(np.array([index], dtype=np.int64),
                                                                       np.array([term], dtype=np.int64), prev):
            on_problem(path, file_pos, offset, kind, message, expected, found)
        for found in part.found:
            on_problem(*found)
        prev = part.last
        tally.entries += part.entries
        tally.uncommitted += part.uncommitted
        for key, first in part.uncommitted_queues.items():
            tally.uncommitted_queues.setdefault(key, first)
    return tally


def _inside(offset, low, high) -> bool:
    return offset is None or ((low is None or offset >= low) and (high is None or offset < high))


def index_units(layout, display=None):
    """(file shown, position, unit) of every index unit up to the first zero one."""
    show = display or str
    with dledger.IndexUnits(layout.dledger_index_files()) as units:
        for mf, pos, unit in units.units():
            yield show(mf.path), pos, unit


def entry_json(checked: Checked) -> dict:
    e, h = checked.entry, checked.entry.header
    out = {"type": "dledger_entry", "file": e.path, "fileOffset": e.file_pos, "offset": e.offset,
           "magic": h.magic, "size": h.size, "index": h.index, "term": h.term, "pos": h.pos, "channel": h.channel,
           "chainCrc": h.chain_crc, "bodyCrc": h.body_crc, "bodyLength": h.body_length,
           "recordOffset": e.record_offset, "committed": checked.committed}
    if checked.problems:
        out["problems"] = [{"kind": k, "message": m} for k, m, _, _ in checked.problems]
    return out
