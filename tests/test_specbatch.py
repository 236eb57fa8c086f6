"""`mqtool append` from JSON lines: plain lines go straight into columns (mqtool/broker/specbatch.py);
the messages must be exactly those of spec.to_message (the reference, checked against the fixtures),
and the command must store what the brokers stored."""

from __future__ import annotations

import base64
import hashlib
import json
import random

import pytest

from mqtool.broker.spec import to_message
from mqtool.broker.specbatch import SpecBatcher, parse_line
from mqtool.engine.batchappend import BatchResults
from mqtool.engine.clock import ManualClock
from mqtool.engine.store import MessageStore
from mqtool.storage.config import StoreConfig

from conftest import fixture_dir


def random_specs(seed: int, count: int) -> list[dict]:
    rng = random.Random(seed)
    names = ["UNIQ_KEY", "TAGS", "KEYS", "WAIT", "CLUSTER", "a", "b%s", "日本", "TRAN_MSG", "x" * 20, "PGROUP"]
    specs = []
    for i in range(count):
        spec = {"topic": rng.choice(["Orders", "Pay_ments", "%RETRY%g", "T" * 130]), "queueId": rng.randrange(8)}
        if rng.random() < 0.7:
            spec["tags"] = rng.choice(["TagA", "Ελλάδα", "a||b", "%s"])
        if rng.random() < 0.7:
            spec["keys"] = rng.choice([f"k{i}", f"k{i} j{i}", [f"k{i}"], [f"k{i}", "", "z"]])
        if rng.random() < 0.6:
            spec["properties"] = {name: rng.choice(["", "v", f"{rng.getrandbits(64):016X}", "ü%"])
                                  for name in rng.sample(names, rng.randrange(0, 5))}
        if rng.random() < 0.5:
            spec["bornHost"] = rng.choice(["10.0.0.1:1000", "[2001:db8::42]:61001", "[::ffff:10.1.2.3]:7"])
        if rng.random() < 0.5:
            spec["bornTimestamp"] = 1700000000000 + i
        for field, values in (("flag", [0, -5, 7, (1 << 32) - 1]), ("reconsumeTimes", [0, 2]),
                              ("storeTimestamp", [None, 1795305900000 + i])):
            if rng.random() < 0.2:
                spec[field] = rng.choice(values)
        body = rng.randbytes(rng.choice([0, 3, 200]))
        if rng.random() < 0.3:
            spec["bodyBase64"] = base64.b64encode(body).decode()
        elif rng.random() < 0.9:
            spec["body"] = rng.choice(["", "hello", "ünïcödé", "x" * 300])
        keys = list(spec)
        rng.shuffle(keys)
        specs.append({k: spec[k] for k in keys})
    return specs


@pytest.mark.parametrize("seed,version,cluster", [(1, "4", "DefaultCluster"), (2, "5", "DefaultCluster"),
                                                  (3, "4", None), (4, "5", "c%1")])
def test_plain_lines_become_the_reference_messages(seed, version, cluster):
    batcher = SpecBatcher(version=version, cluster=cluster, allow_system_topics=False)
    specs = random_specs(seed, 600)
    taken = [i for i, spec in enumerate(specs) if batcher.add(i, json.loads(json.dumps(spec)))]
    assert len(taken) == len(specs)       # every one of these shapes is plain
    numbers, batch = batcher.take()
    assert numbers == taken
    ends = batch.body_len.cumsum().tolist()
    for j, i in enumerate(numbers):
        msg = to_message(specs[i], version=version, cluster=cluster)
        got = dict(topic=batch.topics[j], queue=batch.queue_ids[j], props=batch.properties[j],
                   tags=batch.tags[j], keys=batch.keys[j], uniq=batch.uniq[j], host=batch.born_hosts[j],
                   sys_flag=batch.sys_flags[j], born=batch.born_ts[j],
                   body=batch.body_buf[ends[j] - int(batch.body_len[j]):ends[j]],
                   flag=batch.flags[j] if batch.flags else 0,
                   store_ts=batch.store_ts[j] if batch.store_ts else None,
                   reconsume=batch.reconsume[j] if batch.reconsume else 0)
        want = dict(topic=msg.topic, queue=msg.queue_id, props=msg.properties_string,
                    tags=msg.properties.get("TAGS"), keys=msg.properties.get("KEYS"),
                    uniq=msg.properties.get("UNIQ_KEY"), host=msg.born_host, sys_flag=msg.sys_flag,
                    born=msg.born_timestamp, body=msg.body, flag=msg.flag, store_ts=msg.store_timestamp,
                    reconsume=msg.reconsume_times)
        assert got == want, specs[i]


@pytest.mark.parametrize("spec", [
    {"topic": "T", "delayLevel": 3}, {"topic": "T", "transaction": "half"}, {"topic": "T", "compress": "ZLIB"},
    {"topic": "T", "properties": {"DELAY": "2"}}, {"topic": "T", "tags": ""}, {"topic": "T", "keys": []},
    {"topic": "T", "tags": None}, {"topic": "T", "properties": {"a": 1}}, {"topic": "T", "queueId": -1},
    {"topic": "T", "flag": True}, {"topic": "T", "bornHost": "nohost"}, {"topic": "SCHEDULE_TOPIC_XXXX"},
    {"topic": "T", "body": "a", "bodyBase64": "YQ=="}, {"topic": "T", "bodyBase64": "!"}, {"topic": 5},
    {"topic": "T", "properties": None}, {"topic": "T", "cluster": None}, [1], {"topic": "T", "bogus": 1},
])
def test_other_lines_are_left_to_the_reference_path(spec):
    assert not SpecBatcher(version="4", cluster="DefaultCluster", allow_system_topics=False).add(1, spec)


