"""JSON lines rendered by compiled code (native/jsonlines.py, forensics/blockjson.py) against the
json module, and `dump commitlog --json` on the columnar path against the record-by-record path,
byte for byte, on every fixture (damaged ones too) and on crafted records that fail checks,
carry compressed bodies, IPv6 hosts, control characters and malformed UTF-8."""

from __future__ import annotations

import base64
import json
import random

import numpy as np
import pytest
from helpers.crafted import bad_utf8, store_of

from conftest import ALL_FIXTURES
from mqtool.cli import dumpview
from mqtool.forensics import dumpkinds
from mqtool.native import jsonlines as jl

ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _array(raw: bytes):
    return np.frombuffer(raw, dtype=np.uint8)


def test_strings_are_escaped_as_the_json_module_escapes_them():
    rng = random.Random(11)
    alphabet = list(range(0, 0x22)) + [0x22, 0x5C, 0x41, 0x7F, 0x80, 0xBF, 0xC2, 0xC3, 0xA9, 0xE0, 0xE2, 0x80,
                                       0xA8, 0xED, 0xF0, 0x9F, 0x98, 0x80, 0xF4, 0xF5, 0xFF]
    out = np.empty(6 * 40 + 2, dtype=np.uint8)
    for _ in range(5000):
        raw = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        n = jl.put_json_string(_array(raw), 0, len(raw), out, 0)
        assert bytes(out[:n]).decode("utf-8") == ENCODE(raw.decode("utf-8", "replace")), raw


def test_bodies_and_numbers():
    rng = random.Random(5)
    out = np.empty(1024, dtype=np.uint8)
    for size in range(0, 40):
        raw = bytes(rng.randrange(256) for _ in range(size))
        n = jl.put_base64(_array(raw), 0, size, out, 0)
        assert bytes(out[:n]) == base64.b64encode(raw)
        n = jl.put_hex(_array(raw), 0, size, out, 0)
        assert bytes(out[:n]).decode() == raw.hex()
    for value in (0, 1, -1, 9, 10, -10, 2**31 - 1, -2**31, 2**63 - 1, -2**63, -2**63 + 1, 1234567890123):
        n = jl.put_int64(value, out, 0)
        assert bytes(out[:n]).decode() == str(value)


CASES = [
    {"properties": "TAGS\x01a\x02KEYS\x01k1 k2  k3\x02UNIQ_KEY\x01U1", "body": b'{"quote": "\\\\"}\n\t\x00\x1f'},
    {"properties": "A\x01x\x02B\x01y\x02A\x01z\x02TAGS\x01t1\x02TAGS\x01t2\x02", "body": b""},
    {"properties": bad_utf8(b"TAGS\x01\xe0\x80x\x02KEYS\x01\xff\xfe k\x02\xc3\x01v\x02Q\x01\"\\\x7f\xe2\x80\xa8"),
     "topic": bad_utf8(b'T\xf0\x90"\\'), "body": b"\xff\xfe\xe2\x82 text \xf0\x9f\x98\x80"},
    {"topic": "SCHEDULE_TOPIC_XXXX", "properties": "DELAY\x013\x02TAGS\x01x\x02REAL_TOPIC\x01a\x08b\x0c"},
    {"topic": "SCHEDULE_TOPIC_XXXX", "properties": "DELAY\x01abc"},
    {"sysFlag": 0x30, "bornHost": "[2001:db8:0:0:0:0:0:1]:61001", "storeHost": "[0:0:0:0:0:ffff:a00:1]:10911"},
    {"sysFlag": 0x4, "queueOffset": 5},                          # a prepared record with a queue offset
    {"sysFlag": 0xC, "queueOffset": 0, "queueId": -1},
    {"physicalOffset": 12345, "bodyCRC": 99, "body": b""},
    {"bodyCRC": 1, "sysFlag": 0x301, "body": b"\x00\x01 not zlib"},
    {"sysFlag": 0x1, "body": __import__("zlib").compress(b"unpacked \x01 body\n")},
    {"topic": "t\u00e9\u4e2d\U0001F600", "properties": "TAGS\x01\u00e9\x02KEYS\x01\u4e2d \U0001F600", "flag": -3,
     "preparedTransactionOffset": -2**63, "bornTimestamp": 2**63 - 1},
    {"magicCode": 0xDAA320AB, "topic": "V2" * 70, "reconsumeTimes": 3, "preparedTransactionOffset": 77},
]


@pytest.fixture
def crafted(tmp_path):
    return store_of(tmp_path / "store", CASES)


VARIANTS = [
    (),
    ("--no-body",),
    ("--body", "text"),
    ("--body", "hex"),
    ("--no-crc",),
    ("--limit", "1"),
    ("--limit", "7", "--no-body"),
    ("--limit", "0"),
    ("--queue", "1", "--queue", "2", "--no-body"),
    ("--since", "1795305910700", "--body", "text"),
    ("--offset-from", "500", "--offset-to", "5000"),
]


