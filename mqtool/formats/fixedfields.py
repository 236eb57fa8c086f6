"""The layout of a run of fixed-size numbers in a `construct` schema, read off the schema: each
field's byte offset, width and struct format.  The one way the file kinds' modules turn their
reference schemas into what the fast decoders (struct.Struct), the numpy readers and the compiled
kernels read fields by, so the layout is written once, in the schema.
"""

from __future__ import annotations

import struct


def inner(sub):
    """A field's construct without its name and adapters (Renamed, Default, OneOf, Const, ...):
    the number (it has a struct format, `fmtstr`) or the prefixed part (`lengthfield`) inside."""
    while not hasattr(sub, "fmtstr") and not hasattr(sub, "lengthfield") and hasattr(sub, "subcon"):
        sub = sub.subcon
    return sub


def run(subcons) -> dict:
    """name -> (offset from the run's start, struct format) of the fixed-size fields of subcons,
    up to the first field of variable size (whose offset is there too, format None)."""
    out, at = {}, 0
    for sub in subcons:
        number = inner(sub)
        fmt = getattr(number, "fmtstr", None)
        if fmt is None:      # a host, a body, a topic: the run ends here
            out[sub.name] = (at, None)
            break
        out[sub.name] = (at, fmt)
        at += number.sizeof()
    return out


def _fixed(schema) -> dict:
    fields = run(schema.subcons)
    if any(fmt is None for _, fmt in fields.values()) or len(fields) != len(schema.subcons):
        raise ValueError("not a schema of fixed-size numbers")
    return fields


def offsets(schema) -> dict:
    """name -> byte offset of each field of a schema of fixed-size numbers."""
    return {name: at for name, (at, _) in _fixed(schema).items()}


def widths(schema, names=None) -> dict:
    """name -> (byte offset, width) of a schema's fields (names: only these): the layout as the
    numpy readers of many records at once take it."""
    return {name: (at, struct.calcsize(fmt)) for name, (at, fmt) in _fixed(schema).items()
            if names is None or name in names}


def struct_format(fields: dict, through: str | None = None) -> str:
    """The big-endian struct format of a run's fields (run()), up to and including `through`
    (None: all of them)."""
    fmt = ""
    for name, (_, f) in fields.items():
        fmt += f.lstrip("<>=!")
        if name == through:
            return ">" + fmt
    if through is not None:
        raise KeyError(through)
    return ">" + fmt


def fixed_struct(schema) -> struct.Struct:
    """A schema of fixed-size big-endian numbers as a struct.Struct (the fast decoders')."""
    return struct.Struct(struct_format(_fixed(schema)))


def numpy_dtype(schema):
    """A schema of fixed-size big-endian numbers as a numpy record type, for a block of records
    at once (numpy loaded only when asked)."""
    import numpy as np

    fields = _fixed(schema)
    # by width, not by the struct letter: construct's i32 is struct's "l", numpy's "l" is 8 bytes
    numbers = [f">{'u' if fmt[-1].isupper() else 'i'}{struct.calcsize(fmt)}" for _, fmt in fields.values()]
    return np.dtype({"names": list(fields), "formats": numbers,
                     "offsets": [at for at, _ in fields.values()], "itemsize": schema.sizeof()})
