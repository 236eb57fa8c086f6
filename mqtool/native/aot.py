"""The kernels built ahead of time: numba.pycc compiles the same kernel sources (the @njit
functions of native/ and forensics/verify/kernels.py) into one extension module per family when
the package is built (setup.py's build_ext), so that no command compiles anything at run time.

A family's module (mqtool/native/_aot_<family>*.so) exports the family's entry points, the
kernels that Python code calls, each for the argument types of the real calls (SIGNATURES; the
helpers they call, inline or not, are compiled into them).  adopt() puts them in place of the
JIT dispatchers when the module is there and was built from the sources as they are now
(SOURCES' digest); otherwise, and for a call whose arrays are not of the types built (a
different dtype, dimension count or a non-contiguous array where a contiguous one was built),
the JIT dispatcher runs, compiling into numba's cache as before.  Adopting the built modules
imports no numba (jit.py's Deferred kernels are made only if one of them is called).  So a source checkout that
was never built, or whose kernels changed since, still works, only slower to start.

The built kernels keep the JIT ones' options: nogil (the GIL is released while they run) and
_nrt.  They call ISA-L's CRC by its symbol (jit.crc32), resolved when the module loads:
jit.py loads the isal extension with RTLD_GLOBAL first.  numba.pycc is deprecated; numba is
pinned (pyproject.toml) to the releases the build is tested with.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))     # the directory that holds the mqtool package

# family -> (the module of its kernels, its entry points)
FAMILIES = {
    "fastscan": ("mqtool.native.fastscan", ("scan_records", "scan_entries", "hop_to", "hop_entries",
                                             "lower_bound", "parse_records")),
    "columnar": ("mqtool.native.columnar", ("decode",)),
    "chunkstats": ("mqtool.native.chunkstats", ("chunk_stats", "hash_bytes")),
    "jsonlines": ("mqtool.native.jsonlines", ("render",)),
    "putlines": ("mqtool.native.putlines", ("render_puts",)),
    "specscan": ("mqtool.native.specscan", ("scan_lines", "intern", "build_columns")),
    "append": ("mqtool.native.appendkernels", ("write_records", "insert_keys")),
    "verify": ("mqtool.forensics.verify.kernels", ("check_units", "check_entries", "index_structure",
                                                   "units_by_records", "entries_by_records", "unit_summary",
                                                   "queue_runs")),
}

# The sources the built kernels come from (the kernels, and the formats modules whose primitives
# and constants they compile in): a change to any of them makes the built modules stale.
SOURCES = ("mqtool/formats/primitives.py", "mqtool/formats/commitlog.py", "mqtool/formats/dledger.py",
           "mqtool/formats/index.py", "mqtool/formats/fixedfields.py", "mqtool/formats/consumequeue.py",
           "mqtool/formats/properties.py", "mqtool/formats/sysflag.py", "mqtool/native/jit.py",
           "mqtool/native/fastscan.py", "mqtool/native/columnar.py", "mqtool/native/chunkstats.py",
           "mqtool/native/jsonlines.py", "mqtool/native/putlines.py", "mqtool/native/specscan.py",
           "mqtool/native/appendkernels.py", "mqtool/native/aotsigs.py", "mqtool/forensics/verify/kernels.py")

STAMP = os.path.join(HERE, "_aot.json")    # written by the build: {"digest": ..., "numba": ...}

from mqtool.native import jit  # noqa: E402 - loads the isal extension the built modules call, not numba
from mqtool.native.aotsigs import SIGNATURES  # noqa: E402


def digest(root: str = ROOT) -> str:
    """The kernels' sources, hashed."""
    h = hashlib.sha256()
    for rel in SOURCES:
        with open(os.path.join(root, rel), "rb") as f:
            h.update(rel.encode() + b"\0" + f.read() + b"\0")
    return h.hexdigest()[:20]


_state: dict = {}


def available() -> bool:
    """Whether the built modules are there and match the sources (checked once a process)."""
    if "ok" not in _state:
        ok = False
        if os.environ.get("MQTOOL_JIT") != "1":      # MQTOOL_JIT=1: the JIT kernels (tests compare)
            try:
                with open(STAMP) as f:
                    ok = json.load(f).get("digest") == digest()
            except (OSError, ValueError):
                ok = False
        _state["ok"] = ok
    return _state["ok"]


def _types_namespace() -> dict:
    """numba's type names, for reading SIGNATURES to build with (numba is loaded)."""
    from numba.core import types

    return {**{name: getattr(types, name) for name in dir(types)}, "bool": types.boolean}


# SIGNATURES read without numba: what an argument must be for the built kernel
_CHECKS = {"Array": lambda dtype, ndim, layout: (np.dtype(dtype), ndim, layout == "C"),
           "UniTuple": lambda check, count: (check,) * count,
           **{name: name for name in ("bool", "boolean", "int8", "int32", "int64", "uint8", "uint64")}}


