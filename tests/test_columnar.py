"""The columnar read path (native/columnar.py, forensics/rowblocks.py, pipeline/arrow.py) against the
reference rows (the commitlog walker and messageview), column by column, on every fixture and on
records built by hand to hit what the kernels leave to the reference code or decode themselves."""

from __future__ import annotations

import random

import numpy as np
import pytest
from helpers.crafted import bad_utf8, store_of

from conftest import ALL_FIXTURES
from mqtool.native import columnar
from mqtool.forensics.filters import Filters
from mqtool.pipeline import plan
from mqtool.pipeline import rows as part_rows
from mqtool.pipeline import schema as row_schema

pa = pytest.importorskip("pyarrow")
from mqtool.pipeline.arrow import arrow_schema, block_to_arrow, to_arrow  # noqa: E402


def reference_table(part, with_body, schema, filters=None):
    rows = list(part_rows.rows(part, filters, with_body=with_body, with_problems=True))
    return to_arrow(rows, schema) if rows else schema.empty_table()


def columnar_table(part, with_body, schema, rows, filters=None, columns=None):
    """row_blocks' pieces as a table of schema's columns (columns: those asked of row_blocks)."""
    from mqtool.forensics.rowblocks import Block

    full = arrow_schema(row_schema.columns(with_body))
    batches = []
    for piece in part_rows.row_blocks(part, filters, with_body=with_body, with_problems=True, rows=rows,
                                     columns=columns):
        batches.append(block_to_arrow(piece, part, schema) if isinstance(piece, Block)
                       else to_arrow(piece, full).select(schema.names))
    return pa.Table.from_batches(batches, schema=schema)


def assert_same_columns(store, with_body, rows=1 << 14, filters=None, columns=None):
    """The columnar path's rows equal the reference rows; columns: only those, asked for by name."""
    schema = arrow_schema([c for c in row_schema.columns(with_body) if columns is None or c[0] in columns])
    parts = plan.commitlog_parts(plan.find_stores([store]), filters)
    assert parts
    compared = 0
    for part in parts:
        want = reference_table(part, with_body, arrow_schema(row_schema.columns(with_body)), filters)
        want = want.select(schema.names)
        got = columnar_table(part, with_body, schema, rows, filters, columns)
        assert got.num_rows == want.num_rows, part.display
        for name in schema.names:
            assert got.column(name).to_pylist() == want.column(name).to_pylist(), (part.display, name)
        got.validate(full=True)
        compared += want.num_rows
    return compared


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
@pytest.mark.parametrize("with_body", [False, True])
def test_every_column_equals_the_reference_on_the_fixtures(name, with_body, extracted):
    assert assert_same_columns(extracted(name), with_body, rows=1000 if with_body else 1 << 14) > 0


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_columns_the_scan_gives_need_no_decoding_and_equal_the_reference(name, extracted, monkeypatch):
    """A read of only scanned columns (a pruned Spark query) gets the reference's values, checks
    (ok, problems) included, without the records being decoded."""
    from mqtool.forensics import rowblocks

    def no_decoding(*args, **kwargs):
        raise AssertionError("records decoded for columns the scan gives")

    monkeypatch.setattr(columnar, "decode_columns", no_decoding)
    assert assert_same_columns(extracted(name), False, columns=sorted(rowblocks.SCANNED)) > 0
    assert assert_same_columns(extracted(name), False, columns=["storeSize"]) > 0


def test_scanned_columns_of_crafted_records(crafted, monkeypatch):
    """Crafted records fail every check (CRC, physical offset, queue id/offset of prepared records)."""
    from mqtool.forensics import rowblocks

    assert assert_same_columns(crafted, False, rows=5, columns=sorted(rowblocks.SCANNED)) == len(CASES)
    assert assert_same_columns(crafted, False, rows=5, columns=["commitLogOffset", "ok", "tags"]) == len(CASES)


def test_filters_pick_the_same_rows(extracted):
    filters = Filters.from_options(["OrderTopic"], queue_ids=[1, 2], since="1", offset_from=70000)
    assert assert_same_columns(extracted("multifile"), False, filters=filters) > 0


