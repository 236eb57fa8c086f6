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
from mqtool.storage import commitlog
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

    def to_json(self) -> dict:
        return {"type": "summary", "same": self.same, "commonRecords": self.common,
                "divergedAt": self.diverged_at, "reason": self.reason, "heldByBothPastDivergence": self.retried,
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


def _records(side: Side, queue, start: int, on_problem):
    for entry in commitlog.walk(queue, start=start, check_crc=True):
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
    if mf is None or pos - mf.file_from_offset + dledger_format.HEADER_SIZE > mf.file_size:
        return None
    header = dledger_format.decode_header(mf.buf, pos - mf.file_from_offset)
    if header.magic != dledger_format.MAGIC_1 or header.pos != pos:
        return None
    return {"index": header.index, "term": header.term, "pos": pos}


def diff(layout_a, layout_b, *, on_only=None, on_problem=None) -> DiffResult:
    """Compare two replicas; on_only(side, record line) for each message only one holds (in
    offset order, A's first), on_problem(side, Problem) for damage met on the way."""
    a, b = Side("A", layout_a), Side("B", layout_b)
    result = DiffResult(a, b)

    def problem(side, p):
        result.problems.append((side.name, p))
        if on_problem is not None:
            on_problem(side, p)

    with commitlog.open_queue(layout_a) as qa, commitlog.open_queue(layout_b) as qb:
        a.first_offset, b.first_offset = max(qa.min_offset, 0), max(qb.min_offset, 0)
        start = max(a.first_offset, b.first_offset)
        ita, itb = _records(a, qa, start, problem), _records(b, qb, start, problem)
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
            if side.layout.is_dledger():
                side.entry = _entry_at(queue, rec.offset if rec is not None else result.diverged_at)
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