def _array_checks(types_text):
    """For each argument: None (a scalar) or what an array must be for the built kernel: (dtype,
    ndim, contiguous), or a tuple of those for a tuple of arrays.  numba's own type notation,
    read without numba."""
    checks = [eval(text, {"__builtins__": {}}, _CHECKS) for text in types_text]
    return [None if isinstance(c, str) else c for c in checks]


def _fits(value, check) -> bool:
    if check is None:
        return True
    if isinstance(check, tuple) and check and isinstance(check[0], tuple):
        return (type(value) is tuple and len(value) == len(check)
                and all(_fits(v, c) for v, c in zip(value, check)))
    dtype, ndim, contiguous = check
    return (isinstance(value, np.ndarray) and value.dtype == dtype and value.ndim == ndim
            and (not contiguous or value.flags.c_contiguous))


class Built:
    """A built kernel in its JIT dispatcher's place: calls whose arrays are of the built types
    run the built code; any other call, and numba compiling a kernel that calls this one, get
    the JIT dispatcher (attributes too: py_func, signatures...)."""

    def __init__(self, built, jitted, checks):
        self.built = built
        self.jit = jitted
        self._arrays = [(i, c) for i, c in enumerate(checks) if c is not None]
        self._count = len(checks)
        self.calls = self.fallbacks = 0      # how often the built code ran, and the JIT kernel instead
        self.__name__ = self.__qualname__ = jitted.__name__
        self.__doc__ = jitted.__doc__

    def __call__(self, *args):
        if len(args) == self._count:
            for i, c in self._arrays:
                if not _fits(args[i], c):
                    break
            else:
                self.calls += 1
                return self.built(*args)
        self.fallbacks += 1
        return self.jit(*args)     # types the build did not cover: the JIT kernel, compiled on first use

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.jit, name)


def _register(numba) -> None:
    """numba types a Built as its JIT dispatcher, so that JIT code calling it still compiles."""
    from numba.extending import typeof_impl

    @typeof_impl.register(Built)
    def _typeof_built(value, context):
        jitted = value.jit
        return typeof_impl(jitted.real() if isinstance(jitted, jit.Deferred) else jitted, context)


def adopt(namespace: dict, family: str) -> None:
    """Put the family's built kernels in place of its JIT dispatchers in namespace (the family
    module's globals), when they are built and current."""
    if not available():
        return
    try:
        module = importlib.import_module(f"mqtool.native._aot_{family}")
    except ImportError:
        return
    if not _state.get("registered"):
        jit.when_loaded(_register)       # numba is not loaded for this: only if a JIT kernel compiles
        _state["registered"] = True
    for name in FAMILIES[family][1]:
        namespace[name] = Built(getattr(module, name), namespace[name], _array_checks(SIGNATURES[family][name]))


def adopted(kernel) -> bool:
    """Whether kernel (a family module's entry point) is the built one."""
    return isinstance(kernel, Built)


# -- the build (setup.py) ------------------------------------------------------------------------

def build(family: str, output_dir: str, cpu: str = "") -> str:
    """Compile one family's module into output_dir with numba.pycc; returns its path.  cpu: the
    target CPU ("" for the architecture's generic one, "host" for this machine's)."""
    import warnings

    warnings.simplefilter("ignore")                   # pycc's pending deprecation (numba is pinned for it)
    jit.load()
    from numba.pycc import CC
    import numba.pycc.compiler as pycc_compiler

    module = importlib.import_module(FAMILIES[family][0])
    options = {}

    def compile_extra(typingctx, targetctx, func, args, return_type, flags, locals, library):
        flags = flags.copy()
        nogil, nrt = options[func]
        flags.release_gil = nogil
        flags.nrt = nrt
        return original(typingctx, targetctx, func, args, return_type, flags, locals, library)

    original = pycc_compiler.compile_extra
    pycc_compiler.compile_extra = compile_extra
    namespace = _types_namespace()
    cc = CC(f"_aot_{family}")
    cc.output_dir = output_dir
    cc.target_cpu = cpu
    for name in FAMILIES[family][1]:
        dispatcher = getattr(module, name)
        opts = dispatcher.targetoptions
        options[dispatcher.py_func] = (bool(opts.get("nogil", False)), bool(opts.get("_nrt", True)))
        args = tuple(eval(text, namespace) for text in SIGNATURES[family][name])
        cc.export(name, args)(dispatcher.py_func)   # the return type is inferred, as the JIT does
    try:
        cc.compile()
    finally:
        pycc_compiler.compile_extra = original
    return os.path.join(output_dir, cc._output_file)


def stamp(root: str, numba_version: str, cpu: str) -> dict:
    """What _aot.json holds: the sources' digest, and the numba and the CPU the modules were built
    by and for."""
    return {"digest": digest(root), "numba": numba_version, "cpu": cpu}