CASES = [
    {"properties": "TAGS\x01a\x02KEYS\x01k1 k2  k3\x02UNIQ_KEY\x01U1"},
    {"properties": "A\x01x\x02B\x01y\x02A\x01z\x02TAGS\x01t1\x02TAGS\x01t2\x02"},          # duplicates: last wins
    {"properties": "\x01v\x02n\x01\x02ab\x02\x02\x01\x02Q\x01\x01\x01"},                   # skipped pairs
    {"properties": "TAGX\x01n\x02UNIQ_KEX\x01n\x02KEYZ\x01n\x02DELAZ\x011\x02TAG\x01n\x02TAGS\x01t"},   # near names
    {"properties": bad_utf8(b"TAGS\x01\xe0\x80x\x02KEYS\x01\xff\xfe k\x02\xc3\x01v"), "topic": bad_utf8(b"T\xf0\x90")},
    {"properties": bad_utf8(b"\xe2\x82\x01a\x02\xe2\x82\xff\x01b")},                       # two names that decode alike
    {"topic": "SCHEDULE_TOPIC_XXXX", "properties": "DELAY\x013\x02TAGS\x01x"},
    {"topic": "SCHEDULE_TOPIC_XXXX", "properties": "DELAY\x0199\x02TAGS\x01x"},
    {"topic": "SCHEDULE_TOPIC_XXXX", "properties": "DELAY\x01+2\x02TAGS\x01x"},
    {"topic": "SCHEDULE_TOPIC_XXXX", "properties": "DELAY\x01abc"},
    {"topic": "SCHEDULE_TOPIC_XXXX", "properties": "DELAY\x01-1"},
    {"sysFlag": 0x30, "bornHost": "[2001:db8:0:0:0:0:0:1]:61001", "storeHost": "[0:0:0:0:0:ffff:a00:1]:10911"},
    {"sysFlag": 0x10, "bornHost": "[fe80:0:0:0:0:0:abcd:12]:-5"},
    {"sysFlag": 0x4, "queueOffset": 5},                          # a prepared record with a queue offset
    {"sysFlag": 0xC, "queueOffset": 0, "queueId": -1},
    {"physicalOffset": 12345, "bodyCRC": 99, "body": b""},
    {"bodyCRC": 1, "sysFlag": 0x301, "body": b"\x00\x01 not zlib"},
    {"topic": "t\u00e9\u4e2d\U0001F600", "properties": "TAGS\x01\u00e9\x02KEYS\x01\u4e2d \U0001F600", "flag": -3},
    {"magicCode": 0xDAA320AB, "topic": "V2" * 70, "reconsumeTimes": 3, "preparedTransactionOffset": 77},
]


@pytest.fixture
def crafted(tmp_path):
    return store_of(tmp_path / "store", CASES)


@pytest.mark.parametrize("with_body", [False, True])
def test_every_column_equals_the_reference_on_crafted_records(crafted, with_body):
    assert assert_same_columns(crafted, with_body, rows=5) == len(CASES)


def test_text_is_decoded_as_python_decodes_it():
    rng = random.Random(7)
    alphabet = [0x41, 0x01, 0x80, 0xBF, 0xC2, 0xC1, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xA0, 0x9F, 0x90, 0x8F]
    out = np.empty(64, dtype=np.uint8)
    for _ in range(5000):
        raw = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        n = columnar.put_text(np.frombuffer(raw, dtype=np.uint8), 0, len(raw), out, 0)
        assert bytes(out[:n]) == raw.decode("utf-8", "replace").encode("utf-8"), raw


@pytest.mark.parametrize("name", list(ALL_FIXTURES))
def test_stats_equal_sums_over_the_reference_rows(name, extracted):
    """storestats (vectorised over chunks) against plain sums over the reference walker's rows."""
    assert_stats_equal_reference(name, extracted(name))


def random_key_cases(seed: int, count: int = 3000) -> list[dict]:
    """Records over three topics and six queues, store times over ten hours in no order, bodies of
    0-3000 bytes, KEYS of random pieces (non-ASCII, runs of spaces, long ones), some records
    with two KEYS pairs and some with malformed UTF-8."""
    rng = random.Random(seed)
    pieces = ["k", "\u00e9", "\u4e2d", "\U0001F600", " ", "  ", "x" * 9, "order-", "0", "1"]
    cases = []
    for i in range(count):
        key = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        props = f"TAGS\x01t{i % 3}\x02KEYS\x01{key}" if key else "TAGS\x01a"
        if i % 7 == 0:
            props += "\x02KEYS\x01" + "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        if i % 11 == 0:
            props = bad_utf8(b"KEYS\x01\xff\xfe k" + bytes([rng.randint(0x80, 0xFF)]) + b"\x02A\x01b")
        cases.append({"topic": rng.choice(["A", "B", "Ca"]), "queueId": rng.randint(0, 5), "properties": props,
                      "storeTimestamp": 1_700_000_000_000 + rng.randint(0, 10) * 3_000_000 + i,
                      "body": b"x" * rng.randint(0, 3000)})
    return cases


