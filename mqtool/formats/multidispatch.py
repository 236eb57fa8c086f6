"""Multi-dispatch (LMQ): one record, units in further consume queues.

With enableMultiDispatch a record whose INNER_MULTI_DISPATCH property names queues
("%LMQ%a,%LMQ%b", MixAll's "," separator) is stored once; the broker writes the queue
offsets it assigned at put time into INNER_MULTI_QUEUE_OFFSET ("0,17") and, after the
record's own unit, puts a unit (offset, size, the record's tags code) at that offset into
each named queue: consumequeue/<name>/0/ for an LMQ name (enableLmq and the "%LMQ%"
prefix), else consumequeue/<name>/<the record's queue id>/.  The record's own queue
offset and topic stay those of its topic.

Facts from the Java source: 4.9.8 ConsumeQueue.multiDispatchLmqQueue and
DefaultMessageStore.checkMultiDispatchQueue; 5.3.3 ConsumeQueue.multiDispatchLmqQueue,
MultiDispatchUtils.checkMultiDispatchQueue (5.x leaves out %RETRY%, rmq_sys_ and
SCHEDULE_TOPIC_XXXX records and names holding a "/").
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtool.formats.javastr import parse_java_integer
from mqtool.formats.topicnames import LMQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC, SYSTEM_TOPIC_PREFIX

INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
LMQ_QUEUE_ID = 0
SEPARATOR = ","
MARKER = (INNER_MULTI_DISPATCH + "\x01").encode()   # what a record carrying the property holds

_NOT_5X = (RETRY_PREFIX, SYSTEM_TOPIC_PREFIX)


def is_lmq(name: str) -> bool:
    return name.startswith(LMQ_PREFIX)


def java_split(text: str) -> list[str]:
    """String.split(","): trailing empty strings are dropped."""
    parts = text.split(SEPARATOR)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _blank(text) -> bool:
    return text is None or text.strip() == ""


@dataclass(frozen=True)
class Settings:
    """A broker with enableMultiDispatch on: its enableLmq, and whether it is a 5.x one."""

    enable_lmq: bool
    is_5x: bool


def targets(topic: str, queue_id: int, properties: dict, settings: Settings) -> list:
    """The (queue name, queue id, queue offset) units a broker with enableMultiDispatch adds for
    a record dispatched to its own queue; [] when it adds none.  A queue offset that is not a
    long stops the list there (Long.parseLong throws in the broker's loop)."""
    names, offsets = properties.get(INNER_MULTI_DISPATCH), properties.get(INNER_MULTI_QUEUE_OFFSET)
    if _blank(names) or _blank(offsets):
        return []
    enable_lmq, is_5x = settings.enable_lmq, settings.is_5x
    if is_5x and (topic.startswith(_NOT_5X) or topic == SCHEDULE_TOPIC):
        return []
    names, offsets = java_split(names), java_split(offsets)
    if len(names) != len(offsets):
        return []
    out = []
    for name, offset in zip(names, offsets):
        if is_5x and "/" in name:
            continue
        value = parse_java_integer(offset)
        if value is None:
            break
        out.append((name, LMQ_QUEUE_ID if enable_lmq and is_lmq(name) else queue_id, value))
    return out
