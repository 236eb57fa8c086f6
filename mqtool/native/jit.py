"""Compiled kernels' shared ground: numba, imported only when something must compile, and a
CRC32 callable from compiled code.

Kernels are built ahead of time with the package (aot.py): where they are, nothing compiles and
numba is never imported (it costs ~0.15 s a command).  So the kernels' sources declare their
numba functions without numba: `njit` here gives a Deferred, which load() makes the real
dispatcher; formats/primitives.py's byte rules are plain functions it names in INLINE and
INTRINSICS, which load() makes numba functions too.  load() runs at the first call of a kernel
that was not built (a source checkout never built, kernels changed since, argument types the
build did not cover: the JIT fallback), imports numba, makes every declared function and puts
each in the declared one's place in mqtool's modules, so that numba, compiling a kernel, finds
numba functions in its globals.  The JIT kernels are compiled once and cached on disk
(cache=True).

The CRC comes from ISA-L, which the isal package (already a dependency for the Python-side CRC)
carries in its extension module: its crc32_gzip_refl is the same CRC32 as zlib's, several times
faster.  It is reached by symbol name, so cached kernels stay valid from one run to the next;
the isal extension is loaded with RTLD_GLOBAL at import here, so that the built modules, which
call it by that name, resolve it as they load.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading

import isal

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


def _isal_library() -> str:
    for path in glob.glob(os.path.join(os.path.dirname(isal.__file__), "isal_zlib*.so")):
        return path
    raise ImportError("the isal package has no isal_zlib extension to take crc32_gzip_refl from")


ctypes.CDLL(_isal_library(), mode=os.RTLD_GLOBAL)     # for the kernels built ahead (aot.py) as they load


# -- numba, on demand ----------------------------------------------------------------------------

_numba = None              # the numba module, once load() ran
_declared: list = []       # every Deferred, made real by load()
_on_load: list = []        # what else must happen once numba is there (aot registers its Built type)
_lock = threading.RLock()    # held by load() until its hooks ran: no thread goes on before them
_loaded = False            # load() finished: numba, every declared function and the hooks done


class Deferred:
    """A numba object declared now (a kernel, an intrinsic, an external function) and made by
    load() when something needs it: calling it or asking for any other attribute (py_func,
    signatures...) loads numba first."""

    def __init__(self, make, like=None, name: str = ""):
        self._make = make          # numba -> the real object
        self._real = None
        self.__name__ = self.__qualname__ = getattr(like, "__name__", name)
        self.__doc__ = getattr(like, "__doc__", None)
        self.__module__ = getattr(like, "__module__", __name__)
        _declared.append(self)

    def real(self):
        if not _loaded:    # (not _real: it is set while load() still runs the hooks, in its thread)
            load()
        return self._real

    def __call__(self, *args, **kwargs):
        return self.real()(*args, **kwargs)

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_make", "_real"):
            raise AttributeError(name)
        return getattr(self.real(), name)

    def __repr__(self) -> str:
        return f"<{'deferred' if self._real is None else 'made'} numba function {self.__name__}>"


def njit(func=None, **options):
    """numba.njit, deferred until numba is loaded (directly numba's once it is)."""
    if func is None:
        return lambda f: njit(f, **options)
    if _numba is not None:
        return _numba.njit(**options)(func)
    return Deferred(lambda numba: numba.njit(**options)(func), like=func)


def when_loaded(hook) -> None:
    """Call hook(numba) once numba is loaded (now, if it is)."""
    with _lock:
        if _numba is None:
            _on_load.append(hook)
            return
    hook(_numba)


def load():
    """Import numba (once a process), make every declared numba function and run the when_loaded
    hooks; returns numba.  Every thread's call returns only once all of that is done (the hooks
    run under the lock; the thread running them may call load() again from a hook)."""
    global _numba, _loaded
    with _lock:
        if _numba is not None:
            return _numba
        cache_dir = cache_dir_for(os.path.dirname(os.path.abspath(__file__)), os.environ)
        if cache_dir is not None:
            os.environ["NUMBA_CACHE_DIR"] = cache_dir    # numba reads it when it is imported, just below
        import llvmlite.binding as llvm
        import numba
        from numba.extending import intrinsic, typeof_impl

        from mqtool.formats import primitives

        llvm.load_library_permanently(_isal_library())   # crc32_gzip_refl for the JIT's linker
        made = {}
        for func in primitives.INLINE:
            made[id(func)] = (func, numba.njit(inline="always")(func))
        for func in (*primitives.INTRINSICS, _prefetch):
            made[id(func)] = (func, intrinsic(func))
        for deferred in _declared:
            deferred._real = deferred._make(numba)
            made[id(deferred)] = (deferred, deferred._real)

        @typeof_impl.register(Deferred)
        def _typeof_deferred(value, context):
            return typeof_impl(value.real(), context)

        _numba = numba
        hooks, _on_load[:] = list(_on_load), []
        for hook in hooks:
            hook(numba)
        # each declared function's name, in every mqtool module that holds it, now names the made
        # one: after the hooks, so that no thread calls a made function before they ran
        for name, module in list(sys.modules.items()):
            if module is None or not (name == "mqtool" or name.startswith("mqtool.")):
                continue
            namespace = vars(module)
            for key, value in list(namespace.items()):
                hit = made.get(id(value))
                if hit is not None and hit[0] is value:
                    namespace[key] = hit[1]
        _loaded = True
    return numba


# -- what kernels call besides formats/primitives.py ---------------------------------------------

crc32 = Deferred(lambda numba: numba.types.ExternalFunction(
    "crc32_gzip_refl", numba.types.uint32(numba.types.uint32, numba.types.voidptr, numba.types.uint64)),
    name="crc32")
"""crc32(initial, address, length) -> the zlib-compatible CRC32, inside njit code."""


def _prefetch(typingctx, address):
    """(an intrinsic) prefetch(address): ask the CPU to bring the cache line at address (an
    integer) in ahead of its use.  A walk that hops from record to record waits on memory at
    every hop; this lets the next record's lines arrive while the current one is checked."""
    from llvmlite import ir
    from numba.core import cgutils, types

    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], ir.IntType(8).as_pointer())
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [pointer, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.void(types.int64), codegen


prefetch = _prefetch     # load() makes it a numba intrinsic, here and where kernels imported it
