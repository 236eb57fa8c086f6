"""The pipeline on Spark (local[2]): the rocketmq data sources, export, stats and per-file scans,
against what real RocketMQ reports for the fixtures (expected-read.jsonl) and against stores written
by mqtool's engine.

These tests need PySpark and Java 17+ (`./bootstrap` installs both).  They never skip: a machine
without them fails here, loudly.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from mqtool.formats.commitlog import Blank, Record
from mqtool.pipeline import plan
from mqtool.pipeline import rows as part_rows
from mqtool.pipeline import schema as row_schema
from mqtool.pipeline.local import LocalEngine
from mqtool.pipeline import exporter
from mqtool.storage import commitlog
from mqtool.storage.commitlog import Problem

from conftest import DAMAGED, UNDAMAGED, expected_read
from helpers.pipeline_expect import (
    assert_row_is_broker_record,
    assert_stats_lines,
    broker_records,
    expected_stats,
    fixture_change,
    fixture_summary,
    stats_from_records,
    write_engine_store,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="session")
def spark():
    from mqtool.pipeline.spark import session as spark_session

    session, created = spark_session.session("local[2]", conf=["spark.sql.shuffle.partitions=4"])
    assert created, "another SparkSession was already active"
    yield session
    session.stop()


@pytest.fixture(scope="session")
def engine(spark):
    from mqtool.pipeline.spark.engine import SparkEngine

    return SparkEngine(spark)


@pytest.fixture(scope="session")
def engine_store(tmp_path_factory):
    """A store written by mqtool's engine in 64 KiB files: (root, [(spec, PutResult)])."""
    root = tmp_path_factory.mktemp("engine") / "broker-e" / "store"
    return root, write_engine_store(root)


SOURCES = ("rocketmq", "rocketmq_python")   # the JVM reader (session() loads it) and the Python data source


@pytest.fixture(params=SOURCES)
def fmt(request, spark):
    """Each test of the rocketmq rows runs on both sources: the same rows from either."""
    from mqtool.pipeline.spark import jvmreader

    assert jvmreader.loaded(spark), "the session has no JVM reader: format('rocketmq') is the Python one"
    shipped = str(jvmreader.shipped(jvmreader.spark_jars()))      # the jar built with the package, no javac
    assert shipped in spark.sparkContext.getConf().get("spark.jars", "").split(","), "not the package's jar"
    return request.param


def rows_of(df) -> list[dict]:
    return [row.asDict(recursive=True) for row in df.collect()]


def stores_arg(extracted, names):
    return [f"{name}={extracted(name)}" for name in names]


# ------------------------------------------------------------------ the data source

def test_one_dataframe_holds_exactly_the_brokers_records(spark, fmt, extracted):
    """All undamaged fixtures as one DataFrame: per broker, exactly the records RocketMQ reads."""
    df = spark.read.format(fmt).option("withBody", "true") \
        .load(stores_arg(extracted, UNDAMAGED))
    assert df.schema == spark.createDataFrame([], row_schema.ddl(row_schema.columns(True))).schema
    rows = rows_of(df)
    by_broker: dict = {}
    for row in rows:
        by_broker.setdefault(row["broker"], {})[row["commitLogOffset"]] = row
    assert sorted(by_broker) == sorted(UNDAMAGED)
    for name in UNDAMAGED:
        mine, theirs = by_broker[name], broker_records(name)
        assert sorted(mine) == sorted(theirs), name
        for offset, expected in theirs.items():
            row = mine[offset]
            assert_row_is_broker_record(row, expected)
            assert row["ok"] is True and row["problems"] == []
            assert row["store"] == str(extracted(name).resolve())
            start = int(Path(row["file"]).name)
            assert row["file"].startswith("commitlog/") and row["fileOffset"] == offset - start
        end = next(l for l in expected_read(name) if l["type"] == "commitlog_end")
        assert len(mine) == end["records"]


def test_dledger_stores_are_read_as_the_broker_reads_them(spark, fmt, extracted):
    """DLedger peers: each record of their entries, at entry pos + 48, as RocketMQ reads it."""
    names = ["dledger1", "dledger3-n0", "dledger3-n2"]
    rows = rows_of(spark.read.format(fmt).option("withBody", "true").load(stores_arg(extracted, names)))
    by_broker: dict = {}
    for row in rows:
        by_broker.setdefault(row["broker"], {})[row["commitLogOffset"]] = row
    assert sorted(by_broker) == sorted(names)
    for name in names:
        mine, theirs = by_broker[name], broker_records(name)
        assert sorted(mine) == sorted(theirs), name
        for offset, expected in theirs.items():
            assert_row_is_broker_record(mine[offset], expected)
            assert mine[offset]["ok"] is True
            assert "/data/" in mine[offset]["file"]


