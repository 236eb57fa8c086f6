"""The kernels built ahead of time (mqtool/native/aot.py, built by setup.py with the package) give
what the JIT kernels give, family by family, on every fixture: the same columns, the same
output bytes, the same files.  Each test runs the same work twice in this process: once with
the built kernels in place (and checks that they, not the JIT ones, ran: no call fell back),
once with the JIT dispatchers put back."""

from __future__ import annotations

import hashlib
import importlib
import json
from contextlib import contextmanager

import numpy as np
import pytest

from mqtool.native import aot

from conftest import ALL_FIXTURES, DLEDGER

FIXTURES = sorted(ALL_FIXTURES)


def _module(family):
    return importlib.import_module(aot.FAMILIES[family][0])


@pytest.fixture(autouse=True)
def _built():
    assert aot.available(), ("the kernels were not built ahead of time, or not from these sources: "
                             "pip install -e . builds them")
    for family, (_, names) in aot.FAMILIES.items():
        assert all(aot.adopted(getattr(_module(family), n)) for n in names), family


@contextmanager
def kernels(families, jit: bool):
    """The built kernels of these families (checking that they ran, never the JIT fallback), or
    their JIT dispatchers."""
    saved = {(f, n): getattr(_module(f), n) for f in families for n in aot.FAMILIES[f][1]}
    before = {k: (v.calls, v.fallbacks) for k, v in saved.items()}
    if jit:
        for (f, n), built in saved.items():
            setattr(_module(f), n, built.jit)
    try:
        yield
    finally:
        for (f, n), built in saved.items():
            setattr(_module(f), n, built)
    if not jit:
        assert all(saved[k].fallbacks == before[k][1] for k in saved), "a call fell back to the JIT kernel"
        assert any(saved[k].calls > before[k][0] for k in saved), "the built kernels never ran"


def both(families, work):
    with kernels(families, jit=False):
        built = work()
    with kernels(families, jit=True):
        jitted = work()
    return built, jitted


def _untimed(text: str) -> list:
    """JSON lines without their timings (seconds, loadSeconds, mbPerSecond...), which differ run to run."""
    def strip(v):
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if "second" not in k.lower()}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v
    return [strip(json.loads(line)) for line in text.splitlines() if line.strip()]


def _cli(run_cli, *args):
    result = run_cli(*args)
    assert result.code in (0, 1), result.err
    return result.code, _untimed(result.out)


def _log_files(store):
    """The files holding the store's records: commitlog/, or a DLedger store's data files (entries,
    each holding one record at its pos + 48)."""
    folders = list(store.glob("dledger-*/data")) or [store / "commitlog"]
    return sorted(p for p in folders[0].iterdir() if p.is_file())


