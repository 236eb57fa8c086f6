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

from mqtool.formats.commitlog import Blank
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


def scan(layout, tally: LedgerScan, display=None, *, offset_from: int | None = None, offset_to: int | None = None):
    """Yield Checked, Blank, Problem (the entry walk's own) and EndOfData for every entry of the
    DLedger store `layout` (offsets: entry pos in [offset_from, offset_to)), counting in tally."""
    state = dledger.read_state(layout.dledger_dir)
    committed = state.committed_index
    committed = -1 if committed is None else committed
    show = display or str
    prev_index = prev_term = None
    with commitlog.open_queue(layout) as queue, dledger.IndexUnits(layout.dledger_index_files()) as units:
        for lp in queue.problems:
            tally.problems += 1
            yield Problem(lp.kind, show(lp.path), 0, lp.offset if lp.offset is not None else -1, lp.message)
        last_data = commitlog.last_data_file(queue)
        for i, mf in enumerate(queue.files):
            if offset_to is not None and mf.file_from_offset >= offset_to:
                break
            if offset_from is not None and mf.file_from_offset + mf.file_size <= offset_from:
                continue
            for item in dledger.walk_entries(mf, is_last=i >= last_data, display_path=show(mf.path)):
                if isinstance(item, dledger.Entry):
                    h = item.header
                    checked = Checked(item, h.index <= committed)
                    if prev_index is not None and h.index != prev_index + 1:
                        checked.problems.append(("entry-index-gap", f"entry index {h.index} follows {prev_index}",
                                                 prev_index + 1, h.index))
                    if prev_term is not None and h.term < prev_term:
                        checked.problems.append(("entry-term-back", f"term {h.term} after term {prev_term}",
                                                 prev_term, h.term))
                    why = dledger.unit_problem(item, units.unit(h.index))
                    if why:
                        checked.problems.append(("index-unit-mismatch", f"entry {h.index}: {why}", None, None))
                    prev_index, prev_term = h.index, h.term
                    if not _inside(item.offset, offset_from, offset_to):
                        continue
                    tally.entries += 1
                    tally.problems += len(checked.problems)
                    if not checked.committed:
                        tally.uncommitted += 1
                        if tally.first_uncommitted is None:
                            tally.first_uncommitted = h.index
                        record = commitlog.record_at(queue, item.record_offset)
                        if not isinstance(record, str):
                            tally.uncommitted_queues.setdefault((record.topic, record.queue_id), record.queue_offset)
                    yield checked
                    continue
                if isinstance(item, EndOfData):
                    tally.end_offset = item.offset
                elif isinstance(item, Problem):
                    tally.problems += 1
                elif isinstance(item, Blank):
                    tally.blanks += 1
                if _inside(getattr(item, "offset", None), offset_from, offset_to):
                    yield item


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
