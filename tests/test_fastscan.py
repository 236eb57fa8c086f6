"""The compiled walk (mqtool/native/fastscan.py) against the reference walker (mqtool/storage/commitlog.py)."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.forensics.verify import kernels
from mqtool.formats import consumequeue
from mqtool.formats import index as index_format
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats.javastr import index_key_hash, java_hash
from mqtool.formats.properties import KEYS, UNIQ_KEY, split_keys
from mqtool.native import fastscan
from mqtool.storage import commitlog
from mqtool.storage.commitlog import Problem
from mqtool.storage.settings import open_layout

from conftest import ALL_FIXTURES


def reference(queue):
    return [e for e in commitlog.walk(queue) if isinstance(e, (Record, Blank, Problem))]


def compiled(queue, cap=1 << 12):
    """Every file scanned with the kernels; damage resynchronised like the reference walker."""
    out = []
    for mf in queue.files:
        buf = np.frombuffer(mf.buf, dtype=np.uint8)
        pos = 0
        while pos < mf.file_size:
            chunk = fastscan.scan(buf, pos, mf.file_size, mf.file_from_offset, True, cap)
            parsed = fastscan.parse(buf, chunk)
            out.append((mf, buf, chunk, parsed))
            pos = chunk.stop
            if chunk.kind == fastscan.FULL:
                continue
            if chunk.kind == fastscan.DAMAGE:
                nxt = commitlog.resync(mf.buf, pos + 1, mf.file_size, mf.file_from_offset)
                if nxt < 0:
                    break
                pos = nxt
                continue
            break
        del buf
    return out


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_kernels_decode_every_record_like_the_reference(name, extracted):
    layout = open_layout(str(extracted(name)), None, ())
    queue = commitlog.open_queue(layout)
    try:
        records = [e for e in reference(queue) if isinstance(e, Record)]
        chunks = compiled(queue)
        got = {}
        for mf, buf, chunk, parsed in chunks:
            c = chunk.columns
            keys_of = {}
            for rec, h in zip(parsed["key_record"].tolist(), parsed["key_hash"].tolist()):
                keys_of.setdefault(rec, []).append(h)
            for i in range(chunk.count):
                topic = bytes(buf[c["topic_pos"][i]:c["topic_pos"][i] + c["topic_len"][i]]).decode()
                got[int(c["offset"][i])] = (
                    int(c["size"][i]), int(c["queue_id"][i]), int(c["queue_offset"][i]), int(c["physical"][i]),
                    int(c["sys_flag"][i]), int(c["store_ts"][i]), bool(c["crc_ok"][i]), topic,
                    int(c["body_len"][i]), int(c["props_len"][i]), int(parsed["tags_hash"][i]),
                    int(parsed["delay_level"][i]), keys_of.get(i, []), int(parsed["flags"][i]))
        assert sorted(got) == [r.offset for r in records]
        for r in records:
            props = r.properties
            keys = ([props[UNIQ_KEY]] if props.get(UNIQ_KEY) else []) + split_keys(props.get(KEYS))
            indexed = (r.sys_flag & 0xC) != 0xC
            expected = (r.total_size, r.queue_id, r.queue_offset, r.physical_offset, r.sys_flag,
                        r.store_timestamp, r.crc_ok(), r.topic, len(r.body), len(r.properties_bytes),
                        java_hash(props["TAGS"]) if props.get("TAGS") else 0,
                        int(props.get("DELAY", 0)),
                        [index_key_hash(f"{r.topic}#{k}") for k in keys] if indexed else [],
                        fastscan.HAS_DELAY if "DELAY" in props else 0)
            assert got[r.offset] == expected, r.offset
    finally:
        queue.close()


def test_topics_group_by_hash(extracted):
    layout = open_layout(str(extracted("features")), None, ())
    queue = commitlog.open_queue(layout)
    try:
        seen = {}
        for mf, buf, chunk, parsed in compiled(queue):
            c = chunk.columns
            for i in range(chunk.count):
                topic = bytes(buf[c["topic_pos"][i]:c["topic_pos"][i] + c["topic_len"][i]])
                assert seen.setdefault(int(c["topic_hash"][i]), topic) == topic
        assert len(seen) == len(set(seen.values())) > 5
    finally:
        queue.close()


def test_stop_reasons_match_the_reference_on_damage(store_copy):
    store = store_copy("basic")
    path = store / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    data[5855 + 1] ^= 0xFF        # the size field of record #25
    data[9000:9064] = b"\xAB" * 64   # garbage in the middle of another record
    path.write_bytes(bytes(data))
    layout = open_layout(str(store), None, ())
    queue = commitlog.open_queue(layout)
    try:
        problems = [e for e in reference(queue) if isinstance(e, Problem)]
        stops = [(mf.file_from_offset + ch.stop, ch.reason)
                 for mf, buf, ch, p in compiled(queue) if ch.kind == fastscan.DAMAGE]
        assert stops == [(p.offset, p.kind) for p in problems]
        ref_offsets = [e.offset for e in reference(queue) if isinstance(e, Record)]
        fast_offsets = [int(o) for mf, buf, ch, p in compiled(queue) for o in ch.columns["offset"]]
        assert fast_offsets == ref_offsets
    finally:
        queue.close()


def _entries(queue, chunked):
    """(kind, offset) for every entry of a walk; chunks expanded into their records."""
    out = []
    for e in commitlog.walk(queue, scanner=fastscan if chunked else None):
        if isinstance(e, fastscan.Chunk):
            out.extend(("record", int(o)) for o in e.columns["offset"])
        elif isinstance(e, Record):
            out.append(("record", e.offset))
        else:
            out.append((type(e).__name__, getattr(e, "offset", None), getattr(e, "kind", None)))
    return out


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_chunked_walk_yields_the_same_entries(name, extracted):
    layout = open_layout(str(extracted(name)), None, ())
    queue = commitlog.open_queue(layout)
    try:
        assert _entries(queue, True) == _entries(queue, False)
    finally:
        queue.close()


def test_chunked_walk_on_damage_and_windows(store_copy):
    store = store_copy("multifile")
    first = store / "commitlog" / "00000000000000000000"
    data = bytearray(first.read_bytes())
    data[3000:3100] = b"\x5a" * 100
    data[20000:20010] = bytes(10)
    first.write_bytes(bytes(data))
    layout = open_layout(str(store), None, ())
    queue = commitlog.open_queue(layout)
    try:
        assert _entries(queue, True) == _entries(queue, False)
        window = [int(o) for e in commitlog.walk(queue, start=65536, end=200000, scanner=fastscan)
                  if isinstance(e, fastscan.Chunk) for o in e.columns["offset"]]
        reference_window = [e.offset for e in commitlog.walk(queue, start=65536, end=200000)
                            if isinstance(e, Record)]
        assert window == reference_window
    finally:
        queue.close()


# ------------------------------------------- units and entries checked against scanned records

def _scanned_files(queue, cap=100):
    """For every commitlog file: its buf and kernels.scanned() of all its records, scanned with
    parse_props in chunks of cap records (damage resynchronised like the reference walker)."""
    out = []
    for mf in queue.files:
        buf = np.frombuffer(mf.buf, dtype=np.uint8)
        chunks, pos = [], 0
        while pos < mf.file_size:
            chunk = fastscan.scan(buf, pos, mf.file_size, mf.file_from_offset, True, cap, parse_props=True)
            if chunk.count:
                chunks.append(chunk)
            pos = chunk.stop
            if chunk.kind == fastscan.FULL:
                continue
            if chunk.kind != fastscan.DAMAGE:
                break
            pos = commitlog.resync(mf.buf, pos + 1, mf.file_size, mf.file_from_offset)
            if pos < 0:
                break
        out.append((mf, buf, kernels.scanned(chunks)))
    return out


def _patch_props(store, pick, byte):
    """Put `byte` into the properties of some records (pick: record number -> position in them)."""
    path = store / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    for number, r in enumerate(r for r in _reference_records(store) if r.properties_bytes):
        at = pick(number, r)
        if at is not None:
            data[r.offset + r.total_size - len(r.properties_bytes) + at] = byte
    path.write_bytes(bytes(data))


def _reference_records(store):
    layout = open_layout(str(store), None, ())
    queue = commitlog.open_queue(layout)
    try:
        return [e for e in commitlog.walk(queue) if isinstance(e, Record)]
    finally:
        queue.close()


def _doctored(store_copy):
    """basic with bytes that are not UTF-8 in TAGS values and KEYS of some records, and some
    records made prepared or rollback ones (their units and entries are then wrong)."""
    store = store_copy("basic")
    _patch_props(store, lambda n, r: r.properties_bytes.index(b"TAGS\x01") + 5 if n % 7 == 3
                 and b"TAGS\x01" in r.properties_bytes else None, 0xFF)
    _patch_props(store, lambda n, r: r.properties_bytes.index(b"KEYS\x01") + 5 if n % 5 == 1
                 and b"KEYS\x01" in r.properties_bytes else None, 0xC3)
    path = store / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    for n, r in enumerate(_reference_records(store)):
        if n % 11 in (2, 6):
            data[r.offset + 36:r.offset + 40] = struct.pack(">i", r.sys_flag | (4 if n % 11 == 2 else 12))
    path.write_bytes(bytes(data))
    return store


@pytest.mark.parametrize("name", ["basic", "features", "multifile", "crash", "basic5", "doctored"])
def test_scan_parses_the_properties_as_parse_does(name, extracted, store_copy):
    store = _doctored(store_copy) if name == "doctored" else extracted(name)
    layout = open_layout(str(store), None, ())
    queue = commitlog.open_queue(layout)
    try:
        for mf, buf, chunk, parsed in compiled(queue, cap=100):
            if not chunk.count:
                continue
            start = int(chunk.columns["offset"][0]) - mf.file_from_offset
            both = fastscan.scan(buf, start, mf.file_size, mf.file_from_offset, True, 100, parse_props=True)
            assert both.count == chunk.count
            for key, column in parsed.items():
                assert both.parsed[key].tolist() == column.tolist(), key
    finally:
        queue.close()


def test_topic_hash_is_the_columns(extracted):
    layout = open_layout(str(extracted("features")), None, ())
    queue = commitlog.open_queue(layout)
    try:
        for mf, buf, chunk, parsed in compiled(queue):
            for i in range(chunk.count):
                assert fastscan.topic_hash(chunk.topic(i)) == int(chunk.columns["topic_hash"][i])
    finally:
        queue.close()


@pytest.mark.parametrize("name", ["basic", "features", "multifile", "crash", "basic5", "doctored"])
def test_checks_against_scanned_records_are_the_checks_that_read_them(name, extracted, store_copy):
    """check_units_scanned and check_entries_scanned give check_units' and check_entries' codes
    for every unit and entry of the store, and for wrong ones: pointing inside records, of
    another size, tags code, queue, queue offset or topic, with other key hashes."""
    from mqtool.storage.indexfile import IndexFile

    store = _doctored(store_copy) if name == "doctored" else extracted(name)
    layout = open_layout(str(store), None, ())
    delays = np.array(layout.config.delay_levels_ms() or [0], dtype=np.int64)
    queue = commitlog.open_queue(layout)
    files = _scanned_files(queue)
    settled = unsettled = 0

    def file_of(offsets):
        return np.searchsorted([mf.file_from_offset for mf, _, _ in files], offsets, side="right") - 1

    try:
        for topic, queue_id, directory in layout.consume_queues():
            for path in sorted(directory.iterdir()):
                units = np.frombuffer(path.read_bytes(), dtype=consumequeue.unit_dtype())
                rows = np.flatnonzero(units["size"] > 0)
                offsets, sizes, tags = (units[k][rows].astype(np.int64) for k in ("commitLogOffset", "size", "tagsCode"))
                logical0 = int(path.name) // 20
                cases = [(offsets, sizes, tags, logical0, topic, queue_id), (offsets + 1, sizes, tags, logical0, topic,
                         queue_id), (offsets - 4, sizes, tags, logical0, topic, queue_id),
                         (offsets, sizes + 1, tags, logical0, topic, queue_id), (offsets, sizes, tags ^ 1, logical0,
                         topic, queue_id), (offsets, sizes, tags, logical0 + 1, topic, queue_id),
                         (offsets, sizes, tags, logical0, topic, queue_id + 1), (offsets, sizes, tags, logical0,
                         topic + "X", queue_id), (offsets[::-1], sizes[::-1], tags[::-1], logical0, topic,
                         queue_id)]
                for offs, szs, tgs, lg0, tpc, qid in cases:
                    where = file_of(offs)
                    for f in np.unique(where).tolist():
                        mf, buf, records = files[f]
                        sel = np.flatnonzero(where == f)
                        raw = np.zeros(len(sel), dtype=consumequeue.unit_dtype())     # the units as a file holds them
                        raw["commitLogOffset"], raw["size"], raw["tagsCode"] = offs[sel], szs[sel], tgs[sel]
                        raw = np.frombuffer(raw.tobytes(), dtype=np.uint8)
                        schedule = tpc == "SCHEDULE_TOPIC_XXXX"
                        for rows_given in (np.zeros(0, dtype=np.int64), np.arange(len(sel))[::-2].copy()):
                            at = rows_given if len(rows_given) else np.arange(len(sel))
                            expected = np.empty(len(at), dtype=np.int64)
                            kernels.check_units(buf, mf.file_from_offset, mf.file_size, offs[sel][at], szs[sel][at],
                                                tgs[sel][at], lg0 + at, np.frombuffer(tpc.encode(), dtype=np.uint8),
                                                qid, schedule, delays, expected)
                            got, read = kernels.check_units_scanned(records, buf, mf.file_from_offset, mf.file_size,
                                                                    raw, 0, len(sel), rows_given, lg0, tpc, qid,
                                                                    schedule, delays)
                            assert got.tolist() == expected.tolist(), (path, tpc, qid)
                            settled += len(at) - read
                            unsettled += read
        slots, index_num = layout.index_geometry()
        for info in layout.index_files():
            ix = IndexFile(info.path, slots, index_num)
            try:
                count = ix.header().index_count
                entries = np.frombuffer(ix.buf, dtype=index_format.entry_dtype(), count=count,
                                        offset=index_format.entry_position(slots, 0))[1:]
                hashes, phy = entries["keyHash"].astype(np.int64), entries["phyOffset"].astype(np.int64)
            finally:
                ix.close()
            for hs, ph in [(hashes, phy), (hashes ^ 1, phy), (hashes, phy + 1), (hashes[::-1], phy[::-1])]:
                where = file_of(ph)
                for f in np.unique(where).tolist():
                    mf, buf, records = files[f]
                    sel = np.flatnonzero(where == f)
                    raw = np.zeros(len(sel), dtype=index_format.entry_dtype())    # as an index file holds them
                    raw["keyHash"], raw["phyOffset"], raw["timeDiff"] = hs[sel], ph[sel], np.arange(len(sel))
                    raw = np.frombuffer(raw.tobytes(), dtype=np.uint8)
                    for numbers in (np.zeros(0, dtype=np.int64), np.arange(len(sel))[::-2].copy()):
                        at = numbers if len(numbers) else np.arange(len(sel))
                        expected, expected_ts = np.empty(len(at), dtype=np.int64), np.empty(len(at), dtype=np.int64)
                        kernels.check_entries(buf, mf.file_from_offset, mf.file_size, ph[sel][at], hs[sel][at],
                                              expected_ts, expected)
                        got, ts, diffs, read = kernels.check_entries_scanned(records, buf, mf.file_from_offset,
                                                                             mf.file_size, raw, 0, 0, len(sel), numbers)
                        assert got.tolist() == expected.tolist() and ts.tolist() == expected_ts.tolist(), info.path
                        assert diffs.tolist() == at.tolist()
                        settled += len(at) - read
                        unsettled += read
    finally:
        files.clear()
        queue.close()
    assert settled and unsettled      # both ways were taken


def test_kernel_cache_goes_where_this_user_can_write(tmp_path):
    """numba refuses cache=True kernels when it can write neither the package's __pycache__ nor
    the user's cache directory (a root-installed venv run by a cron user without a home): then
    mqtool gives it a private directory of this user."""
    from mqtool.native.jit import cache_dir_for

    package = tmp_path / "pkg"
    (package / "__pycache__").mkdir(parents=True)
    xdg = tmp_path / "xdg"
    everything = lambda path: True  # noqa: E731
    assert cache_dir_for(str(package), {"XDG_CACHE_HOME": str(xdg)}, writable=everything) is None
    only_xdg = lambda path: str(path).startswith(str(xdg))  # noqa: E731
    chosen = cache_dir_for(str(package), {"XDG_CACHE_HOME": str(xdg)}, writable=only_xdg)
    assert chosen is not None and chosen.startswith(str(xdg))
    assert os.stat(chosen).st_mode & 0o777 == 0o700
    assert cache_dir_for(str(package), {"NUMBA_CACHE_DIR": "/elsewhere"}, writable=only_xdg) is None



LOAD_RACE = """
import sys, threading, time
from mqtool.native import jit

