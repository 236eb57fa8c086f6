"""The compiled walk (mqtool/fastscan.py) against the reference walker (mqtool/commitlog.py)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ALL_FIXTURES
from mqtool import commitlog, fastscan, options
from mqtool.commitlog import Problem
from mqtool.formats.commitlog import Blank, Record
from mqtool.formats.javastr import index_key_hash, java_hash
from mqtool.formats.properties import KEYS, UNIQ_KEY, split_keys


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
    layout = options.open_layout(str(extracted(name)), None, ())
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
    layout = options.open_layout(str(extracted("features")), None, ())
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
    layout = options.open_layout(str(store), None, ())
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
    for e in commitlog.walk(queue, chunked=chunked):
        if isinstance(e, fastscan.Chunk):
            out.extend(("record", int(o)) for o in e.columns["offset"])
        elif isinstance(e, Record):
            out.append(("record", e.offset))
        else:
            out.append((type(e).__name__, getattr(e, "offset", None), getattr(e, "kind", None)))
    return out


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_chunked_walk_yields_the_same_entries(name, extracted):
    layout = options.open_layout(str(extracted(name)), None, ())
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
    layout = options.open_layout(str(store), None, ())
    queue = commitlog.open_queue(layout)
    try:
        assert _entries(queue, True) == _entries(queue, False)
        window = [int(o) for e in commitlog.walk(queue, start=65536, end=200000, chunked=True)
                  if isinstance(e, fastscan.Chunk) for o in e.columns["offset"]]
        reference_window = [e.offset for e in commitlog.walk(queue, start=65536, end=200000)
                            if isinstance(e, Record)]
        assert window == reference_window
    finally:
        queue.close()
