"""`mqtool track` and `mqtool transactions` against the broker's own account of where each record of
journey5 went (journey.json, write.jsonl: the 5.3.3 broker's send-back, schedule delivery, commit, op
and check code through the real store) and timer5 (the timer store's deliveries and recalls)."""

from __future__ import annotations

import json
import shutil

import pytest

from mqtool.forensics.journey import ROLES, role_of
from mqtool.forensics.lookup import StoreReader
from mqtool.formats.crc import body_crc
from mqtool.formats.transactionop import half_offsets
from mqtool.storage.settings import open_layout

from conftest import fixture_dir, load_jsonl

ROLE = {"sent": "sent", "sent-delayed": "delay-scheduled", "retry-scheduled": "retry-scheduled", "retry": "retry",
        "dlq": "dead-letter", "delivered": "delivered", "half": "half", "half-checked": "half-checked",
        "commit": "committed"}


@pytest.fixture(scope="module")
def journey():
    """(journey.json by spec line, write.jsonl's put lines by spec line, the consumer offsets the
    broker persisted)."""
    where = fixture_dir("journey5")
    lines = {int(k): v for k, v in json.loads((where / "journey.json").read_text()).items()}
    writes = load_jsonl(where / "write.jsonl")
    puts = {w["index"]: w for w in writes if w["type"] == "put"}
    table = json.loads(next(w for w in writes if w["type"] == "offsets")["table"])
    offsets = {tuple(k.rsplit("@", 1)): {int(q): o for q, o in v.items()} for k, v in table.items()}
    return lines, puts, offsets


def expected_hops(lines, puts, uniq):
    """The records the broker wrote for one UNIQ_KEY, in store order, as journey.json says."""
    hops = [(puts[n]["wroteOffset"], ROLE[v["kind"]], v["topic"], v["queueId"], v["queueOffset"], v.get("group"))
            for n, v in lines.items() if v.get("uniqKey") == uniq]
    return sorted(hops)


def uniq_keys(lines):
    return sorted({v["uniqKey"] for v in lines.values() if "uniqKey" in v})


def test_every_message_has_the_hops_and_roles_the_broker_wrote(journey, extracted, run_cli):
    lines, puts, _ = journey
    store = extracted("journey5")
    for uniq in uniq_keys(lines):
        result = run_cli("track", store, uniq, "--json")
        assert result.code == 0, result.err
        hops = [h for h in result.json_lines() if h["type"] == "hop"]
        got = [(h["commitLogOffset"], h["role"], h["topic"], h["queueId"], h["queueOffset"], h["group"])
               for h in hops]
        assert got == expected_hops(lines, puts, uniq), uniq
        assert all(h["uniqKey"] == uniq and h["ok"] for h in hops)


def test_consumption_of_every_hop_is_each_groups_committed_offset(journey, extracted, run_cli):
    lines, puts, offsets = journey
    store = extracted("journey5")
    for uniq in uniq_keys(lines):
        rows = [r for r in run_cli("track", store, uniq, "--json").json_lines() if r["type"] == "consumption"]
        expected = []
        for _, _, topic, qid, qoffset, _ in expected_hops(lines, puts, uniq):
            for (t, group), queues in sorted(offsets.items()):
                if t == topic:
                    done = queues.get(qid, -1) > qoffset
                    expected.append((group, topic, qid, qoffset, "CONSUMED" if done else "NOT_CONSUME_YET"))
        got = [(r["group"], r["topic"], r["queueId"], r["queueOffset"], r["state"]) for r in rows]
        assert sorted(got) == sorted(expected), uniq


def summary(run_cli, store, *args) -> dict:
    result = run_cli("track", store, *args, "--json")
    assert result.code == 0, result.err
    return [line for line in result.json_lines() if line["type"] == "summary"][-1]


