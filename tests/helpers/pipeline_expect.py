"""What the pipeline tests expect, computed straight from the fixtures' expected-read.jsonl and from
stores written by mqtool's engine (shared by test_spark_pipeline.py and test_pipeline_local.py)."""

from __future__ import annotations

import base64
import json

from mqtool.broker import spec as specs
from mqtool.engine.clock import ManualClock
from mqtool.engine.store import MessageStore
from mqtool.storage.config import StoreConfig

from conftest import expected_read, fixture_dir

HOUR = 3_600_000
# the fields the broker reports for every record, compared one to one with the rows
BROKER_FIELDS = [
    "topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "bodyCRCRecomputed",
    "flag", "sysFlag", "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
    "preparedTransactionOffset", "properties", "propertiesString", "bodyLength", "msgId", "uniqKey",
]


def broker_records(name) -> dict[int, dict]:
    """commitlog offset -> the broker's view of that record: its `message` fields with the body
    (taken from the matching `message` line when the record line leaves it out) and `dispatch`."""
    records, bodies = {}, {}
    for line in expected_read(name):
        if line["type"] == "commitlog_record":
            records[line["offset"]] = line
        elif line["type"] == "message":
            bodies[line["commitLogOffset"]] = line["body"]
    out = {}
    for offset, rec in records.items():
        msg = dict(rec["message"])
        msg.setdefault("body", bodies.get(offset))
        msg["dispatch"] = rec["dispatch"]
        out[offset] = msg
    return out


def assert_row_is_broker_record(row: dict, expected: dict) -> None:
    offset = expected["commitLogOffset"]
    for name in BROKER_FIELDS:
        assert row[name] == expected[name], (offset, name, row[name], expected[name])
    assert row["tagsCode"] == expected["dispatch"]["tagsCode"], offset
    assert (row["keys"] or "") == (expected["dispatch"]["keys"] or ""), offset
    assert row["tags"] == expected["properties"].get("TAGS"), offset
    if "body" in row:
        assert expected["body"] is not None, offset
        assert base64.b64encode(bytes(row["body"])).decode() == expected["body"], offset


def size_bucket(size: int) -> int:
    bucket = 64
    while bucket < size:
        bucket *= 2
    return bucket


def stats_from_records(broker: str, records) -> dict:
    """`stats --json` queue lines, keyed by (broker, topic, queueId), from plain records
    (dicts with topic, queueId, storeSize, storeTimestamp and keys)."""
    groups: dict = {}
    for r in records:
        g = groups.setdefault((broker, r["topic"], r["queueId"]),
                              {"messages": 0, "bytes": 0, "times": [], "sizes": {}, "keys": set(), "hours": {}, "hourBytes": {}})
        g["messages"] += 1
        g["bytes"] += r["storeSize"]
        g["times"].append(r["storeTimestamp"])
        bucket = str(size_bucket(r["storeSize"]))
        g["sizes"][bucket] = g["sizes"].get(bucket, 0) + 1
        g["keys"].update(k for k in (r["keys"] or "").split(" ") if k)
        hour = r["storeTimestamp"] // HOUR
        g["hours"][hour] = g["hours"].get(hour, 0) + 1
        g["hourBytes"][hour] = g["hourBytes"].get(hour, 0) + r["storeSize"]
    return {key: {"messages": g["messages"], "bytes": g["bytes"], "firstStoreTimestamp": min(g["times"]),
                  "lastStoreTimestamp": max(g["times"]), "sizeHistogram": g["sizes"],
                  "distinctKeys": len(g["keys"]), "hours": g["hours"],
                  "hourBytes": g["hourBytes"]}
            for key, g in groups.items()}


def expected_stats(name: str, broker: str) -> dict:
    records = [{"topic": r["topic"], "queueId": r["queueId"], "storeSize": r["storeSize"],
                "storeTimestamp": r["storeTimestamp"], "keys": r["dispatch"]["keys"]}
               for r in broker_records(name).values()]
    return stats_from_records(broker, records)


def assert_stats_lines(lines: list[dict], expected: dict) -> None:
    queues = {(l["broker"], l["topic"], l["queueId"]): l for l in lines if l["type"] == "queue"}
    assert sorted(queues) == sorted(expected)
    for key, want in expected.items():
        got = queues[key]
        for field in ("messages", "bytes", "firstStoreTimestamp", "lastStoreTimestamp", "sizeHistogram",
                      "distinctKeys"):
            assert got[field] == want[field], (key, field)
        assert sorted(got["messagesPerHour"].values()) == sorted(want["hours"].values()), key
        assert len(got["messagesPerHour"]) == len(want["hours"]), key
        assert sorted(got["bytesPerHour"].values()) == sorted(want["hourBytes"].values()), key
        assert list(got["bytesPerHour"]) == list(got["messagesPerHour"]), key
    total = lines[-1]
    assert total["type"] == "total"
    assert total["messages"] == sum(w["messages"] for w in expected.values())
    assert total["bytes"] == sum(w["bytes"] for w in expected.values())


# ------------------------------------------------------------ a store written by mqtool's engine
ENGINE_TOPICS = ["Orders", "Payments", "%RETRY%group-a"]
ENGINE_START = 1_795_300_000_000


def engine_specs(count: int = 900) -> list[dict]:
    """Messages over three topics, bodies of 10 B to ~6 KiB, store times spread over 3 hours."""
    out = []
    for i in range(count):
        topic = ENGINE_TOPICS[i % 3]
        out.append({"topic": topic, "queueId": i % 4 if topic != "%RETRY%group-a" else 0,
                    "tags": f"tag{i % 5}", "keys": f"k{i % 97} shared",
                    "bodyPattern": {"text": f"message {i} ", "size": 10 + (i * 37) % 6000},
                    "bornTimestamp": 1_700_000_000_000 + i,
                    "storeTimestamp": ENGINE_START + i * (3 * HOUR // count),
                    "properties": {"UNIQ_KEY": f"UNIQ{i:08d}"}})
    return out


def write_engine_store(root) -> list[tuple[dict, object]]:
    """Put engine_specs() into a new store of 64 KiB commitlog files; (spec, PutResult) per message."""
    config = StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=65536,
                         mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400)
    store = MessageStore(config, clock=ManualClock(ENGINE_START)).open()
    results = []
    try:
        for i, spec in enumerate(engine_specs()):
            result = store.put(specs.to_message(spec, line=i, allow_system_topics=True))
            assert result.ok, result
            results.append((spec, result))
    finally:
        store.close()
    return results


def fixture_change(name: str) -> dict:
    return json.loads((fixture_dir(name) / "corruption.json").read_text())["changes"][0]


def fixture_summary(name: str) -> dict:
    return json.loads((fixture_dir(name) / "summary.json").read_text())
