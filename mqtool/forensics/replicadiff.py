"""Two replicas of one broker compared: where their commitlogs diverge and which messages each
holds that the other lacks (`mqtool diff`).

Replicas hold a common prefix: a slave copies the master's commitlog bytes (HA), DLedger peers
hold the same entries up to where one fell behind or a failover cut it.  Both commitlogs are
walked side by side from the later of their first offsets (storage/commitlog.walk, the same
records every reader sees; in DLedger mode the records of the entries): as long as both hold
the same record at the same offset it is common.  The first offset where they do not is the
divergence; for DLedger peers the entries there (index, term) are named too.  Past it, each
side's records are matched by message identity (the producer's UNIQ_KEY, else the msgId):
a message re-sent after a failover, at another offset, is held by both.  Memory grows with
the identities of the diverged tails only; the common prefix streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.forensics.messageview import message_fields
from mqtool.formats import dledger as dledger_format
from mqtool.formats.commitlog import Record
from mqtool.storage import commitlog, dledger
from mqtool.storage.commitlog import Problem


@dataclass
class Side:
    name: str                  # "A" or "B"
    layout: object
    records: int = 0           # records walked
    only: int = 0              # messages the other side lacks
    problems: int = 0
    end: int | None = None     # the offset after its last record
    first_offset: int = 0
    entry: dict | None = None  # DLedger: the entry at the divergence (index, term, pos)

    def to_json(self) -> dict:
        out = {"store": str(self.layout.root), "dledger": self.layout.is_dledger(), "records": self.records,
               "onlyHere": self.only, "problems": self.problems, "firstOffset": self.first_offset,
               "endOffset": self.end}
        if self.entry is not None:
            out["entryAtDivergence"] = self.entry
        return out


@dataclass
class DiffResult:
    a: Side
    b: Side
    common: int = 0                 # records both hold at the same offset, before the divergence
    diverged_at: int | None = None  # the first offset where the two differ (None: they do not)
    reason: str | None = None
    retried: int = 0                # messages both hold past the divergence (at different offsets)
    problems: list = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.a.only == 0 and self.b.only == 0

    @property
    def ends_earlier(self) -> str | None:
        """"A" or "B" when that replica holds a prefix of the other (the same records, then it ends:
        a follower behind, not a divergence); None otherwise."""
        if self.reason == "B ends here" and self.b.only == 0:
            return "B"
        if self.reason == "A ends here" and self.a.only == 0:
            return "A"
        return None

    def to_json(self) -> dict:
        return {"type": "summary", "same": self.same, "commonRecords": self.common,
                "divergedAt": self.diverged_at, "reason": self.reason, "endsEarlier": self.ends_earlier, "heldByBothPastDivergence": self.retried,
                "onlyInA": self.a.only, "onlyInB": self.b.only, "a": self.a.to_json(), "b": self.b.to_json()}


def _identity(record: Record, fields: dict) -> str:
    return fields.get("uniqKey") or fields["msgId"]


def _same(x: Record, y: Record) -> bool:
    return (x.offset == y.offset and x.total_size == y.total_size and x.body_crc == y.body_crc
            and x.queue_id == y.queue_id and x.queue_offset == y.queue_offset and x.sys_flag == y.sys_flag
            and x.store_timestamp == y.store_timestamp and x.born_timestamp == y.born_timestamp
            and x.topic_bytes == y.topic_bytes and x.properties_bytes == y.properties_bytes and x.body == y.body)


def message_line(side: Side, record: Record, fields: dict) -> dict:
    return {"type": "only", "side": side.name, "store": str(side.layout.root), "offset": record.offset,
            "topic": fields["topic"], "queueId": fields["queueId"], "queueOffset": fields["queueOffset"],
            "msgId": fields["msgId"], "uniqKey": fields.get("uniqKey"), "keys": fields.get("keys"),
            "storeTimestamp": fields["storeTimestamp"]}


def _records(side: Side, queue, start: int, on_problem, aligned: bool = False):
    for entry in commitlog.walk(queue, start=start, check_crc=True, aligned=aligned):
        if isinstance(entry, Record) and not entry.crc_ok():   # a torn record (a copy cut mid-record)
            entry = Problem("crc-mismatch", str(queue.find_by_offset(entry.offset).path), 0, entry.offset,
                            f"the record at {entry.offset} fails its body CRC: not counted as a message")
        if isinstance(entry, Record):
            side.records += 1
            side.end = entry.offset + entry.total_size
            yield entry
        elif isinstance(entry, Problem):
            side.problems += 1
            on_problem(side, entry)


def _entry_at(queue, record_offset: int) -> dict | None:
    """The DLedger entry holding the record at record_offset: index, term, pos."""
    pos = record_offset - dledger_format.HEADER_SIZE
    mf = queue.find_by_offset(pos)
    if mf is None:
        return None
    header, why_not = dledger.header_at(mf.buf, pos - mf.file_from_offset, mf.file_size, mf.file_from_offset)
    if why_not is not None:
        return None
    return {"index": header.index, "term": header.term, "pos": pos}


RUN_RECORDS = 8192    # the compiled walk's chunks while the two stores' bytes are compared


def _identical_run(qa, qb, start: int, scanner) -> tuple[int, int]:
    """(records, end): how many of A's records from start B holds byte for byte at the same
    offsets (their DLedger entries too), found by the compiled walk of A and a comparison of the
    two files' bytes, a chunk of records at a time; end: where the last of them ends.  Stops at
    the first record that differs, fails its CRC, or is damaged; the record-by-record comparison
    goes on from there."""
    import numpy as np

    count, end = 0, start
    for entry in commitlog.walk(qa, start=start, check_crc=True, scanner=scanner, chunk_records=RUN_RECORDS):
        if isinstance(entry, scanner.Chunk):
            offsets, sizes, ok = entry.columns["offset"], entry.columns["size"], entry.columns["crc_ok"]
        elif isinstance(entry, Record):
            offsets, sizes = np.array([entry.offset]), np.array([entry.total_size])
            ok = np.array([entry.crc_ok()])
        elif isinstance(entry, Problem):
            break
        else:           # a blank, the end of the data
            continue
        if not len(offsets):
            continue
        head = dledger_format.HEADER_SIZE if dledger.part_of(qa, int(offsets[0])) == dledger.DLEDGER else 0
        lo, hi = int(offsets[0]) - head, int(offsets[-1] + sizes[-1])
        mfa, mfb = qa.find_by_offset(lo), qb.find_by_offset(lo)
        if mfa is None or mfb is None or mfb.file_from_offset != mfa.file_from_offset \
                or hi - mfb.file_from_offset > mfb.file_size:
            break
        base = mfa.file_from_offset
        equal = np.frombuffer(mfa.buf, np.uint8)[lo - base:hi - base] == \
            np.frombuffer(mfb.buf, np.uint8)[lo - base:hi - base]
        good = len(offsets)
        if not equal.all():     # the records that end before the first byte that differs
            good = int(np.searchsorted(offsets + sizes, lo + int(np.argmin(equal)), side="right"))
        if not ok[:good].all():
            good = int(np.argmin(ok[:good]))
        del equal
        mfb.drop_pages_before(hi - base, step=0)     # B is read here, not by a walk: let its pages go
        if good:
            count, end = count + good, int(offsets[good - 1] + sizes[good - 1])
        if good < len(offsets):
            break
    return count, end


def diff(layout_a, layout_b, *, on_only=None, on_problem=None, scanner=None) -> DiffResult:
    """Compare two replicas; on_only(side, record line) for each message only one holds (in
    offset order, A's first), on_problem(side, Problem) for damage met on the way.  scanner
    (mqtool.native.fastscan): the common prefix is found by the compiled walk and a comparison
    of bytes, the rest record by record."""
    a, b = Side("A", layout_a), Side("B", layout_b)
    result = DiffResult(a, b)

    def problem(side, p):
        result.problems.append((side.name, p))
        if on_problem is not None:
            on_problem(side, p)

    with commitlog.open_queue(layout_a) as qa, commitlog.open_queue(layout_b) as qb:
        a.first_offset, b.first_offset = max(qa.min_offset, 0), max(qb.min_offset, 0)
        start = max(a.first_offset, b.first_offset)
        aligned = False
        if scanner is not None and layout_a.is_dledger() == layout_b.is_dledger():
            same, end = _identical_run(qa, qb, start, scanner)
            if same:                   # the walks go on where the last common record ends
                result.common = a.records = b.records = same
                a.end = b.end = start = end
                aligned = True
        ita, itb = _records(a, qa, start, problem, aligned), _records(b, qb, start, problem, aligned)
        x, y = next(ita, None), next(itb, None)
        while x is not None and y is not None and _same(x, y):
            result.common += 1
            x, y = next(ita, None), next(itb, None)
        if x is None and y is None:
            return result
        result.diverged_at = min(r.offset for r in (x, y) if r is not None)
        result.reason = ("B ends here" if y is None else "A ends here" if x is None else
                         "different records at this offset" if x.offset == y.offset else
                         "the next records are at different offsets")
        for side, queue, rec in ((a, qa, x), (b, qb, y)):
            at = rec.offset if rec is not None else result.diverged_at
            if dledger.part_of(queue, at) == dledger.DLEDGER:
                side.entry = _entry_at(queue, at)
        # the tails: identities of B's, then A's streamed against them, then B's against A's
        tail_b = {}
        rest_b = [] if y is None else [y]
        for rec in _chain(rest_b, itb):
            fields = message_fields(rec, body=None)
            tail_b.setdefault(_identity(rec, fields), rec.offset)
        held_by_a = set()
        for rec in _chain([] if x is None else [x], ita):
            fields = message_fields(rec, body=None)
            key = _identity(rec, fields)
            if key in tail_b:
                held_by_a.add(key)
                result.retried += 1
                continue
            a.only += 1
            if on_only is not None:
                on_only(a, message_line(a, rec, fields))
        if len(held_by_a) < len(tail_b):
            for rec in _records(Side("B", layout_b), qb, result.diverged_at, lambda s, p: None):
                fields = message_fields(rec, body=None)
                if _identity(rec, fields) in held_by_a:
                    continue
                b.only += 1
                if on_only is not None:
                    on_only(b, message_line(b, rec, fields))
    return result


def _chain(first: list, rest):
    yield from first
    yield from rest
