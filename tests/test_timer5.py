"""timer5: the timer store the real RocketMQ 5.3.3 wrote (far-future timers, delivered short
timers, two roll units, two recalls), read as the broker reads it; and crashed copies of it,
recovered as TimerMessageStore.load's recover() recovers them.

Expected values come from the fixture's expected-read.jsonl (the broker's own reading: every
timerlog_unit, timer_slot with its chain, timer_open, timer_summary, timer_pre) and, for the
crashes, from the Java source's rules applied to those facts in tests/helpers/timercrash.py.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers.timercrash import PRECISION, SLOTS, crash, facts, read_wheel, replay

F = facts()
READ_TIME = F["open"]["currReadTimeMs"]


def pending_units(units):
    return [u for u in units if u["delayedTimeMs"] // PRECISION * PRECISION >= READ_TIME]


def recalled_units(units):
    """Normal units a delete unit of the same slot cancels (the dequeue's deleteList: the delete
    unit's TIMER_DEL_UNIQKEY = REAL_TOPIC + "+" + UNIQ_KEY of the message)."""
    out = []
    for u in units:
        if u["delete"]:
            continue
        key = f"{u['realTopic']}+{u['uniqKey']}"
        if any(d["delete"] and d["timerDelUniqKey"] == key and
               d["delayedTimeMs"] // PRECISION == u["delayedTimeMs"] // PRECISION for d in units):
            out.append(u)
    return out


@pytest.fixture
def timer5(store_copy):
    return store_copy("timer5")


# ------------------------------------------------------------------- the clean store

def test_every_unit_is_read_as_the_broker_reads_it(extracted, run_cli):
    store = extracted("timer5")
    result = run_cli("dump", store, "timerlog", "--json")
    assert result.code == 0, result.err
    lines = result.json_lines()
    got = {u["pos"]: u for u in lines if u["type"] == "timer_unit"}
    assert sorted(got) == [u["offset"] for u in F["units"]]
    recalled = {u["offset"] for u in recalled_units(F["units"])}
    assert len(recalled) == 2
    for u in F["units"]:
        g = got[u["offset"]]
        assert (g["size"], g["prevPos"], g["magic"], g["roll"], g["delete"], g["currWriteTime"], g["delayedTime"],
                g["deliveryMs"], g["offsetPy"], g["sizePy"], g["realTopicHash"], g["pending"]) == \
            (u["size"], u["prevPos"], u["magic"], u["roll"], u["delete"], u["enqueueTimeMs"], u["delayMs"],
             u["delayedTimeMs"], u["offsetPy"], u["sizePy"], u["realTopicHash"], u["pending"]), u["offset"]
        state = ("delivered" if not u["pending"] else "delete" if u["delete"] else
                 "recalled" if u["offset"] in recalled else "roll" if u["roll"] else "deliver")
        assert g["state"] == state, u["offset"]
    blank = [b for b in lines if b["type"] == "timer_blank"]
    assert [(b["fileOffset"], b["size"]) for b in blank] == [(F["blank"]["offset"], F["blank"]["size"])]
    summary = lines[-1]
    assert (summary["units"], summary["blanks"], summary["endOffset"], summary["problems"]) == \
        (F["end"]["units"], F["end"]["blanks"], F["end"]["maxOffset"], 0)
    assert (summary["pending"], summary["recalled"], summary["rolled"], summary["deleteMarkers"]) == \
        (F["open"]["allCongestNum"], 2, sum(1 for u in pending_units(F["units"]) if u["roll"]),
         sum(1 for u in pending_units(F["units"]) if u["delete"]))


def test_every_slot_and_its_chain_is_the_brokers(extracted, run_cli):
    """Slots 699987 and 735987 end in delete units in the second timerlog file (4252, 4304)."""
    result = run_cli("dump", extracted("timer5"), "timerwheel", "--json")
    assert result.code == 0, result.err
    got = {s["slot"]: s for s in result.json_lines() if s["type"] == "timer_slot"}
    assert set(got) == set(F["slots"])
    for index, e in F["slots"].items():
        g = got[index]
        assert (g["timeMs"], g["firstPos"], g["lastPos"], g["num"], g["magic"], g["chain"], g["pending"]) == \
            (e["timeMs"], e["firstPos"], e["lastPos"], e["num"], e["magic"], e["chain"], e["pending"]), index
    assert got[699987]["chain"] == [4252, 312, 260, 208] and got[735987]["chain"] == [4304, 520, 468]
    summary = result.json_lines()[-1]
    assert summary["allCongestNum"] == F["summary"]["allCongestNum"] == F["summary"]["pendingNumSum"]


def test_info_stats_and_metrics_say_what_the_broker_will_deliver(extracted, run_cli):
    store = extracted("timer5")
    info = run_cli("info", store, "--json")
    assert info.code == 0, info.err
    timer = info.json_lines()[0]["timer"]
    assert timer["pending"] == F["open"]["allCongestNum"] == 70          # not 72: two were recalled
    assert (timer["recalled"], timer["rolled"], timer["deliverable"]) == (2, 2, 70)
    assert timer["byTopic"] == F["open"]["timingCount"]
    assert (timer["lastReadTimeMs"], timer["timerlogEnd"], timer["queueOffset"]) == \
        (F["open"]["currReadTimeMs"], F["open"]["timerLogMaxOffset"], F["open"]["currQueueOffset"])
    assert timer["deliveredTwice"] == 0 and timer["putBack"] == 0
    assert "70 pending message(s)" in run_cli("info", store).out
    stats = run_cli("stats", store, "--json")
    assert {t["topic"]: t["pending"] for t in stats.json_lines() if t["type"] == "timer"} == F["open"]["timingCount"]
    metrics = run_cli("dump", store, "timermetrics", "--json")
    assert metrics.code == 0, metrics.err
    rows = [m for m in metrics.json_lines() if m["type"] == "timer_metric"]
    text = json.loads(F["pre"]["timermetrics"]["text"])
    assert {m["topic"]: m["count"] for m in rows} == {t: v["count"] for t, v in text["timingCount"].items()}
    assert all(m["matches"] for m in rows) and metrics.json_lines()[-1]["dataVersion"] == text["dataVersion"]


def test_recover_and_clean_say_what_the_timer_store_will_deliver(timer5, run_cli):
    plan = run_cli("recover", timer5, "--dry-run", "--json")
    assert plan.code == 0, plan.err
    pending = plan.json_lines()[0]["timerRecovery"]["pending"]
    assert (pending["pending"], pending["recalled"], pending["rolled"]) == (F["open"]["allCongestNum"], 2, 2)
    assert "pending 70" in run_cli("recover", timer5, "--dry-run").out
    clean = run_cli("clean", timer5, "--dry-run", "--json")
    assert clean.code == 0, clean.err
    timer = clean.json_lines()[-1]["timer"]
    assert (timer["pending"], timer["recalled"], timer["rolled"]) == (70, 2, 2)


def test_timermetrics_bak_and_a_count_that_differs(timer5, run_cli):
    """TimerMetrics loads as ConfigManager does (a file it cannot parse: its .bak); a count the
    timerlog does not hold is reported."""
    (timer5 / "config" / "timermetrics").write_text("{broken")
    bak = run_cli("dump", timer5, "timermetrics", "--json")
    assert bak.code == 0, bak.err
    assert bak.json_lines()[-1]["file"] == "config/timermetrics.bak" and bak.json_lines()[-1]["note"]
    (timer5 / "config" / "timermetrics").write_text(
        '{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1},'
        '"timingCount":{"TimerTopic5":{"count":71,"timeStamp":1},"Gone":{"count":"3","timeStamp":1}}}')
    off = run_cli("dump", timer5, "timermetrics", "--json")
    assert off.code == 1
    rows = {m["topic"]: m for m in off.json_lines() if m["type"] == "timer_metric"}
    topic = rows["TimerTopic5"]
    assert (topic["count"], topic["timerlog"], topic["matches"]) == (71, 70, False)
    assert (rows["Gone"]["count"], rows["Gone"]["timerlog"]) == (3, 0)


def test_verify_crc_finds_nothing_on_the_brokers_store(extracted, run_cli):
    result = run_cli("verify-crc", extracted("timer5"), "--json")
    assert result.code == 0, result.out
    summary = result.json_lines()[-1]
    assert summary["problems"] == 0 and summary["timerUnits"] == 83
    assert summary["timer"]["pending"] == 70 and summary["timer"]["recalled"] == 2


def test_recover_after_a_crash_marker_changes_no_timer_byte(timer5, run_cli):
    (timer5 / "abort").write_text("4242")
    before = {p: hashlib.sha256((timer5 / p).read_bytes()).hexdigest()
              for p in ("timerwheel", "config/timercheck", "timerlog/00000000000000000000",
                        "timerlog/00000000000000004096")}
    result = run_cli("recover", timer5, "--json")
    assert result.code == 0, result.err
    plan = result.json_lines()[0]
    assert plan["mode"] == "abnormal" and plan["left"] == []
    assert plan["timerRecovery"]["revisedSlots"] == 0 and plan["timerRecovery"]["deliveredTwice"] == 0
    assert {p: hashlib.sha256((timer5 / p).read_bytes()).hexdigest() for p in before} == before


# ------------------------------------------------------------------------- crashes

def _expected_after(c, at):
    """The wheel TimerMessageStore.recover leaves: the scan starts at the file holding
    lastTimerLogFlushPos - fileSize (file 0 here), so every unit is revised: lastPos is each
    slot's last unit, firstPos its first (kept from the wheel when it had the slot), num as
    the wheel had it (reviseSlot never recounts; 0 for a slot it did not have)."""
    full = replay(F["units"])
    return {i: [t, first, last, c["wheel"][i][3] if i in c["wheel"] else 0, 0]
            for i, (t, first, last, _, _) in full.items()}


@pytest.mark.parametrize("at", [3744, 4252, 4096, 1040])
def test_a_crash_before_the_wheel_was_flushed(at, timer5, run_cli):
    c = crash(timer5, F, at)
    expected = _expected_after(c, at)
    later = c["later"]
    twice = [u for u in later if not u["delete"]]         # a recall is never put back by the dequeue
    congest = sum(s[3] for i, s in expected.items() if s[0] * PRECISION >= READ_TIME)

    verify = run_cli("verify-crc", timer5, "--json")         # units the recovery puts back are no damage
    assert verify.code == 0, verify.out
    info = run_cli("info", timer5, "--json").json_lines()[0]["timer"]
    assert info["pending"] == congest and info["deliverable"] == 70 and info["recalled"] == 2
    assert info["putBackPending"] == len(pending_units(later))
    assert info["queueOffset"] == c["queueOffset"]
    assert info["deliveredTwice"] == len(twice) and info["deliveredTwiceKeys"] == [u["uniqKey"] for u in twice]
    wheel = run_cli("dump", timer5, "timerwheel", "--json")
    got = {s["slot"]: s for s in wheel.json_lines() if s["type"] == "timer_slot"}
    for index, e in F["slots"].items():
        assert got[index]["chain"] == e["chain"] and got[index]["lastPos"] == e["lastPos"], index

    dry = run_cli("recover", timer5, "--dry-run", "--json")
    assert dry.code == 1
    plan = dry.json_lines()[0]["timerRecovery"]
    assert plan["queueOffset"] == c["queueOffset"] and plan["lastUnitQueueOffset"] == F["units"][-1]["queueOffset"]
    assert plan["deliveredTwiceKeys"] == [u["uniqKey"] for u in twice]
    if twice:
        assert f"DELIVERS THEM TWICE ({twice[0]['uniqKey']}" in run_cli("recover", timer5, "--dry-run").out
    check_before = (timer5 / "config" / "timercheck").read_bytes()

    done = run_cli("recover", timer5, "--json")
    assert done.code == 0, done.err
    assert read_wheel(timer5, expected) == expected
    assert (timer5 / "config" / "timercheck").read_bytes() == check_before     # every load recovers from it
    assert run_cli("verify-crc", timer5).code == 0
    again = run_cli("recover", timer5, "--json")
    assert again.code == 0 and again.json_lines()[0]["timerRecovery"]["revisedSlots"] == 0
    assert run_cli("info", timer5, "--json").json_lines()[0]["timer"]["deliveredTwice"] == len(twice)


def test_a_timercheck_that_lags_a_flushed_wheel(timer5, run_cli):
    """The flush service writes the timercheck it prepared before flushing the wheel: the wheel
    holds every unit, the timercheck one flush less.  Nothing to put back; the queue offset
    still moves back behind the later units' messages."""
    c = crash(timer5, F, 3744, wheel_lags=False)
    twice = [u for u in c["later"] if not u["delete"]]
    info = run_cli("info", timer5, "--json").json_lines()[0]["timer"]
    assert (info["pending"], info["putBack"], info["deliveredTwice"]) == (70, 0, len(twice))
    result = run_cli("recover", timer5, "--json")
    assert result.code == 0, result.err
    assert result.json_lines()[0]["timerRecovery"]["revisedSlots"] == 0


def test_a_lost_timerlog_page_and_the_rescan_from_first_pos(timer5, run_cli):
    """The second timerlog file's units never reached the disk: the timerlog ends at 4096 (the
    first file ends with its BLANK), slots from the read time on pointing past it are revised
    again from the smallest firstPos (checkPhyPos, recoverAndRevise(minFirst, false)): their
    last surviving units.  reviseQueueOffset reads the offsetPy 24 bytes before the end: inside
    the BLANK's zeros, no record, so the timer queue restarts at the timercheck's offset."""
    (timer5 / "timerlog" / "00000000000000004096").write_bytes(bytes(4096))
    result = run_cli("dump", timer5, "timerwheel", "--json")
    got = {s["slot"]: s for s in result.json_lines() if s["type"] == "timer_slot"}
    assert got[699987]["lastPos"] == 312 and got[699987]["chain"] == [312, 260, 208]
    assert got[735987]["lastPos"] == 520 and got[735987]["chain"] == [520, 468]
    info = run_cli("info", timer5, "--json").json_lines()[0]["timer"]
    assert info["timerlogEnd"] == 4096 and info["queueOffset"] == F["pre"]["timercheck"]["lastTimerQueueOffset"]
    assert info["deliveredTwice"] == 0
    assert info["recalled"] == 0 and info["deliverable"] == 72          # the recalls went with the page


def test_a_slot_past_the_timerlog_end_is_lost(timer5, run_cli):
    """A pending slot pointing past the timerlog's end that no unit of the recovery's scan
    revises (its firstPos is past the end too, so checkPhyPos's rescan cannot start before it):
    the dequeue reads nothing there; verify-crc says its messages are lost.  (A lastPos alone
    past the end is no damage: the scan puts the slot's last unit back.)"""
    index = (READ_TIME // PRECISION + 3600) % SLOTS
    assert index not in F["slots"]
    with open(timer5 / "timerwheel", "r+b") as fh:
        fh.seek(index * 32)
        fh.write(struct.pack(">qqqii", READ_TIME // PRECISION + 3600, 9000, 9000, 1, 0))
        fh.seek(735987 * 32 + 16)
        fh.write(struct.pack(">q", 9000))
    verify = run_cli("verify-crc", timer5, "--scope", "timer", "--json")
    assert verify.code == 1
    problems = [(p["kind"], p["fileOffset"]) for p in verify.json_lines() if p["type"] == "problem"]
    assert problems == [("timer-slot-outside-timerlog", index * 32)]
    info = run_cli("info", timer5, "--json").json_lines()[0]["timer"]
    assert info["pending"] == 71 and info["deliverable"] == 70         # the slot's num counts; nothing is there


@pytest.mark.parametrize("seed", range(12))
def test_recover_mends_any_crash_of_the_timer_store(seed, timer5, run_cli):
    """The damaged-store property of recover, for the timer store: a kill at any unit boundary,
    with or without the wheel flushed, with or without a crash marker, and the commitlog's
    crash marker alone: recover exits 0, verifies clean, and leaves every chain the broker's."""
    rng = random.Random(seed)
    at = rng.choice([u["offset"] for u in F["units"]] + [F["end"]["maxOffset"]])
    c = crash(timer5, F, at, wheel_lags=rng.random() < 0.7, abort=rng.random() < 0.8)
    result = run_cli("recover", timer5, "--json")
    assert result.code == 0, (at, result.err)
    assert run_cli("verify-crc", timer5).code == 0, at
    assert read_wheel(timer5, F["slots"]) == {i: [s["timeMs"] // PRECISION, s["firstPos"], s["lastPos"],
                                                  _expected_after(c, at)[i][3], 0] for i, s in F["slots"].items()}
    wheel = run_cli("dump", timer5, "timerwheel", "--json").json_lines()
    assert {s["slot"]: s["chain"] for s in wheel if s["type"] == "timer_slot"} == \
        {i: s["chain"] for i, s in F["slots"].items()}
    assert all(i % SLOTS == i for i in F["slots"])


# ------------------------------------------------- the revision, against TimerWheel.reviseSlot

@given(st.lists(st.sampled_from([5, 6, 5 + SLOTS, 7 + SLOTS, 9]), min_size=1, max_size=60),
       st.sampled_from([1, 2, 7, 65536]))
@settings(max_examples=200, deadline=None)
def test_the_revision_is_revise_slot_unit_by_unit(units, chunk):
    """TimerWheel.reviseSlot(delivery, IGNORE, unit, true), one unit after the other, against
    the revision mqtool does a chunk at a time: seconds that share a slot index (a wheel round
    apart), slots that already hold the time (with a firstPos to keep) and ones that do not."""
    import numpy as np
    from types import SimpleNamespace

    from mqtool.formats import timer as fmt
    from mqtool.storage.timerview import TimerRecovery, TimerView

    base = 1795700000
    disk = np.zeros(fmt.SLOT_COUNT, dtype=fmt.SLOT_DTYPE)
    expected = {}
    for second in (5, 9):                           # the wheel already holds these two
        i = (base + second) % SLOTS
        disk[i] = (base + second, 7, 11, 3, 0)
        expected[i] = [base + second, 7, 11, 3, 0]
    data = b""
    for n, second in enumerate(units):
        data += struct.pack(">iqiqiqiiq", 52, -1, 1, (base + second) * 1000 - 400, 400, 0, 1, 0, 0)
        time_slot, i, pos = base + second, (base + second) % SLOTS, n * 52
        row = expected.setdefault(i, [0, 0, 0, 0, 0])
        if row[0] != time_slot:                         # putSlot(timeMs, lastPos, lastPos): num, magic stay
            row[0], row[1], row[2] = time_slot, pos, pos
        else:
            row[2] = pos
    view = SimpleNamespace(wheel=disk.copy(), disk_wheel=disk, precision=1000, read_time_ms=0)
    TimerView._revise(view, SimpleNamespace(buf=data, file_from_offset=0), 0, len(units), count=True,
                      rec=TimerRecovery(0, 0), chunk=chunk)
    got = {i: [int(view.wheel[i][k]) for k in fmt.SLOT_DTYPE.names] for i in expected}
    assert got == expected


@pytest.mark.parametrize("days", [6, 8, 10])
def test_a_broker_starting_more_than_a_wheel_later_skips_slots(days, extracted):
    """recover(): currReadTimeMs = max(lastReadTimeMs, now - 7 days + 60 slots): the slots
    before that are never read; their messages are counted as skipped on restart."""
    from mqtool.storage import commitlog, timerview
    from mqtool.storage.settings import open_layout

    layout = open_layout(str(extracted("timer5")), None, ())
    now = READ_TIME + days * 86_400_000
    floor = now - 7 * 86_400_000 + 60_000
    expected = sum(s["num"] for s in F["slots"].values() if s["pending"] and s["timeMs"] < floor)
    queue = commitlog.open_queue(layout)
    try:
        with timerview.open_view(layout, queue) as view:
            assert view.restart_skips(now) == expected
    finally:
        queue.close()
    assert (expected == 0) == (days == 6)
