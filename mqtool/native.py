"""Compiled kernels' shared ground: numba, and a CRC32 callable from compiled code.

numba is imported only by the store paths and commands that need speed, so
`mqtool info` or `dump` never pay for it.  Kernels are compiled once and
cached on disk (cache=True).

The CRC comes from ISA-L, which the isal package (already a dependency for
the Python-side CRC) carries in its extension module: its crc32_gzip_refl is
the same CRC32 as zlib's, several times faster.  It is reached by symbol name,
so cached kernels stay valid from one run to the next.
"""

from __future__ import annotations

import glob
import os

import llvmlite.binding as _llvm
import numba
from numba import types

import isal


def _load_isal() -> None:
    for path in glob.glob(os.path.join(os.path.dirname(isal.__file__), "isal_zlib*.so")):
        _llvm.load_library_permanently(path)
        return
    raise ImportError("the isal package has no isal_zlib extension to take crc32_gzip_refl from")


_load_isal()

crc32 = types.ExternalFunction("crc32_gzip_refl", types.uint32(types.uint32, types.voidptr, types.uint64))
"""crc32(initial, address, length) -> the zlib-compatible CRC32, inside njit code."""

njit = numba.njit


from llvmlite import ir as _ir
from numba.core import cgutils as _cgutils
from numba.extending import intrinsic as _intrinsic


@_intrinsic
def prefetch(typingctx, address):
    """prefetch(address): ask the CPU to bring the cache line at address (an integer) in ahead
    of its use.  A walk that hops from record to record waits on memory at every hop; this
    lets the next record's lines arrive while the current one is checked."""
    sig = types.void(types.int64)

    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], _ir.IntType(8).as_pointer())
        i32 = _ir.IntType(32)
        fnty = _ir.FunctionType(_ir.VoidType(), [pointer.type, i32, i32, i32])
        fn = _cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [pointer, _ir.Constant(i32, 0), _ir.Constant(i32, 3), _ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return sig, codegen
