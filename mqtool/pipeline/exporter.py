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

from mqtool.pipeline import engines as pipeline

ROW_GROUP = 8192
# Spark's ExternalCatalogUtils.charToEscape (for non-Windows), and NUL: Spark leaves it as it is
# and then cannot create the directory; %00 reads back as NUL with Spark's unescapePathName
_ESCAPE = set(range(0, 32)) | {ord(c) for c in "\"#%'*/:=?\\{[]^"} | {127}
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
FORMATS = ("parquet", "jsonl")


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
        self.fh = open(path, "w", encoding="utf-8")
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
        self.fh.write("\n".join(out) + "\n")

    def close(self) -> None:
        self.fh.close()


class _ParquetWriter:
    def __init__(self, path: Path, cols):
        import pyarrow.parquet as pq

        from mqtool.pipeline.arrow import arrow_schema

        self.schema = arrow_schema(cols)
        self.writer = pq.ParquetWriter(path, self.schema)

    def write(self, rows) -> None:
        from mqtool.pipeline.arrow import to_arrow

        self.writer.write_batch(to_arrow(rows, self.schema))

    def close(self) -> None:
        self.writer.close()


def export_part(part: pipeline.CommitLogPart, out: str, fmt: str, with_body: bool = False,
                filters: pipeline.Filters | None = None) -> dict:
    """Write one partition's rows under out, one file per topic; returns {topic: rows written}
    and the number of damaged (ok = false) rows under the key None."""
    cols = pipeline.columns(with_body)
    topic_at = [name for name, _ in cols].index("topic")
    ok_at = [name for name, _ in cols].index("ok")
    kept = [c for c in cols if c[0] != "topic"]
    names = [name for name, _ in kept]
    suffix = "parquet" if fmt == "parquet" else "jsonl"
    writers: dict = {}
    buffers: dict = {}
    counts: dict = {None: 0}

    def flush(topic):
        rows = buffers.pop(topic, None)
        if not rows:
            return
        writer = writers.get(topic)
        if writer is None:
            directory = topic_dir(Path(out), topic)
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"part-{part.index:05d}.{suffix}"
            writer = writers[topic] = _ParquetWriter(path, kept) if fmt == "parquet" else _JsonWriter(path, names)
        writer.write(rows)

    try:
        for row in pipeline.rows(part, filters, with_body=with_body):
            topic = row[topic_at]
            counts[topic] = counts.get(topic, 0) + 1
            if not row[ok_at]:
                counts[None] += 1
            buf = buffers.setdefault(topic, [])
            buf.append(row[:topic_at] + row[topic_at + 1:])
            if len(buf) >= ROW_GROUP:
                flush(topic)
        for topic in list(buffers):
            flush(topic)
    finally:
        for writer in writers.values():
            writer.close()
    return counts
