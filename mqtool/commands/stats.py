"""`mqtool stats STORE...`: what the stores hold, per topic and queue (like pg_waldump --stats).

Counts, bytes, first/last store time, a size histogram, distinct keys and
messages per hour, for the messages that pass their checks.  Damage is
counted per store, and makes the exit status 1, as in dump.
"""

from __future__ import annotations

import functools

import click
import humanize

from mqtool.cli import metrics, options, output, requires
from mqtool.errors import ProblemsFound
from mqtool.forensics.filters import Filters
from mqtool.pipeline import plan as pipeline
from mqtool.pipeline import storestats


@click.command("stats")
@options.stores_argument
@options.config_option
@options.json_option
@options.prometheus_option
@options.filter_options
@options.engine_options
@click.option("--no-crc", is_flag=True, help="Do not recompute body CRCs.")
@requires.run
def cli(run, stores, config_path, settings, as_json, prometheus, topics, since, until, engine, jobs, master, spark_conf,
        no_crc):
    """Messages, bytes, times, sizes and keys per topic and queue.

    Messages, bytes, store times, sizes, distinct keys and messages per hour, per topic and queue.

    STORE is a store directory, NAME=DIR, or a directory with one store per broker; several
    stores are summed up together, each under its broker name (brokerName from --config or --set
    for a single store, else the folder's).  Replicas of one DLedger group are counted once, from
    the replica holding the most entries (said in a note and a `replicas` JSON line).
    """
    found = pipeline.find_stores(stores, config_path, settings)
    run.reading([s.layout() for s in found])
    found, replicas = pipeline.dledger_replicas(found)     # one DLedger group's replicas: counted once
    filters = Filters.from_options(topics, since=since, until=until)
    runner = run.open_engine(engine, jobs, master, spark_conf)
    try:
        run.warm_up(*([storestats.warm_up] if engine == "local" else []))   # Spark's workers load their own
        parts = pipeline.commitlog_parts(found, filters)
        scan = functools.partial(storestats.scan, filters=filters, check_crc=not no_crc)
        timer = storestats.timer_lines(found, filters.topics)
        batch = storestats.batch_queue_lines(found, filters.topics)
        lines = storestats.report(storestats.merge(runner.map(scan, parts)), timer, batch)
        lines[-1].update(run.timings())
    finally:
        runner.close()
    if as_json:
        for line in replicas + lines:
            output.emit_json(line)
    else:
        for group in replicas:
            others = "; ".join(f"{r['store']} {r['entries']:,}" for r in group["replicas"] if r["store"] != group["counted"])
            output.note(f"note: {len(group['replicas'])} stores are replicas of one DLedger group (the same entry 0): "
                        f"counted once, as {group['broker']}, from {group['counted']} ({group['entries']:,} entries; "
                        f"the others hold {others})")
        _tables(lines, several=len(found) > 1)
    if prometheus:
        metrics.write(prometheus, metrics.stats_metrics([s.root for s in found], lines))
    total = lines[-1]
    if total["problems"]:
        damaged = [l for l in lines if l["type"] == "store" and l["problems"]]
        raise ProblemsFound(f"{total['problems']} problem(s) found in {len(damaged)} store(s); "
                            "see `mqtool dump STORE commitlog` for where")


def _rate(line) -> str:
    """Messages per hour over the hours from the first to the last message, and the busiest hour."""
    hours = line["messagesPerHour"]
    if not hours:
        return "-"
    span = line["lastStoreTimestamp"] // storestats.HOUR_MS - line["firstStoreTimestamp"] // storestats.HOUR_MS + 1
    return f"{line['messages'] / span:,.0f} ({max(hours.values()):,})"


def _tables(lines, several: bool) -> None:
    queues = [l for l in lines if l["type"] == "queue"]
    topics = [l for l in lines if l["type"] == "topic"]
    stores = [l for l in lines if l["type"] == "store"]
    total = lines[-1]
    right = {"justify": "right"}
    lead = [("broker", {})] if several else []
    table = output.TableStream("messages per topic and queue", lead + [
        ("topic", {}), ("queue", right), ("messages", right), ("%", right), ("bytes", right), ("%", right),
        ("first store time", {}), ("last store time", {}), ("distinct keys", right),
        ("per hour (peak)", right)])

    def add(line, topic, queue):
        table.add(*([line.get("broker", "")] if several else []), topic, queue, f"{line['messages']:,}",
                  f"{line['messagesPercent']:.2f}", humanize.naturalsize(line["bytes"], binary=True),
                  f"{line['bytesPercent']:.2f}", output.utc_time(line["firstStoreTimestamp"]),
                  output.utc_time(line["lastStoreTimestamp"]), f"{line['distinctKeys']:,}", _rate(line))

    for topic in topics:   # each topic's queues, then the topic's total
        for line in queues:
            if (line["broker"], line["topic"]) == (topic["broker"], topic["topic"]):
                add(line, line["topic"], line["queueId"])
        if topic["queues"] > 1:
            add(topic, topic["topic"], "all")
    if queues:
        add({**total, "broker": ""}, "Total", "")
    table.flush()

    sizes: dict = {}
    for line in queues:
        for bucket, n in line["sizeHistogram"].items():
            sizes[int(bucket)] = sizes.get(int(bucket), 0) + n
    if sizes:
        hist = output.TableStream("record sizes (storeSize)", [("up to", right), ("records", right),
                                                               ("%", right), ("", {})])
        peak = max(sizes.values())
        for bucket, n in sorted(sizes.items()):
            hist.add(humanize.naturalsize(bucket, binary=True, format="%.0f"), f"{n:,}",
                     f"{100 * n / total['records']:.2f}", "#" * max(1, round(30 * n / peak)))
        hist.flush()

    groups = [l for l in lines if l["type"] == "group"]
    if groups:
        gt = output.TableStream("retries and dead letters per consumer group (%RETRY%group, %DLQ%group)", lead + [
            ("group", {}), ("retries", right), ("dead letters", right)])
        for line in groups:
            gt.add(*([line["broker"]] if several else []), line["group"], f"{line['retries']:,}",
                   f"{line['deadLetters']:,}")
        gt.flush()

    timers = [l for l in lines if l["type"] == "timer"]
    if timers:
        tt = output.TableStream("pending timer messages (timer store)", lead + [("real topic", {}),
                                                                                 ("pending", right)])
        for line in timers:
            tt.add(*([line["broker"]] if several else []), line["topic"], f"{line['pending']:,}")
        tt.flush()

    batch = [l for l in lines if l["type"] == "batch_queue"]
    if batch:
        bt = output.TableStream("batch queues (BatchCQ; offsets count messages, an inner batch many)", lead + [
            ("topic", {}), ("queue", right), ("min offset", right), ("max offset", right), ("messages", right)])
        for line in batch:
            bt.add(*([line["broker"]] if several else []), line["topic"], line["queueId"], f"{line['minOffset']:,}",
                   f"{line['maxOffset']:,}", f"{line['messages']:,}")
        bt.flush()

    st = output.TableStream("stores", [("broker", {}), ("store", {}), ("files", right), ("records", right),
                                       ("damaged records", right), ("problems", right), ("blanks", right),
                                       ("bytes", right)])
    for line in stores:
        kinds = ", ".join(f"{k} {v}" for k, v in line["problemKinds"].items())
        st.add(line["broker"], line["store"], line["files"], f"{line['records']:,}", line["damagedRecords"],
               f"{line['problems']}" + (f" ({kinds})" if kinds else ""), line["blanks"],
               humanize.naturalsize(line["bytes"], binary=True))
    st.flush()
