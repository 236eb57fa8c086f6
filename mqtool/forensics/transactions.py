"""Transactions as the store holds them: every half message, whether it was committed, rolled back
or is still waiting for the broker's check, read from the half and op queues.

The broker's flow (TransactionalMessageBridge, EndTransactionProcessor, TransactionalMessageServiceImpl):
a half is stored in RMQ_SYS_TRANS_HALF_TOPIC with REAL_TOPIC and REAL_QID; a commit stores a copy in
the real topic with the commit sysFlag and preparedTransactionOffset = the half's commitlog offset,
then an op; a rollback stores only the op.  An op (formats/transactionop) names half queue offsets of
the half queue with its own queue id.  The check service puts a half it asks the producer about back
into the half queue (TRANSACTION_CHECK_TIMES counted up), so one transaction may have several copies,
and an op or a commit may name any of them.  Its own progress is consumer group CID_RMQ_SYS_TRANS's
offsets in both queues.

States: COMMITTED (a committed copy exists; `opMissing` when no op names a copy: the check will ask
the producer again), ROLLED_BACK (an op and no committed copy), PENDING (neither).  Committed copies
are found through the index (REAL_TOPIC#UNIQ_KEY), as lookups are, so the commitlog is not walked;
without a usable index the commitlog is scanned once for commit records, and the answer says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.formats import properties as props
from mqtool.formats import sysflag
from mqtool.formats.commitlog import Record
from mqtool.formats.javastr import parse_java_integer
from mqtool.formats.topicnames import TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from mqtool.formats.transactionop import REMOVE_TAG, half_offsets
from mqtool.storage import offsets
from mqtool.storage.commitlog import Problem
from mqtool.storage.settings import duration

COMMITTED, ROLLED_BACK, PENDING = "COMMITTED", "ROLLED_BACK", "PENDING"
_CHUNK = 1024
_INDEX_HITS = 1024     # index answers per commit lookup: a transaction has one committed copy


@dataclass
class Op:
    """An op message, and the half queue offsets it names."""

    queue_id: int
    queue_offset: int
    commitlog_offset: int
    store_timestamp: int
    half_offsets: list[int]
    tags: str | None

    def to_json(self) -> dict:
        return {"queueId": self.queue_id, "queueOffset": self.queue_offset,
                "commitLogOffset": self.commitlog_offset, "storeTimestamp": self.store_timestamp,
                "halfQueueOffsets": self.half_offsets}


def half_copy_json(record: Record) -> dict:
    return {"queueId": record.queue_id, "queueOffset": record.queue_offset, "commitLogOffset": record.offset,
            "storeTimestamp": record.store_timestamp,
            "checkTimes": check_times(record)}


def check_times(record: Record) -> int:
    """TRANSACTION_CHECK_TIMES of a half copy, read as the check's getInt reads it: the check that put
    it back (0: the producer's own half, or a value that is no number)."""
    value = record.properties.get(props.TRANSACTION_CHECK_TIMES)
    return (parse_java_integer(value, 32) or 0) if value is not None else 0


def transaction_key(record: Record) -> str:
    """What ties the copies of one half together: its UNIQ_KEY (the check copies it), else the
    transaction id, else where it is."""
    p = record.properties
    return p.get(props.UNIQ_KEY) or p.get(props.TRANSACTION_ID) or f"@{record.offset}"


@dataclass
class Transaction:
    key: str
    halves: list[Record] = field(default_factory=list)          # the copies, in queue order
    ops: list[Op] = field(default_factory=list)                 # the ops naming any copy
    committed: list[Record] = field(default_factory=list)       # committed copies in the real topic
    state: str = PENDING
    waited_ms: int | None = None                                # PENDING: since the first half was stored
    stuck: bool = False                                         # PENDING past timeout + check interval

    @property
    def first(self) -> Record:
        return self.halves[0]

    @property
    def check_times(self) -> int:
        return max(check_times(h) for h in self.halves)

    @property
    def op_missing(self) -> bool:
        return self.state == COMMITTED and not self.ops

    @property
    def topic(self) -> str | None:
        return self.first.properties.get(props.REAL_TOPIC)

    def to_json(self) -> dict:
        p = self.first.properties
        real_qid = p.get(props.REAL_QID)
        line = {"type": "transaction", "uniqKey": p.get(props.UNIQ_KEY),
                "transactionId": p.get(props.TRANSACTION_ID), "keys": p.get(props.KEYS),
                "producerGroup": p.get(props.PGROUP), "topic": self.topic,
                "queueId": int(real_qid) if real_qid is not None and real_qid.isdigit() else None,
                "state": self.state, "checkTimes": self.check_times, "opMissing": self.op_missing,
                "firstStored": self.first.store_timestamp, "waitedMs": self.waited_ms, "stuck": self.stuck,
                "halves": [half_copy_json(h) for h in self.halves],
                "ops": [op.to_json() for op in self.ops],
                "committed": [{"topic": r.topic, "queueId": r.queue_id, "queueOffset": r.queue_offset,
                               "commitLogOffset": r.offset, "preparedTransactionOffset":
                               r.prepared_transaction_offset, "storeTimestamp": r.store_timestamp}
                              for r in self.committed]}
        return line


def stuck_text(t: Transaction) -> str:
    """One stuck transaction and how long it waited, as the command and the report name it."""
    p = t.first.properties
    return f"transaction {p.get(props.UNIQ_KEY)} ({p.get(props.KEYS)}) pending for {duration(t.waited_ms)}"


@dataclass
class CheckProgress:
    """Where the transaction check (CID_RMQ_SYS_TRANS) stands in one half queue and its op queue."""

    queue_id: int
    half_offset: int | None
    op_offset: int | None
    half_max: int
    op_max: int

    def to_json(self) -> dict:
        return {"type": "check", "group": TRANS_CHECK_GROUP, "queueId": self.queue_id,
                "halfOffset": self.half_offset, "halfMaxOffset": self.half_max,
                "opOffset": self.op_offset, "opMaxOffset": self.op_max}


@dataclass
class TransactionReport:
    transactions: list[Transaction] = field(default_factory=list)
    checks: list[CheckProgress] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    ops: int = 0
    unmatched_ops: list[tuple[Op, int]] = field(default_factory=list)   # an op naming no half copy read
    source: str = "index"          # how committed copies were found: "index" or "scan"
    note: str | None = None        # why the commitlog was scanned
    now_ms: int = 0
    timeout_ms: int = 0

    @property
    def stuck(self) -> list[Transaction]:
        return [t for t in self.transactions if t.stuck]

    def by_topic(self) -> list[dict]:
        """Per real topic: how many transactions are in each state."""
        table: dict[str, dict] = {}
        for t in self.transactions:
            row = table.setdefault(t.topic or "", {"type": "topic", "topic": t.topic, COMMITTED: 0,
                                                   ROLLED_BACK: 0, PENDING: 0, "opMissing": 0, "stuck": 0})
            row[t.state] += 1
            row["opMissing"] += t.op_missing
            row["stuck"] += t.stuck
        return [table[k] for k in sorted(table)]

    def summary(self) -> dict:
        counts = {state: sum(t.state == state for t in self.transactions) for state in (COMMITTED, ROLLED_BACK, PENDING)}
        return {"type": "summary", "transactions": len(self.transactions), **counts,
                "opMissing": sum(t.op_missing for t in self.transactions), "stuck": len(self.stuck),
                "ops": self.ops, "unmatchedOps": len(self.unmatched_ops), "source": self.source,
                "stuckAfterMs": self.timeout_ms, "now": self.now_ms, "problems": len(self.problems)}


def _queue_records(reader, topic: str, queue_id: int, problems: list[Problem]):
    """Every record of a queue, in queue order, each checked against its unit (StoreReader.get);
    what cannot be read is a problem, deleted messages are left out."""
    cq = reader.consume_queue(topic, queue_id)
    if cq is None:
        return
    low, high = cq.min_offset(), cq.max_offset()
    low = max(low, 0)
    while low < high:
        got = reader.get(topic, queue_id, low, min(_CHUNK, high - low))
        if got.status != "FOUND":
            break
        for item in got.items:
            if isinstance(item, Problem):
                if item.kind != "expired":
                    problems.append(item)
            else:
                if not item.ok:
                    problems.extend(Problem(kind, reader.display(item.extra.get("file", "commitlog")),
                                            item.extra.get("fileOffset", 0), item.record.offset, message)
                                    for kind, message in item.problems)
                yield item.record
        if got.next_offset <= low:
            break
        low = got.next_offset


def queue_ids(layout, topic: str) -> list[int]:
    return sorted(qid for t, qid, _ in layout.consume_queues() if t == topic)


def read_ops(reader, queue_id: int, problems: list[Problem]) -> list[Op]:
    """The op messages of one op queue, in queue order (tagged "d": others name nothing)."""
    found = []
    for record in _queue_records(reader, TRANS_OP_HALF_TOPIC, queue_id, problems):
        tags = record.properties.get(props.TAGS)
        named = half_offsets(bytes(record.body)) if tags == REMOVE_TAG else []
        found.append(Op(queue_id, record.queue_offset, record.offset, record.store_timestamp, named, tags))
    return found


def committed_copies(reader, halves: list[Record]) -> list[Record] | None:
    """The committed copies of a transaction through the index (REAL_TOPIC#UNIQ_KEY): records with
    the commit sysFlag whose preparedTransactionOffset is one of the halves' offsets; None when the
    index cannot answer (no index files, or damaged ones)."""
    if not reader.index_files() or reader.index_problems:
        return None
    p = halves[0].properties
    topic, uniq = p.get(props.REAL_TOPIC), p.get(props.UNIQ_KEY)
    if topic is None or uniq is None:
        return []
    at = {h.offset for h in halves}
    answer = reader.by_key(topic, uniq, max_num=_INDEX_HITS)
    return [m.record for m in answer.messages if is_commit_of(m.record, at)]


def is_commit_of(record: Record, half_offsets_at: set[int]) -> bool:
    return (sysflag.transaction_type(record.sys_flag) == sysflag.TRANSACTION_COMMIT
            and record.prepared_transaction_offset in half_offsets_at)


def _scan_commits(reader, problems: list[Problem]) -> dict[int, list[Record]]:
    """Every committed copy in the commitlog by preparedTransactionOffset (no usable index)."""
    found: dict[int, list[Record]] = {}
    for entry in reader.records(problems):
        if sysflag.transaction_type(entry.sys_flag) == sysflag.TRANSACTION_COMMIT:
            found.setdefault(entry.prepared_transaction_offset, []).append(entry)
    return found


def list_transactions(reader, layout, now_ms: int) -> TransactionReport:
    """Every transaction of the half queues, with its state, ops, check copies and committed copies."""
    config = layout.config
    report = TransactionReport(now_ms=now_ms, timeout_ms=config.transactionTimeOut + config.transactionCheckInterval)
    by_key: dict[str, Transaction] = {}
    consumer = offsets.consumer_offsets(layout).table
    for queue_id in queue_ids(layout, TRANS_HALF_TOPIC):
        halves_at: dict[int, Transaction] = {}
        for record in _queue_records(reader, TRANS_HALF_TOPIC, queue_id, report.problems):
            t = by_key.setdefault(transaction_key(record), Transaction(transaction_key(record)))
            t.halves.append(record)
            halves_at[record.queue_offset] = t
        ops = read_ops(reader, queue_id, report.problems)
        report.ops += len(ops)
        for op in ops:
            for half in op.half_offsets:
                t = halves_at.get(half)
                if t is None:
                    report.unmatched_ops.append((op, half))
                elif op not in t.ops:
                    t.ops.append(op)
        cq, op_cq = reader.consume_queue(TRANS_HALF_TOPIC, queue_id), reader.consume_queue(TRANS_OP_HALF_TOPIC, queue_id)
        report.checks.append(CheckProgress(
            queue_id, consumer.get((TRANS_HALF_TOPIC, TRANS_CHECK_GROUP), {}).get(queue_id),
            consumer.get((TRANS_OP_HALF_TOPIC, TRANS_CHECK_GROUP), {}).get(queue_id),
            cq.max_offset() if cq is not None else 0, op_cq.max_offset() if op_cq is not None else 0))
    report.transactions = list(by_key.values())
    scanned = None
    for t in report.transactions:
        copies = committed_copies(reader, t.halves) if scanned is None else None
        if copies is None:
            if scanned is None:
                report.source = "scan"
                report.note = ("no index files" if not reader.index_files() else "the index is damaged") + \
                    ": committed copies were searched in the whole commitlog"
                scanned = _scan_commits(reader, report.problems)
            copies = [r for h in t.halves for r in scanned.get(h.offset, [])]
        t.committed = copies
        if copies:
            t.state = COMMITTED
        elif t.ops:
            t.state = ROLLED_BACK
        else:
            t.state = PENDING
            t.waited_ms = max(now_ms - t.first.store_timestamp, 0)
            t.stuck = t.waited_ms > report.timeout_ms
    return report
