"""lookup-by-key, lookup-by-id and get against what real RocketMQ 4.9.8 and 5.3.3 answered
for the same stores (expected-query.jsonl, the index_query and message lines of
expected-read.jsonl)."""

from __future__ import annotations

import json
import shutil
import struct

import pytest
from test_info_and_layout import age_times, snapshot

from mqtool.forensics.lookup import StoreReader
from mqtool.formats import properties as props
from mqtool.formats.index import ENTRY_STRUCT, entry_position, index_key
from mqtool.formats.javastr import index_key_hash
from mqtool.formats.msgid import encode_offset_msgid
from mqtool.storage.indexfile import IndexFile
from mqtool.storage.settings import open_layout

from conftest import DAMAGED, DLEDGER, MIXED, UNDAMAGED, expected_read, fixture_dir, load_jsonl

WITH_QUERIES = ["basic", "features", "multifile", "basic5", "batchcq5", "lmq5", "cqext5"] + [n for n in DLEDGER if n not in MIXED]
FIELDS = [
    "topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "bodyCRCRecomputed",
    "flag", "sysFlag", "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
    "preparedTransactionOffset", "properties", "propertiesString", "bodyLength", "msgId", "uniqKey",
]


def holds_key(message: dict, topic: str, key: str) -> bool:
    """The re-check, computed from the broker's own view of the record: is it really a message
    of this topic with this key (not a hash collision)?"""
    properties = message["properties"]
    return message["topic"] == topic and (
        properties.get("UNIQ_KEY") == key or key in props.split_keys(properties.get("KEYS")))


def queries(name):
    """(query line, the broker's query_message lines) for each query of expected-query.jsonl."""
    result = []
    node = name.rpartition("-")[2] if name.startswith("dledger3") else None   # one file for the group's nodes
    for line in load_jsonl(fixture_dir(name) / "expected-query.jsonl"):
        if line.get("queriedNode") != node:
            continue
        if line["type"] == "query":
            result.append((line, []))
        else:
            result[-1][1].append(line)
    return result


def records(name) -> dict[int, dict]:
    """commitlog offset -> the broker's decoded record, with the body from its message line."""
    lines = expected_read(name)
    bodies = {l["commitLogOffset"]: l for l in lines if l["type"] == "message"}
    result = {}
    for line in lines:
        if line["type"] == "commitlog_record":
            message = dict(line["message"])
            if line["offset"] in bodies:
                for field in ("body", "bodyDecompressed"):
                    if field in bodies[line["offset"]]:
                        message[field] = bodies[line["offset"]][field]
            result[line["offset"]] = message
    return result


def assert_same_message(mine: dict, theirs: dict) -> None:
    for field in FIELDS:
        assert mine[field] == theirs[field], (theirs["commitLogOffset"], field)
    if "body" in theirs:
        assert mine["body"] == theirs["body"], theirs["commitLogOffset"]
        assert mine.get("bodyDecompressed") == theirs.get("bodyDecompressed")
    assert mine["ok"] is True


def split(result):
    lines = result.json_lines()
    assert lines[-1]["type"] == "summary"
    return [l for l in lines if l["type"] == "message"], lines[-1]


def reader(store) -> StoreReader:
    return StoreReader(open_layout(str(store), None, ()))


# ------------------------------------------------------------------ lookup-by-key

@pytest.mark.parametrize("name", WITH_QUERIES)
def test_lookup_by_key_returns_what_query_message_returned(name, extracted, run_cli):
    store = extracted(name)
    for query, answer in queries(name):
        result = run_cli("lookup-by-key", store, "--topic", query["topic"], query["key"], "--json")
        assert result.code == 0, result.err
        messages, summary = split(result)
        theirs = {m["commitLogOffset"]: m for m in answer}
        real = sorted(o for o, m in theirs.items() if holds_key(m, query["topic"], query["key"]))
        assert [m["commitLogOffset"] for m in messages] == real, query["indexKey"]
        for mine in messages:
            assert_same_message(mine, theirs[mine["commitLogOffset"]])
            assert mine["matchedKey"] == query["key"]
        assert summary["found"] == len(real)
        assert summary["hits"] == len(answer) == query["count"]
        assert summary["dropped"] == len(theirs) - len(real)
        assert summary["duplicates"] == len(answer) - len(theirs)
        assert summary["problems"] == 0
        if summary["dropped"]:
            assert "hash collision" in result.err