def test_where_each_message_is_now(journey, extracted, run_cli):
    """The fixture's README: order-002 dead-lettered by billing after two retries, order-005's retry
    scheduled and not yet due, order-007 straight to %DLQ%billing, order-009 retried once by audit and
    delivered, order-020 delayed and delivered, order-021 still delayed; the transactions."""
    lines, _, _ = journey
    store = extracted("journey5")
    key = {v["key"]: v["uniqKey"] for v in lines.values() if "key" in v}

    def groups(s):
        return {g["group"]: (g["state"], g["retries"]) for g in s["groups"]}

    s = summary(run_cli, store, "--topic", "Orders", "--key", "order-002")
    assert s["uniqKey"] == key["order-002"] and groups(s)["billing"] == ("dead-letter", 2)
    s = summary(run_cli, store, key["order-005"])
    assert groups(s)["billing"][0] == "waiting-retry"
    retry = next(h for h in run_cli("track", store, key["order-005"], "--json").json_lines()
                 if h.get("role") == "retry-scheduled")
    # ScheduleMessageService: store time + the delay of level 3 + reconsumeTimes 0 = 10 s
    assert s["dueAt"] == retry["storeTimestamp"] + 10_000 and retry["queueId"] == 2
    assert groups(summary(run_cli, store, key["order-007"]))["billing"] == ("dead-letter", 0)
    assert groups(summary(run_cli, store, key["order-009"]))["audit"] == ("consumed", 1)
    s = summary(run_cli, store, "--topic", "Orders", "--key", "order-020")
    assert s["state"] == "stored" and s["topic"] == "Orders"
    s = summary(run_cli, store, "--topic", "Orders", "--key", "order-021")
    assert s["state"] == "waiting-delay" and s["hops"] == 1
    assert summary(run_cli, store, "--topic", "Payments", "--key", "pay-tx-2")["state"] == "rolled-back"
    assert summary(run_cli, store, "--topic", "Payments", "--key", "pay-tx-3")["state"] == "transaction-pending"
    assert summary(run_cli, store, "--topic", "Payments", "--key", "pay-tx-5")["state"] == "transaction-pending"
    s = summary(run_cli, store, "--topic", "Payments", "--key", "pay-tx-6")
    assert s["state"] == "stored" and "no op names its half" in s["where"]


def test_a_message_is_found_from_any_of_its_offset_msgids(journey, extracted, run_cli):
    lines, puts, _ = journey
    store = extracted("journey5")
    uniq = lines[2]["uniqKey"]
    for n, v in lines.items():
        if v.get("uniqKey") == uniq:
            s = summary(run_cli, store, puts[n]["msgId"])
            assert s["uniqKey"] == uniq and s["hops"] == 6


def test_without_the_index_it_scans_and_says_so(journey, store_copy, extracted, run_cli):
    lines, puts, _ = journey
    store = store_copy("journey5")
    shutil.rmtree(store / "index")
    for key in ("order-002", "pay-tx-3", "order-020"):
        uniq = next(v["uniqKey"] for v in lines.values() if v.get("key") == key)
        result = run_cli("track", store, uniq, "--json")
        assert result.code == 0 and "scanned" in result.err
        hops = [(h["commitLogOffset"], h["role"]) for h in result.json_lines() if h["type"] == "hop"]
        assert hops == [(h[0], h[1]) for h in expected_hops(lines, puts, uniq)]
        indexed = run_cli("track", extracted("journey5"), uniq, "--json").json_lines()
        assert summary(run_cli, store, uniq)["where"] == [x for x in indexed if x["type"] == "summary"][0]["where"]


def test_a_damaged_record_on_the_way_is_a_hop_that_fails(journey, store_copy, run_cli):
    lines, puts, _ = journey
    store = store_copy("journey5")
    retry = puts[31]          # order-002's first retry in %RETRY%billing
    with open(store / "commitlog" / "00000000000000000000", "r+b") as fh:
        fh.seek(retry["wroteOffset"])
        record = bytearray(fh.read(retry["wroteBytes"]))
        record[record.index(b"Orders order-002")] ^= 0xFF          # a byte of its body: the body CRC fails
        fh.seek(retry["wroteOffset"])
        fh.write(record)
    result = run_cli("track", store, lines[2]["uniqKey"], "--json")
    assert result.code == 1 and "Traceback" not in result.err
    bad = [h for h in result.json_lines() if h["type"] == "hop" and not h["ok"]]
    assert [h["commitLogOffset"] for h in bad] == [retry["wroteOffset"]] and bad[0]["problems"]


def test_unknown_and_malformed_ids(extracted, run_cli):
    store = extracted("journey5")
    result = run_cli("track", store, "C00002011F405EED10E10000000000FF")
    assert result.code == 0 and "not found" in result.err and "the index covers store times" in result.err
    result = run_cli("track", store, "not-a-msgid")
    assert result.code == 2 and "32 hex digits" in result.err
    assert run_cli("track", store).code == 2
    assert run_cli("track", store, "--topic", "Orders").code == 2
    result = run_cli("track", store, "--topic", "Orders", "--key", "no-such-key", "--json")
    assert result.code == 0 and "not found" in result.err


