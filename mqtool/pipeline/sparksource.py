"""mqtool on Apache Spark: PySpark data sources for store files, the session, and the Spark engine.

    spark.read.format("rocketmq").load("/data/rocketmq/store")       # one row per commitlog record
    spark.read.format("rocketmq").load("/data/brokers")              # a directory of stores
    spark.read.format("rocketmq_cq").load("/data/brokers")           # one row per consume queue unit

The data sources use the Python Data Source API (pyspark.sql.datasource, PySpark
>= 4.1 for filter pushdown).  Every input partition is one file, described by a
pipeline partition, and decoded in Spark's Python workers by the same
generators `--engine local` runs (mqtool.pipeline.engines: the compiled columnar read
path), handed to Spark as Arrow batches of a few thousand rows, so memory stays flat.  The workers import
mqtool, so it must be installed where they run (see README.md).  PySpark tells Python data sources
nothing of the columns a query reads: option("columns", "a,b") or a schema of the user's picks
them, and the reader decodes and hands over only those.

In the sessions session() starts, format("rocketmq") and format("rocketmq_cq") are the JVM
reader instead (jvmreader, pipeline/jvm/): a DataSource V2 that gets column pruning and hands
Spark columnar batches, while every answer it gives comes from the classes here, run by mqtool's
row server (rowserver).  The Python data sources are also registered as format("rocketmq_python")
and format("rocketmq_cq_python").

pyspark and pyarrow are imported here (and by the row server the JVM reader starts) only;
nothing else in mqtool imports this module unless `--engine spark` is asked for.
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql.datasource import (
    CaseInsensitiveDict,
    DataSource,
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from mqtool.errors import MqError, NotAStoreError, UsageError
from mqtool.pipeline import engines as pipeline
from mqtool.pipeline.arrow import arrow_schema, block_to_arrow, to_arrow

FORMAT = "rocketmq"
PYTHON_FORMAT = "rocketmq_python"     # the Python data source, also when format("rocketmq") is the JVM's
CQ_FORMAT = "rocketmq_cq"
PYTHON_CQ_FORMAT = "rocketmq_cq_python"

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
SESSION_CONF = {
    # needed for option("pushdown", "true"); readers without pushFilters are not affected
    PUSHDOWN: "true",
    # topic=123/ is a topic named "123", not a number, when an export is read back
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
LOCAL_CONF = {"spark.ui.enabled": "false"}

_OPS = {EqualTo: "eq", In: "in", GreaterThan: "gt", GreaterThanOrEqual: "ge", LessThan: "lt",
        LessThanOrEqual: "le"}


# ------------------------------------------------------------------ data sources
def _flag(options, name: str, default: bool) -> bool:
    value = options.get(name)
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


def _stores(options) -> list[pipeline.Store]:
    """The stores of load(PATH), load([PATHS]) or .option("paths", JSON list), each a store,
    NAME=PATH, or a directory of stores; .option("config", broker.conf) and .option("set",
    "KEY=VALUE,...") apply to every one."""
    paths = json.loads(options["paths"]) if options.get("paths") else []
    if options.get("path"):
        paths.append(options["path"])
    if not paths:
        raise UsageError('give the store: spark.read.format("rocketmq").load("/path/to/store")')
    settings = options.get("set")
    settings = [s for s in settings.split(",") if s.strip()] if settings else []
    return pipeline.find_stores(paths, options.get("config"), settings)


def _checked(fields, known, source: str) -> list[tuple[str, str]]:
    """fields ((name, Spark SQL type) pairs) if every one is a column of the source, with its type."""
    kinds = dict(known)
    for name, kind in fields:
        if name not in kinds:
            raise UsageError(f'format("{source}") has no column {name!r}; its columns: {", ".join(kinds)}')
        if kind != kinds[name]:
            raise UsageError(f'format("{source}"): column {name!r} is {kinds[name]}, not {kind}')
    return list(fields)


def _schema(options, default, known, source: str) -> str:
    """The source's schema as DDL: option("columns", "a,b") picks those columns (in that order), so
    a query pays only for what it reads (PySpark's Python data sources get no column pruning)."""
    names = options.get("columns")
    if names is None:
        return pipeline.ddl(default)
    kinds = dict(known)
    names = [n.strip() for n in names.split(",") if n.strip()]
    if not names:
        raise UsageError(f'format("{source}"): option("columns") names no column; its columns: {", ".join(kinds)}')
    return pipeline.ddl(_checked([(n, kinds.get(n)) for n in names], known, source))


def _wanted(schema, known, source: str) -> list[tuple[str, str]]:
    """The columns reader(schema) is asked for: the source's schema, option("columns")' or the
    user's own (spark.read.schema("storeSize int")), which must name columns of the source."""
    return _checked([(f.name, f.dataType.simpleString()) for f in schema.fields], known, source)


_tasks = 0


def _settle() -> None:
    """Called as a task starts in a Python worker: at its second task, what the first one loaded
    (modules, compiled kernels) is put out of the garbage collector's sight (the first task's own
    objects are gone by then).  PySpark's reused workers run gc.collect() after every task, which
    otherwise walks all of numba's and pyarrow's objects each time: about 70 ms a task here, more
    than a 256 MiB file's read of a few columns."""
    global _tasks
    _tasks += 1
    if _tasks == 2:
        gc.freeze()


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
    """scan(part), as a Spark task (see _settle and _Failed)."""

    def __init__(self, scan):
        self.scan = scan

    def __call__(self, part):
        _settle()
        try:
            return self.scan(part)
        except (MqError, OSError) as exc:
            return _Failed(exc)


class _Reader(DataSourceReader):
    """Shared by both sources: stores from the options, one partition per file, rows of the columns
    asked for (cols).  This class has no pushFilters: Spark refuses a reader that has one while
    spark.sql.python.filterPushdown.enabled is off, and with it on Spark 4.1 to 4.3 reuse one
    query's pushed filters for later queries of the same DataFrame (see _Pushdown)."""

    def __init__(self, options, cols, full):
        self.stores = _stores(options)
        self.filters = pipeline.Filters()
        self.cols = cols
        names = [name for name, _ in full]
        self.picks = None if cols == full else [names.index(name) for name, _ in cols]

    def project(self, batch: list[tuple]) -> list[tuple]:
        """Row tuples of every column cut down to the columns asked for."""
        if self.picks is None:
            return batch
        return [tuple(row[i] for i in self.picks) for row in batch]


class _Pushdown:
    """pushFilters for option("pushdown", "true"): EqualTo/In on broker, topic and queueId, ranges
    on storeTimestamp and commitLogOffset (files outside the offsets are not read, records
    outside the filters are skipped before their row is built).  Spark 4.1 to 4.3 keep the
    pushed reader on the DataFrame's relation, so a later query of the same DataFrame (or
    temporary view) that has no filters reads with the earlier filters and misses rows: use
    pushdown on a DataFrame that serves one query."""

    unpushable = ()

    def pushFilters(self, filters):
        return push_filters(self.filters, filters, self.unpushable)


def push_filters(taker: pipeline.Filters, filters, unpushable=()):
    """The filters (pyspark's) that taker cannot take; each one it can take is pushed into it."""
    for f in filters:
        op = _OPS.get(type(f))
        column = f.attribute[0] if op and len(f.attribute) == 1 else None
        if column is None or column in unpushable or not taker.push(op, column, f.value):
            yield f


def _pushdown_wanted(options) -> bool:
    return _flag(options, "pushdown", False)


class CommitLogReader(_Reader):
    def __init__(self, options, cols=None):
        if cols is None:    # every column (body with option withBody)
            cols = pipeline.columns(_flag(options, "withBody", False))
        self.with_body = any(name == pipeline.BODY_COLUMN[0] for name, _ in cols)
        super().__init__(options, cols, pipeline.columns(self.with_body))
        self.with_problems = _flag(options, "problems", False)
        self.check_crc = _flag(options, "checkCrc", True)

    def partitions(self):
        return [InputPartition(p) for p in pipeline.commitlog_parts(self.stores, self.filters)]

    def read(self, partition):
        """The columnar read path's Arrow batches as they are (pipeline.row_blocks), of the
        columns asked for only (the kernels decode no more than those need)."""
        _settle()
        part = partition.value
        schema = arrow_schema(self.cols)
        names = None if self.picks is None else [name for name, _ in self.cols]
        for piece in pipeline.row_blocks(part, self.filters, with_body=self.with_body,
                                         with_problems=self.with_problems, check_crc=self.check_crc,
                                         rows=pipeline.BATCH_ROWS, columns=names):
            if isinstance(piece, list):
                yield to_arrow(self.project(piece), schema)
            else:
                yield block_to_arrow(piece, part, schema)


class PushdownCommitLogReader(_Pushdown, CommitLogReader):
    pass


class RocketMQDataSource(DataSource):
    """format("rocketmq"): one row per commitlog record (see pipeline.columns).  Options:
    columns ("a,b,...": only these columns, body among them if named; all but body by default),
    withBody (false), problems (false: also a row for each damaged stretch that is no record),
    checkCrc (true), pushdown (false), config (a broker.conf), set (KEY=VALUE,...).  A schema
    given with spark.read.schema(...) picks columns too."""

    @classmethod
    def name(cls):
        return FORMAT

    def schema(self):
        return _schema(self.options, pipeline.columns(_flag(self.options, "withBody", False)),
                       pipeline.columns(True), FORMAT)

    def reader(self, schema):
        cls = PushdownCommitLogReader if _pushdown_wanted(self.options) else CommitLogReader
        return cls(self.options, _wanted(schema, pipeline.columns(True), FORMAT))


class PythonRocketMQDataSource(RocketMQDataSource):
    """format("rocketmq_python"): the Python data source under a name of its own, for sessions
    where format("rocketmq") is the JVM reader (jvmreader): the same rows, for comparison, or
    as a way around the JVM reader."""

    @classmethod
    def name(cls):
        return PYTHON_FORMAT


class QueueReader(_Reader):
    def __init__(self, options, cols=None):
        super().__init__(options, cols or pipeline.CQ_COLUMNS, pipeline.CQ_COLUMNS)

    def partitions(self):
        return [InputPartition(p) for p in pipeline.queue_parts(self.stores, self.filters)]

    def read(self, partition):
        _settle()
        schema = arrow_schema(self.cols)
        f = self.filters
        lo, hi = f.offset_range
        for batch in pipeline.batches(pipeline.queue_rows(partition.value)):
            if lo is not None or hi is not None:
                batch = [r for r in batch if f.offset_ok(r[7])]
            if batch:
                yield to_arrow(self.project(batch), schema)


class PushdownQueueReader(_Pushdown, QueueReader):
    unpushable = ("storeTimestamp", "queueOffset")   # a unit has no store time; its queue offset is not filtered here


class ConsumeQueueDataSource(DataSource):
    """format("rocketmq_cq"): one row per consume queue unit (see pipeline.CQ_COLUMNS).
    Options: columns, pushdown (false), config, set."""

    @classmethod
    def name(cls):
        return CQ_FORMAT

    def schema(self):
        return _schema(self.options, pipeline.CQ_COLUMNS, pipeline.CQ_COLUMNS, CQ_FORMAT)

    def reader(self, schema):
        cls = PushdownQueueReader if _pushdown_wanted(self.options) else QueueReader
        return cls(self.options, _wanted(schema, pipeline.CQ_COLUMNS, CQ_FORMAT))


class PythonConsumeQueueDataSource(ConsumeQueueDataSource):
    """format("rocketmq_cq_python"): the Python consume queue source under a name of its own (see
    PythonRocketMQDataSource)."""

    @classmethod
    def name(cls):
        return PYTHON_CQ_FORMAT


# ------------------------------------------------------------------ the JVM reader's answers
# format("rocketmq") in the JVM (jvmreader) asks mqtool's row server (rowserver), which answers
# with these: the Python data source's own classes, so that both give the same rows.

def _jvm_filters(specs):
    """The JVM's simple filters ({"op", "column", "value"}) as pyspark's Python data source filters."""
    kinds = {"eq": EqualTo, "gt": GreaterThan, "ge": GreaterThanOrEqual, "lt": LessThan, "le": LessThanOrEqual}
    for spec in specs:
        if spec["op"] == "in":
            yield In((spec["column"],), tuple(spec["value"]))
        else:
            yield kinds[spec["op"]]((spec["column"],), spec["value"])


def _jvm_source(source: str):
    """(data source class, pushdown reader class, its columns) of format(source)."""
    if source == FORMAT:
        return RocketMQDataSource, PushdownCommitLogReader, pipeline.columns(True)
    if source == CQ_FORMAT:
        return ConsumeQueueDataSource, PushdownQueueReader, pipeline.CQ_COLUMNS
    raise ValueError(f"no data source {source!r}")


def jvm_schema(source: str, options: dict) -> str:
    return _jvm_source(source)[0](CaseInsensitiveDict(options)).schema()


def jvm_push(source: str, specs) -> list[int]:
    """The indexes of the filters the reader takes."""
    filters = list(_jvm_filters(specs))
    left = {id(f) for f in push_filters(pipeline.Filters(), filters, _jvm_source(source)[1].unpushable)}
    return [i for i, f in enumerate(filters) if id(f) not in left]


def jvm_reader(source: str, options: dict, table, columns, specs):
    """The reader of a query: the table's columns (a user's schema) checked, the reader's the ones
    the query reads, the filters jvm_push said it takes pushed."""
    _, reader_class, known = _jvm_source(source)
    _checked([tuple(c) for c in table], known, source)
    reader = reader_class(CaseInsensitiveDict(options), _checked([tuple(c) for c in columns], known, source))
    for f in reader.pushFilters(list(_jvm_filters(specs))):
        raise ValueError(f"the reader does not take the filter {f}, which it took when asked")
    return reader


def jvm_plan(source: str, options: dict, table, columns, specs):
    """(the reader of a query, its partitions)."""
    reader = jvm_reader(source, options, table, columns, specs)
    return reader, [p.value for p in reader.partitions()]


def jvm_read(reader, part):
    """(a partition's Arrow batches, their schema)."""
    return reader.read(InputPartition(part)), arrow_schema(reader.cols)


def register(spark, reader: str | None = None) -> None:
    """Make format("rocketmq") and format("rocketmq_cq") known to this session, and the Python data
    sources as format("rocketmq_python") and format("rocketmq_cq_python").  format("rocketmq")
    and format("rocketmq_cq") are the JVM reader when the session's JVM has it (its jar in
    spark.jars: session() adds it), else the Python data sources.  reader: "python" to insist on
    the Python data source (spark.mqtool.reader by default), refused where the JVM has its own."""
    from mqtool.pipeline import jvmreader

    reader = reader or spark.conf.get(jvmreader.READER_CONF, "jvm")
    if not jvmreader.loaded(spark):
        spark.dataSource.register(RocketMQDataSource)
        spark.dataSource.register(ConsumeQueueDataSource)
    elif reader == "python":
        raise UsageError(f'{jvmreader.READER_CONF}=python: this process\'s JVM has the JVM reader from an earlier '
                         'session, which keeps the name format("rocketmq"); start a new process (or use '
                         'format("rocketmq_python"))')
    spark.dataSource.register(PythonRocketMQDataSource)
    spark.dataSource.register(PythonConsumeQueueDataSource)


def _reader_choice(conf) -> str | None:
    """spark.mqtool.reader from --spark-conf: "jvm" or "python"; None when not given."""
    from mqtool.pipeline import jvmreader

    choice = None
    for item in conf:
        key, _, value = item.partition("=")
        if key.strip() == jvmreader.READER_CONF:
            choice = value.strip().lower()
    if choice not in (None, "jvm", "python"):
        raise UsageError(f'--spark-conf {jvmreader.READER_CONF}={choice}: expected "jvm" or "python"')
    return choice


def _add_jvm_reader(settings, local: bool) -> None:
    """The JVM reader's jar into spark.jars (built first if need be), so that format("rocketmq")
    is the JVM reader; without a JDK to build it, the Python data source serves it."""
    from mqtool.pipeline import jvmreader

    jar, _ = jvmreader.jar()
    if jar is None:
        return
    jars = [j for j in settings.get("spark.jars", "").split(",") if j.strip()]
    settings.set("spark.jars", ",".join(jars + [str(jar)]))
    settings.set(jvmreader.DRIVER_PYTHON_CONF, sys.executable)
    if local:
        settings.set(jvmreader.PYTHON_CONF, sys.executable)


# ------------------------------------------------------------------ the session
def session(master: str | None = None, conf=()):
    """(SparkSession, created): the active session if there is one, else a new one on master
    (local[*] by default) with mqtool's data sources registered."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    from mqtool.pipeline import jvmreader

    reader = _reader_choice(conf)
    active = SparkSession.getActiveSession()
    if active is not None:
        register(active, reader)
        return active, False
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise UsageError("--engine spark needs Java 17 or newer (java on PATH, or JAVA_HOME)")
    master = master or "local[*]"
    local = master.startswith("local")
    if local:
        # Spark's Python workers are this interpreter, so they import this mqtool
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log_conf = Path(__file__).with_name("spark-log4j2.properties")
    settings = SparkConf(loadDefaults=True).setMaster(master).setAppName("mqtool")
    settings.set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log_conf.as_uri()}")
    for key, value in {**SESSION_CONF, **(LOCAL_CONF if local else {})}.items():
        settings.set(key, value)
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--spark-conf {item!r}: expected KEY=VALUE")
        settings.set(key.strip(), value.strip())
    reader = reader or "jvm"
    settings.set(jvmreader.READER_CONF, reader)
    if reader == "jvm":
        _add_jvm_reader(settings, local)
    try:
        if SparkContext._gateway is None:    # the JVM starts here (not again after a stop()): see _forward_stderr
            gateway = launch_gateway(settings, popen_kwargs={"stderr": subprocess.PIPE})
            threading.Thread(target=_forward_stderr, args=(gateway.proc.stderr,), name="spark-stderr",
                             daemon=True).start()
            SparkContext(conf=settings, gateway=gateway)
        spark = SparkSession.builder.config(conf=settings).getOrCreate()
    except Exception as exc:  # noqa: BLE001 - Java failing to start shows up as many error types
        raise UsageError(f"cannot start Spark ({master}): {exc}") from None
    spark.sparkContext.setLogLevel("ERROR")
    try:
        register(spark)
    except UsageError:
        spark.stop()
        raise
    return spark, True


_JVM_NOTICE = b"WARNING: Using incubator modules"


def _forward_stderr(stream) -> None:
    """The JVM's stderr onto ours, less the notice Java prints for the jdk.incubator.vector module
    Spark's launcher always adds (before any log setting can reach it)."""
    for line in iter(stream.readline, b""):
        if not line.startswith(_JVM_NOTICE):
            try:
                sys.stderr.write(line.decode("utf-8", "replace"))
                sys.stderr.flush()
            except (OSError, ValueError):   # our stderr is gone (the reader left, or we are exiting)
                pass


def _as_is(rows):
    return rows


class SparkEngine:
    """Partitions as Spark tasks: map() runs a per-partition scan on the executors and brings the
    results to the driver; read() is the rocketmq data source over the same partitions."""

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
        """The rocketmq DataFrame over these stores (pipeline.Store).  pushdown: only for a
        DataFrame that serves one query (see _Pushdown).  columns: only these (names).  fmt:
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


def export(engine, stores, out: str, fmt: str, with_body: bool, filters: pipeline.Filters,
                 overwrite: bool) -> dict:
    """`export` with Spark's own writer from the rocketmq data source; the counts are read back from
    what was written (which also checks it reads)."""
    with spark_errors():
        return _export(engine, stores, out, fmt, with_body, filters, overwrite)


def _export(engine, stores, out: str, fmt: str, with_body: bool, filters: pipeline.Filters,
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
        back = engine.spark.read.schema(pipeline.ddl(pipeline.columns(with_body))).json(out)
    counts: dict = {None: 0}
    for row in back.groupBy("topic", "ok").count().collect():
        counts[row["topic"]] = counts.get(row["topic"], 0) + row["count"]
        if not row["ok"]:
            counts[None] += row["count"]
    return counts


def _where(df, filters: pipeline.Filters):
    """The filters as Spark conditions (Spark applies them; the source may also take them)."""
    if filters.topics is not None:
        df = df.where(F.col("topic").isin(sorted(filters.topics)))
    lo, hi = filters.time_range
    if lo is not None:
        df = df.where(F.col("storeTimestamp") >= lo)
    if hi is not None:
        df = df.where(F.col("storeTimestamp") <= hi)
    return df
