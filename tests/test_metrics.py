"""--prometheus FILE (node_exporter's textfile collector format, read back with prometheus_client's own
parser) on info, stats, verify-crc, clean and lag; and click's shell completion, in a real bash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, expected_read
from test_lag import write_offsets

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus_client (the test extra) is not installed")


def samples(path: Path) -> dict:
    """{(metric name, labels without store and command): value}, parsed as Prometheus parses the file,
    checked against node_exporter's textfile conventions: a HELP and TYPE per family, no
    timestamps, and no aggregate beside its parts (a label value "all" makes sum() count twice)."""
    text = path.read_text(encoding="utf-8")
    found = {}
    for family in parser.text_string_to_metric_families(text):
        assert family.documentation, family.name           # every family has its HELP
        assert f"# TYPE {family.name} " in text, family.name
        for s in family.samples:
            assert s.timestamp is None, s
            assert "all" not in s.labels.values(), s
            assert os.path.isabs(s.labels["store"].split(",")[0]), s
            labels = {k: v for k, v in s.labels.items() if k not in ("store", "command")}
            found[(s.name, tuple(sorted(labels.items())))] = s.value
    return found


def problems_add_up(got: dict) -> None:
    """The per-kind series add up to the total, which has a name of its own."""
    assert sum(v for (name, _), v in got.items() if name == "mqtool_problems") == got[("mqtool_problems_found", ())]


def only_file(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_info_metrics(store_copy, run_cli, tmp_path):
    store = store_copy("multifile")
    out = tmp_path / "metrics"
    out.mkdir()
    result = run_cli("info", store, "--prometheus", out / "info.prom")
    assert result.code == 0, result.err
    got = samples(out / "info.prom")
    assert only_file(out) == ["info.prom"]          # no temporary file left behind
    commitlog = sum(p.stat().st_size for p in (store / "commitlog").iterdir())
    assert got[("mqtool_store_bytes", (("kind", "commitlog"),))] == commitlog
    assert got[("mqtool_store_files", (("kind", "commitlog"),))] == len(list((store / "commitlog").iterdir()))
    per_topic = Counter(l["topic"] for l in expected_read("multifile") if l["type"] == "message")
    for topic, count in per_topic.items():
        assert got[("mqtool_queue_messages", (("topic", topic),))] == count
    assert got[("mqtool_clean_shutdown", ())] == 1 and got[("mqtool_problems_found", ())] == 0
    problems_add_up(got)
    (info,) = run_cli("info", store, "--json").json_lines()
    assert got[("mqtool_commitlog_max_offset_bytes", ())] == info["commitlog"]["maxOffset"]     # unit suffixed
    assert got[("mqtool_commitlog_min_offset_bytes", ())] == info["commitlog"]["minOffset"]


def test_the_store_label_is_the_absolute_path_wherever_mqtool_runs(store_copy, run_cli, tmp_path, monkeypatch):
    store = store_copy("basic")
    labels = set()
    for where, given in ((store.parent, store.name), (store, "."), (tmp_path.parent, store)):
        monkeypatch.chdir(where)
        assert run_cli("info", given, "--prometheus", tmp_path / "info.prom").code == 0
        text = (tmp_path / "info.prom").read_text(encoding="utf-8")
        labels |= {s.labels["store"] for f in parser.text_string_to_metric_families(text) for s in f.samples}
    assert labels == {str(store)}


def test_info_metrics_hold_the_timer_store(extracted, run_cli, tmp_path):
    store = extracted("timer5")
    assert run_cli("info", store, "--prometheus", tmp_path / "info.prom").code == 0
    got = samples(tmp_path / "info.prom")
    timer_files = [store / "timerwheel", *(store / "timerlog").iterdir(),
                   *(p for p in (store / "config").iterdir() if p.name.startswith("timer"))]
    assert got[("mqtool_store_bytes", (("kind", "timer"),))] == sum(p.stat().st_size for p in timer_files)
    assert got[("mqtool_store_files", (("kind", "timer"),))] == len(timer_files)
    (info,) = run_cli("info", store, "--json").json_lines()
    assert got[("mqtool_timer_pending_messages", ())] == info["timer"]["pending"] == 70


def test_stats_metrics_per_topic(store_copy, run_cli, tmp_path):
    store = store_copy("multifile")
    result = run_cli("stats", store, "--jobs", "1", "--prometheus", tmp_path / "stats.prom")
    assert result.code == 0, result.err
    got = samples(tmp_path / "stats.prom")
    messages = [l for l in expected_read("multifile") if l["type"] == "message"]
    for topic in {m["topic"] for m in messages}:
        labels = (("broker", "multifile"), ("topic", topic))
        assert got[("mqtool_topic_messages", labels)] == sum(1 for m in messages if m["topic"] == topic)
        assert got[("mqtool_topic_bytes", labels)] == sum(m["storeSize"] for m in messages if m["topic"] == topic)


def test_verify_metrics_count_problems_by_kind_and_say_when(store_copy, run_cli, tmp_path):
    store = store_copy("flipped-body-byte")
    path = tmp_path / "verify.prom"
    path.write_text("old contents\n")
    result = run_cli("verify-crc", store, "--json", "--prometheus", path)
    assert result.code == 1
    found = Counter(l["kind"] for l in result.json_lines() if l["type"] != "summary")
    got = samples(path)                                # replaced whole
    assert got[("mqtool_verify_ok", ())] == 0
    assert "crc-mismatch" in found
    for kind, count in found.items():
        assert got[("mqtool_problems", (("kind", kind),))] == count
    assert got[("mqtool_problems_found", ())] == sum(found.values())
    problems_add_up(got)
    import time
    assert abs(got[("mqtool_last_run_timestamp_seconds", ())] - time.time()) < 120
    clean = store_copy("basic")
    assert run_cli("verify-crc", clean, "--prometheus", path).code == 0
    assert samples(path)[("mqtool_verify_ok", ())] == 1


def test_clean_metrics_name_the_unread_messages_lost_per_group(store_copy, run_cli, tmp_path):
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@billing": {0: 10, 1: 369}, "AuditTopic@audit": {0: 0}})
    path = tmp_path / "clean.prom"
    result = run_cli("clean", store, "--now", "--retention-hours", "0", "--max-files", "5", "--delete-delay", "0",
                     "--json", "--prometheus", path)
    assert result.code == 0, result.err
    lines = result.json_lines()
    losses = Counter()
    for l in lines:
        if l["type"] == "loss":
            losses[l["group"]] += l["unreadRemoved"]
    deleted = [l for l in lines if l["type"] == "decision" and l["action"] == "delete"]
    got = samples(path)
    assert losses["billing"] > 0 and losses["audit"] > 0
    for group, unread in losses.items():
        assert got[("mqtool_clean_unread_messages_removed", (("group", group),))] == unread
    assert got[("mqtool_clean_consumer_offsets_known", ())] == 1
    assert got[("mqtool_clean_freed_bytes", ())] == sum(l["size"] for l in deleted) > 0
    assert got[("mqtool_clean_files_removed", (("kind", "commitlog"),))] == 5


def test_lag_metrics_per_group(store_copy, run_cli, tmp_path):
    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@billing": {0: 10, 1: 369, 2: 0, 3: 0}, "AuditTopic@audit": {0: 600}})
    path = tmp_path / "lag.prom"
    result = run_cli("lag", store, "--prometheus", path)
    assert result.code == 1                         # audit's offset is past AuditTopic/0's 588
    got = samples(path)
    queues = {(l["topic"], l["queueId"]): l["maxOffset"] for l in expected_read("multifile") if l["type"] == "queue"}
    billing = queues[("OrderTopic", 0)] - 10 + queues[("OrderTopic", 2)] + queues[("OrderTopic", 3)]
    assert got[("mqtool_consumer_lag_messages", (("group", "billing"),))] == billing
    assert got[("mqtool_consumer_offsets_out_of_range", (("group", "audit"),))] == 1
    assert got[("mqtool_consumer_lag_messages", (("group", "audit"),))] == 0


def test_an_unwritable_metrics_file_is_a_usage_error(store_copy, run_cli, tmp_path):
    result = run_cli("info", store_copy("basic"), "--prometheus", tmp_path / "no-such-dir" / "x.prom")
    assert result.code == 2 and "no-such-dir" in result.err


# ---------------------------------------------------------------------- shell completion

def test_bash_completion(tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    mqtool = Path(sys.executable).parent / "mqtool"
    assert mqtool.exists()
    env = {**os.environ, "PATH": f"{mqtool.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    script = subprocess.run([mqtool], env={**env, "_MQTOOL_COMPLETE": "bash_source"}, capture_output=True,
                            text=True, check=True).stdout
    (tmp_path / "mqtool.bash").write_text(script)

    def complete(*words: str) -> list[str]:
        words_text = " ".join(f"'{w}'" for w in words)
        run = subprocess.run([bash, "-c", f". {tmp_path / 'mqtool.bash'}; COMP_WORDS=(mqtool {words_text}); "
                              f"COMP_CWORD={len(words)}; _mqtool_completion mqtool; printf '%s\\n' \"${{COMPREPLY[@]}}\""],
                             env=env, capture_output=True, text=True, cwd=REPO)
        assert run.returncode == 0, run.stderr
        return [w for w in run.stdout.splitlines() if w]

    assert complete("la") == ["lag"]
    assert set(complete("v")) == {"verify-crc"}
    assert complete("lag", "examples/store", "--gr") == ["--group"]
    assert "--prometheus" in complete("verify-crc", "examples/store", "--")
    assert {"commitlog", "cq", "index", "timer", "all"} == set(complete("verify-crc", "examples/store", "--scope", ""))


# ---------------------------------------------------------------------- the examples

def test_the_systemd_service_runs_as_written(store_copy, tmp_path):
    """examples/mqtool-clean.service's commands, run with its own Environment= lines pointed at a copy."""
    import shlex

    store = store_copy("multifile")
    write_offsets(store, {"OrderTopic@billing": {0: 10}})
    conf = tmp_path / "broker.conf"
    conf.write_text("mappedFileSizeCommitLog=65536\nmappedFileSizeConsumeQueue=6000\nmaxHashSlotNum=100\n"
                    "maxIndexNum=400\n")
    textfile = tmp_path / "textfile"
    textfile.mkdir()
    env = {"STORE": str(store), "BROKER_CONF": str(conf), "TEXTFILE_DIR": str(textfile)}
    unit = (REPO / "examples" / "mqtool-clean.service").read_text()
    commands = []
    for line in unit.splitlines():
        key, _, value = line.partition("=")
        if key == "Environment":
            name, _, given = value.partition("=")
            assert name in env, name
        elif key in ("ExecStart", "ExecStartPost"):
            words = shlex.split(value.lstrip("-"))
            words[0] = str(Path(sys.executable).parent / "mqtool")
            # a leading "-": systemd ignores the exit status (lag's 1 for an offset out of range,
            # which it is once a clean in the deleteWhen hour removed unread messages)
            commands.append((value.startswith("-"), [
                w.replace("${STORE}", env["STORE"]).replace("${BROKER_CONF}", env["BROKER_CONF"])
                .replace("${TEXTFILE_DIR}", env["TEXTFILE_DIR"]) for w in words]))
    assert len(commands) == 2
    for tolerated, words in commands:
        run = subprocess.run(words, capture_output=True, text=True)
        assert run.returncode == 0 or (tolerated and run.returncode == 1), run.stderr
    assert sorted(p.name for p in textfile.iterdir()) == ["mqtool-clean.prom", "mqtool-lag.prom"]
    assert samples(textfile / "mqtool-lag.prom")[("mqtool_consumer_lag_messages", (("group", "billing"),))] > 0
    assert ("mqtool_clean_freed_bytes", ()) in samples(textfile / "mqtool-clean.prom")
    timer = (REPO / "examples" / "mqtool-clean.timer").read_text()
    assert "Unit=mqtool-clean.service" in timer and "OnCalendar=" in timer


def test_the_ci_gate_keeps_the_metrics(store_copy, tmp_path):
    mqtool = Path(sys.executable).parent / "mqtool"
    env = {**os.environ, "MQTOOL": str(mqtool), "PROMETHEUS": str(tmp_path / "verify.prom"), "JOBS": "1"}
    damaged = subprocess.run(["bash", REPO / "examples" / "verify-ci.sh", store_copy("garbage-tail"),
                              tmp_path / "report.jsonl"], env=env, capture_output=True, text=True)
    assert damaged.returncode == 1 and "PROBLEMS FOUND" in damaged.stderr
    assert samples(tmp_path / "verify.prom")[("mqtool_verify_ok", ())] == 0
    gate = (REPO / "examples" / "verify-gate.gitlab-ci.yml").read_text()
    assert "examples/verify-ci.sh" in gate and "PROMETHEUS=verify.prom" in gate
