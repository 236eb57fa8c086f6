"""stored_message() against every stored record of every fixture that has a spec."""

from __future__ import annotations

import pytest

from mqtool.broker.brokerprops import HALF_TOPIC, SCHEDULE_TOPIC, stored_message, stored_properties
from mqtool.formats.properties import decode_properties

from conftest import expected_read, fixture_dir, load_jsonl

SPEC_FIXTURES = {"basic": "4", "features": "4", "multifile": "4", "crash": "4", "basic5": "5"}


def spec_and_records(name):
    """(index, spec line, put result, commitlog_record) for every PUT_OK put."""
    spec = load_jsonl(fixture_dir(name) / "spec.jsonl")
    puts = {w["index"]: w for w in load_jsonl(fixture_dir(name) / "write.jsonl") if w["type"] == "put"}
    records = {r["offset"]: r for r in expected_read(name) if r["type"] == "commitlog_record"}
    rows = []
    for index, line in enumerate(spec):
        put = puts[index]
        if put["status"] != "PUT_OK":
            assert "wroteOffset" not in put or put["wroteOffset"] not in records
            continue
        rows.append((index, line, put, records[put["wroteOffset"]]))
    return rows, len(records)


@pytest.mark.parametrize("name", sorted(SPEC_FIXTURES))
def test_every_stored_record(name):
    rows, record_count = spec_and_records(name)
    assert len(rows) == record_count  # every record is explained by a spec line
    mismatches = []
    for index, line, put, record in rows:
        got = stored_message(line, version=SPEC_FIXTURES[name])
        msg = record["message"]
        want = (msg["propertiesString"], msg["topic"], msg["queueId"], msg["sysFlag"])
        have = (got.properties, got.topic, got.queue_id, got.sys_flag)
        if have != want or (put["storedTopic"], put["storedQueueId"]) != (got.topic, got.queue_id):
            mismatches.append((index, have, want))
    assert not mismatches, mismatches[:3]


@pytest.fixture(scope="module")
def features():
    rows, _ = spec_and_records("features")
    return {index: (line, record["message"]) for index, line, _, record in rows}


def test_features_notes_examples(features):
    line, msg = features[1]
    names = [p.split("\x01")[0] for p in stored_properties(line).split("\x02")]
    assert names == ["備考", "都市", "KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]  # as NOTES.md says
    assert stored_properties(features[9][0]) == ""  # cluster: null, nothing else
    assert stored_properties(features[10][0]) == "CLUSTER\x01DefaultCluster"


def test_wait_dropped_for_plain_kept_for_delay_and_half(features):
    for index in (19, 20):
        assert "WAIT" not in decode_properties(stored_properties(features[index][0]))
    delayed = stored_message(features[24][0])
    assert (delayed.topic, delayed.queue_id, delayed.delay_level) == (SCHEDULE_TOPIC, 0, 1)
    props = decode_properties(delayed.properties)
    assert props["WAIT"] == "true" and props["REAL_TOPIC"] == "GlobalOrders" and props["REAL_QID"] == "0"
    half = stored_message(features[28][0])
    assert (half.topic, half.queue_id, half.sys_flag) == (HALF_TOPIC, 0, 0)
    props = decode_properties(half.properties)
    assert props["WAIT"] == "true" and props["TRAN_MSG"] == "true" and props["REAL_QID"] == "2"


def test_delay_level_clamped(features):
    got = stored_message(features[27][0])
    assert (got.topic, got.queue_id, got.delay_level) == (SCHEDULE_TOPIC, 17, 18)
    assert decode_properties(got.properties)["DELAY"] == "18"
    assert stored_message(features[27][0], max_delay_level=20).queue_id == 19


def test_prepared_and_rollback_are_not_delayed():
    line = {"topic": "T", "queueId": 1, "tags": "t", "delayLevel": 3, "transaction": "prepared"}
    got = stored_message(line)
    assert (got.topic, got.queue_id, got.sys_flag, got.delay_level) == ("T", 1, 4, 0)
    assert decode_properties(got.properties)["DELAY"] == "3"
    line["transaction"] = "commit"
    assert stored_message(line).topic == SCHEDULE_TOPIC


def test_v5_trailing_separator_and_half_transaction_id():
    line = {"topic": "T", "queueId": 3, "tags": "t", "keys": ["a", "b"], "transaction": "half",
            "properties": {"UNIQ_KEY": "U1", "WAIT": "true"}}
    v4 = stored_properties(line)
    v5 = stored_properties(line, version="5")
    assert not v4.endswith("\x02") and v5.endswith("\x02")
    assert "__transactionId__" not in decode_properties(v4)
    assert decode_properties(v5)["__transactionId__"] == "U1"


def test_real_broker_5x_uses_128_buckets_and_keeps_wait():
    line = {"topic": "T", "queueId": 0, "tags": "TagA", "keys": "k1 k2",
            "properties": {"UNIQ_KEY": "U", "WAIT": "true"}}
    text = stored_properties(line, version="5", real_broker_5x=True)
    names = [p.split("\x01")[0] for p in text.rstrip("\x02").split("\x02")]
    assert names == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]  # checked with OpenJDK 17
    assert [p.split("\x01")[0] for p in stored_properties(line, version="5").rstrip("\x02").split("\x02")] == [
        "KEYS", "UNIQ_KEY", "CLUSTER", "TAGS"]


