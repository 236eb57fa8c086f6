"""`mqtool lag STORE`: consumer lag offline, from the consumers' offsets in config/ (mqtool/forensics/lag.py).

Exit 0 (also when there is no offsets file: nobody has consumed yet); 1 when an offset is out of range
(below the queue's min or above its max, or of a queue the store does not hold), the offsets file is
damaged (its .bak read instead) or unreadable, or --group asks for offsets there is no file of.
"""

from __future__ import annotations

import click
import humanize

from mqtool.cli import metrics, options, output, requires
from mqtool.errors import ProblemsFound
from mqtool.forensics import lag
from mqtool.storage.settings import open_layout


@click.command("lag")
@options.store_argument
@options.config_option
@options.json_option
@options.prometheus_option
@click.option("--group", "groups", multiple=True, metavar="GROUP", help="Only this consumer group (repeatable).")
@click.option("--topic", "topics", multiple=True, metavar="TOPIC", help="Only this topic (repeatable).")
@requires.run
def cli(run, store, config_path, settings, as_json, prometheus, groups, topics):
    """Consumer lag per group, topic and queue, offline.

    Per consumer group, topic and queue: committed offset, the queue's min and max, the lag in
    messages and bytes, and the store time of the oldest message not consumed yet.

    Offsets come from config/consumerOffset.json (lmqConsumerOffset.json with enableLmq; a .bak when
    the file is missing or damaged, as a broker reads them); the 4.x delay levels from
    delayOffset.json.  Exit 1 when an offset is out of range, or the offsets cannot be read as they are.
    """
    layout = open_layout(store, config_path, settings)
    run.reading([layout])
    report = lag.compute(layout, groups=groups, topics=topics)
    if as_json:
        for line in report.queues + report.delays:
            output.emit_json(line.to_json())
        for group in report.groups():
            output.emit_json(group.to_json())
        output.emit_json(report.summary())
    else:
        _show(report)
    if prometheus:
        metrics.write(prometheus, metrics.lag_metrics(layout.root, report))
    if report.problems:     # the table's notes listed each one; the last line says how many
        more = len(report.problems) - 1
        raise ProblemsFound(report.problems[0] + (f" (and {more} more)" if more else "") if as_json else
                            f"{len(report.problems)} problem(s) with the consumer offsets (listed above)")


def _show(report: lag.LagReport) -> None:
    right = {"justify": "right"}
    columns = [("topic", {}), ("queue", right), ("committed", right), ("min", right), ("max", right),
               ("lag", right), ("lag bytes", right), ("oldest unconsumed", {}), ("status", {})]

    def cells(q):
        status = q.status
        if q.status == lag.BELOW_MIN:
            status += f" ({q.skipped:,} skipped)"
        elif q.beyond:
            status += f" (+{q.beyond:,})"
        return [q.topic, q.queue_id, "-" if q.committed is None else q.committed, q.min_offset, q.max_offset,
                f"{q.lag_messages:,}", humanize.naturalsize(q.lag_bytes, binary=True), output.utc_time(q.oldest_unconsumed),
                status]

    table = output.TableStream("consumer lag", [("group", {})] + columns)
    for q in report.queues:
        table.add(q.group, *cells(q))
    table.flush()
    if report.delays:
        delays = output.TableStream("delay levels (delayOffset.json)", [("level", right), ("delay", right)] + columns)
        for q in report.delays:
            delays.add(q.level, "-" if q.delay_ms is None else f"{q.delay_ms / 1000:g} s", *cells(q))
        delays.flush()
    groups = output.TableStream("per group", [("group", {}), ("topics", right), ("queues", right), ("lag", right),
                                              ("lag bytes", right), ("oldest unconsumed", {}),
                                              ("out of range", right), ("never committed", right)])
    for g in report.groups():
        groups.add(g.group, len(g.topics), g.queues, f"{g.lag_messages:,}",
                   humanize.naturalsize(g.lag_bytes, binary=True), output.utc_time(g.oldest_unconsumed), g.out_of_range,
                   g.never_committed)
    groups.flush()
    for f in report.files:
        read = f"read {f.read}" if f.read else "not read"
        output.note(f"config/{f.name}: {read}" + (f" ({f.note})" if f.note else "") + (f" ({f.error})" if f.error else ""))
    for line in report.notes:
        output.note(f"note: {line}")
    for problem in report.problems:
        output.note(f"problem: {problem}")
