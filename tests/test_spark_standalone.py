"""The distributed path for real: a Spark standalone master and worker on 127.0.0.1, started from
PySpark's own spark-class, and `stats`, `export` and `verify-crc` run with --master spark://...;
each must equal the local engine's result.  Then both daemons are stopped.

Like the other Spark tests this needs PySpark and Java 17+ (`./bootstrap` installs both) and never
skips.  The commands run as subprocesses: a pytest process may already hold a local session.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parent.parent
MQTOOL = [sys.executable, "-m", "mqtool"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spark_class() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-class")


def _env(tmp: Path) -> dict:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_LOG_DIR=str(tmp / "logs"),
               SPARK_WORKER_DIR=str(tmp / "work"), PYSPARK_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
    env.pop("SPARK_HOME", None)
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("spark-standalone")
    env = _env(tmp)
    port, ui = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    daemons = []

    def start(args, log):
        daemons.append(subprocess.Popen([_spark_class(), *args], env=env, stdout=open(tmp / log, "w"),
                                        stderr=subprocess.STDOUT, start_new_session=True))

    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(ui)], "master.log")
        start(["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1", "--cores", "2",
               "--memory", "2g", "--webui-port", str(_free_port()), "--work-dir", str(tmp / "work")], "worker.log")
        deadline = time.monotonic() + 120
        while True:       # the master's JSON says when the worker has registered
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=5) as answer:
                    if json.load(answer).get("aliveworkers", 0) >= 1:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or any(d.poll() is not None for d in daemons):
                logs = "\n".join((tmp / n).read_text()[-2000:] for n in ("master.log", "worker.log"))
                pytest.fail(f"the standalone cluster did not come up:\n{logs}")
            time.sleep(1)
        yield url, env
    finally:
        for daemon in daemons:
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGTERM)
        for daemon in daemons:
            try:
                daemon.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
    assert all(d.poll() is not None for d in daemons)


def _run(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([*MQTOOL, *map(str, args)], env=env, capture_output=True, text=True, timeout=600)


def _quiet(stderr: str, local_stderr: str) -> None:
    """Spark's own chatter stays off mqtool's stderr: it says what the local engine says (the JVM's
    incubator-module notice, printed before any logging starts, included: mqtool filters it)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines == [line for line in local_stderr.splitlines() if line.strip()], stderr


def test_stats_on_a_standalone_cluster_equal_the_local_engine(cluster, extracted, run_cli):
    url, env = cluster
    store = extracted("multifile")
    spark = _run(env, "stats", store, "--json", "--engine", "spark", "--master", url)
    assert spark.returncode == 0, spark.stderr
    local = run_cli("stats", store, "--json")
    assert local.code == 0
    _quiet(spark.stderr, local.err)
    untimed = lambda lines: [{k: v for k, v in l.items() if k not in ("seconds", "loadSeconds")}  # noqa: E731
                             for l in lines]
    assert untimed(json.loads(line) for line in spark.stdout.splitlines()) == untimed(local.json_lines())


@pytest.mark.parametrize("reader", ["jvm", "python"])
def test_export_on_a_standalone_cluster_equals_the_local_engine(cluster, extracted, run_cli, tmp_path, reader):
    """format("rocketmq") on the executors: the JVM reader (its jar shipped with spark.jars, a row
    server on each executor), and the Python data source when spark.mqtool.reader says so."""
    url, env = cluster
    store = extracted("features")
    spark = _run(env, "export", store, "--out", tmp_path / "spark", "--format", "jsonl", "--with-body",
                 "--engine", "spark", "--master", url, "--spark-conf", f"spark.mqtool.reader={reader}")
    assert spark.returncode == 0, spark.stderr
    local_run = run_cli("export", store, "--out", tmp_path / "local", "--format", "jsonl", "--with-body")
    assert local_run.code == 0
    _quiet(spark.stderr, local_run.err)

    def rows(out: Path) -> dict:
        found = {}
        for topic in sorted(p for p in out.iterdir() if p.is_dir()):
            lines = [json.loads(line) for f in sorted(topic.iterdir()) if not f.name.startswith((".", "_"))
                     for line in f.read_text().splitlines() if line.strip()]
            found[topic.name] = sorted(lines, key=lambda r: (r["broker"], r["commitLogOffset"]))
        return found

    local, distributed = rows(tmp_path / "local"), rows(tmp_path / "spark")
    assert distributed == local and sum(map(len, local.values())) > 0


def test_verify_crc_on_a_standalone_cluster_equals_the_local_engine(cluster, extracted, run_cli):
    url, env = cluster
    store = extracted("flipped-body-byte")
    spark = _run(env, "verify-crc", store, "--json", "--engine", "spark", "--master", url)
    local = run_cli("verify-crc", store, "--json")
    assert (spark.returncode, local.code) == (1, 1)
    _quiet(spark.stderr, local.err)

    def comparable(lines):
        return [{k: v for k, v in line.items() if k not in ("seconds", "loadSeconds", "mbPerSecond")}
                for line in lines]

    distributed = [json.loads(line) for line in spark.stdout.splitlines()]
    assert comparable(distributed) == comparable(local.json_lines())
    assert any(line.get("kind") == "crc-mismatch" for line in distributed), distributed