square = jit.njit(lambda x: x * x)       # a declared function, made by load()
ran = []
jit.when_loaded(lambda numba: (time.sleep(1.0), ran.append("hook")))
loader = threading.Thread(target=jit.load)
loader.start()
while jit._numba is None:                # the other thread is inside load(): numba is there
    time.sleep(0.0005)
if sys.argv[1] == "load":
    jit.load()
else:
    square.real()
print("after the hooks" if ran else "before the hooks", flush=True)
loader.join()
"""


@pytest.mark.parametrize("call", ["load", "deferred"])
def test_no_thread_goes_on_before_the_load_hooks_ran(call):
    """native/jit.load runs the when_loaded hooks (aot's typing of the built kernels) under its lock:
    a second thread's load(), or its call of a declared function, returns only after they ran."""
    import subprocess
    import sys

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=repo)
    done = subprocess.run([sys.executable, "-c", LOAD_RACE, call], capture_output=True, text=True, env=env,
                          cwd=repo, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "after the hooks"


def _compiled_java_hash():
    """primitives.java_hash in a kernel of its own (compiled once, at first use)."""
    from mqtool.native import jit

    numba = jit.load()                  # primitives' rules become numba's
    from mqtool.formats.primitives import java_hash as compiled_hash, signed32

    @numba.njit
    def hash_of(buf, lo, hi):
        state = np.zeros(1, dtype=np.int64)
        return signed32(compiled_hash(buf, lo, hi, 0, state)), state[0]

    return hash_of


_HASH_OF = []


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(max_codepoint=0x7F), st.characters(blacklist_categories=("Cs",))),
               max_size=40),
       st.binary(max_size=9), st.binary(max_size=9))