@pytest.mark.parametrize("seed", [1, 2])
def test_stats_of_random_keys_equal_the_reference(seed, tmp_path):
    assert_stats_equal_reference("random", store_of(tmp_path / "store", random_key_cases(seed), 1 << 24))


def assert_stats_equal_reference(name, store):
    from helpers.pipeline_expect import size_bucket

    from mqtool.pipeline import storestats

    parts = plan.commitlog_parts(plan.find_stores([f"{name}={store}"]))
    got = storestats.merge(storestats.scan(p) for p in parts)
    names = [n for n, _ in row_schema.columns()]
    at = {n: names.index(n) for n in names}
    want: dict = {}
    for part in parts:
        for row in part_rows.rows(part):
            if not row[at["ok"]]:
                continue
            g = want.setdefault((name, row[at["topic"]], row[at["queueId"]]),
                                {"messages": 0, "bytes": 0, "times": [], "sizes": {}, "hours": {}, "keys": set()})
            g["messages"] += 1
            g["bytes"] += row[at["storeSize"]]
            g["times"].append(row[at["storeTimestamp"]])
            bucket = size_bucket(row[at["storeSize"]])
            g["sizes"][bucket] = g["sizes"].get(bucket, 0) + 1
            hour = row[at["storeTimestamp"]] // storestats.HOUR_MS
            g["hours"][hour] = g["hours"].get(hour, 0) + 1
            g["keys"].update(k for k in (row[at["keys"]] or "").split(" ") if k)
    assert sorted(got.queues) == sorted(want)
    for key, w in want.items():
        agg = got.queues[key]
        assert (agg.messages, agg.bytes, agg.first, agg.last) == (w["messages"], w["bytes"], min(w["times"]),
                                                                 max(w["times"])), key
        assert agg.sizes == w["sizes"] and agg.hours == w["hours"], key
        assert agg.distinct_keys() == len(w["keys"]), key
    counts = [part_rows.count_entries(p) for p in parts]
    store = got.stores[name]
    assert (store.records, store.blanks, store.problems, store.damaged_records) == (
        sum(c.records for c in counts), sum(c.blanks for c in counts), sum(c.problems for c in counts),
        sum(c.damaged_records for c in counts))


def test_stats_of_crafted_records(crafted):
    from mqtool.pipeline import storestats

    parts = plan.commitlog_parts(plan.find_stores([crafted]))
    got = storestats.merge(storestats.scan(p) for p in parts)
    ok = [r for p in parts for r in part_rows.rows(p) if r[-2]]
    assert sum(a.messages for a in got.queues.values()) == len(ok) < len(CASES)
    (store,) = got.stores.values()
    assert store.damaged_records == len(CASES) - len(ok)


def test_text_buffers_grow_for_malformed_utf8(tmp_path):
    """Malformed bytes decode to 3 bytes each: many of them overflow the room decode is first given
    (the text as valid UTF-8), and decode_columns decodes again with room for the worst case."""
    cases = []
    for k in range(40):
        junk = bytes([0xFF, 0xC3, 0xE2, 0x82]) * (10 + k)
        fields = {"topic": bad_utf8(b"T" + junk[:60]),
                  "properties": bad_utf8(b"TAGS\x01" + junk + b"\x02KEYS\x01a " + junk + b"\x02UNIQ_KEY\x01" + junk
                                         + b"\x02" + junk + b"\x01" + junk),
                  "sysFlag": 0x30 if k % 3 == 0 else 0}
        if k % 3 == 0:
            fields.update(bornHost="[2001:db8:0:0:0:0:0:1]:61001", storeHost="[fe80:0:0:0:0:0:abcd:12]:10911")
        cases.append(fields)
    root = store_of(tmp_path / "store", cases, 1 << 20)
    assert assert_same_columns(root, False) == 40      # 4 raw bytes of junk decode to 9: more than twice
