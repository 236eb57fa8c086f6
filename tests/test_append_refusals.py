"""`mqtool append` never stores what verify-crc then rejects (issue 22, 1): texts holding the
properties' separator bytes, and the names a broker's LMQ multi-dispatch reserves, are refused
line by line (exit 2, nothing of the line stored); keys are indexed as a broker splits them."""

from __future__ import annotations

import json

import pytest


def _append(run_cli, store, lines, *args):
    path = store.parent / f"{store.name}-input.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run_cli("append", store, "--input", path, *args)


BAD = [
    pytest.param({"topic": "T", "keys": "a\u0002b", "body": "x"}, "keys", id="key-0x02"),
    pytest.param({"topic": "T", "keys": ["a", "b\u0001"], "body": "x"}, "keys", id="key-list-0x01"),
    pytest.param({"topic": "T", "tags": "a\u0001b", "keys": "k", "body": "x"}, "tags", id="tags-0x01"),
    pytest.param({"topic": "T", "properties": {"p": "v\u0002w"}, "keys": "k", "body": "x"}, "property",
                 id="value-0x02"),
    pytest.param({"topic": "T", "properties": {"p\u0001q": "v"}, "keys": "k", "body": "x"}, "property name",
                 id="name-0x01"),
    pytest.param({"topic": "%LMQ%abc", "body": "x"}, "%LMQ%", id="lmq-topic"),
    pytest.param({"topic": "T", "properties": {"INNER_MULTI_DISPATCH": "%LMQ%x"}, "body": "x"},
                 "INNER_MULTI_DISPATCH", id="multi-dispatch"),
    pytest.param({"topic": "T", "properties": {"INNER_MULTI_QUEUE_OFFSET": "0"}, "body": "x"},
                 "INNER_MULTI_QUEUE_OFFSET", id="multi-queue-offset"),
]


@pytest.mark.parametrize("line,named", BAD)
@pytest.mark.parametrize("runs", [1, 40], ids=["one", "run"])
def test_a_line_whose_texts_a_broker_reads_otherwise_is_refused(run_cli, tmp_path, line, named, runs):
    """One good line, then the bad one (alone, or inside a run long enough for the compiled path):
    exit 2 naming the line, nothing of the bad one stored (the good one is, with --batch 1);
    verify-crc is clean."""
    store = tmp_path / "s"
    good = {"topic": "T", "keys": "good", "body": "ok"}
    result = _append(run_cli, store, [good] + [line] * runs, "--batch", "1" if runs == 1 else "4096")
    assert result.code == 2, result.out + result.err
    assert "input line 2" in result.err and named in result.err
    dump = run_cli("dump", store, "commitlog", "--json") if (store / "commitlog").is_dir() else None
    records = [r for r in dump.json_lines() if r["type"] == "message"] if dump else []
    assert [r["keys"] for r in records] == (["good"] if runs == 1 else [])
    if runs == 1:
        check = run_cli("verify-crc", store, "--json")
        assert check.code == 0, check.out


def test_the_issue_reproduction_key_separator(run_cli, tmp_path):
    store = tmp_path / "k"
    assert _append(run_cli, store, [{"topic": "T", "keys": "a\u0002b", "body": "x"}]).code == 2
    assert not (store / "commitlog").exists() or not any((store / "commitlog").iterdir())


def test_keys_split_on_the_key_separator_are_indexed_as_the_broker_splits_them(run_cli, tmp_path):
    """KEY_SEPARATOR is a space: a key holding spaces is several keys to a broker's index."""
    store = tmp_path / "s"
    result = _append(run_cli, store, [{"topic": "T", "keys": ["a b", "", "c"], "body": "x"},
                                      {"topic": "T", "keys": " d  e ", "body": "y"}])
    assert result.code == 0, result.err
    assert run_cli("verify-crc", store).code == 0
    for key, body in (("a", "x"), ("b", "x"), ("c", "x"), ("d", "y"), ("e", "y")):
        found = run_cli("lookup-by-key", store, key, "--topic", "T", "--json").json_lines()
        assert [m.get("body") for m in found if m.get("type") == "message"] == [
            __import__("base64").b64encode(body.encode()).decode()], key


def test_allow_system_topics_stores_the_reserved_names_as_given(run_cli, tmp_path):
    """The test stores of LMQ (tests/helpers/lmqgen.py) are built this way; separators stay refused."""
    store = tmp_path / "s"
    line = {"topic": "T", "properties": {"INNER_MULTI_DISPATCH": "%LMQ%x", "INNER_MULTI_QUEUE_OFFSET": "0"},
            "body": "x"}
    assert _append(run_cli, store, [line], "--allow-system-topics").code == 0
    assert _append(run_cli, store, [{"topic": "T", "keys": "a\u0002", "body": "x"}],
                   "--allow-system-topics").code == 2