def test_a_switched_store_is_read_across_its_division(spark, fmt, extracted):
    """A broker switched to DLedger mode (mixed5): a part per file of either kind, the old
    commitlog's records below dividedCommitlogOffset, DLedger's entries' records above it."""
    rows = rows_of(spark.read.format(fmt).option("withBody", "true").load(stores_arg(extracted, ["mixed5"])))
    mine, theirs = {row["commitLogOffset"]: row for row in rows}, broker_records("mixed5")
    assert sorted(mine) == sorted(theirs)
    divided = next(l for l in expected_read("mixed5") if l["type"] == "dledger_open")["dividedCommitlogOffset"]
    for offset, expected in theirs.items():
        assert_row_is_broker_record(mine[offset], expected)
        assert mine[offset]["ok"] is True
        assert ("/data/" in mine[offset]["file"]) == (offset >= divided), offset
    parts = plan.commitlog_parts(plan.find_stores([str(extracted("mixed5"))]))
    assert [Path(p.display).parent.name for p in parts] == ["commitlog"] * 4 + ["data"] * 3


def test_damaged_fixtures_flag_the_records_that_fail_their_checks(spark, fmt, extracted):
    df = spark.read.format(fmt).option("problems", "true").load(stores_arg(extracted, DAMAGED))
    rows = rows_of(df)
    # flipped-body-byte: every record is on disk; the broker cut at the one whose CRC fails
    flipped = [r for r in rows if r["broker"] == "flipped-body-byte"]
    summary = fixture_summary("flipped-body-byte")
    assert len(flipped) == summary["messagesWritten"]
    bad = [r for r in flipped if not r["ok"]]
    assert [r["commitLogOffset"] for r in bad] == [summary["maxPhyOffsetAfterRecovery"]]
    assert [p["kind"] for p in bad[0]["problems"]] == ["crc-mismatch"]
    by_offset = {r["commitLogOffset"]: r for r in flipped}
    for offset, expected in broker_records("flipped-body-byte").items():
        assert by_offset[offset]["ok"] is True
        assert_row_is_broker_record(by_offset[offset], expected)
    # garbage-tail: all 50 records pass; the garbage is a problem row of its own
    garbage = [r for r in rows if r["broker"] == "garbage-tail"]
    records = [r for r in garbage if r["topic"] is not None]
    assert len(records) == 50 and all(r["ok"] for r in records)
    assert sorted(r["commitLogOffset"] for r in records) == sorted(broker_records("garbage-tail"))
    (problem,) = [r for r in garbage if r["topic"] is None]
    change = fixture_change("garbage-tail")
    assert problem["ok"] is False and problem["problems"][0]["kind"] == "bad-magic"
    assert (problem["file"], problem["fileOffset"]) == (change["file"], change["fileOffset"])
    # without option("problems") only records are rows
    assert spark.read.format(fmt).load(str(extracted("garbage-tail"))).count() == 50


