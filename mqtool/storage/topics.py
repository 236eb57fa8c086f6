"""Topic names as the broker's TopicValidator accepts them.

A topic becomes a directory name under consumequeue/, so the store refuses
anything outside ^[%|a-zA-Z0-9_-]+$ or longer than 127 characters before a
single byte is written: `/`, `..`, NUL and the like never reach the file system.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mqtool.formats import multidispatch
from mqtool.formats.topicnames import (SCHEDULE_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC,
                                       TRANS_OP_HALF_TOPIC)

TOPIC_MAX_LENGTH = 127
_VALID = re.compile(r"[%|a-zA-Z0-9_-]+\Z")

NOT_ALLOWED_SEND = frozenset({
    SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC,
    "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
})
SYSTEM_TOPICS = NOT_ALLOWED_SEND | {"TBW102", "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC"}


@lru_cache(maxsize=16384)
def topic_problem(topic: str, max_length: int = TOPIC_MAX_LENGTH) -> str | None:
    """Why the topic is not a valid topic name, or None (TopicValidator.validateTopic).

    5.x stores may hold longer topics (MessageVersion V2); they still have to be
    a single directory name, so the caller passes at most 255."""
    if not topic or not topic.strip():
        return "the topic is blank"
    if not _VALID.match(topic):
        return "the topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > max_length:
        return f"the topic is {len(topic)} characters, longer than {max_length}"
    return None


LONGEST_DIRECTORY_NAME = 255


def is_safe_directory_name(topic: str) -> bool:
    """A topic read from a commitlog may only become a path when it is a valid name
    (5.x stores hold topics past 127 characters; a directory name stops at 255 bytes)."""
    return topic_problem(topic, LONGEST_DIRECTORY_NAME) is None


def send_forbidden(topic: str) -> bool:
    """TopicValidator.isNotAllowedSendTopic: producers may not send to these directly."""
    return topic in NOT_ALLOWED_SEND


def lmq_reserved(topic: str) -> bool:
    """A %LMQ% queue name (MixAll.LMQ_PREFIX): its units are written by a broker's multi-dispatch
    (enableLmq, enableMultiDispatch), which assigns their queue offsets; a store without LMQ does
    not dispatch such a topic as one, so a writer that does not multi-dispatch refuses it."""
    return multidispatch.is_lmq(topic)


def producer_refused(topic: str) -> bool:
    """A topic append refuses from a producer's line (without --allow-system-topics): one a broker
    refuses (send_forbidden) or one only multi-dispatch writes (lmq_reserved)."""
    return send_forbidden(topic) or lmq_reserved(topic)
