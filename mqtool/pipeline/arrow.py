"""Rows as Arrow: the schema of the pipeline's columns and record batches of row tuples.

pyarrow only (the `spark` extra installs it): export's Parquet writer and the Spark data
sources both use these, and export works without pyspark.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from mqtool.pipeline.schema import PROBLEMS_TYPE


def arrow_type(kind: str):
    simple = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(), "boolean": pa.bool_(),
              "binary": pa.binary()}
    if kind in simple:
        return simple[kind]
    if kind == "map<string,string>":
        return pa.map_(pa.string(), pa.string())
    if kind == PROBLEMS_TYPE:
        return pa.list_(pa.struct([("kind", pa.string()), ("message", pa.string())]))
    raise ValueError(f"no Arrow type for {kind}")


def arrow_schema(cols):
    return pa.schema([(name, arrow_type(kind)) for name, kind in cols])


def to_arrow(batch: list[tuple], schema):
    """A list of row tuples as one Arrow record batch."""
    arrays = [pa.array(values, type=f.type) for values, f in zip(zip(*batch), schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _text_array(column, kind):
    off, data, valid = column
    n = len(off) - 1
    mask = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(kind, n, [mask, pa.py_buffer(off), pa.py_buffer(data)],
                                 null_count=-1 if valid is not None else 0)


def block_to_arrow(block, part, schema):
    """A rowblocks.Block of one partition as an Arrow record batch of schema (the row columns):
    numbers and text wrap the block's arrays without copying them."""
    n = block.n
    entries, koff, kdata, voff, vdata = block.props
    arrays = []
    for f in schema:
        name = f.name
        if name in ("broker", "store", "file"):
            value = {"broker": part.broker, "store": part.store, "file": block.path}[name]
            arrays.append(pa.repeat(pa.scalar(value, type=f.type), n))   # a dictionary type: one value, every index 0
        elif name in block.numbers:
            arrays.append(pa.array(block.numbers[name], type=f.type))
        elif name in block.texts:
            arrays.append(_text_array(block.texts[name], f.type))
        elif name == "properties":
            keys = _text_array((koff, kdata, None), pa.string())
            values = _text_array((voff, vdata, None), pa.string())
            arrays.append(pa.MapArray.from_arrays(pa.array(entries, type=pa.int32()), keys, values))
        elif name == "problems":
            arrays.append(_problems_array(block, n, f.type))
        else:
            raise ValueError(f"no column {name} in a block")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _problems_array(block, n, kind):
    offsets = np.zeros(n + 1, dtype=np.int32)
    items = []
    for i in sorted(block.problems):
        offsets[i + 1] = len(block.problems[i])
        items.extend({"kind": k, "message": m} for k, m in block.problems[i])
    np.cumsum(offsets, out=offsets)
    values = pa.array(items, type=kind.value_type)
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), values, type=kind)
