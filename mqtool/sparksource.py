"""`mqtool.sparksource`, as documented: the names a Spark user needs, from mqtool.pipeline.spark."""

from mqtool.pipeline.spark.engine import SparkEngine
from mqtool.pipeline.spark.session import register, session
from mqtool.pipeline.spark.sources import (
    CQ_FORMAT,
    FORMAT,
    PYTHON_CQ_FORMAT,
    PYTHON_FORMAT,
    ConsumeQueueDataSource,
    RocketMQDataSource,
)

__all__ = ["CQ_FORMAT", "FORMAT", "PYTHON_CQ_FORMAT", "PYTHON_FORMAT", "ConsumeQueueDataSource",
           "RocketMQDataSource", "SparkEngine", "register", "session"]
