"""`mqtool append`'s compiled reading of JSON lines (mqtool/broker/specblock.py,
mqtool/native/specscan.py): a fast line must become exactly spec.to_message's message (the
reference), every line it cannot take must be left to the reference path, and the command
must store the same bytes as the reference path, whatever the mix of lines."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from test_fastappend import digest

from mqtool.broker.spec import to_message
from mqtool.broker.specbatch import SpecBatcher
from mqtool.broker.specblock import FAST, SLOW, BlockScanner
from mqtool.engine import store as store_module
from mqtool.engine.clock import ManualClock
from mqtool.engine.store import MessageStore
from mqtool.formats.javastr import index_key_hash, java_hash
from mqtool.storage.config import StoreConfig


def fast_specs(seed: int, count: int) -> list[dict]:
    """Specs of the shapes the compiled reader takes (ASCII text without escapes)."""
    rng = random.Random(seed)
    specs = []
    for i in range(count):
        spec = {"topic": rng.choice(["Orders", "Pay_ments", "%RETRY%g", "T" * 130]), "queueId": rng.randrange(8)}
        if rng.random() < 0.7:
            spec["tags"] = rng.choice(["TagA", "a||b", "%s", "x y"])
        if rng.random() < 0.7:
            spec["keys"] = rng.choice([f"k{i}", f"k{i} j{i}", f" k{i}  z ", "%d"])
        if rng.random() < 0.5:
            spec["bornHost"] = rng.choice(["10.0.0.1:1000", "[2001:db8::42]:61001", "[::ffff:10.1.2.3]:7"])
        if rng.random() < 0.5:
            spec["bornTimestamp"] = rng.choice([1700000000000 + i, -5, 0])
        for field, values in (("flag", [0, -5, 7, (1 << 32) - 1, -(1 << 31)]), ("reconsumeTimes", [0, 2, -1]),
                              ("storeTimestamp", [1795305900000 + i, -3])):
            if rng.random() < 0.3:
                spec[field] = rng.choice(values)
        if rng.random() < 0.9:
            spec["body"] = rng.choice(["", "hello", "x" * 300, "{\"}"[0:1] + "a:b,c}"])
        keys = list(spec)
        rng.shuffle(keys)
        specs.append({k: spec[k] for k in keys})
    return specs


def render(spec: dict, rng: random.Random) -> str:
    """A spec as a JSON line, with JSON's optional spaces here and there."""
    space = lambda: rng.choice(["", " ", "\t", "  "])  # noqa: E731
    fields = [f'{space()}{json.dumps(k)}{space()}:{space()}{json.dumps(v)}{space()}' for k, v in spec.items()]
    return space() + "{" + ",".join(fields) + "}" + space() + rng.choice(["", "\r"])


def scan(lines: list[str], version="4", cluster="DefaultCluster", allow_system_topics=False):
    batcher = SpecBatcher(version=version, cluster=cluster, allow_system_topics=allow_system_topics)
    scanner = BlockScanner(batcher, 1 << 20)
    data = np.frombuffer("".join(line + "\n" for line in lines).encode("utf-8"), dtype=np.uint8)
    return scanner, scanner.scan(data, 1)


@pytest.mark.parametrize("seed,version,cluster", [(1, "4", "DefaultCluster"), (2, "5", "DefaultCluster"),
                                                  (3, "4", None), (4, "5", "c%1ü")])
def test_fast_lines_become_the_reference_messages(seed, version, cluster):
    rng = random.Random(seed)
    specs = fast_specs(seed, 500)
    scanner, block = scan([render(s, rng) for s in specs], version, cluster)
    assert (block.status == FAST).all()
    batch = scanner.batch(block, 0, len(specs))
    msgs = batch.to_messages()
    owners = batch.key_owner.tolist()
    for i, (spec, msg) in enumerate(zip(specs, msgs)):
        want = to_message(spec, version=version, cluster=cluster)
        got = (msg.topic, msg.queue_id, msg.body, msg.properties_string, msg.flag, msg.sys_flag, msg.born_timestamp,
               msg.born_host, msg.reconsume_times, msg.store_timestamp)
        assert got == (want.topic, want.queue_id, want.body, want.properties_string, want.flag, want.sys_flag,
                       want.born_timestamp, want.born_host, want.reconsume_times, want.store_timestamp), spec
        # the consume queue's tags code and the index keys: String.hashCode over topic#key, by hand
        assert batch.tags_code[i] == (java_hash(spec["tags"]) if "tags" in spec else 0)
        keys = [k for k in spec.get("keys", "").split(" ") if k]
        assert [int(h) for h, o in zip(batch.key_hash, owners) if o == i] == [
            index_key_hash(f"{spec['topic']}#{k}") for k in keys]


