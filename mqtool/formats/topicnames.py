"""The topic names and prefixes the broker gives a meaning (TopicValidator, MixAll,
TopicSysFlag): written once, for the dispatch rules, the reclaim policy, the offsets and the
topic checks that treat them apart."""

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"          # delayed messages, one queue per delay level
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"   # prepared transaction messages
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"   # halves checked transactionCheckMax times
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"         # the transaction check's own offsets (MixAll.CID_SYS_RMQ_TRANS)
TIMER_TOPIC = "rmq_sys_wheel_timer"             # 5.x timer messages until they fall due
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
LMQ_PREFIX = "%LMQ%"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"            # MixAll.CID_RMQ_SYS_PREFIX: the broker's own consumer groups
SYSTEM_GROUPS = {TRANS_CHECK_GROUP: "the transaction check's progress in the half topic"}


def is_system_group(group: str) -> bool:
    """MixAll.isSysConsumerGroup: a group of the broker itself (CID_RMQ_SYS_TRANS: the transaction
    check's progress), not a user's."""
    return group.startswith(SYSTEM_GROUP_PREFIX)


def group_of(topic: str) -> str | None:
    """The consumer group a retry or dead-letter topic belongs to (MixAll.getRetryTopic,
    getDLQTopic: the prefix and the group; a POP retry topic of 5.x, %RETRY%group+topic, names
    the group before the "+"), or None for any other topic."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX):
        if topic.startswith(prefix):
            return topic[len(prefix):].split("+", 1)[0]
    return None
