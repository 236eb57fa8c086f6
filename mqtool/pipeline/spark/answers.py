"""The JVM reader's answers: format("rocketmq") in the JVM (jvmreader) asks mqtool's row server
(rowserver), which answers with these: the Python data sources' own classes (sources), so that
both give the same rows.
"""

from __future__ import annotations

from pyspark.sql.datasource import CaseInsensitiveDict, InputPartition

from mqtool.forensics.filters import Filters
from mqtool.pipeline import schema as row_schema
from mqtool.pipeline.arrow import arrow_schema
from mqtool.pipeline.spark.sources import (
    CQ_FORMAT,
    FILTER_OPS,
    FORMAT,
    ConsumeQueueDataSource,
    PushdownCommitLogReader,
    PushdownQueueReader,
    RocketMQDataSource,
    checked,
    push_filters,
)


_FILTER_KINDS = {op: kind for kind, op in FILTER_OPS.items()}     # "eq" -> EqualTo, ...


def _jvm_filters(specs):
    """The JVM's simple filters ({"op", "column", "value"}) as pyspark's Python data source filters."""
    for spec in specs:
        value = tuple(spec["value"]) if spec["op"] == "in" else spec["value"]
        yield _FILTER_KINDS[spec["op"]]((spec["column"],), value)


def _jvm_source(source: str):
    """(data source class, pushdown reader class, its columns) of format(source)."""
    if source == FORMAT:
        return RocketMQDataSource, PushdownCommitLogReader, row_schema.columns(True)
    if source == CQ_FORMAT:
        return ConsumeQueueDataSource, PushdownQueueReader, row_schema.CQ_COLUMNS
    raise ValueError(f"no data source {source!r}")


def jvm_schema(source: str, options: dict) -> str:
    return _jvm_source(source)[0](CaseInsensitiveDict(options)).schema()


def jvm_push(source: str, specs) -> list[int]:
    """The indexes of the filters the reader takes."""
    filters = list(_jvm_filters(specs))
    left = {id(f) for f in push_filters(Filters(), filters, _jvm_source(source)[1].unpushable)}
    return [i for i, f in enumerate(filters) if id(f) not in left]


def jvm_reader(source: str, options: dict, table, columns, specs):
    """The reader of a query: the table's columns (a user's schema) checked, the reader's the ones
    the query reads, the filters jvm_push said it takes pushed."""
    _, reader_class, known = _jvm_source(source)
    checked([tuple(c) for c in table], known, source)
    reader = reader_class(CaseInsensitiveDict(options), checked([tuple(c) for c in columns], known, source))
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

