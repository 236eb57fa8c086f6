"""What an engine is (the Engine protocol LocalEngine and SparkEngine both implement), and the
engine a command asked for (open_engine: pyspark is imported only when --engine spark is).
"""

from __future__ import annotations

import importlib
from typing import Protocol, runtime_checkable

from mqtool.errors import UsageError
from mqtool.pipeline.local import LocalEngine


@runtime_checkable
class Engine(Protocol):
    """Runs a per-partition scan over partitions (plan.CommitLogPart or QueuePart).  A scan must be
    picklable (a module-level function or a functools.partial of one); results come back in
    partition order.  tests/test_pipeline_engines.py checks both engines implement it alike."""

    name: str

    @property
    def cores(self) -> int:
        """How many partitions run at once."""

    def map(self, scan, parts) -> list:
        """scan(part) for every partition, the results in partition order."""

    def imap(self, scan, parts):
        """map() as a stream: results in partition order as they are ready."""

    def close(self) -> None:
        """Let go of what the engine started (a Spark session it created)."""


# named, not imported: pyspark loads only when --engine spark is asked for (the fsspec way)
SPARK_ENGINE = "mqtool.pipeline.spark.engine:SparkEngine"


def open_engine(name: str, *, jobs: int | None = None, master: str | None = None, conf=()) -> Engine:
    """The engine a command asked for: LocalEngine, or a SparkEngine (pyspark imported only here)."""
    if name == "local":
        if master:
            raise UsageError("--master needs --engine spark")
        if conf:
            raise UsageError("--spark-conf needs --engine spark")
        return LocalEngine(jobs)
    module, _, name = SPARK_ENGINE.partition(":")
    try:
        engine = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise UsageError(f"--engine spark needs PySpark 4.1 or newer and pyarrow ({exc}): "
                         "pip install 'mqtool[spark]'") from None
    return engine.open(master=master, conf=conf)
