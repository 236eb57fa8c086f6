"""Where a message went: every record the broker wrote for it (`mqtool track`), each a hop with its
role, the consumer groups' state at each hop, and where the message is now.

One message is one UNIQ_KEY: the broker keeps the producer's UNIQ_KEY on every copy it makes — a
delay level's record in SCHEDULE_TOPIC_XXXX and its delivery, a consumer's send-back through
SCHEDULE_TOPIC_XXXX into %RETRY%group and at last %DLQ%group, a 5.x timer's record in
rmq_sys_wheel_timer, its delivery and a recall of it, a transaction's half, the check's copies of it
and the committed copy.  Each copy says how it is linked: ORIGIN_MESSAGE_ID and RETRY_TOPIC (a
send-back), REAL_TOPIC and REAL_QID (a delay, a timer, a half), TIMER_DEL_UNIQKEY (a recall),
TRANSACTION_CHECK_TIMES (a check's copy), preparedTransactionOffset (a committed copy), and an op
message names a half by its queue offset.  So the hops are found through the index
(topic#UNIQ_KEY under every topic the store holds), as lookups are; a missing or damaged index is
said, and the commitlog is scanned instead.

Consumption, for a hop in a topic a group has offsets for (config/consumerOffset.json, read as `lag`
reads it): CONSUMED when the group's committed offset of that queue is past the hop's queue offset,
else NOT_CONSUME_YET (the names of mqadmin's consume track).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.formats import properties as props
from mqtool.formats import sysflag
from mqtool.formats.commitlog import Record
from mqtool.formats.msgid import decode_offset_msgid, encode_offset_msgid
from mqtool.formats.topicnames import (DLQ_PREFIX, LMQ_PREFIX, SCHEDULE_TOPIC, TIMER_TOPIC,
                                       TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC,
                                       group_of)
from mqtool.forensics import transactions as tx
from mqtool.forensics.lookup import StoreReader, matched_by
from mqtool.forensics.storeinfo import iso
from mqtool.storage.settings import duration
from mqtool.storage import batchqueue, offsets
from mqtool.storage.commitlog import Problem

SENT, DELAY_SCHEDULED, DELIVERED = "sent", "delay-scheduled", "delivered"
RETRY_SCHEDULED, RETRY, DEAD_LETTER = "retry-scheduled", "retry", "dead-letter"
TIMER_SCHEDULED, TIMER_DELIVERED, RECALLED = "timer-scheduled", "timer-delivered", "recalled"
HALF, HALF_CHECKED, COMMITTED, HALF_DISCARDED = "half", "half-checked", "committed", "half-discarded"
ROLES = (SENT, DELAY_SCHEDULED, DELIVERED, RETRY_SCHEDULED, RETRY, DEAD_LETTER, TIMER_SCHEDULED,
         TIMER_DELIVERED, RECALLED, HALF, HALF_CHECKED, COMMITTED, HALF_DISCARDED)
HOME_ROLES = (SENT, DELIVERED, TIMER_DELIVERED, COMMITTED)   # the message in the topic it was sent to
CONSUMED, NOT_CONSUME_YET = "CONSUMED", "NOT_CONSUME_YET"
_INDEX_HITS = 4096    # index answers per topic: the copies of one message under one topic


def role_of(record: Record) -> tuple[str, str | None]:
    """(role, consumer group) of a record, from its topic, sysFlag and the properties the broker
    gives each copy it makes."""
    topic, p = record.topic, record.properties
    kind = sysflag.transaction_type(record.sys_flag)
    if kind == sysflag.TRANSACTION_COMMIT:
        return COMMITTED, None
    if kind == sysflag.TRANSACTION_PREPARED:     # a prepared record in the real topic itself (before the half topic)
        return HALF, None
    if topic == SCHEDULE_TOPIC:
        group = group_of(p.get(props.REAL_TOPIC, ""))
        if group is not None and props.RETRY_TOPIC in p:
            return RETRY_SCHEDULED, group
        return DELAY_SCHEDULED, None
    if topic == TIMER_TOPIC:
        return (RECALLED if props.TIMER_DEL_UNIQKEY in p else TIMER_SCHEDULED), None
    if topic == TRANS_HALF_TOPIC:
        return (HALF_CHECKED if props.TRANSACTION_CHECK_TIMES in p else HALF), None
    if topic == TRANS_CHECK_MAX_TIME_TOPIC:
        return HALF_DISCARDED, None
    group = group_of(topic)
    if group is not None:
        return (DEAD_LETTER if topic.startswith(DLQ_PREFIX) else RETRY), group
    if props.TIMER_DEQUEUE_MS in p or (props.TIMER_OUT_MS in p and props.REAL_TOPIC not in p):
        return TIMER_DELIVERED, None
    if p.get(props.REAL_TOPIC) == topic and props.DELAY in p:
        return DELIVERED, None
    return SENT, None


@dataclass
class Hop:
    record: Record
    role: str
    group: str | None
    due_at: int | None = None           # a scheduled hop: when it falls due (ms)
    linked_by: str = "UNIQ_KEY"
    problems: list[tuple[str, str]] = field(default_factory=list)
    location: dict = field(default_factory=dict)   # file, fileOffset
    consumption: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        r, p = self.record, self.record.properties
        line = {"type": "hop", "role": self.role, "topic": r.topic, "queueId": r.queue_id,
                "queueOffset": r.queue_offset, "commitLogOffset": r.offset,
                "msgId": encode_offset_msgid(r.store_address, r.store_port, r.offset),
                "uniqKey": p.get(props.UNIQ_KEY), "storeTimestamp": r.store_timestamp,
                "reconsumeTimes": r.reconsume_times, "group": self.group, "keys": p.get(props.KEYS),
                "tags": p.get(props.TAGS), "linkedBy": self.linked_by, **self.location}
        for name, key in (("realTopic", props.REAL_TOPIC), ("realQueueId", props.REAL_QID),
                          ("originMessageId", props.ORIGIN_MESSAGE_ID), ("retryTopic", props.RETRY_TOPIC),
                          ("delayLevel", props.DELAY), ("checkTimes", props.TRANSACTION_CHECK_TIMES),
                          ("timerOutMs", props.TIMER_OUT_MS), ("recalls", props.TIMER_DEL_UNIQKEY)):
            if key in p:
                line[name] = p[key]
        if self.role == COMMITTED:
            line["preparedTransactionOffset"] = r.prepared_transaction_offset
        if self.due_at is not None:
            line["dueAt"] = self.due_at
        line["ok"] = self.ok
        if self.problems:
            line["problems"] = [{"kind": k, "message": m} for k, m in self.problems]
        return line


@dataclass
class GroupState:
    group: str
    state: str                     # consumed, not-consumed, waiting-retry, dead-letter
    topic: str
    queue_id: int
    queue_offset: int
    retries: int = 0
    due_at: int | None = None

    def to_json(self) -> dict:
        line = {"group": self.group, "state": self.state, "topic": self.topic, "queueId": self.queue_id,
                "queueOffset": self.queue_offset, "retries": self.retries}
        if self.due_at is not None:
            line["dueAt"] = self.due_at
        return line


@dataclass
class Journey:
    """One message's hops, in store order, and where it is now."""

    uniq_key: str | None
    hops: list[Hop] = field(default_factory=list)
    deleted: list[dict] = field(default_factory=list)     # index hits below the commitlog's first file
    ops: list[tx.Op] = field(default_factory=list)        # transaction ops naming one of its halves
    state: str = "not-found"
    where: str = ""
    groups: list[GroupState] = field(default_factory=list)
    due_at: int | None = None
    topic: str | None = None

    def summary(self, source: str) -> dict:
        line = {"type": "summary", "uniqKey": self.uniq_key, "topic": self.topic, "hops": len(self.hops),
                "state": self.state, "where": self.where, "groups": [g.to_json() for g in self.groups],
                "source": source, "problems": sum(not h.ok for h in self.hops)}
        if self.due_at is not None:
            line["dueAt"] = self.due_at
        if self.ops:
            line["ops"] = [op.to_json() for op in self.ops]
        if self.deleted:
            line["deleted"] = self.deleted
        return line


