"""`export`'s writers: the commitlog rows as Parquet or JSON lines, one directory per topic.

The layout is Spark's partitioned layout, `OUT/topic=<name>/part-*`, with the
topic left out of the files and special characters of the name escaped as
Spark escapes them (`%RETRY%g` -> `topic=%25RETRY%25g`), so either engine's
output reads back with `spark.read.parquet(OUT)` (or `.json`) and the topic
comes back from the directory name.  The local engine writes one file per
partition and topic, buffering a row group per topic at a time (memory stays
flat); Parquet needs pyarrow (the `spark` extra), JSON lines need nothing.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np

from mqtool.forensics.filters import Filters
from mqtool.engine.behind import Behind
from mqtool.pipeline.plan import CommitLogPart
from mqtool.pipeline.rows import row_blocks
from mqtool.pipeline.schema import columns

ROW_GROUP = 8192
# Spark's ExternalCatalogUtils.charToEscape (for non-Windows), and NUL: Spark leaves it as it is
# and then cannot create the directory; %00 reads back as NUL with Spark's unescapePathName
_ESCAPE = set(range(0, 32)) | {ord(c) for c in "\"#%'*/:=?\\{[]^"} | {127}
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
FORMATS = ("parquet", "jsonl")


def warm_up(fmt: str, with_body: bool = False) -> None:
    """Load what the local engine's export needs before it starts (the compiled kernels, and the
    JSON lines renderer; the command has imported pyarrow's Parquet writer already), so that the
    export's own time is measured apart from it."""
    from mqtool.native import columnar, fastscan

    fastscan.warm_up()
    columnar.warm_up()
    if fmt == "jsonl":
        from mqtool.forensics import blockjson

        blockjson.warm_up(json_lines(file_columns(with_body)))


def file_columns(with_body: bool) -> list:
    """The columns of export's files: every row column but topic (the directory names it)."""
    return [c for c in columns(with_body) if c[0] != "topic"]


def escape_path_name(name: str | None) -> str:
    """A partition value as Spark writes it into a directory name."""
    if not name:
        return DEFAULT_PARTITION
    return "".join(f"%{ord(c):02X}" if ord(c) in _ESCAPE else c for c in name)


def topic_dir(out: Path, topic: str | None) -> Path:
    return Path(out) / f"topic={escape_path_name(topic)}"


class _JsonWriter:
    """JSON lines as Spark's JSON writer makes them: nulls left out, binary as base64."""

    def __init__(self, path: Path, names: list[str]):
        self.fh = open(path, "wb")
        self.names = names
        self.encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def write(self, rows) -> None:
        out = []
        for row in rows:
            obj = {}
            for name, value in zip(self.names, row):
                if value is None:
                    continue
                if isinstance(value, bytes):
                    value = base64.b64encode(value).decode("ascii")
                obj[name] = value
            out.append(self.encode(obj))
        self.fh.write(("\n".join(out) + "\n").encode("utf-8"))

    def write_lines(self, data) -> None:
        """Lines rendered already (blockjson)."""
        self.fh.write(memoryview(data))

    def close(self) -> None:
        self.fh.close()


def json_lines(cols):
    """The fields of export's JSON lines (the columns but topic), for blockjson: the location as
    constants, nulls left out, problems always there (an empty list when none)."""
    from mqtool.forensics import blockjson
    from mqtool.native import jsonlines as jl

    fields = []
    for name, kind in cols:
        if name in ("broker", "store", "file"):
            fields.append((name, jl.CONST, None))
        elif name == "problems":
            fields.append((name, jl.RAW, '"problems":[]'))
        else:
            fields.append((name, blockjson.kind_of(kind), None))
    return blockjson.Lines(fields, skip_null=True)


_FEW_VALUES = {"broker", "store", "file", "magicCode", "version", "sysFlagText", "bornHost", "storeHost", "tags",
               "flag", "sysFlag", "queueId", "reconsumeTimes", "dispatchedToConsumeQueue", "ok"}


def pa_is_number(kind) -> bool:
    import pyarrow.types as t

    return t.is_integer(kind) or t.is_boolean(kind)


CONSTANT_COLUMNS = ("broker", "store", "file")   # one value in all the rows of a file


def parquet_schema(cols):
    """The Arrow schema of export's Parquet files: arrow_schema, with the columns that hold one
    value per file as dictionaries (pyarrow reads them back as dictionary<string>, Spark as
    string): neither they nor the writer then handle a string per row."""
    import pyarrow as pa

    from mqtool.pipeline.arrow import arrow_schema

    schema = arrow_schema(cols)
    for name in CONSTANT_COLUMNS:
        at = schema.get_field_index(name)
        schema = schema.set(at, schema.field(at).with_type(pa.dictionary(pa.int32(), pa.string())))
    return schema


