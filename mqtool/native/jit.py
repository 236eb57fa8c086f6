"""Compiled kernels' shared ground: numba, and a CRC32 callable from compiled code.

numba is imported only by the store paths and commands that need speed, so
`mqtool info` or `dump` never pay for it.  Kernels are built ahead of time with
the package (aot.py); where they are not, they are compiled once and cached on
disk (cache=True).

The CRC comes from ISA-L, which the isal package (already a dependency for
the Python-side CRC) carries in its extension module: its crc32_gzip_refl is
the same CRC32 as zlib's, several times faster.  It is reached by symbol name,
so cached kernels stay valid from one run to the next.
"""

from __future__ import annotations

import ctypes
import glob
import os

from mqtool.storage.fsutil import private_cache_dir


def cache_dir_for(package_dir: str, environ, writable=None) -> str | None:
    """Where numba should cache the compiled kernels, when not next to the sources.

    numba writes its cache into the package's __pycache__, else into the user's cache
    directory, and refuses to compile a cache=True function when it can write neither (a
    root-installed venv run by a cron user without a writable home).  Then: a private
    directory of this user under $XDG_CACHE_HOME, ~/.cache or the system's temp directory
    (created 0700, used only when this user owns it).  None: leave numba to its own rules."""
    writable = writable or (lambda path: os.access(path, os.W_OK))
    if environ.get("NUMBA_CACHE_DIR"):
        return None
    pycache = os.path.join(package_dir, "__pycache__")
    if writable(pycache if os.path.isdir(pycache) else package_dir):
        return None
    return private_cache_dir(f"mqtool-numba-{os.geteuid()}", environ, writable)

_cache_dir = cache_dir_for(os.path.dirname(os.path.abspath(__file__)), os.environ)
if _cache_dir is not None:
    os.environ["NUMBA_CACHE_DIR"] = _cache_dir   # read by numba when it is first imported, just below

import isal  # noqa: E402
import llvmlite.binding as _llvm  # noqa: E402
import numba  # noqa: E402
from numba import types  # noqa: E402

# numba reads NUMBA_CACHE_DIR when it is imported; mqtool/formats/primitives.py (whose functions
# are never cached themselves) may have imported it before the line above set it
numba.core.config.reload_config()


def _load_isal() -> None:
    for path in glob.glob(os.path.join(os.path.dirname(isal.__file__), "isal_zlib*.so")):
        _llvm.load_library_permanently(path)
        ctypes.CDLL(path, mode=os.RTLD_GLOBAL)    # and for the kernels built ahead (aot.py) as they load
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
