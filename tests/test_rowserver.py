"""The row server (the Python half of the JVM reader) on its own: its protocol, its answers
against the pipeline's rows, its errors, and its life (it leaves with the JVM that started it);
and the JVM reader's jar, built with the package (or, as a fallback, at first use with the JDK's javac).  Spark's side is tested in
test_spark_pipeline.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from mqtool.pipeline.plan import commitlog_parts, find_stores
from mqtool.pipeline.spark import jvmreader, rowserver

from pipeline_expect import broker_records

pytestmark = pytest.mark.spark

STORE_SIZE = [["storeSize", "int"]]


@pytest.fixture
def server(tmp_path):
    """A row server with two workers: (its process, its socket path)."""
    path = str(tmp_path / "socket")
    proc = subprocess.Popen([sys.executable, "-m", "mqtool.pipeline.spark.rowserver", path, "2"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"ready\n"
    yield proc, path
    proc.kill()
    proc.wait()


def ask(path: str, request: dict, version=rowserver.PROTOCOL):
    """(the answer's kind, a file to read the rest from)."""
    conn = socket.socket(socket.AF_UNIX)
    conn.settimeout(30)          # a server that does not answer fails the test instead of hanging it
    conn.connect(path)
    body = json.dumps(request if version is None else {"v": version, **request}).encode()
    conn.sendall(struct.pack(">I", len(body)) + body)
    answer = conn.makefile("rb")
    conn.close()
    return answer.read(1), answer


def text(answer) -> str:
    (size,) = struct.unpack(">I", answer.read(4))
    return answer.read(size).decode()


def plan(path: str, store, columns=STORE_SIZE, filters=()) -> dict:
    kind, answer = ask(path, {"op": "plan", "source": "rocketmq", "options": {"path": str(store)},
                              "schema": columns, "columns": columns, "filters": list(filters)})
    assert kind == b"J", text(answer)
    return json.loads(text(answer))


def read(path: str, planned: dict, part: str):
    """(the partition's Arrow table, the trailer: 'K' or the error message)."""
    kind, answer = ask(path, {"op": "read", "reader": planned["reader"], "part": part})
    assert kind == b"A"
    stream = pa.ipc.open_stream(answer)
    table = stream.read_all()
    trailer = answer.read(1)
    return table, ("K" if trailer == b"K" else text(answer))


def test_plan_and_reads_give_the_pipelines_rows(server, extracted):
    _, path = server
    store = extracted("multifile")
    columns = [["topic", "string"], ["storeSize", "int"], ["commitLogOffset", "bigint"]]
    planned = plan(path, store, columns)
    parts = commitlog_parts(find_stores([str(store)]))
    assert len(planned["parts"]) == len(parts) > 1
    got = []
    for part in planned["parts"]:
        table, trailer = read(path, planned, part)
        assert trailer == "K" and table.column_names == ["topic", "storeSize", "commitLogOffset"]
        got.extend(zip(*(table.column(c).to_pylist() for c in table.column_names)))
    want = [(r["topic"], r["storeSize"], offset) for offset, r in broker_records("multifile").items()]
    assert sorted(got, key=lambda r: r[2]) == sorted(want, key=lambda r: r[2])


def test_pushed_filters_are_taken_or_left_and_the_plan_reads_with_them(server, extracted):
    _, path = server
    filters = [{"op": "eq", "column": "topic", "value": "AuditTopic"},
               {"op": "eq", "column": "keys", "value": "x"},                 # no reader filter on keys
               {"op": "lt", "column": "commitLogOffset", "value": 3 * 65536}]
    kind, answer = ask(path, {"op": "push", "source": "rocketmq", "filters": filters})
    assert kind == b"J" and json.loads(text(answer)) == {"v": rowserver.PROTOCOL, "taken": [0, 2]}
    planned = plan(path, extracted("multifile"), [["topic", "string"], ["commitLogOffset", "bigint"]],
                   [filters[0], filters[2]])
    assert len(planned["parts"]) == 3           # files past the offset are not read at all
    rows = [row for part in planned["parts"] for row in read(path, planned, part)[0].to_pylist()]
    want = sorted(o for o, r in broker_records("multifile").items() if r["topic"] == "AuditTopic" and o < 3 * 65536)
    assert sorted(r["commitLogOffset"] for r in rows) == want and {r["topic"] for r in rows} == {"AuditTopic"}


def test_errors_are_mqtools_own_messages(server, tmp_path, store_copy):
    _, path = server
    kind, answer = ask(path, {"op": "plan", "source": "rocketmq", "options": {"path": str(tmp_path)},
                              "schema": STORE_SIZE, "columns": STORE_SIZE, "filters": []})
    assert (kind, text(answer)) == (b"E", f"{tmp_path}: not a RocketMQ store, nor a directory of stores (one per broker)")
    kind, answer = ask(path, {"op": "plan", "source": "rocketmq", "options": {"path": str(tmp_path)},
                              "schema": [["nope", "int"]], "columns": STORE_SIZE, "filters": []})
    assert kind == b"E" and "has no column 'nope'" in text(answer)
    # a read that stops: the rows sent so far, then its error (never a short partition that looks whole)
    store = store_copy("multifile")
    planned = plan(path, store)
    first = sorted((store / "commitlog").iterdir())[0]
    first.unlink()
    table, trailer = read(path, planned, planned["parts"][0])
    assert table.num_rows == 0 and trailer == f"{first}: cannot open: No such file or directory"
    table, trailer = read(path, planned, planned["parts"][1])
    assert table.num_rows > 0 and trailer == "K"


def test_parts_are_versioned_json_and_a_peer_of_another_version_is_refused(server, extracted):
    _, path = server
    store = extracted("multifile")
    planned = plan(path, store)
    reader = json.loads(planned["reader"])
    assert reader["v"] == rowserver.PROTOCOL and reader["options"] == {"path": str(store)}
    parts = [json.loads(p) for p in planned["parts"]]
    files = sorted(str(f) for f in (store / "commitlog").iterdir())
    assert [(p["v"], p["part"], p["path"]) for p in parts] == [(rowserver.PROTOCOL, "commitlog", f) for f in files]
    assert rowserver.read_part(planned["parts"][0]) == commitlog_parts(find_stores([str(store)]))[0]
    refused = (f"mqtool's row server speaks protocol {rowserver.PROTOCOL}, and got a request of protocol 1: "
               "run the same mqtool on the driver and the executors")
    for version in (None, 1):        # a JVM reader of the pickled protocol sends no version
        kind, answer = ask(path, {"op": "schema", "source": "rocketmq", "options": {"path": str(store)}}, version)
        assert (kind, text(answer)) == (b"E", refused)
    old_part = json.dumps({**parts[0], "v": 1})
    kind, answer = ask(path, {"op": "read", "reader": planned["reader"], "part": old_part})
    assert kind == b"E" and text(answer) == refused.replace("a request", "a part")


def _workers(proc) -> set[int]:
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    return {int(pid) for pid in children}


def _gone(pids, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()
                   for pid in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("how", ["stdin closed", "SIGTERM"])
def test_the_server_leaves_with_its_workers(server, how):
    proc, path = server
    workers = _workers(proc)
    assert len(workers) == 2
    if how == "stdin closed":
        proc.stdin.close()          # the JVM that started it is gone
    else:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=10)
    assert _gone(workers)
    assert not Path(path).exists()      # the socket is removed (and the JVM's private directory)


def test_a_connection_that_waits_on_busy_workers_gets_one_more(tmp_path, run_cli):
    """A task may hold one connection while it opens another (a zip of two reads): with every
    worker answering, the server forks one more instead of leaving the new connection waiting."""
    store = tmp_path / "store"      # two commitlog files of 4 MiB bodies: more than a socket buffers
    lines = "".join(json.dumps({"topic": "Big", "body": "x" * (4 << 20)}) + "\n" for _ in range(4))
    (tmp_path / "big.jsonl").write_text(lines)
    appended = run_cli("append", store, "--set", f"mappedFileSizeCommitLog={10 << 20}", "--input",
                       tmp_path / "big.jsonl")
    assert appended.code == 0, appended.err
    path = str(tmp_path / "socket")
    proc = subprocess.Popen([sys.executable, "-m", "mqtool.pipeline.spark.rowserver", path, "1"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        planned = plan(path, store, [["body", "binary"]])
        assert len(planned["parts"]) == 2
        kind, held = ask(path, {"op": "read", "reader": planned["reader"], "part": planned["parts"][0]})
        assert kind == b"A"              # the one worker is answering it, and nobody reads the rest
        started = time.monotonic()
        assert read(path, planned, planned["parts"][1])[1] == "K"
        assert time.monotonic() - started < 10 and len(_workers(proc)) == 2
        assert pa.ipc.open_stream(held).read_all().num_rows == 2
    finally:
        proc.kill()
        proc.wait()


def test_a_worker_that_dies_is_replaced_and_a_dropped_connection_costs_nothing(server, extracted):
    proc, path = server
    planned = plan(path, extracted("multifile"))
    dropped = socket.socket(socket.AF_UNIX)        # a read asked for and never read (a LIMIT)
    dropped.connect(path)
    body = json.dumps({"op": "read", "reader": planned["reader"], "part": planned["parts"][0]}).encode()
    dropped.sendall(struct.pack(">I", len(body)) + body)
    dropped.close()
    victim = min(_workers(proc))
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (len(_workers(proc) - {victim}) < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_workers(proc) - {victim}) == 2
    for part in planned["parts"]:
        assert read(path, planned, part)[1] == "K"


# ------------------------------------------------------------------ the jar

def test_the_jar_built_with_the_package_serves_without_a_jdk(tmp_path):
    if jvmreader.javac() is None:
        pytest.skip("no JDK here: the package was built without the jar")
    no_jdk = {"PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    jar, why = jvmreader.jar(no_jdk)
    assert why == "" and jar.parent == jvmreader.SOURCES and jar.name.startswith("mqtool-spark-")
    assert jar == jvmreader.shipped(jvmreader.spark_jars())
    with zipfile.ZipFile(jar) as built:
        assert built.read(jvmreader.REGISTER_SERVICE).decode().split() == [jvmreader.CLASS, jvmreader.QUEUE_CLASS]
    assert not (tmp_path / "cache").exists()          # nothing built at run time


def test_the_jar_is_built_once_at_first_use_where_the_package_has_none(tmp_path):
    environ = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    jar, why = jvmreader.jar(environ, package=tmp_path / "unbuilt")
    assert why == "" and jar.parent.parent == tmp_path
    with zipfile.ZipFile(jar) as built:
        assert built.read(jvmreader.REGISTER_SERVICE).decode().split() == [jvmreader.CLASS, jvmreader.QUEUE_CLASS]
        assert {"mqtool/spark/RocketMQSource.class", "mqtool/spark/RocketMQQueueSource.class"} <= set(built.namelist())
    stamp = jar.stat().st_mtime_ns
    assert jvmreader.jar(environ, tmp_path / "unbuilt") == (jar, "") and jar.stat().st_mtime_ns == stamp   # not built again


def test_no_jdk_or_a_failed_build_leaves_the_python_source(tmp_path, monkeypatch):
    no_jdk = {"PATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    assert jvmreader.javac(no_jdk) is None
    assert jvmreader.jar(no_jdk, tmp_path) == (None, 'no JDK (javac) found: format("rocketmq") runs in Python workers')
    broken = tmp_path / "jvm"
    broken.mkdir()
    (broken / "Broken.java").write_text("package mqtool.spark; class Broken { int x = ; }\n")
    monkeypatch.setattr(jvmreader, "SOURCES", broken)
    jar, why = jvmreader.jar(dict(os.environ, XDG_CACHE_HOME=str(tmp_path)))
    assert jar is None and why.startswith("the JVM reader did not compile (") and "Broken.java" in why
    assert not list(tmp_path.rglob("*.jar"))