class _ParquetWriter:
    def __init__(self, path: Path, cols):
        import pyarrow.parquet as pq

        self.schema = parquet_schema(cols)
        # dictionaries and min/max statistics where they pay: columns of few distinct values, and
        # numbers (a dictionary over msgId or propertiesString costs time and saves nothing)
        few = [n for n in self.schema.names if n in _FEW_VALUES]
        numbers = [f.name for f in self.schema if pa_is_number(f.type)]
        self.writer = pq.ParquetWriter(path, self.schema, use_dictionary=few, write_statistics=numbers)

    def write(self, rows) -> None:
        from mqtool.pipeline.arrow import to_arrow

        self.writer.write_batch(to_arrow(rows, self.schema))

    def write_batches(self, batches) -> None:
        import pyarrow as pa

        self.writer.write_table(pa.Table.from_batches(batches, schema=self.schema), row_group_size=1 << 20)

    def close(self) -> None:
        self.writer.close()


def _write_lines(writers, lines, block, rows, consts, raws) -> None:
    """The block's rows rendered in one go (rows: each topic's, one after the other; None: all of
    them, for one writer), each topic's lines to its writer: a line ends at its only raw 0x0A
    (JSON escapes the others)."""
    data = lines.render(block, rows, consts, raws)
    if len(writers) == 1:
        writers[0][0].write_lines(data)
        return
    ends = np.flatnonzero(data == 10) + 1
    start = done = 0
    for writer, count in writers:
        done += count
        stop = int(ends[done - 1])
        writer.write_lines(data[start:stop])
        start = stop


def export_part(part: CommitLogPart, out: str, fmt: str, with_body: bool = False,
                filters: Filters | None = None) -> dict:
    """Write one partition's rows under out, one file per topic; returns {topic: rows written}
    and the number of damaged (ok = false) rows under the key None.  Rows come from the
    columnar read path (pipeline.rows.row_blocks); Parquet gets its Arrow batches as they are, split
    by topic, a row group per ROW_GROUP rows of a topic."""
    cols = columns(with_body)
    topic_at = [name for name, _ in cols].index("topic")
    ok_at = [name for name, _ in cols].index("ok")
    kept = file_columns(with_body)
    names = [name for name, _ in kept]
    suffix = "parquet" if fmt == "parquet" else "jsonl"
    writers: dict = {}
    pending: dict = {}   # topic -> (Arrow batches or row lists, rows)
    counts: dict = {None: 0}
    if fmt == "parquet":
        from mqtool.pipeline.arrow import block_to_arrow, to_arrow

        full_schema = parquet_schema(cols)
    else:
        from mqtool.forensics.blockjson import problems_fragments

        lines = json_lines(kept)

    def writer_of(topic):
        writer = writers.get(topic)
        if writer is None:
            directory = topic_dir(Path(out), topic)
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"part-{part.index:05d}.{suffix}"
            writer = writers[topic] = _ParquetWriter(path, kept) if fmt == "parquet" else _JsonWriter(path, names)
        return writer

    def flush(topic):
        items, _ = pending.pop(topic, ((), 0))
        if not items:
            return
        writer = writer_of(topic)
        if fmt == "parquet":
            behind.run(writer.write_batches, items)
        else:
            behind.run(writer.write, [row for rows in items for row in rows])

    def add(topic, item, n):
        items, size = pending.setdefault(topic, ([], 0))
        items.append(item)
        pending[topic] = (items, size + n)
        if size + n >= ROW_GROUP:
            flush(topic)

    def add_rows(rows):
        by_topic: dict = {}
        for row in rows:
            topic = row[topic_at]
            counts[topic] = counts.get(topic, 0) + 1
            if not row[ok_at]:
                counts[None] += 1
            by_topic.setdefault(topic, []).append(row)
        for topic, group in by_topic.items():
            if fmt == "parquet":
                batch = to_arrow(group, full_schema).drop_columns(["topic"])
                add(topic, batch, len(group))
            else:
                add(topic, [r[:topic_at] + r[topic_at + 1:] for r in group], len(group))

    behind = Behind()    # writes (and JSON lines rendered) while the next block is decoded
    try:
        with behind:     # on the way out the last write ends before the files are closed
            for piece in row_blocks(part, filters, with_body=with_body):
                if isinstance(piece, list):
                    add_rows(piece)
                    continue
                counts[None] += piece.n - int(piece.numbers["ok"].sum())
                topics = piece.topics()
                for topic, rows in topics:
                    counts[topic] = counts.get(topic, 0) + len(rows)
                if fmt == "parquet":
                    batch = block_to_arrow(piece, part, full_schema).drop_columns(["topic"])
                    for topic, rows in topics:
                        add(topic, batch if len(topics) == 1 else batch.take(rows), len(rows))
                else:
                    consts = {"broker": part.broker, "store": part.store, "file": piece.path}
                    raws = {"problems": problems_fragments(piece)}
                    for topic, _ in topics:
                        flush(topic)     # rows of these topics that came as row tuples go first
                    picked = None if len(topics) == 1 else np.concatenate([rows for _, rows in topics])
                    behind.run(_write_lines, [(writer_of(topic), len(rows)) for topic, rows in topics], lines, piece,
                               picked, consts, raws)
            for topic in list(pending):
                flush(topic)
            behind.wait()
    finally:
        for writer in writers.values():
            writer.close()
    return counts