@pytest.mark.parametrize("name", FIXTURES)
def test_fastscan_columns(name, extracted):
    from mqtool.native import fastscan

    dledger = name in DLEDGER
    files = _log_files(extracted(name))

    def work():
        out = []
        for path in files:
            buf = np.fromfile(path, dtype=np.uint8)
            buf.flags.writeable = False                   # as over a file mapping
            if dledger:
                chunk = fastscan.scan_dledger(buf, 0, len(buf), int(path.name), True, 1 << 12, parse_props=True)
            else:
                chunk = fastscan.scan(buf, 0, len(buf), 0, True, 1 << 12, parse_props=True)
            parsed = fastscan.parse(buf, chunk)
            hop = fastscan.hop_entries if dledger else fastscan.hop_to
            half = hop(buf, 0, len(buf), len(buf) // 2)
            lows = [fastscan.lower_bound(buf, 0, 20, 0, 1 << 10, v) for v in (0, 1 << 20)]
            out.append((chunk.count, chunk.stop, chunk.kind, chunk.reason, chunk.blank_size,
                        {k: v.tolist() for k, v in chunk.columns.items()},
                        {k: v.tolist() for k, v in chunk.parsed.items()},
                        {k: v.tolist() for k, v in parsed.items()}, half, lows))
        return out

    built, jitted = both(["fastscan"], work)
    assert built == jitted and sum(c[0] for c in built) > 0


@pytest.mark.parametrize("name", FIXTURES)
def test_verify_kernels(name, extracted, run_cli):
    store = extracted(name)
    built, jitted = both(["verify", "fastscan"], lambda: _cli(run_cli, "verify-crc", store, "--json", "--jobs", "1"))
    assert built == jitted


@pytest.mark.parametrize("name", FIXTURES)
def test_verify_kernels_on_units_and_entries_of_their_bytes(name, extracted):
    """check_units and check_entries (what verify-crc uses for what the scanned columns cannot
    settle), on every unit of the fixture's consume queues and every entry of its index files."""
    from mqtool.forensics.verify import kernels
    from mqtool.native import fastscan

    store = extracted(name)
    files = _log_files(store)
    units = [np.fromfile(p, dtype=">i8,>i4,>i8") for p in sorted((store / "consumequeue").rglob("0*")) if p.is_file()]
    units = [u for u in units if len(u)]

    def work():
        out = []
        for path in files[:1]:
            buf = np.fromfile(path, dtype=np.uint8)
            base = int(path.name)
            for u in units:
                offsets = np.ascontiguousarray(u["f0"], dtype=np.int64)
                sizes = np.ascontiguousarray(u["f1"], dtype=np.int64)
                tags = np.ascontiguousarray(u["f2"], dtype=np.int64)
                logical = np.arange(len(u), dtype=np.int64)
                found = np.zeros(len(u), dtype=np.int64)
                kernels.check_units(buf, base, len(buf), offsets, sizes, tags, logical,
                                    np.frombuffer(b"TopicTest", dtype=np.uint8), 0, False,
                                    np.zeros(len(u), dtype=np.int64), found)
                times = np.zeros(len(u), dtype=np.int64)
                codes = np.zeros(len(u), dtype=np.int64)
                kernels.check_entries(buf, base, len(buf), offsets, tags, times, codes)
                out.append((found.tolist(), times.tolist(), codes.tolist()))
        return out

    built, jitted = both(["verify", "fastscan"], work)
    assert built == jitted and fastscan is not None


@pytest.mark.parametrize("name", FIXTURES)
def test_chunkstats_kernels(name, extracted, run_cli):
    store = extracted(name)
    built, jitted = both(["chunkstats", "fastscan"], lambda: _cli(run_cli, "stats", store, "--json", "--jobs", "1"))
    assert built == jitted


@pytest.mark.parametrize("name", FIXTURES)
def test_columnar_and_jsonlines_kernels(name, extracted, run_cli, tmp_path):
    store = extracted(name)
    counter = iter(range(10))

    def work():
        dumped = run_cli("dump", store, "commitlog", "--json")
        assert dumped.code in (0, 1), dumped.err
        out = tmp_path / f"export-{next(counter)}"
        exported = run_cli("export", store, "--out", out, "--format", "jsonl")
        assert exported.code in (0, 1), exported.err
        files = {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
                 for p in sorted(out.rglob("*")) if p.is_file()}
        return dumped.out, files

    built, jitted = both(["columnar", "jsonlines", "fastscan"], work)
    assert built == jitted and built[0]


@pytest.mark.parametrize("name", [n for n in FIXTURES if n not in DLEDGER])   # append refuses DLedger stores
def test_append_specscan_and_putlines_kernels(name, store_copy, run_cli, tmp_path, monkeypatch):
    """append --json --input into a copy of each fixture (the clock held still): the same
    answers and the same files, byte for byte."""
    from mqtool.engine import clock

    monkeypatch.setattr(clock.SystemClock, "now_ms", lambda self: 1795305900000)
    lines = tmp_path / "lines.jsonl"
    with open(lines, "w") as fh:
        for i in range(300):
            fh.write(json.dumps({"topic": "AotTopic", "queueId": i % 3, "tags": "TagA", "keys": f"k{i} z{i % 7}",
                                 "body": "x" * (i % 50), "properties": {"UNIQ_KEY": f"AB{i:030X}"}}) + "\n")
    counter = iter(range(10))

    def work():
        store = store_copy(name).rename(tmp_path / f"{name}-{next(counter)}")
        result = run_cli("append", store, "--json", "--input", lines)
        files = {str(p.relative_to(store)): hashlib.sha256(p.read_bytes()).hexdigest()
                 for p in sorted(store.rglob("*"))
                 # a manifest names the store's path; the checkpoint's times are those of the flushes
                 if p.is_file() and p.name not in ("lock", "abort", "manifest.json", "checkpoint")}
        return result.code, result.out, files

    built, jitted = both(["append", "specscan", "putlines"], work)
    assert built == jitted and built[1].count("\n") == 300


def test_a_call_the_build_did_not_cover_runs_the_jit_kernel():
    from mqtool.native import fastscan

    units = np.arange(0, 4000, 40, dtype=">i8").view(np.uint8)    # sorted big-endian int64s, 8 bytes apart
    kernel = fastscan.lower_bound
    calls, fallbacks = kernel.calls, kernel.fallbacks
    strided = np.repeat(units, 2)[::2]                 # the same bytes, not contiguous: not a type built
    assert kernel(strided, 0, 8, 0, 100, 1234) == kernel(units, 0, 8, 0, 100, 1234) == 31
    assert (kernel.calls, kernel.fallbacks) == (calls + 1, fallbacks + 1)


def test_jit_code_that_calls_a_built_kernel_still_compiles(extracted, monkeypatch):
    """numba types a built kernel as its JIT dispatcher: scan_records, JIT-compiled, calls the
    parse_records that stands in the module."""
    import numba

    from mqtool.native import fastscan

    assert numba.typeof(fastscan.parse_records) == numba.typeof(fastscan.parse_records.jit)
    monkeypatch.setattr(fastscan, "scan_records", fastscan.scan_records.jit)
    (path,) = sorted((extracted("basic") / "commitlog").iterdir())[:1]
    buf = np.fromfile(path, dtype=np.uint8)
    jitted = fastscan.scan(buf, 0, len(buf), 0, True, 1 << 12, parse_props=True)
    monkeypatch.undo()
    built = fastscan.scan(buf, 0, len(buf), 0, True, 1 << 12, parse_props=True)
    assert jitted.count == built.count > 0
    assert all(np.array_equal(jitted.parsed[k], built.parsed[k]) for k in built.parsed)


def test_the_sources_digest_covers_every_module_the_kernels_compile_code_from():
    """A family's built module holds every numba function its kernels call, wherever it is defined
    (formats/primitives.py's byte rules, jit.py's intrinsics): each such module must be among
    aot.SOURCES, or a change to it would leave the built kernels stale with no one noticing."""
    import inspect
    import os

    from mqtool.native import jit

    jit.load()          # numba made: each module's declared functions are numba's now
    from numba.core.dispatcher import Dispatcher
    from numba.core.extending import _Intrinsic

    def compiled_from(module):
        for value in vars(module).values():
            value = getattr(value, "jit", value)          # a Built kernel: its JIT dispatcher
            if isinstance(value, Dispatcher):
                yield value.py_func
            elif isinstance(value, _Intrinsic):
                yield value._defn

    seen, todo = set(), [importlib.import_module(name) for name, _ in aot.FAMILIES.values()]
    while todo:
        module = todo.pop()
        for func in compiled_from(module):
            if not func.__module__.startswith("mqtool."):
                continue                                   # numba's own
            path = os.path.relpath(inspect.getsourcefile(func), aot.ROOT)
            if path not in seen:
                seen.add(path)
                todo.append(importlib.import_module(func.__module__))
    assert "mqtool/formats/primitives.py" in seen
    assert seen <= set(aot.SOURCES), sorted(seen - set(aot.SOURCES))


def test_the_sources_digest_covers_every_module_the_kernels_take_constants_from():
    """numba compiles a kernel module's globals in as constants (the record's and the index
    entry's field offsets from formats/commitlog.py and formats/index.py, the magic codes, the
    sysFlag bits): every mqtool module a kernel module imports (but aot.py, the loader) must be
    among aot.SOURCES, or a change to a layout would leave the built kernels reading old offsets."""
    import ast
    import os

    missing = set()
    for name, _ in aot.FAMILIES.values():
        path = importlib.import_module(name).__file__
        for node in ast.parse(open(path).read()).body:        # the module's own top-level imports
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("mqtool"):
                continue
            for alias in node.names:
                module = f"{node.module}.{alias.name}"
                try:
                    module = importlib.import_module(module)
                except ImportError:                           # a name from the module, not a module
                    module = importlib.import_module(node.module)
                rel = os.path.relpath(module.__file__, aot.ROOT)
                if rel != "mqtool/native/aot.py" and rel not in aot.SOURCES:
                    missing.add(rel)
    assert not missing, sorted(missing)