def test_store_written_by_the_engine_and_a_directory_of_stores(spark, fmt, engine_store, extracted, tmp_path):
    """A fleet directory (one store per broker, broker-x/ or broker-x/store/) is one DataFrame."""
    root, results = engine_store
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "broker-e").symlink_to(root.parent)          # broker-e/store/commitlog/...
    (fleet / "broker-b").symlink_to(extracted("basic"))   # broker-b/commitlog/...
    df = spark.read.format(fmt).option("withBody", "true").load(str(fleet))
    rows = rows_of(df)
    assert {r["broker"] for r in rows} == {"broker-e", "broker-b"}
    mine = {r["commitLogOffset"]: r for r in rows if r["broker"] == "broker-e"}
    assert sorted(mine) == [result.wrote_offset for _, result in results]
    for spec, result in results:
        row = mine[result.wrote_offset]
        assert (row["topic"], row["queueId"], row["queueOffset"]) == (result.topic, result.queue_id,
                                                                     result.queue_offset)
        assert (row["storeSize"], row["msgId"], row["storeTimestamp"]) == (result.wrote_bytes, result.msg_id,
                                                                          result.store_timestamp)
        assert (row["tags"], row["keys"], row["uniqKey"]) == (spec["tags"], spec["keys"],
                                                            spec["properties"]["UNIQ_KEY"])
        pattern = spec["bodyPattern"]
        body = (pattern["text"].encode() * (pattern["size"] // len(pattern["text"]) + 1))[:pattern["size"]]
        assert bytes(row["body"]) == body and row["ok"] is True
    assert len([r for r in rows if r["broker"] == "broker-b"]) == 50


@pytest.mark.parametrize("cq_fmt", ["rocketmq_cq", "rocketmq_cq_python"])
def test_consume_queue_source_matches_the_brokers_units(spark, extracted, cq_fmt):
    names = ["basic", "multifile", "features"]
    df = spark.read.format(cq_fmt).load(stores_arg(extracted, names))
    if cq_fmt == "rocketmq_cq":      # the JVM reader: what a query reads, and the filters it takes
        assert "rocketmq_cq struct<topic:string>" in _scan_of(df.groupBy("topic").count())
        assert "pushed" in _scan_of(df.where("topic = 'PaymentTopic'").select("size"))
        assert df.count() == sum(1 for name in names for u in expected_read(name) if u["type"] == "cq_unit") \
            + df.where("not ok").count()
    rows = rows_of(df)
    for name in names:
        mine = {(r["topic"], r["queueId"], r["queueOffset"]): (r["commitLogOffset"], r["size"], r["tagsCode"])
                for r in rows if r["broker"] == name and r["ok"]}
        theirs = {(u["topic"], u["queueId"], u["offset"]): (u["commitLogOffset"], u["size"], u["tagsCode"])
                  for u in expected_read(name) if u["type"] == "cq_unit"}
        assert mine == theirs, name


@pytest.mark.parametrize("cq_fmt", ["rocketmq_cq", "rocketmq_cq_python"])
def test_consume_queue_source_holds_the_brokers_batch_units(spark, extracted, cq_fmt):
    """batchcq5 (5.3.3, a BatchCQ topic): every unit of its batch queues is a row, queueOffset its
    msgBaseOffset, with cqType and batchSize; the consume queues' units beside them."""
    df = spark.read.format(cq_fmt).load(stores_arg(extracted, ["batchcq5"]))
    mine = sorted((r["topic"], r["queueId"], r["queueOffset"], r["commitLogOffset"], r["size"], r["tagsCode"],
                   r["cqType"], r["batchSize"]) for r in rows_of(df) if r["ok"])
    lines = expected_read("batchcq5")
    theirs = sorted([(u["topic"], u["queueId"], u["msgBaseOffset"], u["commitLogOffset"], u["size"], u["tagsCode"],
                      "BatchCQ", u["batchSize"]) for u in lines if u["type"] == "bcq_unit"]
                    + [(u["topic"], u["queueId"], u["offset"], u["commitLogOffset"], u["size"], u["tagsCode"],
                        "SimpleCQ", 1) for u in lines if u["type"] == "cq_unit"])
    assert mine == theirs
    sums = {r["queueId"]: r["messages"] for r in rows_of(df.where("cqType = 'BatchCQ'").groupBy("queueId")
                                                         .agg({"batchSize": "sum"})
                                                         .withColumnRenamed("sum(batchSize)", "messages"))}
    assert sums == {0: 295, 1: 165, 2: 120}       # the broker's max offsets: the queues' messages


def test_filters_pushed_down_give_what_spark_filters_give(spark, fmt, extracted):
    """The reader takes topic, queue, time and offset filters: the JVM reader always, the Python
    data source with option("pushdown", "true")."""
    path = str(extracted("multifile"))
    times = sorted(r["storeTimestamp"] for r in broker_records("multifile").values())
    lo, hi = times[len(times) // 4], times[len(times) // 2]
    condition = (f"topic in ('OrderTopic', 'AuditTopic') and queueId = 0 and storeTimestamp >= {lo} "
                 f"and storeTimestamp < {hi} and commitLogOffset > 100000 and commitLogOffset <= 2000000")
    key = lambda r: r["commitLogOffset"]  # noqa: E731
    plain = spark.read.format(fmt).load(path).where(condition)
    pushed = spark.read.format(fmt).option("pushdown", "true").load(path).where(condition)
    expected = sorted(rows_of(plain), key=key)
    assert expected and sorted(rows_of(pushed), key=key) == expected
    # Spark's own Filter keeps only what the reader did not take (here: the IS NOT NULLs)
    def spark_filter(df):
        plan = df._jdf.queryExecution().executedPlan().toString()
        return " ".join(line for line in plan.splitlines() if " Filter " in line)
    if fmt == "rocketmq_python":
        assert "OrderTopic" in spark_filter(plain) and "<=" in spark_filter(plain)
    for df in [pushed] + ([plain] if fmt == "rocketmq" else []):
        assert "isnotnull(queueId" in spark_filter(df)
        for taken in ("OrderTopic", "=", ">", "<"):
            assert taken not in spark_filter(df)
    # the same through the CQ source
    cq_pushed = spark.read.format("rocketmq_cq").option("pushdown", "true").load(path).where("topic = 'PaymentTopic'")
    assert cq_pushed.count() == sum(1 for r in broker_records("multifile").values() if r["topic"] == "PaymentTopic")


def test_pushdown_prunes_files_and_records_in_the_reader(extracted):
    """What Spark hands pushFilters, applied to the reader directly."""
    from pyspark.sql.datasource import EqualTo, GreaterThanOrEqual, In, LessThan, StringContains

    from mqtool.pipeline.spark.sources import PushdownCommitLogReader

    reader = PushdownCommitLogReader({"path": str(extracted("multifile"))})
    unsupported = StringContains(("keys",), "x")
    filters = [In(("topic",), ("AuditTopic",)), GreaterThanOrEqual(("commitLogOffset",), 65536),
               LessThan(("commitLogOffset",), 3 * 65536), EqualTo(("broker",), "multifile"), unsupported]
    assert list(reader.pushFilters(filters)) == [unsupported]
    parts = [p.value for p in reader.partitions()]
    assert [p.file_from for p in parts] == [65536, 2 * 65536]
    rows = [r for p in parts for r in part_rows.rows(p, reader.filters)]
    expected = sorted(o for o, r in broker_records("multifile").items()
                      if r["topic"] == "AuditTopic" and 65536 <= o < 3 * 65536)
    assert sorted(r[7] for r in rows) == expected


def test_without_pushdown_a_dataframe_can_be_queried_again(spark, fmt, extracted):
    """Spark 4.1-4.3 keep a Python data source's pushed filters on the DataFrame (its default
    reader pushes none); the JVM reader pushes them per query."""
    df = spark.read.format(fmt).load(str(extracted("multifile")))
    df.createOrReplaceTempView("multifile")
    audit = spark.sql("select count(*) from multifile where topic = 'AuditTopic'").collect()[0][0]
    assert audit == sum(1 for r in broker_records("multifile").values() if r["topic"] == "AuditTopic")
    assert spark.sql("select count(*) from multifile").collect()[0][0] == len(broker_records("multifile"))


def test_a_read_of_some_columns_gives_those_columns_of_the_full_read(spark, fmt, extracted):
    """option("columns") and a schema given to spark.read pick columns (PySpark tells Python data
    sources nothing of what a query reads): the same rows, fewer columns."""
    paths = stores_arg(extracted, ["multifile", *DAMAGED])
    full = spark.read.format(fmt).option("problems", "true").option("withBody", "true").load(paths)
    key = lambda r: (r["broker"], r["file"], r["fileOffset"])  # noqa: E731
    for names in (["broker", "file", "fileOffset", "storeSize", "topic", "ok", "problems", "sysFlagText"],
                  ["tags", "body", "fileOffset", "broker", "file", "bodyCRCRecomputed"]):
        df = spark.read.format(fmt).option("problems", "true").option("columns", ", ".join(names)).load(paths)
        assert df.columns == names
        assert sorted(rows_of(df), key=key) == sorted(rows_of(full.select(*names)), key=key)
    by_schema = spark.read.format(fmt).schema("storeSize INT, commitLogOffset BIGINT").load(paths)
    got = by_schema.groupBy().agg({"*": "count", "storeSize": "sum"}).collect()[0]
    records = [r for name in ["multifile", *DAMAGED] for r in broker_records(name).values()]
    extra = fixture_summary("flipped-body-byte")["messagesWritten"] - len(broker_records("flipped-body-byte"))
    assert got["count(1)"] == len(records) + extra     # flipped-body-byte: records past the broker's cut too
    want = full.where("topic is not null").selectExpr("count(*)", "sum(storeSize)").collect()[0]
    assert (got["count(1)"], got["sum(storeSize)"]) == (want[0], want[1])
    pushed = spark.read.format(fmt).option("pushdown", "true").option("columns", "topic,storeSize") \
        .load(str(extracted("multifile"))).where("topic = 'OrderTopic'")
    orders = [r for r in broker_records("multifile").values() if r["topic"] == "OrderTopic"]
    assert pushed.selectExpr("count(*)", "sum(storeSize)").collect()[0][:] == \
        (len(orders), sum(r["storeSize"] for r in orders))
    cq = spark.read.format("rocketmq_cq").option("columns", "topic,commitLogOffset").load(paths)
    assert cq.columns == ["topic", "commitLogOffset"]
    assert sorted(map(tuple, cq.collect())) == sorted(map(tuple, spark.read.format("rocketmq_cq").load(paths)
                                                          .select("topic", "commitLogOffset").collect()))


@pytest.mark.parametrize("how, message", [
    (lambda r: r.option("columns", "topic,nope"), "has no column 'nope'"),
    (lambda r: r.option("columns", " , "), "names no column"),
    (lambda r: r.schema("storeSize bigint"), "column 'storeSize' is int, not bigint"),
])
def test_unknown_columns_are_a_clear_error(spark, fmt, extracted, how, message):
    with pytest.raises(Exception, match=message):
        how(spark.read.format(fmt)).load(str(extracted("basic"))).collect()


def _scan_of(df) -> str:
    """The BatchScan line of a DataFrame's plan: what the source is asked to read."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return next(line for line in plan.splitlines() if "BatchScan" in line)


def test_the_jvm_reader_reads_only_the_columns_a_query_needs(spark, extracted):
    """format("rocketmq") is the JVM reader: Spark tells it the columns a query reads (the Python
    data source reads all 36), and the counts are the broker's."""
    path = str(extracted("multifile"))
    df = spark.read.format("rocketmq").load(path)
    records = broker_records("multifile").values()
    sums = df.selectExpr("count(*)", "sum(storeSize)")
    assert "rocketmq struct<storeSize:int>" in _scan_of(sums)
    assert tuple(sums.collect()[0]) == (len(records), sum(r["storeSize"] for r in records))
    assert "rocketmq struct<>" in _scan_of(df.selectExpr("count(*)"))
    assert df.count() == len(records)
    topics = df.groupBy("topic").count()
    assert "rocketmq struct<topic:string>" in _scan_of(topics)
    want: dict = {}
    for r in records:
        want[r["topic"]] = want.get(r["topic"], 0) + 1
    assert dict(map(tuple, topics.collect())) == want


def test_a_query_of_a_struct_field_reads_the_whole_column(spark, extracted):
    """Spark's nested schema pruning asks for problems.kind alone; the JVM reader reads the
    problems column whole and gives what the Python data source gives."""
    paths = stores_arg(extracted, DAMAGED)
    results = []
    for fmt in SOURCES:
        df = spark.read.format(fmt).option("problems", "true").load(paths)
        kinds = sorted(map(tuple, df.selectExpr("commitLogOffset", "problems.kind").collect()),
                       key=lambda r: (r[0], r[1] or []))
        bad_magic = df.where("array_contains(problems.kind, 'bad-magic')").count()
        messages = sorted(r[0] for r in df.selectExpr("explode(problems) as p").select("p.message").collect())
        results.append((kinds, bad_magic, messages))
    assert results[0] == results[1] and results[0][1] == 1 and results[0][2]


def test_a_task_that_reads_two_partitions_at_once_gets_its_rows(spark, extracted):
    """zip() has each task read a partition of both DataFrames at once, holding two connections
    (test_rowserver shows the server adding a worker when all are busy, which this needs on
    partitions bigger than a socket's buffers)."""
    import threading

    path = str(extracted("multifile"))
    a = spark.read.format("rocketmq").load(path).select("commitLogOffset").rdd
    b = spark.read.format("rocketmq").load(path).select("storeSize").rdd
    result = []
    worker = threading.Thread(target=lambda: result.append(a.zip(b).count()), daemon=True)
    worker.start()
    worker.join(120)
    if worker.is_alive():
        spark.sparkContext.cancelAllJobs()
        pytest.fail("zip of two reads did not finish in 120 s")
    assert result == [len(broker_records("multifile"))]


def test_the_python_reader_is_refused_where_the_jvm_has_its_own(spark):
    from mqtool.errors import UsageError
    from mqtool.pipeline.spark import session as spark_session

    with pytest.raises(UsageError, match=r"spark.mqtool.reader=python: this process's JVM has the JVM reader"):
        spark_session.session(conf=["spark.mqtool.reader=python"])
    spark_session.register(spark)          # the session's own choice stands


def test_a_read_that_fails_fails_the_query_with_mqtools_message(spark, store_copy):
    """A partition's read that stops (its file gone since the plan) fails its task with mqtool's
    one-line message: never a partition with rows missing."""
    root = store_copy("multifile")
    rdd = spark.read.format("rocketmq").load(str(root)).select("storeSize")._jdf.queryExecution().toRdd()
    assert len(rdd.partitions()) > 1          # planned now: one partition per commitlog file
    first = sorted((root / "commitlog").iterdir())[0]
    first.rename(root / "moved-away")
    from mqtool.errors import NotAStoreError
    from mqtool.pipeline.spark.engine import spark_errors

    with pytest.raises(NotAStoreError, match=f"^{first}: cannot open: No such file or directory$"):
        with spark_errors():       # what export does: mqtool's one line, not Spark's wrappers
            rdd.count()


def test_a_query_that_stops_reading_early_leaves_the_reader_serving(spark, extracted):
    """A LIMIT drops a partition's connection halfway; the row server's worker goes on."""
    path = str(extracted("multifile"))
    df = spark.read.format("rocketmq").load(path)
    for _ in range(3):
        assert len(df.limit(2).collect()) == 2
    assert df.count() == len(broker_records("multifile"))


def test_a_row_server_that_cannot_start_is_a_clear_error(spark, extracted):
    with pytest.raises(Exception, match="cannot start mqtool's row server with /nowhere/python"):
        spark.read.format("rocketmq").option("python", "/nowhere/python").load(str(extracted("basic"))).count()


# ------------------------------------------------------------------ per-file scans on Spark

def test_reused_workers_keep_what_they_loaded_out_of_the_collectors_sight(engine, extracted):
    """PySpark runs gc.collect() after every task of a reused worker; past its first task a
    worker has frozen what it loaded (spark.sources.settle), so that walks only the new objects."""
    parts = plan.commitlog_parts(plan.find_stores([str(extracted("multifile"))]))
    assert len(parts) > 2 * engine.cores
    frozen = engine.map(lambda part: gc.get_freeze_count(), parts)
    assert max(frozen) > 10_000    # modules, numba's and pyarrow's objects: far more than a task makes


def test_a_task_that_fails_raises_mqtools_error_as_the_local_engine_does(engine, store_copy):
    """A task's mqtool error (here: its file gone since the plan) reaches the command as the error
    itself, one line and its exit code, as from the local engine: not PySpark's text of it."""
    root = store_copy("multifile")
    parts = plan.commitlog_parts(plan.find_stores([str(root)]))
    (root / parts[1].display).unlink()
    with pytest.raises(Exception) as local:
        LocalEngine(1).map(part_rows.count_entries, parts)
    with pytest.raises(type(local.value)) as on_spark:
        engine.map(part_rows.count_entries, parts)
    assert str(on_spark.value) == str(local.value) and "cannot open" in str(local.value)
    with pytest.raises(type(local.value), match="cannot open"):
        list(engine.imap(part_rows.count_entries, parts))


def test_map_runs_a_per_file_scan_like_the_local_walk(engine, extracted, engine_store):
    """SparkEngine.map (what verify-crc/rebuild-cq --engine spark will build on): per-file counts
    of records, BLANKs and problems equal one local walk over the whole commitlog."""
    names = UNDAMAGED + DAMAGED
    stores = plan.find_stores([f"{n}={extracted(n)}" for n in names] + [str(engine_store[0])])
    parts = plan.commitlog_parts(stores)
    on_spark = engine.map(part_rows.count_entries, parts)
    assert on_spark == LocalEngine(1).map(part_rows.count_entries, parts)
    assert on_spark == LocalEngine(2).map(part_rows.count_entries, parts)
    for store in stores:
        layout = store.layout()
        walked: dict = {}
        with commitlog.open_queue(layout) as queue:
            for entry in commitlog.walk(queue, path_display=lambda p: str(Path(p).relative_to(layout.root))):
                if isinstance(entry, (Record, Blank, Problem)):
                    path = entry.path if isinstance(entry, Problem) else _file_of(layout, entry.offset)
                    counts = walked.setdefault(path, [0, 0, 0])
                    if isinstance(entry, Record):
                        counts[0] += 1
                        counts[2] += len(commitlog.record_problems(entry))
                    elif isinstance(entry, Blank):
                        counts[1] += 1
                    else:
                        counts[2] += 1
        mine = {c.file: [c.records, c.blanks, c.problems]
                for p, c in zip(parts, on_spark) if p.broker == store.broker and (c.records or c.blanks or c.problems)}
        assert mine == walked, store.broker
    assert sum(c.problems for p, c in zip(parts, on_spark) if p.broker in DAMAGED) == 2


def _file_of(layout, offset):
    size = layout.commitlog_file_size()
    return f"commitlog/{offset - offset % size:020d}"


# ------------------------------------------------------------------ export and stats

@pytest.mark.parametrize("engine_name,fmt", [("spark", "parquet"), ("spark", "jsonl"), ("local", "parquet"),
                                             ("local", "jsonl")])
def test_export_reads_back_equal_to_the_dataframe(engine_name, fmt, spark, extracted, engine_store, run_cli,
                                                  tmp_path):
    names = ["features", "flipped-body-byte"]
    args = stores_arg(extracted, names) + [f"engine={engine_store[0]}"]
    out = tmp_path / "out"
    result = run_cli("export", *args, "--out", out, "--format", fmt, "--with-body", "--engine", engine_name,
                     "--json")
    assert result.code == 0, result.err
    (summary,) = result.json_lines()
    cols = row_schema.columns(True)
    names_in_order = [n for n, _ in cols]
    if fmt == "parquet":
        back = spark.read.parquet(str(out))
    else:
        back = spark.read.schema(row_schema.ddl(cols)).json(str(out))
    df = spark.read.format("rocketmq").option("withBody", "true").load(args)
    key = lambda r: (r["broker"], r["commitLogOffset"])  # noqa: E731
    expected = sorted(rows_of(df), key=key)
    got = sorted(rows_of(back.select(*names_in_order)), key=key)
    assert len(got) == len(expected) == summary["rows"]
    assert got == expected
    assert summary["damagedRows"] == 1
    # one directory per topic, named as Spark names partitions (%RETRY% topics escaped)
    topics = {r["topic"] for r in expected}
    assert {p.name for p in out.iterdir() if p.is_dir()} == {f"topic={exporter.escape_path_name(t)}" for t in topics}
    assert "topic=%25RETRY%25group-a" in {p.name for p in out.iterdir()}


@pytest.mark.parametrize("engine_name", ["spark", "local"])
def test_stats_equal_counts_from_expected_read(engine_name, spark, extracted, engine_store, run_cli):
    args = stores_arg(extracted, UNDAMAGED) + [f"engine={engine_store[0]}"]
    extra = ["--jobs", "2"] if engine_name == "local" else []
    result = run_cli("stats", *args, "--json", "--engine", engine_name, *extra)
    assert result.code == 0, result.err
    lines = result.json_lines()
    expected = {}
    for name in UNDAMAGED:
        expected.update(expected_stats(name, name))
    root, results = engine_store
    expected.update(stats_from_records("engine", [
        {"topic": r.topic, "queueId": r.queue_id, "storeSize": r.wrote_bytes, "storeTimestamp": r.store_timestamp,
         "keys": spec["keys"]} for spec, r in results]))
    assert_stats_lines(lines, expected)
    stores = {l["broker"]: l for l in lines if l["type"] == "store"}
    for name in UNDAMAGED:
        end = next(l for l in expected_read(name) if l["type"] == "commitlog_end")
        assert (stores[name]["records"], stores[name]["blanks"], stores[name]["problems"]) == \
            (end["records"], end["blanks"], 0)


def test_stats_on_damaged_stores_exit_1_with_the_damage_counted(extracted, run_cli, spark):
    result = run_cli("stats", *stores_arg(extracted, DAMAGED), "--json", "--engine", "spark")
    assert result.code == 1
    stores = {l["broker"]: l for l in result.json_lines() if l["type"] == "store"}
    assert stores["flipped-body-byte"]["damagedRecords"] == 1
    assert stores["flipped-body-byte"]["problemKinds"] == {"crc-mismatch": 1}
    assert stores["garbage-tail"]["problemKinds"] == {"bad-magic": 1}
    assert "2 problem(s)" in result.err


def test_stats_tables_and_topic_filter(extracted, run_cli, spark):
    result = run_cli("stats", str(extracted("multifile")), "--topic", "AuditTopic", "--engine", "spark")
    assert result.code == 0, result.err
    assert "AuditTopic" in result.out and "OrderTopic" not in result.out
    assert "588" in result.out and "record sizes" in result.out


def test_python_workers_run_this_interpreter(spark):
    """Local mode: Spark's Python workers are the venv's Python, so they import this mqtool."""
    import mqtool

    def where(_):
        import mqtool as m
        return sys.executable, m.__file__

    (got,) = set(spark.sparkContext.parallelize([1, 2], 2).map(where).collect())
    assert got == (sys.executable, mqtool.__file__)
    assert os.environ.get("PYSPARK_PYTHON") == sys.executable


# ------------------------------------------------------------------ verify-crc on Spark

def _patch(path: Path, offset: int, data: bytes) -> None:
    raw = bytearray(path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(bytes(raw))


def test_verify_crc_on_spark_finds_what_the_local_run_finds(store_copy, run_cli, spark):
    """Every file part a Spark task: the same findings, in the same order, and the same summary."""
    store = store_copy("multifile")
    _patch(store / "commitlog" / "00000000000000131072", 5000, b"\xff" * 8)         # a damaged header
    queue = next(p for p in sorted((store / "consumequeue").rglob("*")) if p.is_file())
    _patch(queue, 2 * 20 + 8, (77).to_bytes(4, "big"))                               # a unit's size
    local = run_cli("verify-crc", str(store), "--json")
    on_spark = run_cli("verify-crc", str(store), "--json", "--engine", "spark")
    assert (local.code, on_spark.code) == (1, 1)
    found = on_spark.json_lines()
    kinds = {l["kind"] for l in found if l["type"] == "problem"}
    assert {"bad-magic", "unit-size-mismatch"} <= kinds
    timing = ("seconds", "loadSeconds", "mbPerSecond")
    strip = lambda lines: [{k: v for k, v in l.items() if k not in timing} for l in lines]  # noqa: E731
    assert strip(found) == strip(local.json_lines())


def test_verify_crc_on_spark_of_a_clean_store_and_bad_options(extracted, run_cli, spark, tmp_path):
    result = run_cli("verify-crc", str(extracted("features")), "--engine", "spark")
    assert result.code == 0, result.err
    assert "0 problem(s)" in result.err
    refused = run_cli("verify-crc", str(extracted("features")), "--engine", "spark", "--jobs", "2")
    assert refused.code == 2 and "--jobs" in refused.err
    refused = run_cli("verify-crc", str(extracted("features")), "--master", "local[2]")
    assert refused.code == 2 and "--engine spark" in refused.err
    refused = run_cli("export", str(extracted("features")), "--out", str(tmp_path / "x"),
                      "--engine", "spark", "--spark-conf", "spark.mqtool.reader=scala")
    assert refused.code == 2 and 'spark.mqtool.reader=scala: expected "jvm" or "python"' in refused.err


# ------------------------------------------------------------------ rebuild-cq on Spark

REBUILD_SIZES = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=6000",
                 "--set", "maxHashSlotNum=100", "--set", "maxIndexNum=400"]


def _built_files(store: Path) -> tuple:
    """The rebuilt consume queue files by path; the index files in order (named by the clock)."""
    queues = {str(p.relative_to(store)): p.read_bytes()
              for p in sorted((store / "consumequeue").rglob("*")) if p.is_file()}
    return queues, [p.read_bytes() for p in sorted((store / "index").iterdir())]


@pytest.mark.parametrize("name", ["multifile", "features", "basic5", "flipped-body-byte", "garbage-tail"])
def test_rebuild_cq_on_spark_writes_the_files_the_local_engine_writes(name, extracted, tmp_path, run_cli, spark):
    import shutil

    copies = {}
    for engine in ("local", "spark"):
        store = tmp_path / engine
        shutil.copytree(extracted(name), store, symlinks=True)
        shutil.rmtree(store / "consumequeue")
        result = run_cli("rebuild-cq", str(store), *REBUILD_SIZES, "--index", "--json", "--no-quarantine",
                         "--engine", engine)
        report = json.loads(result.out.replace(str(store), "STORE"))     # the copies' paths differ
        copies[engine] = (result.code, {k: v for k, v in report.items() if k not in ("seconds", "loadSeconds")},
                          _built_files(store))
    assert copies["spark"] == copies["local"]
    code, report, files = copies["spark"]
    assert report["records"] > 0 and files
    assert code == (0 if name not in DAMAGED else 1)
    if name == "flipped-body-byte":
        assert report["stop"]["kind"] == "crc-mismatch"


def test_parts_cut_inside_files_give_the_walk_of_the_whole_store(engine, extracted):
    """Parts much smaller than a file (cut at record boundaries): the same records, in order."""
    from mqtool.engine import redispatch
    from mqtool.native import fastscan
    from mqtool.storage.settings import open_layout

    layout = open_layout(str(extracted("multifile")), None, ())
    queue = commitlog.open_queue(layout)
    try:
        tasks = redispatch.part_tasks(queue, 0, True, True, part_bytes=4096)
        assert len(tasks) > 3 * len(queue.files)
        whole = [c for c in commitlog.walk(queue, scanner=fastscan, resync_after_damage=False)
                 if isinstance(c, fastscan.Chunk)]
    finally:
        queue.close()
    parts = [c for c in redispatch.scanned_on(engine, layout, tasks) if isinstance(c, fastscan.Chunk)]
    for column in redispatch.DISPATCH_COLUMNS:
        assert np.array_equal(np.concatenate([c.columns[column] for c in parts]),
                              np.concatenate([c.columns[column] for c in whole])), column
    topics = {c.topic(i) for c in parts for i in range(c.count)}
    assert topics == {r["message"]["topic"] for r in expected_read("multifile") if r["type"] == "commitlog_record"}
