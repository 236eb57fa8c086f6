"""The topic names and prefixes the broker gives a meaning (TopicValidator, MixAll,
TopicSysFlag): written once, for the dispatch rules, the reclaim policy, the offsets and the
topic checks that treat them apart."""

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"          # delayed messages, one queue per delay level
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"   # prepared transaction messages
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_PREFIX = "%RETRY%"
LMQ_PREFIX = "%LMQ%"
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"            # MixAll.CID_RMQ_SYS_PREFIX: the broker's own consumer groups
SYSTEM_GROUPS = {"CID_RMQ_SYS_TRANS": "the transaction check's progress in the half topic"}


def is_system_group(group: str) -> bool:
    """MixAll.isSysConsumerGroup: a group of the broker itself (CID_RMQ_SYS_TRANS: the transaction
    check's progress), not a user's."""
    return group.startswith(SYSTEM_GROUP_PREFIX)