def test_timer_messages_their_delivery_and_recalls(extracted, run_cli):
    """timer5: each short timer's record in rmq_sys_wheel_timer and its delivery into the real topic
    (write.jsonl's timer_delivery lines); the two recalls (RecallMessageProcessor's records)."""
    where = fixture_dir("timer5")
    writes = load_jsonl(where / "write.jsonl")
    store = extracted("timer5")
    deliveries = [w for w in writes if w["type"] == "timer_delivery"]
    assert len(deliveries) == 9
    for d in deliveries:
        lines = run_cli("track", store, d["uniqKey"], "--json").json_lines()
        hops = [(h["role"], h["topic"], h["queueId"]) for h in lines if h["type"] == "hop"]
        assert hops == [("timer-scheduled", "rmq_sys_wheel_timer", 0), ("timer-delivered", d["topic"], d["queueId"])]
        delivered = [h for h in lines if h.get("role") == "timer-delivered"][0]
        assert (delivered["commitLogOffset"], delivered["queueOffset"]) == (d["wroteOffset"], d["queueOffset"])
        assert lines[-1]["state"] == "stored"
    spec = load_jsonl(where / "spec.jsonl")
    puts = {w["index"]: w for w in writes if w["type"] == "put"}
    recalls = [w for w in puts.values() if "recallOf" in w]
    assert len(recalls) == 2
    for recall in recalls:
        target = puts[recall["recallOf"]]
        uniq = spec[recall["recallOf"]].get("properties", {}).get("UNIQ_KEY")
        lines = run_cli("track", store, target["msgId"], "--json").json_lines()
        hops = [(h["role"], h["commitLogOffset"]) for h in lines if h["type"] == "hop"]
        assert hops == [("timer-scheduled", target["wroteOffset"]), ("recalled", recall["wroteOffset"])]
        assert lines[-1]["state"] == "recalled"
        if uniq:
            assert lines[-1]["uniqKey"] == uniq


def test_a_pending_timer_waits_until_its_timer_out_time(extracted, run_cli):
    store = extracted("timer5")
    s = summary(run_cli, store, "--topic", "TimerTopic5", "--key", "slot-1h")
    hop = [h for h in run_cli("track", store, s["uniqKey"], "--json").json_lines() if h["type"] == "hop"][0]
    assert s["state"] == "waiting-timer" and s["dueAt"] == int(hop["timerOutMs"])


@pytest.mark.parametrize("name", ["basic", "basic5", "dledger1"])
def test_plain_and_dledger_stores(name, extracted, run_cli, request):
    """A plain message on 4.9.8, 5.3.3 and DLedger stores: one `sent` hop at the broker's offset."""
    from conftest import expected_read
    message = next(m for m in expected_read(name) if m.get("type") == "message" and m["properties"].get("UNIQ_KEY"))
    lines = run_cli("track", extracted(name), message["properties"]["UNIQ_KEY"], "--json").json_lines()
    hops = [(h["role"], h["commitLogOffset"], h["topic"]) for h in lines if h["type"] == "hop"]
    assert hops == [("sent", message["commitLogOffset"], message["topic"])]


def test_roles_come_from_the_records_themselves(journey, extracted):
    """role_of reads each record alone (no context), and agrees with the broker's account."""
    lines, puts, _ = journey
    layout = open_layout(str(extracted("journey5")), None, ())
    with StoreReader(layout) as reader:
        for n, v in lines.items():
            if v["kind"] == "op":
                continue
            record = reader.record_at(puts[n]["wroteOffset"])
            assert role_of(record) == (ROLE[v["kind"]], v.get("group")), n


# ---------------------------------------------------------------------------------- transactions
def expected_transactions(lines):
    halves = {n: v for n, v in lines.items() if v["kind"] in ("half", "half-checked")}
    root = {}
    for n in sorted(halves):
        root[n] = root.get(halves[n].get("of"), n) if halves[n]["kind"] == "half-checked" else n
    committed = {root[v["of"]] for v in lines.values() if v["kind"] == "commit"}
    opped = {root[h] for v in lines.values() if v["kind"] == "op" for h in v["halves"]}
    result = {}
    for n, v in halves.items():
        if root[n] != n:
            continue
        copies = [m for m in halves if root[m] == n]
        state = "COMMITTED" if n in committed else "ROLLED_BACK" if n in opped else "PENDING"
        result[v["uniqKey"]] = {"state": state, "checkTimes": len(copies) - 1, "copies": len(copies),
                                "opMissing": n in committed and n not in opped, "keys": v["key"]}
    return result


def test_every_transaction_state_check_count_and_missing_op(journey, extracted, run_cli):
    lines, _, _ = journey
    result = run_cli("transactions", extracted("journey5"), "--json", "--at", "2026-11-28T07:21:40Z")
    assert result.code == 0, result.err
    got = {t["uniqKey"]: {"state": t["state"], "checkTimes": t["checkTimes"], "copies": len(t["halves"]),
                          "opMissing": t["opMissing"], "keys": t["keys"]}
           for t in result.json_lines() if t["type"] == "transaction"}
    assert got == expected_transactions(lines)
    summary_line = result.json_lines()[-1]
    assert (summary_line["COMMITTED"], summary_line["ROLLED_BACK"], summary_line["PENDING"]) == (3, 1, 2)
    check = [c for c in result.json_lines() if c["type"] == "check"][0]
    assert (check["halfOffset"], check["opOffset"]) == (2, 0)     # CID_RMQ_SYS_TRANS in consumerOffset.json