@dataclass
class TrackResult:
    journeys: list[Journey] = field(default_factory=list)
    source: str = "index"          # "index" or "scan"
    note: str | None = None        # why the commitlog was scanned
    problems: list[Problem] = field(default_factory=list)
    looked_up: str = ""
    index_span: tuple[int, int] | None = None     # store times the index files cover

    @property
    def problem_count(self) -> int:
        return len(self.problems) + sum(not h.ok for j in self.journeys for h in j.hops)


class Tracker:
    """Follows messages through a store opened with a StoreReader."""

    def __init__(self, reader: StoreReader, layout, now_ms: int):
        self.reader = reader
        self.layout = layout
        self.now_ms = now_ms
        self.offsets = offsets.consumer_offsets(layout)
        self.delay_levels = layout.config.delay_levels_ms()
        self._topics: list[str] | None = None
        self._ops: dict[int, list[tx.Op]] = {}
        self.problems: list[Problem] = []

    # ------------------------------------------------------------------ where to look
    def topics(self) -> list[str]:
        """Every topic a copy of a message may be indexed under: the store's queues (LMQ queues
        aside: their records are indexed under the topic they were sent to) and the broker's own."""
        if self._topics is None:
            names = {t for t, _, _ in self.layout.consume_queues()}
            names |= {t for t, _, _ in batchqueue.queues(self.layout)}
            names |= {SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC}
            names -= {TRANS_OP_HALF_TOPIC}
            self._topics = sorted(n for n in names if not n.startswith(LMQ_PREFIX))
        return self._topics

    def index_usable(self) -> str | None:
        """None when the index can answer; else why not."""
        files = self.reader.index_files()
        if self.reader.index_problems:
            return f"the index is damaged ({self.reader.index_problems[0].message})"
        if not files:
            return "there are no index files"
        return None

    def index_span(self) -> tuple[int, int] | None:
        files = [f for f in self.reader.index_files() if f.begin_timestamp > 0]
        if not files:
            return None
        return min(f.begin_timestamp for f in files), max(f.end_timestamp for f in files)

    def _index(self, topic: str, key: str, deleted: list[dict] | None = None) -> list[Record]:
        """The records of topic holding key, through the index (lookup's by_key: each hit
        re-checked); hits below the commitlog's first file go to deleted."""
        result = self.reader.by_key(topic, key, max_num=_INDEX_HITS)
        self.problems += result.problems
        if deleted is not None:
            deleted += [{"topic": topic, "commitLogOffset": offset} for offset in result.expired_offsets]
        return [found.record for found in result.messages]

    # ------------------------------------------------------------------ seeds
    def seed_by_msgid(self, msgid: str) -> tuple[str | None, Record | None]:
        """(UNIQ_KEY, the record an offset msgId names): an offset msgId of this store names the
        record at its offset (stored by the id's host); any other id is taken as a UNIQ_KEY."""
        msgid = msgid.strip().upper()
        offset_id = decode_offset_msgid(msgid)
        entry = self.reader.record_at(offset_id.commitlog_offset)
        if isinstance(entry, Record) and (entry.store_address, entry.store_port) == \
                (offset_id.store_address, offset_id.store_port):
            return entry.properties.get(props.UNIQ_KEY), entry
        return msgid, None

    def seeds_by_key(self, topic: str, key: str) -> list[Record]:
        """Records holding KEY (in KEYS or as UNIQ_KEY) sent to topic: stored under it, or under
        SCHEDULE_TOPIC_XXXX, the half topic or the timer topic with REAL_TOPIC naming it."""
        found = self._index(topic, key)
        for parked in (SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TIMER_TOPIC):
            found += [r for r in self._index(parked, key) if r.properties.get(props.REAL_TOPIC) == topic]
        return sorted({r.offset: r for r in found}.values(), key=lambda r: r.offset)

    # ------------------------------------------------------------------ hops
    def journey_by_index(self, uniq_key: str) -> Journey:
        journey = Journey(uniq_key)
        records: dict[int, Record] = {}
        for topic in self.topics():
            for record in self._index(topic, uniq_key, journey.deleted):
                if record.properties.get(props.UNIQ_KEY) == uniq_key:
                    records[record.offset] = record
        self._fill(journey, records.values())
        return journey

    def journey_of_records(self, uniq_key: str | None, records) -> Journey:
        journey = Journey(uniq_key)
        self._fill(journey, records)
        return journey

    def _fill(self, journey: Journey, records) -> None:
        for record in sorted(records, key=lambda r: r.offset):
            role, group = role_of(record)
            found = self.reader.found(record)
            hop = Hop(record, role, group, problems=list(found.problems),
                      location={k: found.extra[k] for k in ("file", "fileOffset") if k in found.extra})
            hop.due_at = self._due_at(hop)
            hop.linked_by = _linked_by(hop, journey.hops)
            hop.consumption = self._consumption(record)
            journey.hops.append(hop)
        halves = [h for h in journey.hops if h.role in (HALF, HALF_CHECKED)]
        for queue_id in sorted({h.record.queue_id for h in halves}):
            mine = {h.record.queue_offset for h in halves if h.record.queue_id == queue_id}
            journey.ops += [op for op in self.ops(queue_id) if mine & set(op.half_offsets)]
        _judge(journey, self.now_ms)

    def _due_at(self, hop: Hop) -> int | None:
        r = hop.record
        if hop.role in (DELAY_SCHEDULED, RETRY_SCHEDULED):
            # ScheduleMessageService.computeDeliverTimestamp: the level's delay after the store time;
            # the queue is the level (clamped to the levels there are) - 1
            if 0 <= r.queue_id < len(self.delay_levels):
                return r.store_timestamp + self.delay_levels[r.queue_id]
            return None
        if hop.role == TIMER_SCHEDULED:
            value = r.properties.get(props.TIMER_OUT_MS)
            return int(value) if value is not None and value.isdigit() else None
        return None

    def _consumption(self, record: Record) -> list[dict]:
        rows = []
        for (topic, group), queues in sorted(self.offsets.table.items()):
            if topic != record.topic:
                continue
            committed = queues.get(record.queue_id)
            state = CONSUMED if committed is not None and committed > record.queue_offset else NOT_CONSUME_YET
            rows.append({"type": "consumption", "group": group, "topic": topic, "queueId": record.queue_id,
                         "queueOffset": record.queue_offset, "committedOffset": committed, "state": state})
        return rows

    def ops(self, queue_id: int) -> list[tx.Op]:
        if queue_id not in self._ops:
            self._ops[queue_id] = tx.read_ops(self.reader, queue_id, self.problems)
        return self._ops[queue_id]

    # ------------------------------------------------------------------ without the index
    def scan(self, uniq_keys: set[str], key: str | None = None, topic: str | None = None,
             progress=None) -> dict[str, list[Record]]:
        """One walk of the commitlog: the records of each UNIQ_KEY, and with key/topic those
        holding key sent to topic (their UNIQ_KEYs join the set as they are met)."""
        found: dict[str, list[Record]] = {}
        needles = [k.encode("utf-8", "surrogateescape") for k in uniq_keys]
        needle = key.encode("utf-8", "surrogateescape") if key is not None else None
        for entry in self.reader.records(self.problems, progress):
            raw = entry.properties_bytes
            if not any(n in raw for n in needles) and (needle is None or needle not in raw):
                continue
            uniq = entry.properties.get(props.UNIQ_KEY)
            if uniq in uniq_keys:
                found.setdefault(uniq, []).append(entry)
            elif needle is not None and uniq is not None and _sent_to(entry, topic) and \
                    matched_by(entry, entry.topic, key):
                uniq_keys.add(uniq)
                needles.append(uniq.encode())
                found.setdefault(uniq, []).append(entry)
        return found

    def copies_of_origin(self, msgid: str, progress=None) -> list[Record]:
        """One walk of the commitlog: the records whose ORIGIN_MESSAGE_ID is msgid (a send-back's
        copies of a message that has no UNIQ_KEY: the index cannot find them)."""
        found = []
        needle = msgid.encode()
        for entry in self.reader.records(self.problems, progress):
            if needle in entry.properties_bytes and entry.properties.get(props.ORIGIN_MESSAGE_ID) == msgid:
                found.append(entry)
        return found


