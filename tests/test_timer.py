"""The 5.x timer store (timerwheel, timerlog/, config/timercheck): schemas, dump, verify-crc's
timer scope, what recover and clean leave dangling, and the pending counts of info and stats.

No fixture holds a timer store (the 5.3.3 fixture was written with the store alone), so stores
are built by tests/helpers/timergen.py from the Java source's facts: the records by `mqtool append`,
the timer files with struct, as TimerMessageStore.doEnqueue writes them.  Expected values come
from that spec (which message is due when, where append put it), never from mqtool's timer code.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from helpers.timergen import BLANK_MAGIC, UNIT, WRITE_TIME, Timed, append_timer_messages, string_hash, write_timer_store

from mqtool.formats import timer as fmt
from mqtool.formats.javastr import java_hash

READ_TIME = WRITE_TIME + 100_000      # the timercheck's lastReadTimeMs: slots before it were read
FILE = 1040                           # timerlog files of 20 units: 19 fit before a BLANK


def spec() -> list[Timed]:
    """40 timer messages, 4 per delivery second, so slots chain several units; one delete marker."""
    out = []
    for i in range(40):
        due = WRITE_TIME + 60_000 + (i // 4) * 10_000 + 17      # due seconds from 60 s to 150 s
        out.append(Timed("Orders" if i % 3 else "Payments", due, body=f"timer #{i} " + "x" * 1500))
    out[-1].magic = 1 | 4                                       # MAGIC_DELETE: cancels, counts -1
    return out


@pytest.fixture
def timer_store(store_copy, run_cli, tmp_path):
    store = store_copy("basic5")
    messages = spec()
    append_timer_messages(run_cli, store, messages, tmp_path)
    slots = write_timer_store(store, messages, read_time_ms=READ_TIME, file_size=FILE)
    return store, messages, slots


def pending(messages) -> list[Timed]:
    return [m for m in messages if m.delivery_ms // 1000 * 1000 >= READ_TIME]


def per_topic(messages) -> dict:
    out = {}
    for m in messages:
        if not m.magic & 4:
            out[m.real_topic] = out.get(m.real_topic, 0) + 1
    return dict(sorted(out.items()))


def digest(*paths) -> dict:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for path in paths
            for p in ([path] if path.is_file() else sorted(path.iterdir()))}


# ------------------------------------------------------------------------- formats

def test_geometry_is_the_java_sources():
    assert fmt.WHEEL_SIZE == 38_707_200                       # the number: 7 x 86400 x 2 x 32
    assert fmt.BLANK_MAGIC == (0xBBCCDDEE ^ 1880681594) and fmt.BLANK_MAGIC_SIGNED < 0
    assert fmt.UNIT_SIZE == UNIT.size == 4 + 8 + 4 + 8 + 4 + 8 + 4 + 4 + 8
    # TimerLog.getOffsetForLastUnit for the default 100 MiB file: whole units before a 16-byte blank
    size = 100 * 1024 * 1024
    assert fmt.last_unit_offset(size) == ((size - 16) // 52 - 1) * 52
    assert java_hash("Orders") == string_hash("Orders")


units = st.tuples(st.just(52), st.integers(-1, 2**62), st.integers(0, 15), st.integers(0, 2**62),
                  st.integers(-2**31, 2**31 - 1), st.integers(0, 2**62), st.integers(1, 2**31 - 1),
                  st.integers(-2**31, 2**31 - 1), st.just(0))


@given(units)
def test_unit_schema_numpy_decoder_and_the_java_layout_agree(values):
    data = UNIT.pack(*values)
    parsed = fmt.UNIT.parse(data)
    row = fmt.units(data)[0]
    names = ("size", "prevPos", "magic", "currWriteTime", "delayedTime", "offsetPy", "sizePy", "realTopicHash",
             "reserved")
    assert [parsed[n] for n in names] == list(values) == [int(row[n]) for n in names]
    assert fmt.UNIT.build(parsed) == data


@given(st.integers(0, 2**40), st.integers(-1, 2**40), st.integers(-1, 2**40), st.integers(-2**31, 2**31 - 1))
def test_slot_schema_and_numpy_decoder_agree(time_slot, first, last, num):
    data = struct.pack(">qqqii", time_slot, first, last, num, 0)
    parsed = fmt.SLOT.parse(data)
    row = fmt.wheel(data)[0]
    assert (parsed.timeSlot, parsed.firstPos, parsed.lastPos, parsed.num) == (time_slot, first, last, num)
    assert (int(row["timeSlot"]), int(row["firstPos"]), int(row["lastPos"]), int(row["num"])) == \
        (time_slot, first, last, num)
    assert fmt.SLOT.build(parsed) == data


def test_blank_and_checkpoint_schemas():
    blank = struct.pack(">iqi", 52, 0, fmt.BLANK_MAGIC_SIGNED)
    assert fmt.BLANK.parse(blank).size == 52 and fmt.BLANK.build({"size": 52, "zero": 0}) == blank
    page = struct.pack(">7q", 1, 2, 3, 4, 5, 6, 7).ljust(4096, b"\0")
    parsed = fmt.CHECKPOINT.parse(page)
    assert [parsed[n] for n in fmt.CHECKPOINT_FIELDS] == [1, 2, 3, 4, 5, 6, 7]


# ---------------------------------------------------------------------------- dump

def test_dump_shows_the_files_as_written(timer_store, run_cli):
    store, messages, slots = timer_store
    check = run_cli("dump", store, "timercheck", "--json")
    assert check.code == 0, check.err
    line = check.json_lines()[0]
    assert (line["lastReadTimeMs"], line["lastTimerLogFlushPos"], line["lastTimerQueueOffset"]) == \
        (READ_TIME, messages[-1].pos + 52, len(messages))

    wheel = run_cli("dump", store, "timerwheel", "--json")
    assert wheel.code == 0, wheel.err
    got = {s["slot"]: (s["timeSlot"], s["firstPos"], s["lastPos"], s["num"]) for s in wheel.json_lines()
           if s["type"] == "timer_slot"}
    assert got == slots

    log = run_cli("dump", store, "timerlog", "--json")
    assert log.code == 0, log.err
    lines = log.json_lines()
    rows = [u for u in lines if u["type"] == "timer_unit"]
    assert [(u["pos"], u["offsetPy"], u["sizePy"], u["deliveryMs"]) for u in rows] == \
        [(m.pos, m.offset, m.size, m.delivery_ms) for m in messages]
    assert [u["pending"] for u in rows] == [m in pending(messages) for m in messages]
    assert all(b["size"] == FILE - 19 * 52 for b in lines if b["type"] == "timer_blank")
    assert len([b for b in lines if b["type"] == "timer_blank"]) == (len(messages) - 1) // 19
    assert lines[-1]["units"] == len(messages) and lines[-1]["problems"] == 0

    by_topic = run_cli("dump", store, "timerlog", "--json", "--topic", "Payments")
    assert [u["offsetPy"] for u in by_topic.json_lines() if u["type"] == "timer_unit"] == \
        [m.offset for m in messages if m.real_topic == "Payments"]


def test_a_timerlog_file_is_not_read_as_a_commitlog(timer_store, run_cli):
    store, messages, _ = timer_store
    one = run_cli("dump", store / "timerlog" / f"{FILE:020d}", "--json")
    assert one.code == 0, one.err
    rows = [u for u in one.json_lines() if u["type"] == "timer_unit"]
    assert [u["pos"] for u in rows] == [m.pos for m in messages if FILE <= m.pos < 2 * FILE]
    assert not [p for p in one.json_lines() if p["type"] == "problem"]


# -------------------------------------------------------------------------- verify

def test_verify_checks_a_sound_timer_store_and_only_when_there_is_one(timer_store, run_cli, extracted):
    store, messages, _ = timer_store
    result = run_cli("verify-crc", store, "--json")
    assert result.code == 0, result.out
    summary = result.json_lines()[-1]
    assert summary["scopes"] == ["commitlog", "cq", "index", "timer"]
    assert summary["timerUnits"] == len(messages) and summary["unchecked"] == []
    plain = run_cli("verify-crc", extracted("basic5"), "--json").json_lines()[-1]
    assert plain["scopes"] == ["commitlog", "cq", "index"]
    for kind in ("timerlog", "timerwheel", "timercheck"):
        none = run_cli("dump", extracted("basic5"), kind)
        assert none.code == 4 and "timer" in none.err, (kind, none.err)


def _unit_field(store, pos, at, fmt_, value):
    path = store / "timerlog" / f"{pos - pos % FILE:020d}"
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt_, data, pos % FILE + at, value)
    path.write_bytes(bytes(data))


def _slot_field(store, slot, at, fmt_, value):
    with open(store / "timerwheel", "r+b") as fh:
        fh.seek(slot * 32 + at)
        fh.write(struct.pack(fmt_, value))


DAMAGE = {   # name: (how, the finding's kind)
    "bad magic": (lambda s, m, sl: _unit_field(s, m[20].pos, 12, ">i", 0x40), "bad-timer-unit"),
    "sizePy": (lambda s, m, sl: _unit_field(s, m[30].pos, 36, ">i", m[30].size + 1), "timer-unit-size-mismatch"),
    "offsetPy past the end": (lambda s, m, sl: _unit_field(s, m[31].pos, 28, ">q", 10 << 20),
                              "timer-unit-outside-commitlog"),
    "offsetPy at another topic": (lambda s, m, sl: _unit_field(s, m[32].pos, 28, ">q", 0), "timer-unit-wrong-topic"),
    "topic hash": (lambda s, m, sl: _unit_field(s, m[33].pos, 40, ">i", 7), "timer-unit-wrong-real-topic"),
    "prevPos of another slot": (lambda s, m, sl: _unit_field(s, m[21].pos, 4, ">q", m[0].pos), "timer-bad-prev"),
    "slot count": (lambda s, m, sl: _slot_field(s, max(sl), 24, ">i", 99), "timer-slot-count-mismatch"),
    # (a lastPos alone past the log is mended by the broker's timer recovery: it rescans from firstPos)
    "slot past the log": (lambda s, m, sl: (_slot_field(s, max(sl), 8, ">q", 1 << 30),
                                            _slot_field(s, max(sl), 16, ">q", 1 << 30)), "timer-slot-outside-timerlog"),
    "flush position": (lambda s, m, sl: _checkpoint(s, 8, 1 << 30), "timercheck-beyond-timerlog"),
}


def _checkpoint(store, at, value):
    path = store / "config" / "timercheck"
    data = bytearray(path.read_bytes())
    struct.pack_into(">q", data, at, value)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", list(DAMAGE))
def test_verify_finds_each_damage(name, timer_store, run_cli):
    store, messages, slots = timer_store
    how, kind = DAMAGE[name]
    how(store, messages, slots)
    result = run_cli("verify-crc", store, "--scope", "timer", "--json")
    assert result.code == 1, result.out
    kinds = [p["kind"] for p in result.json_lines() if p["type"] == "problem"]
    assert kind in kinds, kinds


def test_dump_and_verify_agree_on_what_lies_after_the_timerlogs_end(timer_store, run_cli):
    """A broker's recovery ends the timerlog at its first end (zeros or damage) and drops every
    later file: a later file holding a BLANK alone is data after the end, for dump and verify alike."""
    store, _, _ = timer_store
    files = sorted((store / "timerlog").iterdir())
    assert len(files) >= 3
    files[-2].write_bytes(bytes(FILE))                                           # the end: its first byte
    files[-1].write_bytes(struct.pack(">iqi", FILE, 0, BLANK_MAGIC).ljust(FILE, b"\0"))   # a BLANK, no unit
    verify = run_cli("verify-crc", store, "--scope", "timer", "--json")
    dump = run_cli("dump", store, "timerlog", "--json")
    after = [[(p["file"], p["offset"]) for p in r.json_lines() if p["type"] == "problem" and p["kind"] == "data-after-end"]
             for r in (verify, dump)]
    assert after[0] == after[1] and len(after[0]) == 1 and after[0][0][0].endswith(files[-1].name)
    assert verify.code == dump.code == 1


def test_a_unit_missing_from_its_slot_chain_is_found(timer_store, run_cli):
    """A slot whose units all lie before the file the broker's timer recovery rescans (the one
    holding lastTimerLogFlushPos minus one file) keeps its lastPos: a unit after it is lost."""
    store, messages, slots = timer_store
    _checkpoint(store, 0, WRITE_TIME + 50_000)   # read from 50 s: the 60 s slot (units 0-3, file 0) is pending
    last = messages[3]                       # a pending unit with an earlier one in its slot
    assert last.pos + 52 < FILE and messages[-1].pos - FILE >= FILE
    slot = last.delivery_ms // 1000 % (7 * 86400 * 2)
    _slot_field(store, slot, 16, ">q", slots[slot][2] - 52)     # lastPos one unit back
    kinds = [p["kind"] for p in run_cli("verify-crc", store, "--scope", "timer", "--json").json_lines()
             if p["type"] == "problem"]
    assert "timer-unit-not-in-wheel" in kinds


# ------------------------------------------------------------------ recover, clean

def _flip_body_byte(store, message):
    files = sorted((store / "commitlog").iterdir())
    size = files[0].stat().st_size
    path = files[message.offset // size]
    data = bytearray(path.read_bytes())
    data[message.offset % size + 400] ^= 0xFF                   # inside the 1.5 KB body: a CRC mismatch
    path.write_bytes(bytes(data))


def test_recover_reports_the_units_it_leaves_dangling_and_keeps_their_records(timer_store, run_cli):
    store, messages, _ = timer_store
    broken = messages[25]
    _flip_body_byte(store, broken)
    lost = [m for m in pending(messages) if m.offset >= broken.offset]
    timer_files = digest(store / "timerlog", store / "timerwheel", store / "config" / "timercheck")

    dry = run_cli("recover", store, "--dry-run", "--json")
    assert dry.code == 1
    plan = dry.json_lines()[0]
    assert plan["cut"] == broken.offset
    dangling = plan["timerDangling"]
    assert dangling["count"] == len(lost) and dangling["byTopic"] == {
        t: sum(1 for m in lost if m.real_topic == t) for t in {m.real_topic for m in lost}}
    assert [u["pos"] for u in dangling["units"]] == [m.pos for m in lost]
    text = run_cli("recover", store, "--dry-run")
    assert f"{len(lost)} timer unit(s) would be left dangling" in text.out
    assert not (store / "quarantine").exists()

    done = run_cli("recover", store, "--json")
    assert done.code == 1 and "timer-units.jsonl" in done.err, done.err   # recover's promise: it names what is left
    assert {p["kind"] for p in done.json_lines()[0]["left"]} <= {"timer-unit-not-a-record",
                                                                  "timer-unit-outside-commitlog"}
    quarantine = Path(done.json_lines()[0]["quarantine"])
    rows = [json.loads(line) for line in (quarantine / "timer-units.jsonl").read_text().splitlines()]
    assert [(r["offsetPy"], r["sizePy"], r["realTopic"]) for r in rows] == \
        [(m.offset, m.size, m.real_topic) for m in lost]
    saved = [e for e in json.loads((quarantine / "manifest.json").read_text())["entries"]
             if e["kind"] == "range" and "commitlog" in e["source"]]
    cut_file = sorted((store / "commitlog").iterdir())[-1]
    start = broken.offset - int(cut_file.name)
    assert saved and saved[0]["start"] == start                 # the records' bytes, kept
    kept = (quarantine / saved[0]["saved"]).read_bytes()
    first = lost[0]
    assert kept[first.offset - broken.offset + 4:][:4] == bytes.fromhex("DAA320A7")   # a record's magic code
    assert digest(store / "timerlog", store / "timerwheel", store / "config" / "timercheck") == timer_files
    after = run_cli("verify-crc", store, "--scope", "timer", "--json").json_lines()
    gone = ("timer-unit-not-a-record", "timer-unit-outside-commitlog")    # zeroed, or in a removed file
    assert {p["offset"] for p in after if p.get("kind") in gone} == {m.offset for m in lost}


def test_clean_stages_the_files_pending_timer_units_point_into(timer_store, run_cli):
    store, messages, _ = timer_store
    files = sorted((store / "commitlog").iterdir())
    size = files[0].stat().st_size
    old = time.time() - 100 * 3600
    os.utime(files[0], (old, old))
    lost = [m for m in pending(messages) if m.offset < size]
    timer_files = digest(store / "timerlog", store / "timerwheel", store / "config" / "timercheck")

    dry = run_cli("clean", store, "--now", "--delete-delay", "0", "--dry-run", "--json")
    assert dry.code == 0, dry.err
    lines = dry.json_lines()
    assert lines[-1]["timerDangling"]["count"] == len(lost)
    decision = next(d for d in lines if d["type"] == "decision" and d["file"] == f"commitlog/{files[0].name}")
    assert decision["action"] == "stage" and decision["timerUnits"] == len(lost)
    assert f"{len(lost)} timer unit(s) would be left dangling" in dry.err
    assert files[0].exists()

    done = run_cli("clean", store, "--now", "--delete-delay", "0", "--json")
    assert done.code == 0, done.err
    assert not files[0].exists()
    assert (store / "trash" / "commitlog" / files[0].name).exists()    # --delete-delay 0, yet kept
    again = run_cli("clean", store, "--now", "--delete-delay", "0", "--json")   # the next run, or the service's
    assert again.code == 0 and (store / "trash" / "commitlog" / files[0].name).exists()
    assert digest(store / "timerlog", store / "timerwheel", store / "config" / "timercheck") == timer_files
    undo = run_cli("clean", store, "--undo")
    assert undo.code == 0, undo.err
    assert files[0].exists()


# ---------------------------------------------------------------------- info, stats

def test_info_and_stats_count_pending_timer_messages_per_real_topic(timer_store, run_cli):
    store, messages, _ = timer_store
    expected = per_topic(pending(messages))
    info = run_cli("info", store, "--json")
    assert info.code == 0, info.err
    line = info.json_lines()[0]
    assert line["timer"]["byTopic"] == expected
    # pending: the wheel's counts (getAllCongestNum), where the delete unit counts -1; its record
    # names no TIMER_DEL_UNIQKEY, so it cancels nothing and every other message is delivered
    assert line["timer"]["deliverable"] == sum(expected.values()) and line["timer"]["deleteMarkers"] == 1
    assert line["timer"]["pending"] == sum(expected.values()) - 1 and line["timer"]["recalled"] == 0
    census = [e for e in line["census"] if e["feature"] == "timer"]
    assert {e["path"] for e in census} == {"timerwheel", "timerlog/", "config/timercheck"}
    assert {e["status"] for e in census} == {"understood"} and line["unchecked"] == []
    stats = run_cli("stats", store, "--json")
    assert stats.code == 0, stats.err
    got = {t["topic"]: t["pending"] for t in stats.json_lines() if t["type"] == "timer"}
    assert got == expected and stats.json_lines()[-1]["pendingTimerMessages"] == sum(expected.values())
