"""A live `mqtool append` fed through a pipe (issue 22, 3 and 4): it acknowledges each line as it
arrives (within 200 ms, also under SYNC_FLUSH, also with stdout on a file), and while it holds
the store every reader says so, on stderr and in --json, naming the process as info does."""

from __future__ import annotations

import json
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

_SCRIPT = Path(sys.executable).with_name("mqtool")
MQTOOL = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "mqtool"]
START = 60.0     # seconds a fresh process may take to load and open the store (the machine is shared)


def _line(i: int) -> bytes:
    return json.dumps({"topic": "Live", "keys": f"key-{i}", "body": f"message {i}"}).encode() + b"\n"


def _read_line(stream, timeout: float) -> bytes | None:
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline() if ready else None


class LiveAppend:
    """`mqtool append STORE --json ...` reading a pipe, its put lines read from another pipe."""

    def __init__(self, store: Path, *args, stdout=subprocess.PIPE, as_json=True):
        self.proc = subprocess.Popen(MQTOOL + ["append", str(store), *(["--json"] if as_json else []),
                                               *map(str, args)],
                                     stdin=subprocess.PIPE, stdout=stdout, stderr=subprocess.PIPE, bufsize=0)

    def send(self, i: int) -> None:
        self.proc.stdin.write(_line(i))

    def close(self) -> int:
        self.proc.stdin.close()
        code = self.proc.wait(timeout=60)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.parametrize("flush", ["async", "sync"])
def test_each_line_from_a_pipe_is_acknowledged_within_200_ms(tmp_path, flush):
    live = LiveAppend(tmp_path / "s", "--flush", flush)
    try:
        live.send(1)
        first = _read_line(live.proc.stdout, START)       # start-up: loading, creating the store
        assert first is not None and json.loads(first)["line"] == 1
        for i in range(2, 8):
            started = time.monotonic()
            live.send(i)
            put = _read_line(live.proc.stdout, 0.2)
            took = time.monotonic() - started
            assert put is not None, f"line {i}: no put line within 200 ms"
            put = json.loads(put)
            assert (put["type"], put["line"], put["status"]) == ("put", i, "PUT_OK"), put
            assert took < 0.2
            time.sleep(0.05)
        assert live.close() == 0
    finally:
        live.kill()


def test_without_json_each_stored_line_is_said_as_it_is_acknowledged(tmp_path):
    live = LiveAppend(tmp_path / "s", as_json=False)
    try:
        live.send(1)
        assert _read_line(live.proc.stdout, START) == b"stored input line 1: 1 PUT_OK\n"
        for i in range(2, 5):
            live.send(i)
            assert _read_line(live.proc.stdout, 0.2) == f"stored input line {i}: 1 PUT_OK\n".encode()
        assert live.close() == 0
    finally:
        live.kill()


def test_put_lines_reach_a_file_when_acknowledged(tmp_path):
    """stdout on a file, --batch 1: the put line is in the file while the input is still open."""
    out = tmp_path / "acks.jsonl"
    with open(out, "wb") as fh:
        live = LiveAppend(tmp_path / "s", "--batch", "1", stdout=fh)
    try:
        live.send(1)
        deadline = time.monotonic() + START
        while time.monotonic() < deadline and not out.read_bytes().endswith(b"\n"):
            time.sleep(0.02)
        (put,) = [json.loads(line) for line in out.read_text().splitlines()]
        assert put["line"] == 1 and put["status"] == "PUT_OK"
        assert live.proc.poll() is None       # still reading its input
        assert live.close() == 0
    finally:
        live.kill()


READERS = [
    ["dump", "{s}", "commitlog", "--json"],
    ["get", "{s}", "--topic", "Live", "--queue", "0", "--offset", "0", "--json"],
    ["stats", "{s}", "--json"],
    ["export", "{s}", "--format", "jsonl", "-o", "{out}", "--json"],
    ["lookup-by-key", "{s}", "key-1", "--topic", "Live", "--json"],
    ["lookup-by-id", "{s}", "{msgid}", "--json"],
    ["recover", "{s}", "--dry-run", "--json"],
    ["lag", "{s}", "--json"],
    ["report", "{s}", "-o", "{out}.html", "--json"],
    ["diff", "{s}", "{s}", "--json"],
    ["salvage", "{s}", "{out}", "--json"],     # it writes OUT, but only reads the store: a reader here
]
# a recover dry run is refused too (lag and report find no config/consumerOffset.json: nobody consumed yet)
EXIT = {"recover": 3}


def test_readers_say_when_a_live_process_holds_the_store(tmp_path, run_cli):
    store = tmp_path / "s"
    live = LiveAppend(store)
    try:
        live.send(1)
        put = _read_line(live.proc.stdout, START)
        assert put is not None
        msgid = json.loads(put)["msgId"]
        for k, args in enumerate(READERS):
            args = [a.format(s=store, out=tmp_path / f"export{k}", msgid=msgid) for a in args]
            result = run_cli(*args)
            assert result.code == EXIT.get(args[0], 0), (args, result.err)
            first = json.loads(result.out.splitlines()[0])
            assert first["type"] == "in_use" and first["pid"] == live.proc.pid, (args, result.out[:300])
            assert "append" in first["command"] and str(store) in first["command"]
            notes = [line for line in result.err.splitlines() if "is in use" in line]
            assert len(notes) == (2 if args[0] == "diff" else 1), (args, result.err)     # diff: once per store
            assert all(f"process {live.proc.pid} (" in note for note in notes), (args, result.err)
        (info,) = run_cli("info", store, "--json").json_lines()
        assert info["lock"]["heldBy"] == live.proc.pid and "append" in info["lock"]["command"]
        table = run_cli("info", store)
        assert f"held by process {live.proc.pid} (" in " ".join(table.out.split())
        assert "a broker is using" not in table.out
        assert live.close() == 0
    finally:
        live.kill()
    result = run_cli("dump", store, "commitlog", "--json")     # stopped: nothing said
    assert json.loads(result.out.splitlines()[0])["type"] != "in_use" and "is in use" not in result.err