def test_the_compiled_java_hash_is_string_hash_code_for_any_text(text, before, after):
    """primitives.java_hash (the tags codes and index keys of every compiled path) gives Java's
    String.hashCode of the UTF-8 text wherever it lies in the buffer, and flags nothing valid."""
    if not _HASH_OF:
        _HASH_OF.append(_compiled_java_hash())
    data = text.encode("utf-8")
    buf = np.frombuffer(before + data + after, dtype=np.uint8)
    assert _HASH_OF[0](buf, len(before), len(before) + len(data)) == (java_hash(text), 0)


def _walked(mf, copies, start=0, stop=None, parse_props=True):
    """A file's walk as (every chunk's columns and parse, joined; the other items in order)."""
    columns, parsed, others = {}, {}, []
    for item in commitlog.walk_file(mf, start=start, stop=stop, scanner=fastscan, parse_props=parse_props,
                                    copies=copies, chunk_records=300):
        if isinstance(item, fastscan.Chunk):
            for k, v in item.columns.items():
                columns.setdefault(k, []).extend(v.tolist())
            rows = len(columns["offset"]) - item.count
            for k, v in (item.parsed or {}).items():
                parsed.setdefault(k, []).extend((v + rows).tolist() if k == "key_record" else v.tolist())
            others.append(("chunk-stop", item.stop))
        elif isinstance(item, Record):
            others.append(("record", item.offset, item.total_size, item.crc_ok()))
        else:
            fields = getattr(item, "__dict__", None) or {k: getattr(item, k) for k in item.__slots__}
            others.append((type(item).__name__, sorted(fields.items())))
    return columns, parsed, others


@pytest.mark.parametrize("window", [64, 700, 4096, 1 << 20])
@pytest.mark.parametrize("name", ["basic", "multifile", "features", "flipped-body-byte", "garbage-tail",
                                  "dledger1", "mixed5"])
def test_a_walk_of_copies_is_the_walk_of_the_mapping(name, window, extracted, monkeypatch, store_copy):
    """scan_copies reads a file a window at a time: records the window's end cuts (64 bytes: every
    record; 700: most), records longer than the window, BLANKs, damage and the end of the data
    come out as the walk through the mapping gives them, column for column, from any start."""
    monkeypatch.setattr(fastscan, "WINDOW_BYTES", window)
    layout = open_layout(str(extracted(name)), None, ())
    queue = commitlog.open_queue(layout)
    try:
        for mf in queue.files:
            assert _walked(mf, True) == _walked(mf, False), mf.path
            records, _, _ = _walked(mf, False, parse_props=False)
            if len(records.get("offset", [])) > 3:       # from a record inside, to one before the end
                start, stop = (records["offset"][1] - mf.file_from_offset, records["offset"][-2] - mf.file_from_offset)
                assert _walked(mf, True, start, stop) == _walked(mf, False, start, stop)
    finally:
        queue.close()
