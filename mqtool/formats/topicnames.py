"""The topic names and prefixes the broker gives a meaning (TopicValidator, MixAll,
TopicSysFlag): written once, for the dispatch rules, the reclaim policy, the offsets and the
topic checks that treat them apart."""

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"          # delayed messages, one queue per delay level
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"   # prepared transaction messages
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
RETRY_PREFIX = "%RETRY%"
LMQ_PREFIX = "%LMQ%"