def _sent_to(record: Record, topic: str | None) -> bool:
    if topic is None:
        return True
    if record.topic == topic:
        return True
    return record.topic in (SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TIMER_TOPIC) and \
        record.properties.get(props.REAL_TOPIC) == topic


def _linked_by(hop: Hop, before: list[Hop]) -> str:
    """The property (besides UNIQ_KEY) that ties this copy to an earlier one, as the broker wrote it."""
    p = hop.record.properties
    offsets_before = {h.record.offset for h in before}
    if hop.role == COMMITTED and hop.record.prepared_transaction_offset in offsets_before:
        return "PreparedTransactionOffset"
    if hop.role == RECALLED:
        return props.TIMER_DEL_UNIQKEY
    if hop.role == HALF_CHECKED:
        return props.TRANSACTION_CHECK_TIMES
    if hop.role in (RETRY_SCHEDULED, RETRY, DEAD_LETTER) and props.ORIGIN_MESSAGE_ID in p:
        return props.ORIGIN_MESSAGE_ID
    if hop.role in (DELIVERED, TIMER_DELIVERED):
        return props.REAL_TOPIC if props.REAL_TOPIC in p else props.UNIQ_KEY
    return props.UNIQ_KEY


def sent_to(hop: Hop) -> str | None:
    """The topic the producer sent the message to, as its first hop in the store says."""
    p = hop.record.properties
    if hop.role in HOME_ROLES:
        return hop.record.topic
    if props.RETRY_TOPIC in p:
        return p[props.RETRY_TOPIC]
    return p.get(props.REAL_TOPIC)


