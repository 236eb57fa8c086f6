"""The pipeline with `--engine local`: plain Python, no Java and no pyspark needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mqtool.forensics.filters import Filters
from mqtool.pipeline import plan
from mqtool.pipeline import rows as part_rows
from mqtool.pipeline import schema as row_schema
from mqtool.pipeline.local import LocalEngine
from mqtool.pipeline import exporter
from mqtool.storage import commitlog

from conftest import UNDAMAGED
from pipeline_expect import assert_stats_lines, broker_records, expected_stats

REPO = Path(__file__).resolve().parent.parent


def run_python(code: str, *args, env_extra=None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_PYTHON")}
    env["PATH"] = os.path.dirname(sys.executable) + ":/nonexistent"   # no java on PATH
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=REPO, timeout=300)


WITHOUT_SPARK = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyspark", "py4j", "pyarrow"):
            raise ImportError(f"{name} is blocked for this test")
sys.meta_path.insert(0, Block())
from mqtool.cli.main import run
code = run(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j", "pyarrow"))
print("LOADED", loaded, file=sys.stderr)
sys.exit(code)
"""


def test_local_engine_runs_without_pyspark_and_java(extracted, tmp_path):
    store = extracted("multifile")
    stats = run_python(WITHOUT_SPARK, "stats", store, "--json", "--jobs", "2")
    assert stats.returncode == 0, stats.stderr
    assert "LOADED []" in stats.stderr
    assert json.loads(stats.stdout.splitlines()[-1])["messages"] == 2350
    out = tmp_path / "out"
    export = run_python(WITHOUT_SPARK, "export", store, "--out", out, "--format", "jsonl", "--json")
    assert export.returncode == 0, export.stderr
    assert json.loads(export.stdout)["rows"] == 2350
    # what needs Spark or pyarrow says so, as a usage error
    spark = run_python(WITHOUT_SPARK, "stats", store, "--engine", "spark")
    assert spark.returncode == 2 and "pip install 'mqtool[spark]'" in spark.stderr
    parquet = run_python(WITHOUT_SPARK, "export", store, "--out", tmp_path / "p", "--format", "parquet")
    assert parquet.returncode == 2 and "needs pyarrow" in parquet.stderr


def test_other_commands_never_import_spark(extracted):
    probe = run_python(WITHOUT_SPARK, "info", extracted("basic"))
    assert probe.returncode == 0, probe.stderr
    assert "LOADED []" in probe.stderr


def test_spark_engine_without_java_is_a_usage_error(extracted):
    code = "import sys; from mqtool.cli.main import run; sys.exit(run(sys.argv[1:]))"
    result = run_python(code, "stats", extracted("basic"), "--engine", "spark")
    assert result.returncode == 2
    assert "needs Java 17" in result.stderr


def test_local_stats_equal_counts_from_expected_read(extracted, run_cli):
    args = [f"{name}={extracted(name)}" for name in UNDAMAGED]
    result = run_cli("stats", *args, "--json", "--jobs", "1")
    assert result.code == 0, result.err
    expected = {}
    for name in UNDAMAGED:
        expected.update(expected_stats(name, name))
    assert_stats_lines(result.json_lines(), expected)
    tables = run_cli("stats", *args)
    assert tables.code == 0 and "messages per topic and queue" in tables.out and "Total" in tables.out


def test_stats_total_times_its_own_work_and_the_loading_apart(extracted, run_cli):
    """`seconds` is stats' own work, `loadSeconds` the loading of the kernels before it (as
    verify-crc reports them), on the total line only."""
    result = run_cli("stats", extracted("multifile"), "--json", "--jobs", "1")
    assert result.code == 0, result.err
    total = result.json_lines()[-1]
    assert isinstance(total["seconds"], float) and isinstance(total["loadSeconds"], float)
    assert 0 < total["seconds"] < 60 and 0 <= total["loadSeconds"] < 60
    assert not any("seconds" in line or "loadSeconds" in line for line in result.json_lines()[:-1])


def test_stats_filters_topic_and_time(extracted, run_cli):
    records = broker_records("multifile")
    times = sorted(r["storeTimestamp"] for r in records.values())
    since, until = times[100], times[2000]
    result = run_cli("stats", extracted("multifile"), "--json", "--topic", "OrderTopic", "--since", since,
                     "--until", until)
    assert result.code == 0, result.err
    total = result.json_lines()[-1]
    assert total["messages"] == sum(1 for r in records.values()
                                    if r["topic"] == "OrderTopic" and since <= r["storeTimestamp"] < until)


def test_local_export_jsonl_is_the_same_with_one_or_more_processes(extracted, run_cli, tmp_path):
    store = extracted("features")
    outputs = []
    for jobs in ("1", "2"):
        out = tmp_path / jobs
        result = run_cli("export", store, "--out", out, "--format", "jsonl", "--with-body", "--jobs", jobs)
        assert result.code == 0, result.err
        rows = {}
        for path in out.glob("topic=*/*.jsonl"):
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                rows[row["commitLogOffset"]] = (path.parent.name, row)
        outputs.append(rows)
    assert outputs[0] == outputs[1]
    assert sorted(outputs[0]) == sorted(broker_records("features"))
    assert (tmp_path / "1" / "_SUCCESS").exists()


