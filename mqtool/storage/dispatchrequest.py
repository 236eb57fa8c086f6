"""What the store derives from a record for its consume queues and index.

This is CommitLog.checkMessageAndReturnSize's DispatchRequest: the consume
queue gets (offset, size, tagsCode), the index gets the KEYS and UNIQ_KEY of
the topic the record is stored under.  tagsCode is the tags' hashCode, except
for SCHEDULE_TOPIC_XXXX records, whose tagsCode is the delivery time
(storeTimestamp + the delay of their level, the level clamped to the highest).

Each fact is written once and serves both forms of the dispatch rule
(mqtool/engine/dispatchrule.py): one record here (from_record, delivery_time), numpy columns
of scanned records next to it (tags_codes, delivery_times).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mqtool.formats import multidispatch, sysflag
from mqtool.formats import properties as props
from mqtool.formats.commitlog import Record
from mqtool.formats.javastr import parse_java_integer
from mqtool.formats.javastr import tags_code as _tags_code
from mqtool.formats.topicnames import SCHEDULE_TOPIC

if TYPE_CHECKING:
    import numpy as np   # imported where used: one record's dispatch (dump, lookups) needs no numpy

# Few distinct tags, hashed by a per-character loop: hash each once.
tags_code = functools.lru_cache(maxsize=4096)(_tags_code)


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    commitlog_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: str
    uniq_key: str | None
    sys_flag: int
    prepared_transaction_offset: int
    multi: dict | None = None     # the properties, when they name further queues (INNER_MULTI_DISPATCH)
    msg_base_offset: int = -1     # a batch queue unit's msgBaseOffset and batchSize: the record's queue
    batch_size: int = -1          # offset and 1, or INNER_BASE and INNER_NUM when it has both (from_record)

    @property
    def goes_to_consume_queue(self) -> bool:
        return sysflag.is_dispatched_to_consume_queue(self.sys_flag)

    @property
    def is_indexed(self) -> bool:
        return sysflag.is_indexed(self.sys_flag)

    def index_keys(self) -> list[str]:
        """The keys the index service adds, in its order: UNIQ_KEY first, then KEYS."""
        keys = []
        if self.uniq_key:
            keys.append(self.uniq_key)
        keys.extend(props.split_keys(self.keys))
        return keys


def rewrites_tags_code(topic: str) -> bool:
    """Is a DELAY level's delivery time the tags code of this topic's records?"""
    return topic == SCHEDULE_TOPIC


def delivery_time(level: int, store_timestamp: int, delay_levels_ms: list[int]) -> int:
    """ScheduleMessageService.computeDeliverTimestamp for a (clamped) level >= 1."""
    level = min(level, len(delay_levels_ms))
    return store_timestamp + delay_levels_ms[level - 1]


def delivery_times(levels: np.ndarray, store_timestamps: np.ndarray, delay_levels_ms: list[int]) -> np.ndarray:
    """delivery_time for columns of levels >= 1 (delay_levels_ms not empty)."""
    import numpy as np

    delays = np.asarray(delay_levels_ms, dtype=np.int64)
    return store_timestamps + delays[np.minimum(levels, len(delays)) - 1]


def tags_codes(tags_hash: np.ndarray, delay_level: np.ndarray, rewritten: np.ndarray, store_timestamps: np.ndarray,
               delay_levels_ms: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """from_record's tags code for columns of scanned records: the kernels' hash of TAGS, or
    for a record of a topic whose tags code is its delivery time (rewritten) with a DELAY level
    (delay_level > 0) that time.  delay_level is the kernels' reading of DELAY: 0 without one,
    -1 for a text that is not plain digits, which Integer.parseInt may still read: those rows come back
    as the second value, for the caller to ask from_record."""
    codes = tags_hash.copy()
    timed = rewritten & (delay_level > 0)
    if delay_levels_ms and timed.any():
        codes[timed] = delivery_times(delay_level[timed], store_timestamps[timed], delay_levels_ms)
    return codes, rewritten & (delay_level < 0)


def from_record(record: Record, delay_levels_ms: list[int],
                properties: dict[str, str] | None = None) -> DispatchRequest:
    """properties: the record's decoded properties, when the caller has them already."""
    topic = record.topic
    if properties is None:
        properties = record.properties if record.properties_bytes else {}
    tags = properties.get(props.TAGS)
    code = tags_code(tags)
    level_text = properties.get(props.DELAY)
    if rewrites_tags_code(topic) and level_text is not None:
        level = min(props.delay_level(level_text), len(delay_levels_ms))
        if level > 0:
            code = delivery_time(level, record.store_timestamp, delay_levels_ms)
    return DispatchRequest(
        topic=topic, queue_id=record.queue_id, commitlog_offset=record.offset, size=record.total_size,
        tags_code=code, store_timestamp=record.store_timestamp, queue_offset=record.queue_offset,
        keys=properties.get(props.KEYS, "") or "", uniq_key=properties.get(props.UNIQ_KEY),
        sys_flag=record.sys_flag, prepared_transaction_offset=record.prepared_transaction_offset,
        multi=properties if multidispatch.INNER_MULTI_DISPATCH in properties else None,
        **batch_fields(properties, record.queue_offset))


INNER_BASE, INNER_NUM = "INNER_BASE", "INNER_NUM"


def batch_fields(properties: dict, queue_offset: int) -> dict:
    """A batch queue unit's msgBaseOffset and batchSize for a record at queue_offset: the
    DispatchRequest's defaults (the queue offset, 1), which CommitLog.setBatchSizeIfNeeded replaces
    with INNER_BASE and INNER_NUM, parsed as a long and a short, when the record has both (a text
    Java would not parse keeps the defaults here).  5.3.3 writes single messages and 4.x-style
    batches (one record per message) without them, inner batches with them."""
    base, num = properties.get(INNER_BASE), properties.get(INNER_NUM)
    defaults = {"msg_base_offset": queue_offset, "batch_size": 1}
    if base is None or num is None:
        return defaults
    base_value, num_value = parse_java_integer(base), parse_java_integer(num, 16)
    if base_value is None or num_value is None:
        return defaults
    return {"msg_base_offset": base_value, "batch_size": num_value}


def messages_held(sys_flag: int, properties: dict) -> int:
    """How many messages one record holds, as the broker counts them: INNER_NUM for an inner batch
    (INNER_BATCH_FLAG: one record a consumer unwraps into that many, and a batch queue's offsets
    move on by as many), 1 for every other record."""
    return message_num(properties, bool(sys_flag & sysflag.INNER_BATCH))


def message_num(properties: dict, batch_topic: bool) -> int:
    """CommitLog.getMessageNum: how far a record moves its queue's offsets on.  INNER_NUM (at least
    1) for a record of a BatchCQ topic that carries it (an inner batch); 1 for everything else.
    The broker also counts INNER_NUM for an inner-batch record (INNER_BATCH_FLAG) on a topic
    with a consume queue, but that queue holds one unit per record, so offsets that jump there
    break it: for such a topic the offsets go up one by one (and a jump is reported)."""
    num = properties.get(INNER_NUM) if batch_topic else None
    value = parse_java_integer(num, 16) if num is not None else None
    return value if value is not None and value >= 1 else 1