def test_sys_flag_bits():
    base = {"topic": "T", "queueId": 0}
    assert stored_message({**base, "bornHost": "[2001:db8::1]:1"}).sys_flag == 0x10
    assert stored_message({**base, "bornHost": "[::ffff:10.0.0.1]:1"}).sys_flag == 0  # Java: Inet4Address
    assert stored_message({**base, "bornHost": "10.0.0.1:1", "sysFlag": 2, "compress": "zstd"}).sys_flag == 0x203
    assert stored_message({**base, "sysFlag": 8}).sys_flag == 8  # given bits kept without "transaction"
    assert stored_message({**base, "sysFlag": 8, "transaction": "rollback"}).sys_flag == 12


# DELAY as Integer.parseInt reads it (Message.getDelayTimeLevel; CommitLog.checkMessageAndReturnSize):
# an optional sign and decimal digits of any script (Character.digit), within int's range.  What
# it throws on (spaces, underscores, out of range, no number) is no delay here: Python's int()
# took " 3", "1_0" and 2147483648.
DELAYS = [("3", 3), ("+3", 3), ("\uff13", 3), ("0", 0), ("-3", 0), (" 3", 0), ("3 ", 0), ("1_0", 0),
          ("2147483648", 0), ("99999999999999999999", 0), ("", 0), ("3.0", 0), ("+", 0), ("x", 0)]


@pytest.mark.parametrize("text, level", DELAYS)
def test_the_store_reads_delay_as_integer_parse_int(text, level):
    got = stored_message({"topic": "T", "queueId": 1, "tags": "t", "properties": {"DELAY": text}})
    assert (got.topic, got.delay_level) == ((SCHEDULE_TOPIC, level) if level else ("T", 0))


@pytest.mark.parametrize("text, level", DELAYS)
def test_dispatch_reads_delay_as_integer_parse_int(text, level, extracted):
    """A SCHEDULE_TOPIC_XXXX record's tags code is its delivery time for a DELAY level Java reads,
    else its tags' hash code."""
    from mqtool.formats.javastr import tags_code
    from mqtool.storage import commitlog
    from mqtool.storage.dispatchrequest import from_record
    from mqtool.storage.settings import open_layout

    queue = commitlog.open_queue(open_layout(str(extracted("features")), None, ()))
    try:
        record = next(e for e in commitlog.walk(queue) if getattr(e, "topic", None) == SCHEDULE_TOPIC)
    finally:
        queue.close()
    levels = [1000 * (k + 1) for k in range(18)]
    properties = {**record.properties, "DELAY": text}
    got = from_record(record, levels, properties).tags_code
    expected = record.store_timestamp + levels[level - 1] if level else tags_code(properties.get("TAGS"))
    assert got == expected
