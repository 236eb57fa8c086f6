"""Hostile file systems, one case each: a store file that cannot be read, links out of the store,
special files where files belong, unbounded inputs, odd command lines."""

from __future__ import annotations

import os
import shutil
import threading

import pytest

from helpers.damage import state

WRITERS = [("recover", "{store}"), ("rebuild-cq", "{store}"), ("clean", "--force", "{store}"),
           ("append", "{store}", "--topic", "BasicTopic", "--body", "x")]
READERS = [("info", "{store}"), ("dump", "{store}", "commitlog"), ("verify-crc", "{store}"), ("stats", "{store}"),
           ("recover", "--dry-run", "{store}")]


def _args(command, store):
    return [a.format(store=store) for a in command]


def _first_commitlog_file(store):
    return sorted((store / "commitlog").iterdir())[0]


@pytest.mark.parametrize("command", READERS + WRITERS)
def test_a_dangling_link_as_a_commitlog_file_is_named_by_every_command(command, store_copy, run_cli):
    store = store_copy("multifile")
    victim = sorted((store / "commitlog").iterdir())[1]
    victim.unlink()
    victim.symlink_to("/nonexistent/x")
    before = state(store)
    result = run_cli(*_args(command, store))
    assert result.code == 4, result.out + result.err
    assert victim.name in result.err and "dangling symbolic link" in result.err
    assert state(store) == before


@pytest.mark.parametrize("what", ["directory", "fifo"])
@pytest.mark.parametrize("where", ["commitlog", "consumequeue"])
def test_something_else_where_a_store_file_belongs_is_unreadable_input(what, where, store_copy, run_cli):
    store = store_copy("basic")
    victim = (_first_commitlog_file(store) if where == "commitlog"
              else sorted((store / "consumequeue" / "BasicTopic" / "1").iterdir())[0])
    victim.unlink()
    victim.mkdir() if what == "directory" else os.mkfifo(victim)
    before = state(store)
    readers = READERS if where == "commitlog" else [
        ("info", "{store}"), ("verify-crc", "{store}"), ("recover", "--dry-run", "{store}"),
        ("dump", "{store}", "consumequeue")]    # (dump commitlog and stats read no consume queue)
    for command in readers + WRITERS:
        result = run_cli(*_args(command, store))
        assert result.code == 4, (command, result.code, result.err)
        assert str(victim.relative_to(store)) in result.err, result.err
        assert ("a folder" if what == "directory" else "a FIFO") in result.err
    assert state(store) == before


def test_a_commitlog_file_named_past_a_java_long_is_a_problem_not_a_crash(store_copy, run_cli):
    store = store_copy("basic")
    first = _first_commitlog_file(store)
    first.rename(first.with_name("09223372036854775807"))
    dump = run_cli("dump", store, "commitlog")
    assert dump.code == 1 and "bad-file-name" in dump.err
    verify = run_cli("verify-crc", store)
    assert verify.code == 1 and "09223372036854775807" in verify.out
    assert "unit-outside-commitlog" in verify.out   # every unit points where no file is left
    recover = run_cli("recover", store)
    assert recover.code == 4 and "2^63 - 1" in recover.err


def test_export_escapes_a_nul_in_a_topic(store_copy, run_cli, tmp_path):
    store = store_copy("basic")
    path = _first_commitlog_file(store)
    data = bytearray(path.read_bytes())
    at = data.find(b"BasicTopic")
    data[at + 3] = 0     # the topic of the first record: "Bas\0cTopic" (4.9.8 records have no CRC over it)
    path.write_bytes(bytes(data))
    out = tmp_path / "out"
    result = run_cli("export", store, "--out", out, "--format", "jsonl")
    assert result.code == 0, result.err
    assert (out / "topic=Bas%00cTopic").is_dir()
    assert "\\x00" in result.out and "\x00" not in result.out    # the table shows it, escaped


LINKED = ["lock", "abort", "checkpoint", "index", "consumequeue/BasicTopic", "consumequeue/BasicTopic/0",
          "cqfile", "clfile", "quarantine", "trash"]


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("name", LINKED)
def test_writers_refuse_links_where_they_write(name, command, store_copy, run_cli, tmp_path):
    store = store_copy("basic")
    outside = tmp_path / "outside"
    name, target = _link_out(store, name, outside)
    before, outside_before = state(store), state(outside)
    result = run_cli(*_args(command, store))
    assert result.code == 3, (result.code, result.err)
    assert f"{name}: a symbolic link to {target}" in result.err
    assert state(store) == before and state(outside) == outside_before
    shown = run_cli("info", "--json", store)
    assert shown.code == 1 and shown.json_lines()[0]["links"][0]["path"] == name
    assert "symbolic-link" in run_cli("verify-crc", store).out


@pytest.mark.parametrize("name", LINKED)
def test_verify_counts_a_link_out_of_the_store_as_a_problem(name, store_copy, run_cli, tmp_path):
    store = store_copy("basic")
    _link_out(store, name, tmp_path / "outside")
    result = run_cli("verify-crc", store)
    assert result.code == 1, result.out + result.err
    assert "; 1 problem(s)" in result.err and "symbolic-link" in result.err
    shown = run_cli("verify-crc", "--json", store)
    summary = [line for line in shown.json_lines() if line.get("type") == "summary"][0]
    assert shown.code == 1 and summary["problems"] == 1 and summary["problemsByKind"] == {"symbolic-link": 1}


