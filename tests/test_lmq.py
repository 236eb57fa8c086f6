"""LMQ (enableLmq, enableMultiDispatch): %LMQ% consume queues whose units point at records of other
topics.  The stores are built by tests/helpers/lmqgen.py from the Java source's facts (the records by
`mqtool append`, the LMQ queues with struct), for 4.9.8 and 5.3.3 record formats; what each test
expects comes from that spec, never from mqtool's LMQ code.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.lmqgen import Lmq, append_messages, broker_view, lmq_files, spec, write_lmq_queues

CQ_FILE = 200          # consume queue files of 10 units: LMQ queues span several files
FORMATS = {"4.9.8": (), "5.3.3": ("--set", "storeFormat=5")}


def messages(count: int = 30) -> list[Lmq]:
    """30 messages of two topics; most go to one or two of three LMQ queues, some to none."""
    out = []
    for i in range(count):
        lmq = [name for k, name in enumerate(("%LMQ%alpha", "%LMQ%beta", "%LMQ%gamma")) if i % (k + 2) == 0]
        out.append(Lmq("Orders" if i % 3 else "Payments", i % 2, f"Tag{i % 4}", lmq))
    return out


def lmq_store(tmp_path: Path, run_cli, fmt: str, count: int = 30) -> tuple[Path, list[Lmq], dict]:
    store = tmp_path / "store"
    msgs = messages(count)
    append_messages(run_cli, store, msgs, tmp_path, "--set", f"mappedFileSizeConsumeQueue={CQ_FILE}",
                    "--set", "mappedFileSizeCommitLog=8192", *FORMATS[fmt])
    files = write_lmq_queues(store, msgs, CQ_FILE)
    return store, msgs, files


def problems(run_cli, store, *args) -> list[tuple]:
    result = run_cli("verify-crc", store, "--json", *args)
    return [(p["kind"], p["file"]) for p in result.json_lines() if p["type"] == "problem"]


def snapshot(store: Path, under: str = "consumequeue") -> dict:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted((store / under).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_spec_lays_out_lmq_queues_over_several_files(tmp_path, run_cli, fmt):
    store, msgs, files = lmq_store(tmp_path, run_cli, fmt)
    view = broker_view(msgs)
    assert sorted(view) == ["%LMQ%alpha", "%LMQ%beta", "%LMQ%gamma"]
    assert len(view["%LMQ%alpha"]) == 15 and len([f for f in files if "%LMQ%alpha" in f]) == 2
    info = run_cli("info", store, "--json").json_lines()[0]
    assert "lmq" in info["features"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_verify_reads_lmq_units_as_the_broker_wrote_them(tmp_path, run_cli, fmt):
    store, msgs, _ = lmq_store(tmp_path, run_cli, fmt)
    result = run_cli("verify-crc", store, "--json")
    assert result.code == 0, result.out
    summary = result.json_lines()[-1]
    assert summary["units"] == 30 + sum(len(m.lmq) for m in msgs)


def test_verify_finds_damage_in_lmq_queues(tmp_path, run_cli):
    store, msgs, files = lmq_store(tmp_path, run_cli, "5.3.3")
    alpha = store / "consumequeue" / "%LMQ%alpha" / "0" / f"{0:020d}"
    data = bytearray(alpha.read_bytes())
    data[20:40], data[40:60] = data[40:60], data[20:40]         # two units swapped
    alpha.write_bytes(bytes(data))
    shutil.rmtree(store / "consumequeue" / "%LMQ%gamma")          # a whole LMQ queue lost
    beta = sorted((store / "consumequeue" / "%LMQ%beta" / "0").iterdir())[-1]
    data = bytearray(beta.read_bytes())
    last = len(data.rstrip(b"\0")) // 20 * 20 - (20 if len(data.rstrip(b"\0")) % 20 == 0 else 0)
    data[last + 12:last + 20] = (12345).to_bytes(8, "big")       # its last unit's tags code
    beta.write_bytes(bytes(data))
    found = problems(run_cli, store)
    rel = str(alpha.relative_to(store))
    assert found.count(("unit-wrong-queue-offset", rel)) == 2
    assert ("unit-wrong-tags-code", str(beta.relative_to(store))) in found
    assert ("cq-missing", "consumequeue/%LMQ%gamma/0") in found
    assert len(found) == 4, found


@pytest.mark.parametrize("fmt", FORMATS)
def test_rebuild_cq_writes_lmq_queues_byte_for_byte(tmp_path, run_cli, fmt):
    store, msgs, files = lmq_store(tmp_path, run_cli, fmt)
    before = snapshot(store)
    shutil.rmtree(store / "consumequeue" / "%LMQ%beta" / "0")
    (store / "consumequeue" / "%LMQ%beta" / "0").mkdir()
    result = run_cli("rebuild-cq", store, "--json")
    assert result.code == 0, result.err
    assert snapshot(store) == before
    assert problems(run_cli, store) == []


def test_rebuild_cq_of_one_lmq_queue(tmp_path, run_cli):
    store, msgs, files = lmq_store(tmp_path, run_cli, "4.9.8")
    before = snapshot(store)
    shutil.rmtree(store / "consumequeue" / "%LMQ%alpha")
    result = run_cli("rebuild-cq", store, "--topic", "%LMQ%alpha", "--json")
    assert result.code == 0, result.err
    assert snapshot(store) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_recover_multi_dispatches_what_a_crash_left_out(tmp_path, run_cli, fmt):
    """A crash after the commitlog was written: the last records' units (their own and their LMQ
    ones) never reached the consume queues.  Abnormal recovery dispatches them again."""
    store, msgs, files = lmq_store(tmp_path, run_cli, fmt)
    before = snapshot(store)
    cut = msgs[-8].offset
    for path in (store / "consumequeue").rglob("*"):
        if path.is_file():
            data = bytearray(path.read_bytes())
            for pos in range(0, len(data), 20):
                if int.from_bytes(data[pos:pos + 8], "big") >= cut and any(data[pos:pos + 20]):
                    data[pos:pos + 20] = bytes(20)
            if any(data):
                path.write_bytes(bytes(data))
            else:
                path.unlink()
    assert snapshot(store) != before
    (store / "abort").write_bytes(b"")
    result = run_cli("recover", store, "--json")
    assert result.code == 0, result.out + result.err
    assert snapshot(store) == before


@pytest.mark.parametrize("fmt", FORMATS)
def test_clean_reclaims_lmq_queue_files_as_the_other_queues(tmp_path, run_cli, fmt):
    """CleanConsumeQueueService walks every queue of the table, LMQ ones too: a file whose last
    unit points below the commitlog's new minimum offset goes (never a queue's last file)."""
    store, msgs, files = lmq_store(tmp_path, run_cli, fmt, count=120)
    before = {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()}
    logs = sorted((store / "commitlog").iterdir())
    assert len(logs) >= 3          # two closed files to delete, the active one kept
    new_min = int(logs[2].name)
    gone = set()
    for name in broker_view(msgs):
        paths = sorted(p for p in files if p.startswith(f"consumequeue/{name}/"))
        for path in paths[:-1]:
            data = files[path]
            last = max(pos for pos in range(0, len(data), 20) if any(data[pos:pos + 20]))
            if int.from_bytes(data[last:last + 8], "big") >= new_min:
                break
            gone.add(path)
    assert len(gone) >= 3
    result = run_cli("clean", store, "--now", "--retention-ms", "0", "--max-files", "2", "--json")
    assert result.code == 0, result.err
    staged = {line["file"] for line in result.json_lines()
              if line["type"] == "decision" and line["kind"] == "consumequeue" and "%LMQ%" in line["file"]}
    assert staged == gone
    assert {f for f in files if (store / f).exists()} == set(files) - gone
    assert {str(p.relative_to(store / "trash")) for p in (store / "trash" / "consumequeue").rglob("*")
            if p.is_file() and "%LMQ%" in str(p)} == gone
    assert problems(run_cli, store) == []
    assert run_cli("clean", store, "--undo").code == 0
    assert {str(p.relative_to(store)): p.read_bytes() for p in store.rglob("*") if p.is_file()
            and not str(p.relative_to(store)).startswith(("trash", "config", "checkpoint"))} == {
        k: v for k, v in before.items() if not k.startswith(("trash", "config", "checkpoint"))}


def test_clean_names_unread_lmq_messages_from_lmqConsumerOffset_json(tmp_path, run_cli):
    """A broker with enableLmq keeps every consumer offset in config/lmqConsumerOffset.json
    (LmqConsumerOffsetManager: an LMQ group's offset of queue 0 under lmqOffsetTable "topic@group")."""
    store, _, _ = lmq_store(tmp_path, run_cli, "4.9.8", count=120)
    (store / "config").mkdir(exist_ok=True)
    (store / "config" / "lmqConsumerOffset.json").write_text(json.dumps(
        {"offsetTable": {}, "lmqOffsetTable": {"%LMQ%alpha@%LMQ%reader": 1}}))
    args = ("clean", store, "--now", "--retention-ms", "0", "--max-files", "2", "--json", "--dry-run")
    lines = run_cli(*args).json_lines()
    queue = next(l for l in lines if l["type"] == "queue" and l["topic"] == "%LMQ%alpha")
    assert queue["minOffsetAfter"] > 1
    losses = [(l["group"], l["topic"], l["queueId"], l["consumerOffset"], l["unreadRemoved"])
              for l in lines if l["type"] == "loss"]
    assert losses == [("%LMQ%reader", "%LMQ%alpha", 0, 1, queue["minOffsetAfter"] - max(1, queue["minOffsetBefore"]))]
    assert lines[-1]["unreadMessagesRemoved"] == losses[0][-1]
    off = run_cli(*args, "--set", "enableLmq=false")       # such a broker reads consumerOffset.json only
    assert [l for l in off.json_lines() if l["type"] == "loss"] == []
    assert "there is no config/consumerOffset.json" in off.err


def test_without_multi_dispatch_lmq_units_are_units_of_another_topic(tmp_path, run_cli):
    store, msgs, _ = lmq_store(tmp_path, run_cli, "4.9.8")
    found = problems(run_cli, store, "--set", "enableMultiDispatch=false")
    assert {kind for kind, _ in found} == {"unit-wrong-topic"}
    assert len(found) == sum(len(m.lmq) for m in msgs)


def test_lmq_files_match_the_spec():
    """The generator itself: queue offsets count per LMQ queue from 0, units land at them."""
    msgs = messages()
    lines = spec(msgs)
    assert lines[6]["properties"] == {"INNER_MULTI_DISPATCH": "%LMQ%alpha,%LMQ%beta",
                                      "INNER_MULTI_QUEUE_OFFSET": "3,2"}
    for i, m in enumerate(msgs):
        m.offset, m.size = 1000 * i, 200
    files = lmq_files(msgs, CQ_FILE)
    view = broker_view(msgs)
    assert [u[0] for u in view["%LMQ%beta"]] == list(range(10))
    first = files[f"consumequeue/%LMQ%beta/0/{0:020d}"]
    assert int.from_bytes(first[20:28], "big") == 3000       # message 3 is %LMQ%beta's second


def test_multi_dispatch_rules_of_each_broker_generation():
    """ConsumeQueue.multiDispatchLmqQueue (4.9.8, 5.3.3) and MultiDispatchUtils (5.3.3), by hand."""
    from mqtool.formats.multidispatch import Settings, targets

    props = {"INNER_MULTI_DISPATCH": "%LMQ%a,plain,%LMQ%b,", "INNER_MULTI_QUEUE_OFFSET": "4,7,9"}
    v4, v5 = Settings(enable_lmq=True, is_5x=False), Settings(enable_lmq=True, is_5x=True)
    assert targets("T", 3, props, v4) == [("%LMQ%a", 0, 4), ("plain", 3, 7), ("%LMQ%b", 0, 9)]   # split drops ""
    assert targets("T", 3, props, Settings(enable_lmq=False, is_5x=False))[0] == ("%LMQ%a", 3, 4)
    assert targets("%RETRY%g", 3, props, v5) == [] and len(targets("%RETRY%g", 3, props, v4)) == 3
    slash = {"INNER_MULTI_DISPATCH": "%LMQ%a/x,%LMQ%b", "INNER_MULTI_QUEUE_OFFSET": "4,7"}
    assert targets("T", 3, slash, v5) == [("%LMQ%b", 0, 7)] and len(targets("T", 3, slash, v4)) == 2
    assert targets("T", 3, {**props, "INNER_MULTI_QUEUE_OFFSET": "4,7"}, v4) == []          # counts differ
    assert targets("T", 3, {**props, "INNER_MULTI_QUEUE_OFFSET": "4,x,9"}, v4) == [("%LMQ%a", 0, 4)]
    assert targets("T", 3, {"INNER_MULTI_DISPATCH": "%LMQ%a"}, v4) == []