def test_local_export_parquet_reads_back_as_the_reference_rows(extracted, run_cli, tmp_path):
    """What pyarrow reads from the files is what the reference walker gives (pipeline.rows.rows), with
    the topic from the directory; the summary times the export and the loading before it apart."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for name in ("features", "flipped-body-byte"):
        store = extracted(name)
        out = tmp_path / name
        result = run_cli("export", store, "--out", out, "--with-body", "--jobs", "1", "--json")
        assert result.code == 0, result.err
        (summary,) = result.json_lines()
        assert summary["seconds"] > 0 and summary["loadSeconds"] >= 0
        cols = [n for n, _ in row_schema.columns(True)]
        topics = {exporter.topic_dir(Path(""), topic).name: topic for topic in summary["topics"]}
        got = []
        for path in out.glob("topic=*/*.parquet"):
            assert pq.read_schema(path).field("broker").type == pa.dictionary(pa.int32(), pa.string())
            for row in pq.read_table(path).to_pylist():
                row["topic"] = topics[path.parent.name]
                row["properties"] = dict(row["properties"]) if row["properties"] is not None else None
                got.append(tuple(row[c] for c in cols))
        want = [row for part in plan.commitlog_parts(plan.find_stores([str(store)]))
                for row in part_rows.rows(part, with_body=True)]
        key = lambda row: row[cols.index("commitLogOffset")]  # noqa: E731
        assert sorted(got, key=key) == sorted(want, key=key)
        assert len(got) == summary["rows"] and sum(not row[cols.index("ok")] for row in got) == summary["damagedRows"]


def test_export_refuses_to_write_over_data(extracted, run_cli, tmp_path):
    store = extracted("basic")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    result = run_cli("export", store, "--out", busy, "--format", "jsonl")
    assert result.code == 3 and "--overwrite" in result.err
    assert (busy / "keep.txt").exists()
    inside = run_cli("export", store, "--out", store / "export", "--format", "jsonl", "--overwrite")
    assert inside.code == 3 and "overlaps" in inside.err
    assert not (store / "export").exists()
    again = run_cli("export", store, "--out", busy, "--format", "jsonl", "--overwrite")
    assert again.code == 0 and not (busy / "keep.txt").exists()


def test_store_arguments(extracted, run_cli, tmp_path):
    same = run_cli("stats", extracted("basic"), extracted("basic"))
    assert same.code == 2 and "NAME=PATH" in same.err
    missing = run_cli("stats", tmp_path / "nothing")
    assert missing.code == 4
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_cli("stats", empty).code == 4
    assert run_cli("stats", extracted("basic"), "--master", "local[2]").code == 2


def test_filters_follow_sql_semantics():
    f = Filters()
    assert f.push("in", "topic", ("A", "B", None))
    assert f.push("eq", "topic", "B")
    assert f.topics == {"B"}
    assert f.push("gt", "commitLogOffset", 10) and f.push("le", "commitLogOffset", 20)
    assert f.offset_range == (11, 20)
    assert f.push("lt", "storeTimestamp", 5) and f.time_range == (None, 4)
    assert f.file_ok(0, 12) and f.file_ok(20, 30)            # files covering [start, end)
    assert not f.file_ok(0, 11) and not f.file_ok(21, 30)
    assert not f.push("eq", "queueId", "1")            # a string for an int column: Spark keeps it
    assert not f.push("ge", "storeTimestamp", 1.5)
    assert not f.push("eq", "keys", "k")
    assert f.needs_message


def test_partition_names_are_escaped_as_spark_escapes_them():
    assert exporter.escape_path_name("%RETRY%group") == "%25RETRY%25group"
    assert exporter.escape_path_name("a/b:c=d") == "a%2Fb%3Ac%3Dd"
    assert exporter.escape_path_name("") == "__HIVE_DEFAULT_PARTITION__"
    assert exporter.escape_path_name("Orders|x") == "Orders|x"


def test_per_file_counts_add_up_to_the_walk(extracted):
    for name in ("crash", "garbage-tail"):
        stores = plan.find_stores([extracted(name)])
        parts = plan.commitlog_parts(stores)
        counts = LocalEngine(2).map(part_rows.count_entries, parts)
        # the data ends where the walk says (an empty pre-created file after it ends too)
        end = [c.data_end for c in counts if c.data_end is not None]
        with commitlog.open_queue(stores[0].layout()) as queue:
            walked = next(e.offset for e in commitlog.walk(queue) if isinstance(e, commitlog.EndOfData))
        assert end[0] == walked
        if name == "crash":
            assert sum(c.records for c in counts) == len(broker_records(name))
            assert parts[-2].is_last and not parts[-3].is_last   # the last file is pre-created, empty
        else:
            assert [c.kinds for c in counts] == [{"bad-magic": 1}]
