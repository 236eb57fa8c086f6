"""The Spark engine: partitions as Spark tasks (map, imap), the rocketmq DataFrame over stores
(read), and `export` with Spark's own writer.  It implements pipeline.engines.Engine, as
LocalEngine does.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager

from pyspark.sql import functions as F

from mqtool.errors import MqError, NotAStoreError
from mqtool.forensics.filters import Filters
from mqtool.pipeline import schema as row_schema
from mqtool.pipeline.spark.session import session
from mqtool.pipeline.spark.sources import FORMAT, settle


class _Failed:
    """A task's mqtool error or OSError, returned instead of raised: raised in the task, Spark
    would hand the driver PySpark's text of it (an internal error to the command line); the
    driver raises it itself (_raised), one line and its exit code, as the local engine does."""

    def __init__(self, error: Exception):
        self.error = error


def _raised(result):
    if isinstance(result, _Failed):
        raise result.error
    return result


class _Settled:
    """scan(part), as a Spark task (see sources.settle and _Failed)."""

    def __init__(self, scan):
        self.scan = scan

    def __call__(self, part):
        settle()
        try:
            return self.scan(part)
        except (MqError, OSError) as exc:
            return _Failed(exc)


def _as_is(rows):
    return rows


class SparkEngine:
    """Partitions as Spark tasks: map() runs a per-partition scan on the executors and brings the
    results to the driver; read() is the rocketmq data source over the same partitions.  An
    engines.Engine, as LocalEngine is (read, export and open are its own)."""

    name = "spark"

    def __init__(self, spark, owned: bool = False):
        self.spark = spark
        self.owned = owned

    @classmethod
    def open(cls, master: str | None = None, conf=()):
        spark, created = session(master, conf)
        return cls(spark, created)

    @property
    def cores(self) -> int:
        return self.spark.sparkContext.defaultParallelism

    def map(self, scan, parts) -> list:
        """scan(part) for every partition, one Spark task each; results in partition order."""
        parts = list(parts)
        if not parts:
            return []
        return [_raised(r) for r in self.spark.sparkContext.parallelize(parts, len(parts)).map(_Settled(scan))
                .collect()]

    def imap(self, scan, parts):
        """map() as a stream, for results too big to collect at once: the partitions run in waves
        of `cores` tasks, the next wave while the caller consumes this one, so the driver holds
        at most two waves of results.  Results come in partition order."""
        from concurrent.futures import ThreadPoolExecutor

        parts = list(parts)
        if not parts:
            return
        context = self.spark.sparkContext
        rdd = context.parallelize(parts, len(parts)).map(_Settled(scan))
        step = max(1, self.cores)
        waves = [list(range(i, min(i + step, len(parts)))) for i in range(0, len(parts), step)]
        with ThreadPoolExecutor(1, thread_name_prefix="spark-wave") as submitter:
            pending = submitter.submit(context.runJob, rdd, _as_is, waves[0])
            for following in waves[1:] + [None]:
                results = pending.result()
                if following is not None:
                    pending = submitter.submit(context.runJob, rdd, _as_is, following)
                yield from map(_raised, results)

    def read(self, stores, *, with_body: bool = False, with_problems: bool = False, check_crc: bool = True,
             pushdown: bool = False, columns=None, fmt: str = FORMAT):
        """The rocketmq DataFrame over these stores (plan.Store).  pushdown: only for a
        DataFrame that serves one query (see sources._Pushdown).  columns: only these (names).  fmt:
        PYTHON_FORMAT for the Python data source where FORMAT is the JVM reader."""
        reader = self.spark.read.format(fmt)
        for key, value in (("withBody", with_body), ("problems", with_problems), ("checkCrc", check_crc),
                           ("pushdown", pushdown)):
            reader = reader.option(key, str(value).lower())
        if columns is not None:
            reader = reader.option("columns", ",".join(columns))
        first = stores[0]
        if first.config_path:
            reader = reader.option("config", first.config_path)
        if first.settings:
            reader = reader.option("set", ",".join(first.settings))
        return reader.option("paths", json.dumps([f"{s.broker}={s.root}" for s in stores])).load()

    def export(self, stores, out: str, fmt: str, with_body: bool, filters, overwrite: bool) -> dict:
        return export(self, stores, out, fmt, with_body, filters, overwrite)

    def close(self) -> None:
        if self.owned:
            self.spark.stop()


# ------------------------------------------------------------------ export
_ROWS_ERROR = re.compile(r"mqtool\.spark\.RowsException: ([^\n]*)")


@contextmanager
def spark_errors():
    """mqtool's own errors out of Spark's wrappers: an error the JVM reader's row server answered
    with (RowsException, its message mqtool's one line) is the NotAStoreError it stands for (data
    that could not be read: a file gone since the plan, say), not an internal error."""
    try:
        yield
    except MqError:
        raise
    except Exception as exc:  # noqa: BLE001 - Spark's errors come as Py4J and PySpark types alike
        found = _ROWS_ERROR.search(str(exc))
        if found is None:
            raise
        raise NotAStoreError(found.group(1)) from None


def export(engine, stores, out: str, fmt: str, with_body: bool, filters: Filters,
                 overwrite: bool) -> dict:
    """`export` with Spark's own writer from the rocketmq data source; the counts are read back from
    what was written (which also checks it reads)."""
    with spark_errors():
        return _export(engine, stores, out, fmt, with_body, filters, overwrite)


def _export(engine, stores, out: str, fmt: str, with_body: bool, filters: Filters,
            overwrite: bool) -> dict:
    # df is new and serves this one write, so the filters it pushes cannot leak into another query
    df = engine.read(stores, with_body=with_body, pushdown=True)
    df = _where(df, filters)
    writer = df.write.partitionBy("topic").mode("overwrite" if overwrite else "errorifexists")
    if fmt == "parquet":
        writer.parquet(out)
    else:
        writer.json(out)
    if fmt == "parquet":
        back = engine.spark.read.parquet(out)
    else:
        back = engine.spark.read.schema(row_schema.ddl(row_schema.columns(with_body))).json(out)
    counts: dict = {None: 0}
    for row in back.groupBy("topic", "ok").count().collect():
        counts[row["topic"]] = counts.get(row["topic"], 0) + row["count"]
        if not row["ok"]:
            counts[None] += row["count"]
    return counts


def _where(df, filters: Filters):
    """The filters as Spark conditions (Spark applies them; the source may also take them)."""
    if filters.topics is not None:
        df = df.where(F.col("topic").isin(sorted(filters.topics)))
    lo, hi = filters.time_range
    if lo is not None:
        df = df.where(F.col("storeTimestamp") >= lo)
    if hi is not None:
        df = df.where(F.col("storeTimestamp") <= hi)
    return df