def _at(ms: int | None) -> str:
    return iso(ms) or "?"


def _due(due_at: int | None, now_ms: int) -> str:
    if due_at is None:
        return "due at an unknown time"
    if due_at < now_ms:
        return f"due at {_at(due_at)}, overdue (the broker has not delivered it: is it running?)"
    return f"due at {_at(due_at)}"


def _judge(journey: Journey, now_ms: int) -> None:
    """Where the message is now: its state, each group's, and a sentence saying so."""
    hops = journey.hops
    if not hops:
        journey.state = "deleted" if journey.deleted else "not-found"
        journey.where = ("its records were deleted by reclaim: their commitlog files are gone"
                         if journey.deleted else "no record of this message in the store")
        return
    roles = [h.role for h in hops]
    journey.topic = sent_to(hops[0])
    home = [h for h in hops if h.role in HOME_ROLES]
    said = []
    if HALF in roles or HALF_CHECKED in roles:
        checks = max((tx.check_times(h.record) for h in hops if h.role in (HALF, HALF_CHECKED)), default=0)
        if COMMITTED not in roles:
            if journey.ops:
                journey.state, journey.where = "rolled-back", "the transaction was rolled back (an op and no committed copy)"
            elif HALF_DISCARDED in roles:
                journey.state, journey.where = "discarded", "the transaction check gave up on it (transactionCheckMax)"
            else:
                first_half = next(h for h in hops if h.role in (HALF, HALF_CHECKED)).record
                journey.state = "transaction-pending"
                journey.where = (f"in a transaction not yet resolved: checked {checks} time(s), waiting "
                                 f"{duration(now_ms - first_half.store_timestamp)} since its half was stored")
            return
        if not journey.ops:
            said.append("committed, but no op names its half: the check will ask the producer again")
    timers = [h for h in hops if h.role == TIMER_SCHEDULED]
    if timers and not any(h.role == TIMER_DELIVERED for h in hops):
        if RECALLED in roles:
            journey.state, journey.where = "recalled", "recalled before its timer fell due"
        else:
            journey.state, journey.due_at = "waiting-timer", timers[-1].due_at
            journey.where = f"waiting for its timer: {_due(journey.due_at, now_ms)}"
        return
    delays = [h for h in hops if h.role == DELAY_SCHEDULED]
    if delays and not home:
        journey.state, journey.due_at = "waiting-delay", delays[-1].due_at
        journey.where = f"waiting for delay level {delays[-1].record.queue_id + 1}: {_due(journey.due_at, now_ms)}"
        return
    if not home:
        journey.state = "stored"
        journey.where = f"only its {', '.join(dict.fromkeys(roles))} record(s) are in the store"
        return
    journey.groups = _group_states(home[-1], hops)
    journey.state = "stored"
    for g in journey.groups:
        if g.state == "dead-letter":
            said.append(f"dead-lettered for {g.group} " + (
                f"after {g.retries} retr{'y' if g.retries == 1 else 'ies'}" if g.retries else "without a retry"))
        elif g.state == "waiting-retry":
            said.append(f"waiting for retry {g.retries + 1} of {g.group}: {_due(g.due_at, now_ms)}")
        elif g.state == "consumed":
            said.append(f"consumed by {g.group}" + (f" on retry {g.retries}" if g.retries else ""))
        else:
            said.append(f"not consumed yet by {g.group}" + (f" (retry {g.retries} waits in {g.topic})" if g.retries else ""))
    due = [g.due_at for g in journey.groups if g.due_at is not None]
    journey.due_at = min(due) if due else None
    last = home[-1].record
    stored = f"stored in {last.topic} queue {last.queue_id} at queue offset {last.queue_offset}"
    journey.where = "; ".join([stored] + said) if said else stored + "; no consumer group has offsets for it"