@pytest.mark.parametrize("line", [
    '{"topic":"T","body":"a\\"b"}', '{"topic":"T","body":"\u00fc"}', '{"topic":"T","tags":"\\u0041"}',
    '{"topic":"T","body":"a\tb"}', '{"topic":"T","queueId":1.0}', '{"topic":"T","queueId":1e2}',
    '{"topic":"T","queueId":01}', '{"topic":"T","queueId":-1}', '{"topic":"T","queueId":2147483648}',
    '{"topic":"T","bornTimestamp":1234567890123456789}', '{"topic":"T","flag":4294967296}',
    '{"topic":"T","storeTimestamp":null}', '{"topic":"T","keys":["a"]}', '{"topic":"T","tags":""}',
    '{"topic":"T","keys":""}', '{"topic":"T","topic":"U"}', '{"topic":"T","delayLevel":1}',
    '{"topic":"T","properties":{}}', '{"topic":"T","expect":"PUT_OK"}', '{"queueId":1}', '{"topic":1}',
    '{"topic":"T"} x', '{"topic":"T",}', '{"topic":"T"', '["topic"]', '{"topic":"T","body":true}',
    '{"topic":"SCHEDULE_TOPIC_XXXX"}', '{"topic":"T","bornHost":"nohost"}', '{"topic":"T" "body":"x"}',
    '{"topic":"T","queueId":-}', '\x0c{"topic":"T"}',
])
def test_other_lines_are_left_to_the_reference_path(line):
    _, block = scan([line])
    assert block.status.tolist() == [SLOW], line


def test_blank_lines_and_system_topics_when_allowed():
    _, block = scan(["", " \t\r", '{"topic":"SCHEDULE_TOPIC_XXXX"}'], allow_system_topics=True)
    assert block.status.tolist() == [2, 2, FAST]