def test_a_transaction_pending_past_the_check_is_stuck(extracted, run_cli):
    store = extracted("journey5")
    late = run_cli("transactions", store, "--json", "--at", "2026-11-28T08:00:00Z")
    assert late.code == 1 and "stuck" in late.err
    stuck = {t["keys"] for t in late.json_lines() if t["type"] == "transaction" and t["stuck"]}
    assert stuck == {"pay-tx-3", "pay-tx-5"}
    # a longer check interval from the broker's settings: not stuck yet
    lenient = run_cli("transactions", store, "--at", "2026-11-28T08:00:00Z", "--set", "transactionCheckInterval=7200000")
    assert lenient.code == 0


def test_op_bodies_as_the_broker_reads_them():
    assert half_offsets(b"3,") == [3]          # 5.x: each offset followed by a comma
    assert half_offsets(b"4,7,9,") == [4, 7, 9]  # 5.x batches several halves in one op
    assert half_offsets(b"12") == [12]         # 4.x: one offset, no comma
    assert half_offsets(b"x,5,") == [-1, 5]    # getLong: -1 for a part that is no number


def test_an_op_may_name_any_copy_and_several_halves(journey, store_copy, run_cli):
    """Rewrite the rollback's op body (same length) to name pay-tx-3's second check copy instead:
    pay-tx-3 becomes rolled back and pay-tx-2 pending."""
    lines, puts, _ = journey
    store = store_copy("journey5")
    op = puts[48]        # the op of pay-tx-2's half (queue offset 1): body "1,"
    with open(store / "commitlog" / "00000000000000000000", "r+b") as fh:
        fh.seek(op["wroteOffset"])
        record = bytearray(fh.read(op["wroteBytes"]))
        at = record.index(b"1,")
        record[at:at + 2] = b"7,"
        record[8:12] = body_crc(b"7,").to_bytes(4, "big")      # bodyCRC: the record's third field
        fh.seek(op["wroteOffset"])
        fh.write(record)
    got = {t["keys"]: t["state"] for t in run_cli("transactions", store, "--json", "--at", "2026-11-28T07:21:40Z")
           .json_lines() if t["type"] == "transaction"}
    assert got["pay-tx-3"] == "ROLLED_BACK" and got["pay-tx-2"] == "PENDING"


def test_stats_counts_retries_and_dead_letters_per_group(extracted, run_cli):
    """stats' group lines: the messages the broker stored in %RETRY%group and %DLQ%group."""
    from collections import Counter

    from conftest import expected_read

    per_topic = Counter(m["topic"] for m in expected_read("journey5") if m["type"] == "message")
    lines = run_cli("stats", extracted("journey5"), "--json").json_lines()
    groups = {l["group"]: (l["retries"], l["deadLetters"]) for l in lines if l["type"] == "group"}
    expected = {t.split("%", 2)[2]: (per_topic.get(f"%RETRY%{t.split('%', 2)[2]}", 0),
                                     per_topic.get(f"%DLQ%{t.split('%', 2)[2]}", 0))
                for t in per_topic if t.startswith(("%RETRY%", "%DLQ%"))}
    assert groups == expected and groups["billing"] == (2, 2)


def test_a_message_whose_file_reclaim_deleted(store_copy, run_cli):
    """The index still names the message's offset, below the commitlog's first file: deleted."""
    from conftest import expected_read

    store = store_copy("multifile")
    first = next(m for m in expected_read("multifile") if m.get("type") == "message"
                 and m["commitLogOffset"] < 65536 and m["properties"].get("UNIQ_KEY"))
    (store / "commitlog" / "00000000000000000000").unlink()
    s = summary(run_cli, store, first["properties"]["UNIQ_KEY"])
    assert s["state"] == "deleted" and s["hops"] == 0
    assert {"topic": first["topic"], "commitLogOffset": first["commitLogOffset"]} in s["deleted"]


def test_a_damaged_index_is_said_and_the_commitlog_scanned(journey, store_copy, run_cli):
    lines, puts, _ = journey
    store = store_copy("journey5")
    index = next((store / "index").iterdir())
    with open(index, "r+b") as fh:
        fh.truncate(index.stat().st_size - 7)        # a size no index geometry has
    uniq = lines[2]["uniqKey"]
    result = run_cli("track", store, uniq, "--json")
    assert result.code == 1 and "index" in result.err and "scanned" in result.err
    hops = [(h["commitLogOffset"], h["role"]) for h in result.json_lines() if h["type"] == "hop"]
    assert hops == [(h[0], h[1]) for h in expected_hops(lines, puts, uniq)]


def test_every_role_is_documented():
    from conftest import REPO

    page = (REPO / "docs" / "commands" / "track.md").read_text(encoding="utf-8")
    assert all(f"| `{role}` |" in page for role in ROLES)