def test_collisions_and_repeated_keys_in_the_features_store(extracted, run_cli):
    """Ωa and ΪB share a hash, so the index answers both for either; `twice` is indexed twice."""
    store = extracted("features")
    for key, other in (("Ωa", "ΪB"), ("ΪB", "Ωa")):
        messages, summary = split(run_cli("lookup-by-key", store, "--topic", "GlobalOrders", key, "--json"))
        assert [m["keys"] for m in messages] == [key]
        assert (summary["hits"], summary["dropped"]) == (2, 1)
    messages, summary = split(run_cli("lookup-by-key", store, "--topic", "GlobalOrders", "twice", "--json"))
    assert len(messages) == 1 and summary["duplicates"] == 1


@pytest.mark.parametrize("name", UNDAMAGED + DLEDGER)
def test_every_index_query_of_the_broker_is_answered(name, extracted, run_cli):
    """All keys of all records (the broker's index_query lines), in-process with one reader,
    and a sample through the command."""
    store = extracted(name)
    by_offset = records(name)
    asked = [l for l in expected_read(name) if l["type"] == "index_query"]
    assert asked
    with reader(store) as r:
        for q in asked:
            result = r.by_key(q["topic"], q["key"])
            expected = sorted({o for o in q["commitLogOffsets"] if holds_key(by_offset[o], q["topic"], q["key"])})
            assert [m.record.offset for m in result.messages] == expected, q["indexKey"]
            assert not result.problems
    for q in asked[::max(1, len(asked) // 20)]:
        messages, _ = split(run_cli("lookup-by-key", store, "--topic", q["topic"], q["key"], "--json", "--no-body"))
        assert [m["commitLogOffset"] for m in messages] == \
            sorted({o for o in q["commitLogOffsets"] if holds_key(by_offset[o], q["topic"], q["key"])})


def test_duplicates_left_by_abnormal_recovery_are_listed_once(store_copy, run_cli):
    """The broker's abnormal recovery of `crash` indexes offset 2802723 twice; mqtool's engine
    recovers the same way, and the lookup lists that message once."""
    from mqtool.engine.store import MessageStore
    from mqtool.storage.config import StoreConfig

    root = store_copy("crash")
    MessageStore(StoreConfig(storePathRootDir=str(root), mappedFileSizeCommitLog=65536,
                             mappedFileSizeConsumeQueue=6000, maxHashSlotNum=100, maxIndexNum=400)).open().close()
    doubled = [l for l in expected_read("crash")
               if l["type"] == "index_query" and len(l["commitLogOffsets"]) > len(set(l["commitLogOffsets"]))]
    assert doubled
    for q in doubled:
        messages, summary = split(run_cli("lookup-by-key", root, "--topic", q["topic"], q["key"], "--json"))
        assert [m["commitLogOffset"] for m in messages] == sorted(set(q["commitLogOffsets"]))
        assert summary["hits"] == len(q["commitLogOffsets"])
        assert summary["duplicates"] == len(q["commitLogOffsets"]) - len(set(q["commitLogOffsets"]))


@pytest.mark.parametrize("name", ["basic", "features", "basic5"])
def test_scan_finds_what_the_index_finds(name, extracted, run_cli):
    store = extracted(name)
    asked = {(q["topic"], q["key"]) for q, _ in queries(name)}
    asked |= {(l["topic"], l["key"]) for l in expected_read(name) if l["type"] == "index_query"}
    for topic, key in sorted(asked):
        by_index, s1 = split(run_cli("lookup-by-key", store, "--topic", topic, key, "--json"))
        by_scan, s2 = split(run_cli("lookup-by-key", store, "--topic", topic, key, "--json", "--scan"))
        assert by_scan == by_index, (topic, key)
        assert (s1["source"], s2["source"], s2["found"], s2["problems"]) == ("index", "scan", s1["found"], 0)


def test_scan_on_a_store_of_many_files(extracted, run_cli):
    store = extracted("multifile")
    for query, _ in queries("multifile"):
        args = ("lookup-by-key", store, "--topic", query["topic"], query["key"], "--json", "--no-body")
        assert split(run_cli(*args, "--scan"))[0] == split(run_cli(*args))[0]


def test_limit_and_the_time_window(extracted, run_cli):
    store = extracted("basic")
    args = ("lookup-by-key", store, "--topic", "BasicTopic", "user-3", "--json", "--no-body")
    messages, summary = split(run_cli(*args))
    assert len(messages) == 7
    newest = [m["commitLogOffset"] for m in messages][-3:]
    result = run_cli(*args, "--limit", "3")
    assert [m["commitLogOffset"] for m in split(result)[0]] == newest   # the newest hits, as the broker
    assert "--limit 3" in result.err
    assert [m["commitLogOffset"] for m in split(run_cli(*args, "--limit", "3", "--scan"))[0]] == newest
    stored = messages[0]["storeTimestamp"]
    assert len(split(run_cli(*args, "--since", "2026-01-01T00:00:00Z", "--until", str(stored + 3600_000)))[0]) == 7
    for window in (("--until", str(stored - 5000)), ("--since", str(stored + 5000))):
        result = run_cli(*args, *window)
        assert result.code == 0 and split(result)[0] == []
        assert split(run_cli(*args, *window, "--scan"))[0] == []
    assert "maxMsgsNumBatch" in run_cli("lookup-by-key", "--help").out


def test_since_until_and_limit_as_elsewhere_with_the_old_names_still_working(extracted, run_cli):
    """lookup-by-key says --since/--until/--limit as dump, stats and export do (--until exclusive);
    --begin/--end/--max still work, hidden from --help, with a warning."""
    store = extracted("basic")
    args = ("lookup-by-key", store, "--topic", "BasicTopic", "user-3", "--json", "--no-body", "--scan")
    messages = split(run_cli(*args))[0]
    times = sorted({m["storeTimestamp"] for m in messages})
    assert len(times) > 1
    later = [m["commitLogOffset"] for m in messages if m["storeTimestamp"] >= times[1]]
    earlier = [m["commitLogOffset"] for m in messages if m["storeTimestamp"] < times[1]]
    assert [m["commitLogOffset"] for m in split(run_cli(*args, "--since", str(times[1])))[0]] == later
    assert [m["commitLogOffset"] for m in split(run_cli(*args, "--until", str(times[1])))[0]] == earlier
    old = run_cli(*args, "--begin", str(times[1]), "--max", "2")
    assert [m["commitLogOffset"] for m in split(old)[0]] == later[-2:]
    assert "--begin is deprecated" in old.err and "--max is deprecated" in old.err
    inclusive = run_cli(*args, "--end", str(times[1]))       # the old --end kept its meaning: at or before
    assert [m["commitLogOffset"] for m in split(inclusive)[0]] == earlier + [
        m["commitLogOffset"] for m in messages if m["storeTimestamp"] == times[1]]
    shown = run_cli("lookup-by-key", "--help").out
    assert "--since" in shown and "--limit" in shown and "--begin" not in shown and "--max" not in shown
    assert run_cli(*args, "--since", "1", "--begin", "1").code == 2


def test_without_index_files_lookup_says_so_and_scan_works(store_copy, run_cli):
    store = store_copy("basic")
    shutil.rmtree(store / "index")
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3")
    assert result.code == 1
    assert "no index files" in result.err and "--scan" in result.err
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3", "--scan", "--json")
    assert result.code == 0
    assert len(split(result)[0]) == 7


def test_a_damaged_index_file_is_reported(store_copy, run_cli):
    store = store_copy("basic")
    (index,) = (store / "index").iterdir()
    index.write_bytes(index.read_bytes()[:20])
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3", "--json")
    assert result.code == 1
    problems = [l for l in result.json_lines() if l["type"] == "problem"]
    assert [p["kind"] for p in problems] == ["bad-index-file"]
    assert "--scan" in result.err
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3", "--scan", "--json")
    assert result.code == 0 and len(split(result)[0]) == 7


@pytest.mark.parametrize("field, offset, value", [
    ("indexCount", 36, 401),             # more entries than the file holds (maxIndexNum 400)
    ("indexCount", 36, -5),
    ("hashSlotCount", 32, 101),          # more used slots than there are (maxHashSlotNum 100)
    ("beginPhyOffset", 16, 1 << 40),     # after endPhyOffset
])
def test_a_damaged_index_header_is_reported_by_lookup_and_verify(field, offset, value, store_copy, run_cli):
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    data = bytearray(path.read_bytes())
    width = 8 if offset < 32 else 4
    data[offset:offset + width] = value.to_bytes(width, "big", signed=True)
    path.write_bytes(bytes(data))
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3", "--json")
    assert result.code == 1
    problems = [l for l in result.json_lines() if l["type"] == "problem"]
    assert [(p["kind"], p["fileOffset"]) for p in problems] == [("bad-index-header", offset)]
    assert field in problems[0]["message"] and "--scan" in result.err
    verify = run_cli("verify-crc", store, "--json")
    assert verify.code == 1
    assert (offset, field) in {(f["fileOffset"], f["message"].split()[0]) for f in verify.json_lines()
                               if f.get("kind") == "bad-header"}


def outcomes(run_cli, store, topic, key) -> tuple[int, int, int, int]:
    """Exit codes of lookup-by-key, verify-crc and info, and how many messages the lookup found."""
    lookup = run_cli("lookup-by-key", store, "--topic", topic, key, "--json")
    found = len(split(lookup)[0]) if lookup.code in (0, 1) else -1
    return lookup.code, run_cli("verify-crc", store).code, run_cli("info", store).code, found


def test_an_index_file_created_and_never_written_is_no_damage(store_copy, run_cli):
    """A broker that stops right after rolling to a new index file leaves a header that holds
    only where it starts (all zeros in a new store): indexCount 0, no entry."""
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    header = IndexFile(path, 100, 400).header()
    empty = store / "index" / "29991231235959999"
    empty.write_bytes(bytes(path.stat().st_size))
    assert outcomes(run_cli, store, "BasicTopic", "user-3") == (0, 0, 0, 7)
    data = bytearray(empty.read_bytes())     # the times and offsets the full file ended with
    struct.pack_into(">qqqq", data, 0, header.end_timestamp, header.end_timestamp,
                     header.end_phy_offset, header.end_phy_offset)
    empty.write_bytes(bytes(data))
    assert outcomes(run_cli, store, "BasicTopic", "user-3") == (0, 0, 0, 7)


def test_a_zeroed_index_file_that_is_not_the_newest_is_damage(store_copy, run_cli):
    store = store_copy("multifile")
    fifth = sorted((store / "index").iterdir())[4]
    fifth.write_bytes(bytes(fifth.stat().st_size))
    lookup, verify, info, _ = outcomes(run_cli, store, "PaymentTopic", "cust-7")
    assert (lookup, verify, info) == (1, 1, 1)


def test_a_zeroed_header_over_written_entries_is_damage(store_copy, run_cli):
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    data = bytearray(path.read_bytes())
    data[:40] = bytes(40)
    path.write_bytes(bytes(data))
    lookup, verify, info, _ = outcomes(run_cli, store, "BasicTopic", "user-3")
    assert (lookup, verify, info) == (1, 1, 1)


def test_store_times_that_step_back_are_no_header_damage(tmp_path, run_cli):
    """The broker sets endTimestamp to each put's store time: a clock that stepped back
    leaves beginTimestamp after endTimestamp in a sound file."""
    spec = tmp_path / "in.jsonl"
    spec.write_text("\n".join(json.dumps({"topic": "T", "queueId": 0, "keys": "k", "body": "x",
                                          "storeTimestamp": ts}) for ts in (1795300002000, 1795300001000)))
    store = tmp_path / "s"
    assert run_cli("append", store, "--input", spec, "--set", "maxHashSlotNum=100",
                   "--set", "maxIndexNum=400").code == 0
    (path,) = (store / "index").iterdir()
    header = IndexFile(path, 100, 400).header()
    assert header.begin_timestamp > header.end_timestamp
    assert outcomes(run_cli, store, "T", "k") == (0, 0, 0, 2)


def test_an_index_entry_that_points_at_no_record(store_copy, run_cli):
    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    wanted = index_key_hash(index_key("BasicTopic", "order-10"))
    ix = IndexFile(path, 100, 400)
    (entry,) = [e for e in ix.entries() if e.key_hash == wanted]
    ix.close()
    data = bytearray(path.read_bytes())
    ENTRY_STRUCT.pack_into(data, entry_position(100, entry.number), entry.key_hash, entry.phy_offset + 1,
                           entry.time_diff, entry.prev_index)
    path.write_bytes(bytes(data))
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "order-10", "--json")
    assert result.code == 1
    (problem,) = [l for l in result.json_lines() if l["type"] == "problem"]
    assert (problem["kind"], problem["offset"]) == ("not-a-record", entry.phy_offset + 1)
    assert split(result)[1]["problems"] == 1
    # the other keys of the store are unaffected
    assert run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3").code == 0


def test_messages_deleted_with_their_commitlog_file(store_copy, run_cli):
    """A broker deletes old commitlog files before the index and consume queue files that still
    point into them: those answers are counted as expired, not reported as damage."""
    store = store_copy("multifile")
    (store / "commitlog" / "00000000000000000000").unlink()
    gone = [m for m in records("multifile").values() if m["commitLogOffset"] < 65536]
    first = next(m for m in gone if m["properties"].get("KEYS"))
    key = props.split_keys(first["properties"]["KEYS"])[0]
    result = run_cli("lookup-by-key", store, "--topic", first["topic"], key, "--json")
    assert result.code == 0, result.err
    messages, summary = split(result)
    assert first["commitLogOffset"] not in [m["commitLogOffset"] for m in messages]
    assert summary["expired"] >= 1 and summary["problems"] == 0
    assert "deleted" in result.err
    result = run_cli("get", store, "--topic", first["topic"], "--queue", first["queueId"], "--offset", 0,
                     "--count", 50, "--json", "--no-body")
    assert result.code == 0, result.err
    messages, summary = split(result)
    expired = [m for m in gone if (m["topic"], m["queueId"]) == (first["topic"], first["queueId"])]
    assert summary["expired"] == len(expired) and summary["problems"] == 0
    assert [m["queueOffset"] for m in messages] == list(range(len(expired), 50))


def test_stale_index_entries_of_a_damaged_log(extracted, run_cli):
    """flipped-body-byte: the index still points at message 25, whose body CRC fails."""
    result = run_cli("lookup-by-key", extracted("flipped-body-byte"), "--topic", "BasicTopic", "order-25", "--json")
    assert result.code == 1
    (message,) = split(result)[0]
    assert message["ok"] is False and message["problems"][0]["kind"] == "crc-mismatch"
    assert "crc-mismatch" in result.err
    assert run_cli("lookup-by-key", extracted("garbage-tail"), "--topic", "BasicTopic", "order-49").code == 0


# ------------------------------------------------------------------ lookup-by-id

@pytest.mark.parametrize("name", ["basic", "features"])
def test_lookup_by_id_finds_every_record(name, extracted, run_cli):
    """Every record of the commitlog, prepared and rollback records included."""
    store = extracted(name)
    for offset, theirs in records(name).items():
        result = run_cli("lookup-by-id", store, theirs["msgId"], "--json")
        assert result.code == 0, result.err
        (mine,), summary = split(result)
        assert_same_message(mine, theirs)
        assert (mine["storeHostMatches"], summary["source"], summary["found"]) == (True, "offset", 1)


def test_lookup_by_id_on_a_sample_of_multifile(extracted, run_cli):
    store = extracted("multifile")
    messages = [l for l in expected_read("multifile") if l["type"] == "message"]
    for theirs in messages[::97]:
        (mine,), _ = split(run_cli("lookup-by-id", store, theirs["msgId"], "--json"))
        assert_same_message(mine, theirs)


def test_lookup_by_id_of_uniq_keys(extracted, run_cli):
    """A transaction's half and commit records share their UNIQ_KEY: both are found, or the
    one of the topic given."""
    store = extracted("features")
    everything = records("features")
    for theirs in [m for m in everything.values() if m["uniqKey"]][::5]:
        for args in ((), ("--uniq", "--topic", theirs["topic"])):
            result = run_cli("lookup-by-id", store, theirs["uniqKey"].lower(), "--json", *args)
            assert result.code == 0, result.err
            messages, summary = split(result)
            expected = [m for m in everything.values() if m["uniqKey"] == theirs["uniqKey"]
                        and (not args or m["topic"] == theirs["topic"])]
            assert len(messages) == len(expected) == summary["found"]
            for mine, record in zip(messages, expected):
                assert_same_message(mine, record)
                assert mine["lookedUpAs"] == "uniqKey"
            assert summary["source"] == ("index" if args else "scan")
            if not args:   # tried as an offset id first, then scanned for
                assert "not an offset message id" in result.err and "scanning" in result.err


def test_lookup_by_id_checks_the_store_host_and_the_record_boundary(extracted, run_cli):
    store = extracted("basic")
    theirs = records("basic")[699]
    other_host = encode_offset_msgid(bytes([10, 0, 0, 7]), 10911, 699)
    result = run_cli("lookup-by-id", store, other_host, "--json")
    assert result.code == 0
    (mine,), _ = split(result)
    assert mine["commitLogOffset"] == 699 and mine["storeHostMatches"] is False
    assert "10.0.0.7:10911" in result.err and "another broker" in result.err
    inside = encode_offset_msgid(bytes([127, 0, 0, 1]), 10911, 700)
    result = run_cli("lookup-by-id", store, inside, "--json")
    assert result.code == 0
    messages, summary = split(result)
    assert messages == [] and summary["found"] == 0
    assert "not an offset message id of this store" in result.err
    table = run_cli("lookup-by-id", store, theirs["msgId"])
    assert table.code == 0 and theirs["uniqKey"] in table.out


@pytest.mark.parametrize("msgid", ["xyz", "7F000001", "7F00000100002A9F00000000000002BB00", "G" * 32])
def test_lookup_by_id_refuses_what_is_not_an_id(msgid, extracted, run_cli):
    result = run_cli("lookup-by-id", extracted("basic"), msgid)
    assert result.code == 2
    assert result.err.startswith("mqtool: ") and result.out == ""
    if all(c in "0123456789ABCDEF" for c in msgid):
        assert f"has {len(msgid)} hex digits" in result.err
    else:
        assert "not hexadecimal" in result.err


def test_an_id_of_an_odd_number_of_digits_is_told_by_its_length(extracted, run_cli):
    result = run_cli("lookup-by-id", extracted("basic"), "7F00000100002A9F00000000000002BB0")
    assert result.code == 2 and "has 33 hex digits" in result.err


# ------------------------------------------------------------------------- get

@pytest.mark.parametrize("name", ["basic", "features", "basic5"])
def test_get_reads_every_queue_as_get_message_does(name, extracted, run_cli):
    store = extracted(name)
    lines = expected_read(name)
    for queue in [l for l in lines if l["type"] == "queue"]:
        theirs = [l for l in lines if l["type"] == "message" and (l["topic"], l["queueId"]) ==
                  (queue["topic"], queue["queueId"])]
        count = queue["maxOffset"] - queue["minOffset"]
        result = run_cli("get", store, "--topic", queue["topic"], "--queue", queue["queueId"],
                         "--offset", queue["minOffset"], "--count", count + 5, "--json")
        assert result.code == 0, result.err
        messages, summary = split(result)
        assert len(messages) == len(theirs) == count
        for mine, expected in zip(messages, theirs):
            assert_same_message(mine, expected)
        assert (summary["status"], summary["nextOffset"], summary["maxOffset"]) == \
            ("FOUND", queue["maxOffset"], queue["maxOffset"])
        # one message at a time
        last = theirs[-1]
        (mine,), _ = split(run_cli("get", store, "--topic", last["topic"], "--queue", last["queueId"],
                                   "--offset", last["queueOffset"], "--json"))
        assert_same_message(mine, last)


def test_get_across_consume_queue_files(extracted, run_cli):
    """Queues of more than 300 units roll into a second file at queue offset 300."""
    store = extracted("multifile")
    lines = expected_read("multifile")
    long_queues = [l for l in lines if l["type"] == "queue" and l["maxOffset"] > 300]
    assert long_queues
    for queue in long_queues[:2]:
        theirs = {l["queueOffset"]: l for l in lines if l["type"] == "message"
                  and (l["topic"], l["queueId"]) == (queue["topic"], queue["queueId"])}
        messages, _ = split(run_cli("get", store, "--topic", queue["topic"], "--queue", queue["queueId"],
                                    "--offset", 295, "--count", 10, "--json"))
        assert [m["queueOffset"] for m in messages] == list(range(295, 305))
        for mine in messages:
            assert_same_message(mine, theirs[mine["queueOffset"]])


def test_get_outside_the_queue(extracted, run_cli):
    store = extracted("basic")
    base = ("get", store, "--topic", "BasicTopic", "--queue", 0)
    result = run_cli(*base, "--offset", 13, "--json")      # the max offset: nothing yet, not an error
    assert result.code == 0
    messages, summary = split(result)
    assert messages == [] and summary["status"] == "OFFSET_OVERFLOW_ONE"
    result = run_cli(*base, "--offset", 14)
    assert result.code == 2 and "0 .. 12" in result.err and result.out == ""
    result = run_cli("get", store, "--topic", "BasicTopic", "--queue", 9, "--offset", 0)
    assert result.code == 2 and "0, 1, 2, 3" in result.err
    assert run_cli("get", store, "--topic", "BasicTopic", "--queue", 0).code == 2   # --offset missing
    assert run_cli("get", store, "--topic", "../index", "--queue", 0, "--offset", 0).code == 2


def test_tables(extracted, run_cli):
    store = extracted("basic")
    result = run_cli("get", store, "--topic", "BasicTopic", "--queue", 3, "--offset", 0, "--count", 2)
    assert result.code == 0
    assert "7F00000100002A9F00000000000002BB" in result.out and "basic message #3" in result.out
    assert "2 messages from queue offset 0" in result.err
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3")
    assert result.code == 0 and result.out.count("user-3") == 7 + 1   # the title names the key


def test_get_reports_a_unit_that_disagrees_with_its_record(store_copy, run_cli):
    store = store_copy("basic")
    unit_file = store / "consumequeue" / "BasicTopic" / "0" / "00000000000000000000"
    data = bytearray(unit_file.read_bytes())
    data[20 * 2 + 8:20 * 2 + 12] = (1000).to_bytes(4, "big")    # unit 2's size
    unit_file.write_bytes(bytes(data))
    result = run_cli("get", store, "--topic", "BasicTopic", "--queue", 0, "--offset", 1, "--count", 3, "--json")
    assert result.code == 1
    messages, summary = split(result)
    assert [m["ok"] for m in messages] == [True, False, True]
    assert messages[1]["problems"][0]["kind"] == "unit-mismatch"
    assert summary["problems"] == 1


# ---------------------------------------------------------------- common ground

@pytest.mark.parametrize("command", [
    ("lookup-by-key", "--topic", "OrderTopic", "cust-7"),
    ("lookup-by-key", "--topic", "OrderTopic", "cust-7", "--scan", "--json"),
    ("lookup-by-id", "7F00000100002A9F0000000000000000"),
    ("lookup-by-id", "C00002011F405EED000200014D6F0903", "--json"),
    ("get", "--topic", "OrderTopic", "--queue", "1", "--offset", "290", "--count", "20"),
])
def test_lookups_change_no_byte_and_no_file_time(command, store_copy, run_cli):
    store = store_copy("crash")
    age_times(store)
    before = snapshot(store)
    result = run_cli(command[0], store, *command[1:])
    assert result.code == 0, result.err
    assert snapshot(store) == before


@pytest.mark.parametrize("command", [
    ("lookup-by-key", "--topic", "T", "k"), ("lookup-by-id", "7F00000100002A9F0000000000000000"),
    ("get", "--topic", "T", "--queue", "0", "--offset", "0"),
])
def test_missing_store(command, tmp_path, run_cli):
    result = run_cli(command[0], tmp_path / "nowhere", *command[1:])
    assert result.code == 4
    assert "no such store directory" in result.err


@pytest.mark.parametrize("args", [("--limit", "0"), ("--since", "yesterday"), ("--since", "20", "--until", "10"),
                                  ("--max", "0"), ("--begin", "yesterday"), ("--begin", "20", "--end", "10")])
def test_lookup_by_key_usage_errors(args, extracted, run_cli):
    result = run_cli("lookup-by-key", extracted("basic"), "--topic", "BasicTopic", "user-3", *args)
    assert result.code == 2


@pytest.mark.parametrize("name", DAMAGED)
def test_get_on_damaged_stores_reads_what_is_on_disk(name, extracted, run_cli):
    """The consume queue files still hold every unit (the broker cut its queues in memory only);
    get reads them all and marks the record whose body CRC fails."""
    bad = []
    for queue in range(4):
        result = run_cli("get", extracted(name), "--topic", "BasicTopic", "--queue", queue, "--offset", 0,
                         "--count", 100, "--json", "--no-body")
        messages, summary = split(result)
        assert len(messages) == summary["found"] > 0
        bad += [m["commitLogOffset"] for m in messages if not m["ok"]]
        assert result.code == (1 if any(not m["ok"] for m in messages) else 0)
    if name == "flipped-body-byte":
        assert bad == [5855]
    else:
        assert bad == []


def test_a_loop_in_an_index_chain_ends_the_walk(store_copy, run_cli):
    """Entries only link back to older ones; a damaged file whose links go round in a circle
    must not keep a lookup walking for ever (the broker's own walk would)."""
    import struct

    store = store_copy("basic")
    (path,) = (store / "index").iterdir()
    raw = bytearray(path.read_bytes())
    for number, prev in ((1, 2), (2, 1)):
        struct.pack_into(">i", raw, entry_position(100, number) + 16, prev)
    for slot in range(100):
        struct.pack_into(">i", raw, 40 + slot * 4, 2)
    path.write_bytes(bytes(raw))
    result = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "user-3")   # returns at all
    assert result.code in (0, 1), result.err


def test_a_fifo_where_a_store_file_should_be_is_refused_not_waited_on(store_copy, run_cli):
    import os

    store = store_copy("basic")
    (store / "checkpoint").unlink()
    os.mkfifo(store / "checkpoint")
    result = run_cli("dump", store, "checkpoint")
    assert result.code == 4 and "not a regular file" in result.err
    info = run_cli("info", store)
    assert "not a regular file" in info.out + info.err


def test_a_broker_conf_is_read_as_java_reads_it(extracted, run_cli, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_bytes(b"# r\xe9glages du broker\nbrokerName=a\nmappedFileSizeCommitLog=65536\n"
                     b"mappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=100\nmaxIndexNum=400\n")
    assert run_cli("verify-crc", extracted("basic"), "--config", conf).code == 0


def test_scan_for_a_key_that_is_not_utf8(extracted, run_cli):
    """Bytes that are not UTF-8 on a command line reach Python as surrogate escapes."""
    for args in (("--topic", "BasicTopic", "\udcff"), ("--topic", "\udcff", "user-3")):
        result = run_cli("lookup-by-key", extracted("basic"), *args, "--scan")
        assert result.code == 0 and "0 messages found" in result.out + result.err, result.err