def _group_states(home: Hop, hops: list[Hop]) -> list[GroupState]:
    """Each group's state: those with offsets for the home queue, and those that sent it back."""
    states: dict[str, GroupState] = {}
    for row in home.consumption:
        states[row["group"]] = GroupState(row["group"], "consumed" if row["state"] == CONSUMED else "not-consumed",
                                          home.record.topic, home.record.queue_id, home.record.queue_offset)
    for hop in hops:
        if hop.group is None:
            continue
        r = hop.record
        g = states.setdefault(hop.group, GroupState(hop.group, "not-consumed", r.topic, r.queue_id, r.queue_offset))
        g.topic, g.queue_id, g.queue_offset, g.due_at = r.topic, r.queue_id, r.queue_offset, None
        if hop.role == RETRY_SCHEDULED:
            g.state, g.due_at = "waiting-retry", hop.due_at
        elif hop.role == DEAD_LETTER:
            g.state = "dead-letter"
        elif hop.role == RETRY:
            g.retries += 1
            mine = [c for c in hop.consumption if c["group"] == hop.group]
            g.state = "consumed" if mine and mine[0]["state"] == CONSUMED else "not-consumed"
    return [states[name] for name in sorted(states)]


def track(reader: StoreReader, layout, now_ms: int, *, msgid: str | None = None, topic: str | None = None,
          key: str | None = None, scan: bool = False, progress=None) -> TrackResult:
    """Every message msgid names (one), or every message holding key sent to topic, with its hops."""
    tracker = Tracker(reader, layout, now_ms)
    result = TrackResult(looked_up=msgid or f"{topic} / {key}")
    why = None if scan else tracker.index_usable()
    result.index_span = tracker.index_span()
    seed = None
    if msgid is not None:
        uniq, seed = tracker.seed_by_msgid(msgid)
        uniq_keys = {uniq} if uniq is not None else set()
    else:
        uniq_keys = set()
    if scan or why is not None:
        result.source, result.note = "scan", why
        found = tracker.scan(uniq_keys, key=key, topic=topic, progress=progress)
        for uniq in sorted(found, key=lambda u: found[u][0].offset):
            result.journeys.append(tracker.journey_of_records(uniq, found[uniq]))
    elif msgid is not None:
        if uniq_keys:
            result.journeys.append(tracker.journey_by_index(next(iter(uniq_keys))))
    else:
        for uniq in dict.fromkeys(r.properties.get(props.UNIQ_KEY) for r in tracker.seeds_by_key(topic, key)):
            if uniq is not None:
                result.journeys.append(tracker.journey_by_index(uniq))
    if seed is not None and not uniq_keys:
        # a record without UNIQ_KEY (an old client): itself, and the copies whose ORIGIN_MESSAGE_ID names it
        result.source = "scan"
        result.note = "the message has no UNIQ_KEY: its copies were searched by ORIGIN_MESSAGE_ID in the commitlog"
        origin = seed.properties.get(props.ORIGIN_MESSAGE_ID) or msgid.strip().upper()
        copies = tracker.copies_of_origin(origin, progress=progress)
        if origin != msgid.strip().upper():      # the seed is a copy: the record first sent too
            first = reader.record_at(decode_offset_msgid(origin).commitlog_offset)
            copies += [first] if isinstance(first, Record) else []
        result.journeys.append(tracker.journey_of_records(None, {r.offset: r for r in [seed, *copies]}.values()))
    result.journeys = [j for j in result.journeys if j.hops or j.deleted] or \
        ([Journey(next(iter(uniq_keys)) if uniq_keys else None, state="not-found")] if msgid else [])
    for j in result.journeys:
        if not j.hops:
            _judge(j, now_ms)
    result.problems = tracker.problems
    return result