def test_lines_orjson_reads_differently_get_the_reference_errors():
    batcher = SpecBatcher(version="4", cluster="DefaultCluster", allow_system_topics=False)
    raw = b'{"topic":"T","bornTimestamp":99999999999999999999999}\n'
    spec, plain = parse_line(raw, 3)
    assert plain and not batcher.add(3, spec)
    with pytest.raises(Exception) as err:
        batcher.message(3, spec, raw, {})
    assert "not 99999999999999999999999" in str(err.value)        # the json module's reading
    assert parse_line(b"   \n", 4) == (None, False)
    spec, plain = parse_line(b'{"topic":"T","tags":"\\ud800"}', 5)  # a lone surrogate: json reads it
    assert not plain and spec["tags"] == "\ud800"


def fixture_store_args(name):
    sizes = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=6000",
             "--set", "maxHashSlotNum=100", "--set", "maxIndexNum=400"]
    return sizes + (["--set", "storeFormat=5"] if name == "basic5" else [])


@pytest.mark.parametrize("name", ["basic", "features", "multifile", "basic5"])
@pytest.mark.parametrize("batch", ["4096", "3"])
def test_the_command_stores_what_the_broker_stored(name, batch, tmp_path, run_cli):
    """The fixture's lines with the broker's store times, through `mqtool append --input`: the same
    put results and byte-identical commitlog and consume queue files."""
    writes = {w["index"]: w for w in map(json.loads, (fixture_dir(name) / "write.jsonl").open())
              if w.get("type") == "put"}
    lines = []
    for i, line in enumerate((fixture_dir(name) / "spec.jsonl").open()):
        spec = json.loads(line)
        spec["storeTimestamp"] = writes[i].get("storeTimestamp") or 1795305900000
        lines.append(json.dumps(spec, ensure_ascii=False))
    spec_file = tmp_path / "in.jsonl"
    spec_file.write_text("\n".join(lines) + "\n")
    root = tmp_path / "store"
    result = run_cli("append", root, *fixture_store_args(name), "--input", spec_file, "--allow-system-topics",
                     "--json", "--batch", batch)
    puts = result.json_lines()
    assert [p["line"] for p in puts] == list(range(1, len(lines) + 1))
    for put in puts:
        theirs = writes[put["line"] - 1]
        assert put["status"] == theirs["status"]
        if put["status"] == "PUT_OK":
            assert (put["wroteOffset"], put["wroteBytes"], put["queueOffset"], put["msgId"], put["topic"],
                    put["queueId"]) == (theirs["wroteOffset"], theirs["wroteBytes"], theirs["queueOffset"],
                                        theirs["msgId"], theirs["storedTopic"], theirs["storedQueueId"])
    assert result.code == (1 if any(p["status"] != "PUT_OK" for p in puts) else 0)
    tree = {}
    for line in (fixture_dir(name) / "tree.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            _, sha, rel = line.split("\t")
            if rel.startswith(("commitlog/", "consumequeue/")):
                tree[rel] = sha
    for rel, sha in tree.items():
        assert hashlib.sha256((root / rel).read_bytes()).hexdigest() == sha, rel


def test_json_lines_of_a_compiled_batch_are_the_put_results(tmp_path):
    batcher = SpecBatcher(version="5", cluster="DefaultCluster", allow_system_topics=False)
    for i, spec in enumerate(random_specs(7, 300), start=1):
        assert batcher.add(i, spec)
    numbers, batch = batcher.take()
    config = StoreConfig(storePathRootDir=str(tmp_path / "s"), mappedFileSizeCommitLog=1 << 20, storeFormat="5")
    with MessageStore(config, clock=ManualClock(1795305900000)) as store:
        results = store.put_batch(batch)
        assert isinstance(results, BatchResults)   # the compiled path took it
        lines = bytes(results.json_lines(numbers)).decode().splitlines()
        assert len(lines) == len(results) == 300
        for number, line, i in zip(numbers, lines, range(len(results))):
            assert line == json.dumps({"type": "put", "line": number, **results[i].to_json()}, ensure_ascii=False,
                                      separators=(",", ":"))


def test_many_puts_are_summed_up_not_listed(tmp_path, run_cli):
    lines = [{"topic": "T", "queueId": i % 2, "body": "x"} for i in range(50)]
    lines[30] = {"topic": "T" * 128, "transaction": "prepared", "body": "x"}   # refused by the store (4.x)
    spec_file = tmp_path / "in.jsonl"
    spec_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = run_cli("append", tmp_path / "s", "--input", spec_file)
    assert result.code == 1
    text = " ".join(result.out.split())
    assert "50 puts from input lines 1-50: PUT_OK 49, MESSAGE_ILLEGAL 1" in text
    assert "commitlog offsets of the first and last stored message: 0 .." in text
    assert "not stored" in text and text.count("PUT_OK") == 1 and "│ 31 │ MESSAGE_ILLEGAL" in result.out
    small = run_cli("append", tmp_path / "s", "--input", spec_file, "--batch", "5")   # the same in small batches
    assert small.code == 1 and "50 puts from input lines 1-50: PUT_OK 49, MESSAGE_ILLEGAL 1" in small.out
    spec_file.write_text("".join(json.dumps(line) + "\n" for line in lines[:5]))   # a screenful: a table
    table = run_cli("append", tmp_path / "s", "--input", spec_file)
    assert table.code == 0 and len([line for line in table.out.splitlines() if "│ PUT_OK" in line]) == 5