def _both(run_cli, monkeypatch, *args):
    monkeypatch.setattr(dumpkinds, "COLUMNAR_FROM", 0)     # the fixtures are small stores
    new = run_cli("dump", *args)
    with monkeypatch.context() as m:
        m.setattr(dumpkinds, "COLUMNAR_JSON", False)
        old = run_cli("dump", *args)
    return new, old


def _assert_same(new, old):
    assert new.code == old.code, (new.err, old.err)
    assert new.err == old.err
    assert new.out == old.out


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_dump_json_is_the_record_by_record_output_on_the_fixtures(name, extracted, run_cli, monkeypatch):
    store = extracted(name)
    shown = 0
    for variant in VARIANTS:
        new, old = _both(run_cli, monkeypatch, store, "commitlog", "--json", *variant)
        _assert_same(new, old)
        shown += new.out.count('"type":"message"')
    assert shown > 0
    topic = json.loads(new.out.splitlines()[0])["topic"] if new.out.startswith('{"type":"message"') else "BasicTopic"
    _assert_same(*_both(run_cli, monkeypatch, store, "commitlog", "--json", "--topic", topic, "--limit", "3"))


@pytest.mark.parametrize("variant", VARIANTS + [("--topic", "T"), ("--topic", "SCHEDULE_TOPIC_XXXX", "--body", "text")])
def test_dump_json_is_the_record_by_record_output_on_crafted_records(variant, crafted, run_cli, monkeypatch):
    new, old = _both(run_cli, monkeypatch, crafted, "commitlog", "--json", *variant)
    _assert_same(new, old)
    if "--limit" not in variant:
        assert new.code == 1       # some records fail their checks
    if not variant:
        assert new.out.count('"problems":[') == 4 and new.out.count('"bodyDecompress') == 2


def test_dump_json_in_blocks_of_a_few_records(crafted, extracted, run_cli, monkeypatch):
    """Chunks cut into many blocks, and a file given instead of the store, change nothing."""
    monkeypatch.setattr(dumpview, "BLOCK_ROWS", 3)
    for args in ((crafted, "commitlog", "--json", "--body", "text"),
                 (crafted / "commitlog" / "00000000000000000000", "--json", "--limit", "5"),
                 (extracted("multifile"), "commitlog", "--json", "--queue", "0")):
        _assert_same(*_both(run_cli, monkeypatch, *args))


def _expected_export(parts, with_body):
    """topic -> {file name: the JSON lines of the reference rows}, as Spark's JSON writer writes rows."""
    from mqtool.pipeline import rows as part_rows
    from mqtool.pipeline import schema as row_schema

    names = [name for name, _ in row_schema.columns(with_body)]
    want: dict = {}
    for part in parts:
        for row in part_rows.rows(part, with_body=with_body):
            obj = {k: (base64.b64encode(v).decode() if isinstance(v, bytes) else v)
                   for k, v in zip(names, row) if v is not None and k != "topic"}
            files = want.setdefault(row[names.index("topic")], {})
            name = f"part-{part.index:05d}.jsonl"
            files[name] = files.get(name, "") + ENCODE(obj) + "\n"
    return want


@pytest.mark.parametrize("with_body", [False, True])
def test_export_jsonl_is_what_the_reference_rows_give(with_body, crafted, extracted, tmp_path):
    from mqtool.pipeline import exporter, plan

    for k, store in enumerate([crafted] + [extracted(name) for name in ALL_FIXTURES]):
        parts = plan.commitlog_parts(plan.find_stores([store]))
        out = tmp_path / f"out{k}"
        for part in parts:
            exporter.export_part(part, str(out), "jsonl", with_body)
        want = _expected_export(parts, with_body)
        assert sorted(out.rglob("*.jsonl")) == sorted(exporter.topic_dir(out, topic) / name
                                                      for topic, files in want.items() for name in files)
        for topic, files in want.items():
            for name, text in files.items():
                assert (exporter.topic_dir(out, topic) / name).read_text(encoding="utf-8") == text, (store, name)


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_the_columnar_walk_counts_what_the_record_walk_counts(name, extracted):
    """dumpwalk with the compiled scanner: runs of records come as chunks, the tally is the same."""
    from mqtool.forensics import dumpwalk
    from mqtool.forensics.filters import Filters
    from mqtool.native import fastscan
    from mqtool.storage import commitlog, fsutil
    from mqtool.storage.settings import open_layout

    layout = open_layout(str(extracted(name)), None, ())
    for filters, limit in ((Filters(), None), (Filters.from_options(queue_ids=[1]), 3)):
        tallies, kinds = [], []
        for scanner in (None, fastscan):
            tally = dumpwalk.Tally(limit)
            with commitlog.open_queue(layout) as queue:
                events = [e[0] for e in dumpwalk.walk_commitlog(queue, filters, tally, check_crc=True,
                                                                display=fsutil.relative_paths(layout.root),
                                                                scanner=scanner)]
            tallies.append(tally)
            kinds.append(events)
        assert tallies[0] == tallies[1]
        assert "records" in kinds[1] and "records" not in kinds[0]