def mixed_lines(seed: int, count: int) -> list[str]:
    """Fast lines in runs long and short, between lines only the reference path takes
    (escapes, non-ASCII, properties, delays, transactions, compression, refused topics)."""
    rng = random.Random(seed)
    fast = fast_specs(seed, count)
    lines = []
    for i, spec in enumerate(fast):
        spec["storeTimestamp"] = 1795305900000 + i     # the store's clock plays no part
        if rng.random() < (0.3 if (i // 40) % 2 else 0.02):
            other = dict(spec)
            other.update(rng.choice([{"body": "ünï\"cödé\n"}, {"properties": {"a": "b", "UNIQ_KEY": "U1"}},
                                     {"delayLevel": 2}, {"transaction": "prepared"}, {"compress": "ZLIB"},
                                     {"keys": ["a", "b"]}, {"tags": "日本"}, {"topic": "T" * 260}]))
            lines.append(json.dumps(other, ensure_ascii=rng.random() < 0.5))
        else:
            lines.append(render(spec, rng))
        if rng.random() < 0.01:
            lines.append(" ")
    return lines


def store_args(five: bool) -> list[str]:
    return ["--set", "mappedFileSizeCommitLog=20000", "--set", "mappedFileSizeConsumeQueue=800",
            "--set", "maxHashSlotNum=16", "--set", "maxIndexNum=64"] + (["--set", "storeFormat=5"] if five else [])


@pytest.mark.parametrize("seed,five,batch", [(1, False, "4096"), (2, True, "37"), (3, False, "1")])
def test_the_command_stores_what_the_reference_path_stores(seed, five, batch, tmp_path, run_cli, monkeypatch):
    lines = mixed_lines(seed, 600)
    spec_file = tmp_path / "in.jsonl"
    spec_file.write_text("\n".join(lines))          # the last line without its newline
    result = run_cli("append", tmp_path / "fast", *store_args(five), "--input", spec_file, "--json",
                     "--batch", batch)
    puts = result.json_lines()
    # the reference: each line through spec.to_message and the store's reference encoder
    config = StoreConfig(storePathRootDir=str(tmp_path / "slow"), mappedFileSizeCommitLog=20000,
                         mappedFileSizeConsumeQueue=800, maxHashSlotNum=16, maxIndexNum=64,
                         storeFormat="5" if five else "4")
    monkeypatch.setattr(store_module, "FAST_BATCH", 10**9)
    numbered = [(n, json.loads(line)) for n, line in enumerate(lines, start=1) if line.strip()]
    with MessageStore(config, clock=ManualClock(1795305900000)) as store:
        msgs = [to_message(spec, line=n, version="5" if five else "4") for n, spec in numbered]
        results = store.put_many(msgs)
    want = [{"type": "put", "line": n, **r.to_json()} for (n, _), r in zip(numbered, results)]
    assert puts == want
    assert result.code == (1 if any(r.status != "PUT_OK" for r in results) else 0)
    fast_files, slow_files = files(tmp_path / "fast"), files(tmp_path / "slow")
    assert len([f for f in fast_files if f.startswith("commitlog/")]) > 3
    assert fast_files == slow_files


def files(root) -> dict:
    """The digests of the commitlog, consume queue and index files; index files (named by
    the wall clock's time when made) by their rank."""
    found = digest(root)
    index = sorted(name for name in found if name.startswith("index/"))
    return {**{k: v for k, v in found.items() if not k.startswith("index/")},
            **{f"index #{rank}": found[name] for rank, name in enumerate(index)}}


def test_lines_across_reads_and_a_line_too_long(tmp_path, run_cli, monkeypatch):
    """Lines longer than a read (carried over from read to read) are read whole; a line longer
    than MAX_LINE is refused with its number, after the batches before it were stored."""
    from mqtool.broker import ingest

    monkeypatch.setattr(ingest, "CHUNK", 64)
    monkeypatch.setattr(ingest, "MAX_LINE", 1000)
    good = [json.dumps({"topic": "T", "body": "x" * size}) for size in (10, 500, 900, 3)]
    spec_file = tmp_path / "in.jsonl"
    spec_file.write_text("\n".join(good) + "\n")
    result = run_cli("append", tmp_path / "s", "--input", spec_file, "--json")
    puts = result.json_lines()
    assert result.code == 0 and [p["line"] for p in puts] == [1, 2, 3, 4]
    assert [p["wroteBytes"] - puts[0]["wroteBytes"] for p in puts] == [0, 490, 890, -7]   # the bodies' sizes
    spec_file.write_text("\n".join(good + ['{"topic":"T","body":"' + "y" * 2000]))   # no newline at the end
    result = run_cli("append", tmp_path / "s2", "--input", spec_file, "--batch", "3")
    assert result.code == 2 and "input line 5: longer than 1,000 bytes" in result.err
    assert "input lines 1-3 were stored" in result.err


def test_every_special_byte_in_a_body_is_seen_wherever_it_lies():
    """The scan tests eight bytes at a time: a special byte at any offset must still send the
    line to the reference path, and a body without one must stay fast."""
    lines, want = [], []
    for length in range(0, 41):
        for prefix in range(0, 9):   # the body's start at every offset from an 8-byte boundary
            head = '{"topic":"T",' + " " * prefix + '"body":"'
            lines.append(head + "a" * length + '"}')
            want.append(FAST)
            for at in range(length):
                for special in ('\\"', "\\\\", "\x01", "\x7f", "\u00e9", "\x1f"):
                    lines.append(head + "a" * at + special + "a" * (length - at - 1) + '"}')
                    want.append(SLOW)
    _, block = scan(lines)
    assert block.status.tolist() == want


@pytest.mark.parametrize("bad,message", [({"topic": "SCHEDULE_TOPIC_XXXX"}, "input line 41: sending to topic"),
                                         ({"topic": "T", "bornHost": "nohost"}, "input line 41: ")])
def test_a_bad_line_among_fast_ones(bad, message, tmp_path, run_cli):
    """A line the scan leaves to the reference path because of its topic or host sits in the
    same block as fast lines (and in its tables); the fast lines before it are stored."""
    lines = [json.dumps({"topic": "T", "bornHost": "10.0.0.1:5", "body": str(i)}) for i in range(60)]
    lines[40] = json.dumps(bad)
    spec_file = tmp_path / "in.jsonl"
    spec_file.write_text("\n".join(lines) + "\n")
    result = run_cli("append", tmp_path / "s", "--input", spec_file, "--batch", "20")
    assert result.code == 2 and message in result.err, result.err
    assert "input lines 1-40 were stored (40 puts)" in result.err


@pytest.mark.parametrize("count", [1, 20])     # one line: the per-line path; 20: a run of fast lines
@pytest.mark.parametrize("field,value,message", [
    ("bornHost", "", "bornHost must be host:port, not ''"),
    ("bornHost", "  ", "bornHost must be host:port"),
    ("flag", 1.5, "flag must be a whole number"),
    ("flag", "7", "flag must be a whole number"),
    ("flag", True, "flag must be a whole number"),
    ("flag", 1 << 32, "flag must be a whole number"),
])
def test_a_bad_first_batch_stores_nothing_and_names_the_line(count, field, value, message, tmp_path, run_cli):
    """Every line's numbers and host are checked before the store is touched (exit 2, not an
    internal error half-way through the write); an empty bornHost is not a host."""
    spec_file = tmp_path / "in.jsonl"
    spec_file.write_text("".join(json.dumps({"topic": "T", "body": "x", field: value}) + "\n" for _ in range(count)))
    result = run_cli("append", tmp_path / "s", "--input", spec_file)
    assert result.code == 2 and f"input line 1: {message}" in result.err, result.err
    assert not (tmp_path / "s").exists()


def test_the_largest_unsigned_flag_is_stored_as_javas_int(tmp_path, run_cli):
    spec_file = tmp_path / "in.jsonl"
    spec_file.write_text(json.dumps({"topic": "T", "body": "x", "flag": (1 << 32) - 1}) + "\n")
    assert run_cli("append", tmp_path / "s", "--input", spec_file).code == 0
    rows = [r for r in run_cli("dump", tmp_path / "s", "commitlog", "--json").json_lines() if r["type"] == "message"]
    assert [r["flag"] for r in rows] == [-1]


def test_an_empty_born_host_option_is_refused(tmp_path, run_cli):
    result = run_cli("append", tmp_path / "s", "--topic", "T", "--body", "x", "--born-host", "")
    assert result.code == 2 and "bornHost" in result.err
    assert not (tmp_path / "s").exists()
