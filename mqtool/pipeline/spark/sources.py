"""mqtool's PySpark data sources: store files as DataFrames.

    spark.read.format("rocketmq").load("/data/rocketmq/store")       # one row per commitlog record
    spark.read.format("rocketmq").load("/data/brokers")              # a directory of stores
    spark.read.format("rocketmq_cq").load("/data/brokers")           # one row per consume queue unit

The data sources use the Python Data Source API (pyspark.sql.datasource, PySpark
>= 4.1 for filter pushdown).  Every input partition is one file, described by a
pipeline partition (mqtool.pipeline.plan), and decoded in Spark's Python workers by the same
generators `--engine local` runs (mqtool.pipeline.rows: the compiled columnar read
path), handed to Spark as Arrow batches of a few thousand rows, so memory stays flat.  The workers import
mqtool, so it must be installed where they run (see docs/spark.md).  PySpark tells Python data sources
nothing of the columns a query reads: option("columns", "a,b") or a schema of the user's picks
them, and the reader decodes and hands over only those.

In the sessions session.session() starts, format("rocketmq") and format("rocketmq_cq") are the JVM
reader instead (jvmreader, spark/jvm/): a DataSource V2 that gets column pruning and hands
Spark columnar batches, while every answer it gives comes from the classes here (answers), run
by mqtool's row server (rowserver).  The Python data sources are also registered as
format("rocketmq_python") and format("rocketmq_cq_python").
"""

from __future__ import annotations

import gc
import json