def _link_out(store, name, outside):
    """Moves the store's `name` out to outside/target (or makes one there) and links it in: (its path, target)."""
    outside.mkdir()
    if name == "cqfile":
        name = str(sorted((store / "consumequeue" / "BasicTopic" / "0").iterdir())[0].relative_to(store))
    elif name == "clfile":
        name = str(_first_commitlog_file(store).relative_to(store))
    inside = store / name
    target = outside / "target"
    if inside.exists():
        shutil.move(inside, target)
    elif name in ("quarantine", "trash"):
        target.mkdir()
    else:
        target.write_bytes(b"precious bytes")
    inside.symlink_to(target)
    return name, target


def test_a_commitlog_folder_on_another_volume_is_fine(store_copy, run_cli, tmp_path):
    store = store_copy("basic")
    elsewhere = tmp_path / "volume2" / "commitlog"
    elsewhere.parent.mkdir()
    shutil.move(store / "commitlog", elsewhere)
    (store / "commitlog").symlink_to(elsewhere)
    assert run_cli("append", store, "--topic", "BasicTopic", "--body", "x").code == 0
    assert run_cli("recover", store).code == 0
    assert run_cli("verify-crc", store).code == 0
    assert run_cli("info", store).code == 0


def test_config_inputs_are_bounded_and_regular(extracted, run_cli, tmp_path):
    store = extracted("basic")
    result = run_cli("info", store, "--config", "/dev/zero")
    assert result.code == 2 and "not a regular file" in result.err
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = []
    worker = threading.Thread(target=lambda: done.append(run_cli("info", store, "--config", fifo)), daemon=True)
    worker.start()
    worker.join(30)
    assert done and done[0].code == 2, "a FIFO as --config blocked"
    big = tmp_path / "big.conf"
    with open(big, "wb") as fh:
        fh.truncate(17 << 20)
    result = run_cli("info", store, "--config", big)
    assert result.code == 2 and "longer than" in result.err


def test_append_inputs_are_bounded(store_copy, run_cli, tmp_path, monkeypatch):
    store = store_copy("basic")
    before = state(store)
    for args in (["--input", "/dev/zero"], ["--topic", "T", "--body-file", "/dev/zero"]):
        result = run_cli("append", store, *args)
        assert result.code == 2 and "character device" in result.err
    from mqtool.broker import ingest

    monkeypatch.setattr(ingest, "MAX_LINE", 1000)
    long_line = tmp_path / "long.jsonl"
    long_line.write_text('{"topic": "T", "body": "' + "x" * 2000 + '"}\n')
    result = run_cli("append", store, "--input", long_line)
    assert result.code == 2 and "input line 1: longer than 1,000 bytes" in result.err
    assert state(store) == before


def test_odd_command_lines(extracted, run_cli, tmp_path):
    store = extracted("basic")
    for args in (["export", "=", "--out", tmp_path / "d"], ["stats", "x="], ["info", ""]):
        result = run_cli(*args)
        assert result.code == 2, (args, result.err)
    assert not (tmp_path / "d").exists()
    warned = run_cli("info", store, "--set", "bogusKey=1")
    assert warned.code == 0 and "bogusKey" in warned.err and "warning" in warned.err
    quiet = run_cli("info", store, "--set", "enableLmq=false", "--set", "mappedFileSizeCommitLog=65536")
    assert quiet.code == 0 and "warning" not in quiet.err
    for bad in ("storeFormat=7", "flushDiskType=FAST", "maxIndexNum=x", "messageIndexEnable=yes", "enableLmq=yes",
                "enableMultiDispatch=1", "mapperFileSizeBatchConsumeQueue=many", "mapperFileSizeBatchConsumeQueue=0"):
        result = run_cli("info", store, "--set", bad)
        assert result.code == 2, (bad, result.err)


def test_rebuild_cq_says_which_file_size_it_used(store_copy, run_cli):
    store = store_copy("basic")
    shutil.rmtree(store / "consumequeue")
    result = run_cli("rebuild-cq", "--dry-run", store)
    assert "warning" in result.err and "6000000 bytes, RocketMQ's default" in result.err
    assert "consume queue files: 6000000 bytes (RocketMQ's default)" in result.out
    given = run_cli("rebuild-cq", "--json", store, "--set", "mappedFileSizeConsumeQueue=6000")
    assert given.code == 0 and "warning" not in given.err
    assert given.json_lines()[0]["fileSizes"] == [{"files": "consume queue files", "size": 6000, "from": "--set"}]
    kept = run_cli("rebuild-cq", "--json", store)     # now there are files to read the size off
    assert kept.json_lines()[0]["fileSizes"][0]["from"] == "the store's files" and "warning" not in kept.err
    assert (store / "consumequeue" / "BasicTopic" / "0" / "00000000000000000000").stat().st_size == 6000


def test_control_characters_in_data_are_escaped_on_the_terminal(store_copy, run_cli):
    store = store_copy("basic")
    result = run_cli("append", store, "--topic", "BasicTopic", "--keys", "k\x1b[31mred", "--body", "x")
    assert result.code == 0
    shown = run_cli("lookup-by-key", store, "--topic", "BasicTopic", "k\x1b[31mred")
    assert "\x1b" not in shown.out and "\\x1b[31mred" in shown.out
