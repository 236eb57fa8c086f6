"""Rows as Arrow: the schema of the pipeline's columns and record batches of row tuples.

pyarrow only (the `spark` extra installs it): export's Parquet writer and the Spark data
sources both use these, and export works without pyspark.
"""

from __future__ import annotations

import pyarrow as pa

from mqtool.pipeline import engines as pipeline


def arrow_type(kind: str):
    simple = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "boolean": pa.bool_(),
              "binary": pa.binary()}
    if kind in simple:
        return simple[kind]
    if kind == "map<string,string>":
        return pa.map_(pa.string(), pa.string())
    if kind == pipeline.PROBLEMS_TYPE:
        return pa.list_(pa.struct([("kind", pa.string()), ("message", pa.string())]))
    raise ValueError(f"no Arrow type for {kind}")


def arrow_schema(cols):
    return pa.schema([(name, arrow_type(kind)) for name, kind in cols])


def to_arrow(batch: list[tuple], schema):
    """A list of row tuples as one Arrow record batch."""
    arrays = [pa.array(values, type=f.type) for values, f in zip(zip(*batch), schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