from pyspark.sql.datasource import (
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

from mqtool.errors import UsageError
from mqtool.forensics.filters import Filters
from mqtool.pipeline import plan, rows
from mqtool.pipeline import schema as row_schema
from mqtool.pipeline.arrow import arrow_schema, block_to_arrow, to_arrow

FORMAT = "rocketmq"
PYTHON_FORMAT = "rocketmq_python"     # the Python data source, also when format("rocketmq") is the JVM's
CQ_FORMAT = "rocketmq_cq"
PYTHON_CQ_FORMAT = "rocketmq_cq_python"

FILTER_OPS = {EqualTo: "eq", In: "in", GreaterThan: "gt", GreaterThanOrEqual: "ge", LessThan: "lt",
              LessThanOrEqual: "le"}   # pyspark's filter classes and mqtool's names of them


def _flag(options, name: str, default: bool) -> bool:
    value = options.get(name)
    return default if value is None else str(value).strip().lower() in ("true", "1", "yes")


def _stores(options) -> list[plan.Store]:
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
    return plan.find_stores(paths, options.get("config"), settings)


def checked(fields, known, source: str) -> list[tuple[str, str]]:
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
        return row_schema.ddl(default)
    kinds = dict(known)
    names = [n.strip() for n in names.split(",") if n.strip()]
    if not names:
        raise UsageError(f'format("{source}"): option("columns") names no column; its columns: {", ".join(kinds)}')
    return row_schema.ddl(checked([(n, kinds.get(n)) for n in names], known, source))


def _wanted(schema, known, source: str) -> list[tuple[str, str]]:
    """The columns reader(schema) is asked for: the source's schema, option("columns")' or the
    user's own (spark.read.schema("storeSize int")), which must name columns of the source."""
    return checked([(f.name, f.dataType.simpleString()) for f in schema.fields], known, source)


_tasks = 0


def settle() -> None:
    """Called as a task starts in a Python worker: at its second task, what the first one loaded
    (modules, compiled kernels) is put out of the garbage collector's sight (the first task's own
    objects are gone by then).  PySpark's reused workers run gc.collect() after every task, which
    otherwise walks all of numba's and pyarrow's objects each time: about 70 ms a task here, more
    than a 256 MiB file's read of a few columns."""
    global _tasks
    _tasks += 1
    if _tasks == 2:
        gc.freeze()



class _Reader(DataSourceReader):
    """Shared by both sources: stores from the options, one partition per file, rows of the columns
    asked for (cols).  This class has no pushFilters: Spark refuses a reader that has one while
    spark.sql.python.filterPushdown.enabled is off, and with it on Spark 4.1 to 4.3 reuse one
    query's pushed filters for later queries of the same DataFrame (see _Pushdown)."""

    def __init__(self, options, cols, full):
        self.stores = _stores(options)
        self.filters = Filters()
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


def push_filters(taker: Filters, filters, unpushable=()):
    """The filters (pyspark's) that taker cannot take; each one it can take is pushed into it."""
    for f in filters:
        op = FILTER_OPS.get(type(f))
        column = f.attribute[0] if op and len(f.attribute) == 1 else None
        if column is None or column in unpushable or not taker.push(op, column, f.value):
            yield f


def _pushdown_wanted(options) -> bool:
    return _flag(options, "pushdown", False)


class CommitLogReader(_Reader):
    def __init__(self, options, cols=None):
        if cols is None:    # every column (body with option withBody)
            cols = row_schema.columns(_flag(options, "withBody", False))
        self.with_body = any(name == row_schema.BODY_COLUMN[0] for name, _ in cols)
        super().__init__(options, cols, row_schema.columns(self.with_body))
        self.with_problems = _flag(options, "problems", False)
        self.check_crc = _flag(options, "checkCrc", True)

    def partitions(self):
        return [InputPartition(p) for p in plan.commitlog_parts(self.stores, self.filters)]

    def read(self, partition):
        """The columnar read path's Arrow batches as they are (rows.row_blocks), of the
        columns asked for only (the kernels decode no more than those need)."""
        settle()
        part = partition.value
        schema = arrow_schema(self.cols)
        names = None if self.picks is None else [name for name, _ in self.cols]
        for piece in rows.row_blocks(part, self.filters, with_body=self.with_body,
                                         with_problems=self.with_problems, check_crc=self.check_crc,
                                         rows=rows.BATCH_ROWS, columns=names):
            if isinstance(piece, list):
                yield to_arrow(self.project(piece), schema)
            else:
                yield block_to_arrow(piece, part, schema)


class PushdownCommitLogReader(_Pushdown, CommitLogReader):
    pass


class RocketMQDataSource(DataSource):
    """format("rocketmq"): one row per commitlog record (see mqtool.pipeline.schema.columns).  Options:
    columns ("a,b,...": only these columns, body among them if named; all but body by default),
    withBody (false), problems (false: also a row for each damaged stretch that is no record),
    checkCrc (true), pushdown (false), config (a broker.conf), set (KEY=VALUE,...).  A schema
    given with spark.read.schema(...) picks columns too."""

    @classmethod
    def name(cls):
        return FORMAT

    def schema(self):
        return _schema(self.options, row_schema.columns(_flag(self.options, "withBody", False)),
                       row_schema.columns(True), FORMAT)

    def reader(self, schema):
        cls = PushdownCommitLogReader if _pushdown_wanted(self.options) else CommitLogReader
        return cls(self.options, _wanted(schema, row_schema.columns(True), FORMAT))


class PythonRocketMQDataSource(RocketMQDataSource):
    """format("rocketmq_python"): the Python data source under a name of its own, for sessions
    where format("rocketmq") is the JVM reader (jvmreader): the same rows, for comparison, or
    as a way around the JVM reader."""

    @classmethod
    def name(cls):
        return PYTHON_FORMAT


class QueueReader(_Reader):
    def __init__(self, options, cols=None):
        super().__init__(options, cols or row_schema.CQ_COLUMNS, row_schema.CQ_COLUMNS)

    def partitions(self):
        return [InputPartition(p) for p in plan.queue_parts(self.stores, self.filters)]

    def read(self, partition):
        settle()
        schema = arrow_schema(self.cols)
        f = self.filters
        lo, hi = f.offset_range
        for batch in rows.batches(rows.queue_rows(partition.value)):
            if lo is not None or hi is not None:
                batch = [r for r in batch if f.offset_ok(r[7])]
            if batch:
                yield to_arrow(self.project(batch), schema)


class PushdownQueueReader(_Pushdown, QueueReader):
    unpushable = ("storeTimestamp", "queueOffset")   # a unit has no store time; its queue offset is not filtered here


class ConsumeQueueDataSource(DataSource):
    """format("rocketmq_cq"): one row per consume queue unit (see mqtool.pipeline.schema.CQ_COLUMNS).
    Options: columns, pushdown (false), config, set."""

    @classmethod
    def name(cls):
        return CQ_FORMAT

    def schema(self):
        return _schema(self.options, row_schema.CQ_COLUMNS, row_schema.CQ_COLUMNS, CQ_FORMAT)

    def reader(self, schema):
        cls = PushdownQueueReader if _pushdown_wanted(self.options) else QueueReader
        return cls(self.options, _wanted(schema, row_schema.CQ_COLUMNS, CQ_FORMAT))


class PythonConsumeQueueDataSource(ConsumeQueueDataSource):
    """format("rocketmq_cq_python"): the Python consume queue source under a name of its own (see
    PythonRocketMQDataSource)."""

    @classmethod
    def name(cls):
        return PYTHON_CQ_FORMAT

