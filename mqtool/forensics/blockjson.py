"""Blocks of rows (rowblocks.Block) as JSON lines, rendered by compiled code (native/jsonlines).

`Lines` says what a line holds, field by field, in order; `render` turns the
rows of a block into one buffer of lines, exactly what json.JSONEncoder
(ensure_ascii=False, compact separators) makes of the same dicts.  What is
rare is made here in Python and handed over as ready fragments: the
problems of the rows that fail a check, and a compressed body unpacked.
`dump commitlog --json` and `export --format jsonl` use it.
"""

from __future__ import annotations

import json

import numpy as np

from mqtool.forensics.messageview import decompressed_field
from mqtool.formats import sysflag
from mqtool.native import jsonlines as jl

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
BODY_KINDS = {"base64": jl.BODY_BASE64, "hex": jl.BODY_HEX, "text": jl.BODY_TEXT}
_TYPE_KINDS = {"string": jl.TEXT, "int": jl.INT, "bigint": jl.INT, "boolean": jl.BOOL,
               "map<string,string>": jl.MAP, "binary": jl.BODY_BASE64}
_EMPTY_DATA = np.zeros(0, dtype=np.uint8)


def kind_of(column_type: str) -> int:
    """The field kind of a pipeline column type (pipeline.schema's Spark SQL type names); the
    problems array is RAW (its fragments made by problems_fragments)."""
    return _TYPE_KINDS.get(column_type, jl.RAW)


class Lines:
    """The fields of a line: (name, kind, literal) in order.  literal: for CONST the value
    (given here or per render), for RAW the fragment of a row that has none (None: leave the
    field out).  skip_null: leave out null texts (as Spark's JSON writer does) instead of
    writing null."""

    def __init__(self, fields, skip_null: bool = False):
        self.fields = list(fields)
        self.skip_null = skip_null
        self.kinds = np.array([kind for _, kind, _ in self.fields], dtype=np.int64)
        self.ints = [name for name, kind, _ in self.fields if kind in (jl.INT, jl.BOOL)]
        self.texts = [name for name, kind, _ in self.fields
                      if kind in (jl.TEXT, jl.RAW, jl.BODY_BASE64, jl.BODY_HEX, jl.BODY_TEXT)]
        self.cols = np.array([self.ints.index(name) if kind in (jl.INT, jl.BOOL) else
                              self.texts.index(name) if name in self.texts else 0
                              for name, kind, _ in self.fields], dtype=np.int64)
        self._keys = (None, None)

    def keys(self, consts: dict):
        """The keys buffer and its offsets for these const values (kept for the next block)."""
        cached, made = self._keys
        if cached == consts:
            return made
        pieces = []
        for name, kind, literal in self.fields:
            if kind == jl.CONST:
                pieces.append(f"{_encode(name)}:{_encode(consts.get(name, literal))}".encode())
            elif kind == jl.RAW:
                pieces.append((literal or "").encode())
            else:
                pieces.append(f"{_encode(name)}:".encode())
        off = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in pieces], out=off[1:])
        made = (off, np.frombuffer(b"".join(pieces), dtype=np.uint8).copy())
        self._keys = (dict(consts), made)
        return made

    def render(self, block, rows=None, consts: dict | None = None, raws: dict | None = None):
        """The lines of a block's rows (all, or the row numbers given, in that order) as a uint8
        array.  consts: name -> value of CONST fields; raws: name -> {row: JSON fragment}."""
        n = block.n
        rows = np.arange(n, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        key_off, keys = self.keys(consts or {})
        ints = np.empty((len(self.ints), n), dtype=np.int64)
        for k, name in enumerate(self.ints):
            ints[k] = block.numbers[name]
        # the text columns side by side: one data buffer, a row of offsets into it per column
        text_off = np.empty((len(self.texts), n + 1), dtype=np.int64)
        text_valid = np.ones((len(self.texts), n), dtype=np.bool_)
        datas = []
        base = 0
        for k, name in enumerate(self.texts):
            if name in block.texts:
                off, data, valid = block.texts[name]
                if valid is not None:
                    text_valid[k] = valid
            else:
                off, data = _fragments(n, (raws or {}).get(name, {}))
            text_off[k] = off
            text_off[k] += base
            base += len(data)
            datas.append(data)
        text_data = np.concatenate(datas) if datas else _EMPTY_DATA
        entries, koff, kdata, voff, vdata = block.props
        entries = np.asarray(entries, dtype=np.int64)
        # room for the worst case (every text byte escaped as \u00xx): only what is written is touched
        per_row = len(keys) + 2 + 24 * len(self.fields) + 6 * (
            (text_off[:, 1:] - text_off[:, :-1]).sum(axis=0) + (entries[1:] - entries[:-1])
            + koff[entries[1:]] - koff[entries[:-1]] + voff[entries[1:]] - voff[entries[:-1]])
        out = np.empty(int(per_row[rows].sum()) + 64, dtype=np.uint8)
        used = jl.render(rows, self.kinds, self.cols, key_off, keys, self.skip_null, ints, text_off, text_data,
                         text_valid, _int32(entries), _int32(koff), _bytes(kdata), _int32(voff), _bytes(vdata), out)
        return out[:used]


def warm_up(lines: Lines) -> None:
    """Load the compiled renderer now, with the argument types of a real render (zero rows), so
    that its loading is timed as start-up."""
    from mqtool.forensics.rowblocks import Block

    zero, empty = np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    lines.render(Block(0, "", {name: zero[:0] for name in lines.ints}, {}, (zero, zero, empty, zero, empty)))


def _int32(a):
    return np.require(a, np.int32, ["C", "W"])


def _bytes(a):
    return np.require(a, np.uint8, ["C", "W"])


def _fragments(n: int, by_row: dict):
    """A text column of n rows holding the fragments given (empty elsewhere)."""
    off = np.zeros(n + 1, dtype=np.int32)
    if not by_row:
        return off, _EMPTY_DATA
    encoded = {i: text.encode("utf-8") for i, text in by_row.items()}
    lengths = np.zeros(n, dtype=np.int32)
    for i, data in encoded.items():
        lengths[i] = len(data)
    np.cumsum(lengths, out=off[1:])
    return off, np.frombuffer(b"".join(encoded[i] for i in sorted(encoded)), dtype=np.uint8).copy()


def problems_fragments(block, name: str = "problems") -> dict:
    """row -> `"problems":[{"kind":...,"message":...}]` for the rows that failed a check."""
    return {i: f"{_encode(name)}:{_encode([{'kind': k, 'message': m} for k, m in found])}"
            for i, found in block.problems.items()}


def decompressed_fragments(block, how: str) -> dict:
    """row -> `"bodyDecompressed":...` (or `"bodyDecompressError":...`) for the rows whose body is
    compressed, as messageview.message_fields shows it."""
    sys_flags = block.numbers["sysFlag"]
    compressed = np.flatnonzero((sys_flags & sysflag.COMPRESSED) != 0)
    if not len(compressed):
        return {}
    off, data, _ = block.texts["body"]
    found = {}
    for i in compressed.tolist():
        field = decompressed_field(bytes(data[off[i]:off[i + 1]]), int(sys_flags[i]), how)
        if field:
            found[i] = f"{_encode(field[0])}:{_encode(field[1])}"
    return found

