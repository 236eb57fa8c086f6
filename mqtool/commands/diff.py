"""`mqtool diff A B`: two replicas of one broker (DLedger peers, or a master's and a slave's
commitlogs): where they diverge and the messages each holds that the other lacks.

Exit 0 when they hold the same messages, 1 when they differ (or damage was met on the way)."""

from __future__ import annotations

import click
from rich.markup import escape

from mqtool.cli import options, output, requires
from mqtool.errors import ProblemsFound
from mqtool.forensics import replicadiff
from mqtool.storage.settings import open_layout


@click.command("diff")
@click.argument("store_a", metavar="A", type=click.Path(path_type=str), callback=options._not_empty)
@click.argument("store_b", metavar="B", type=click.Path(path_type=str), callback=options._not_empty)
@options.config_option
@options.json_option
@requires.run
def cli(run, store_a, store_b, config_path, settings, as_json):
    """Where two replicas diverge, and what only one holds.

    Compare two replicas: the first offset where their commitlogs diverge (with the DLedger
    entry index and term there), and the messages only one of them holds (topic, queue, msgId,
    keys).  Both stores are read, never changed; --config/--set apply to both.
    """
    layout_a = open_layout(store_a, config_path, settings)
    layout_b = open_layout(store_b, config_path, settings)
    run.reading([layout_a, layout_b])
    table = None if as_json else output.TableStream("messages only one replica holds", [
        ("side", {}), ("offset", {"justify": "right"}), ("topic", {}), ("queue", {"justify": "right"}),
        ("queue offset", {"justify": "right"}), ("msgId", {}), ("keys", {})])

    def on_only(side, line) -> None:
        if table is None:
            output.emit_json(line)
        else:
            table.add(side.name, line["offset"], line["topic"], line["queueId"], line["queueOffset"], line["msgId"],
                      line["keys"] or "")

    def on_problem(side, problem) -> None:
        if table is None:
            output.emit_json({**problem.to_json(), "side": side.name, "store": str(side.layout.root)})
        else:
            output.note(f"{side.name}: {problem.path} at byte {problem.file_offset}: {problem.kind}: {problem.message}")

    from mqtool.native import fastscan   # the common prefix at compiled speed

    result = replicadiff.diff(layout_a, layout_b, on_only=on_only, on_problem=on_problem, scanner=fastscan)
    summary = result.to_json()
    if table is None:
        output.emit_json(summary)
    else:
        table.flush()
        _show(summary)
    if result.problems:
        side, first = result.problems[0]
        raise ProblemsFound(f"{side}: {first.kind}: {first.message} ({len(result.problems)} problem(s) met)",
                            path=first.path, offset=first.file_offset)
    if not result.same:
        where = (f"{result.ends_earlier} ends earlier, at offset {result.diverged_at}" if result.ends_earlier
                 else f"diverged at offset {result.diverged_at}")
        raise ProblemsFound(f"the replicas differ: {result.a.only} message(s) only in A, {result.b.only} only in B "
                            f"({where})")


def _show(summary: dict) -> None:
    a, b = summary["a"], summary["b"]
    lines = [f"A {escape(a['store'])}: {a['records']} records, offsets {a['firstOffset']} .. {a['endOffset']}",
             f"B {escape(b['store'])}: {b['records']} records, offsets {b['firstOffset']} .. {b['endOffset']}",
             f"common records: {summary['commonRecords']}"]
    if summary["divergedAt"] is None:
        lines.append("the replicas hold the same records")
    elif summary["endsEarlier"]:     # a prefix of the other: behind, not diverged
        short, long_ = summary["endsEarlier"], "B" if summary["endsEarlier"] == "A" else "A"
        lines.append(f"{short} ends earlier, at offset {summary['divergedAt']}: it holds the first "
                     f"{summary['commonRecords']} records of {long_} and nothing else (a replica behind the other)")
        lines.append(f"only in {long_}: {summary['onlyIn' + long_]} message(s)")
    else:
        where = f"diverged at offset {summary['divergedAt']} ({summary['reason']})"
        for name, side in (("A", a), ("B", b)):
            if side.get("entryAtDivergence"):
                e = side["entryAtDivergence"]
                where += f"; {name}'s entry there: index {e['index']}, term {e['term']}"
        lines.append(where)
        lines.append(f"only in A: {summary['onlyInA']} message(s); only in B: {summary['onlyInB']}; held by both "
                     f"past the divergence: {summary['heldByBothPastDivergence']}")
    for line in lines:
        output.stdout().print(line, highlight=False)
