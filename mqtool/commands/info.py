"""`mqtool info STORE`: the store at a glance.

Exit 0; 1 when something it shows is wrong (an unreadable checkpoint, an index file that
cannot be read or whose header cannot be right, files of an unexpected size or name), after
showing everything else."""

from __future__ import annotations

from datetime import datetime

import click
import humanize
from rich.markup import escape

from mqtool.cli.timershow import pending_text
from mqtool.cli import metrics, options, output, requires
from mqtool.errors import ProblemsFound
from mqtool.forensics import storeinfo
from mqtool.storage.settings import open_layout


def _time(millis):
    if not millis:
        return "-"
    return f"{output.utc_time(millis)} ({millis})"


def _ago(millis) -> str:
    try:
        return humanize.naturaltime(datetime.fromtimestamp(millis / 1000))
    except (OverflowError, ValueError, OSError):  # a damaged timestamp
        return "not a valid time"


@click.command("info")
@options.store_argument
@options.config_option
@options.json_option
@options.prometheus_option
@requires.run
def cli(run, store, config_path, settings, as_json, prometheus):
    """The store at a glance: files, offsets, queues, lock.

    Files and sizes per kind, offsets, queues, checkpoint times, shutdown state and lock.
    """
    layout = open_layout(store, config_path, settings)
    info = storeinfo.gather(layout)
    if as_json:
        output.emit_json(info)
    else:
        _show(info)
    if prometheus:
        metrics.write(prometheus, metrics.info_metrics(layout.root, info))
    problems = info["problems"]
    if problems:
        more = len(problems) - 1
        raise ProblemsFound(problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""))


def _show(info: dict) -> None:
    console = output.stdout()
    cl, cq, ix = info["commitlog"], info["consumequeue"], info["index"]
    console.print(f"[bold]store[/bold] {escape(info['store'])}  (format {info['format']})")
    lines = [
        ("commitlog", f"{cl['files']} files, {humanize.naturalsize(cl['bytes'], binary=True)} "
                      f"(file size {humanize.naturalsize(cl['fileSize'], binary=True)}), "
                      f"offsets {cl['minOffset']} .. {cl['maxOffset']}"
                      f" ({humanize.naturalsize(cl['maxOffset'] - cl['minOffset'], binary=True)} of messages)"),
        ("consumequeue", f"{cq['files']} files, {humanize.naturalsize(cq['bytes'], binary=True)}, "
                         f"{cq['topics']} topics, {cq['queues']} queues"),
        ("index", f"{ix['files']} files, {humanize.naturalsize(ix['bytes'], binary=True)} "
                  f"({ix['maxHashSlotNum']} slots x {ix['maxIndexNum']} entries)"),
    ]
    bcq = info["batchconsumequeue"]
    if bcq["queues"]:
        lines.insert(2, ("batch queues", f"{bcq['files']} files, {bcq['topics']} topics, {bcq['queues']} queues "
                                         "(BatchCQ; offsets count messages)"))
    for name, text in lines:
        console.print(f"  {name:<13}{text}", highlight=False)
    for kind in ("commitlog", "consumequeue"):
        if info[kind].get("oddFiles"):
            console.print(f"  [red]{kind}: files with an unexpected size or name:[/red] "
                          + escape(", ".join(info[kind]["oddFiles"])), highlight=False)
    for header in info["indexFiles"]:
        if "error" in header:
            console.print(f"  [red]index/{escape(header['name'])}: {escape(header['error'])}[/red]", highlight=False)
        for what in header.get("headerProblems", []):
            console.print(f"  [red]index/{escape(header['name'])} {escape(what)}[/red]", highlight=False)
    if cl.get("firstStoreTimestamp"):
        console.print(f"  first message  {_time(cl['firstStoreTimestamp'])}", highlight=False)
    if cl.get("lastStoreTimestamp"):
        console.print(f"  last message   {_time(cl['lastStoreTimestamp'])}", highlight=False)
    cp = info["checkpoint"]
    if "error" in cp:
        console.print(f"  checkpoint     [red]{escape(cp['error'])}[/red]", highlight=False)
    else:
        console.print("  checkpoint", highlight=False)
        for field in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
            value = cp[field]
            human = _ago(value) if value else "never"
            console.print(f"    {field:<22}{_time(value)}  {human}", highlight=False)
        if info["format"] == "5.x":
            console.print(f"    masterFlushedOffset   {cp['masterFlushedOffset']}", highlight=False)
            console.print(f"    confirmPhyOffset      {cp['confirmPhyOffset']}", highlight=False)
    timer = info.get("timer")
    if timer is not None:
        topics = ", ".join(f"{escape(t)} {n}" for t, n in timer["byTopic"].items()) or "none"
        console.print(f"  timer          {timer['pending']} pending message(s) ({topics}); "
                      f"{timer['recalled']} recalled, {timer['rolled']} roll unit(s), "
                      f"{timer['deleteMarkers']} delete marker(s); read up to {_time(timer['lastReadTimeMs'])}",
                      highlight=False)
        if (timer["deliverable"] != timer["pending"] or timer["putBack"] or timer["deliveredTwice"] or timer["lost"]
                or timer["skippedOnRestart"]):
            console.print(f"                 {escape(pending_text(timer))}", highlight=False)
    dl = info.get("dledger")
    if dl is not None:
        committed = "none" if dl["committedIndex"] < 0 else f"{dl['committedIndex']} (pos {dl['committedPos']})"
        console.print(f"  dledger        {escape(dl['dledgerDir'])}: self {escape(dl['selfId'])}, term "
                      f"{dl['currTerm']}, voted for {escape(dl['voteLeader'] or 'nobody')}; entries "
                      f"{dl['ledgerBeginIndex']} .. {dl['ledgerEndIndex']} (end term {dl['ledgerEndTerm']}, "
                      f"data end {dl['dataEnd']}); committed {committed}", highlight=False)
        if info.get("division"):
            console.print(f"  division       {escape(storeinfo.division_text(info['division']))}", highlight=False)
        if dl["uncommittedEntries"]:
            console.print(f"  [yellow]dledger: {dl['uncommittedEntries']} entries past the committed index "
                          "(uncommitted: a broker dispatches them only after a crash)[/yellow]", highlight=False)
    shutdown = "clean (no abort file)" if info["cleanShutdown"] else \
        "[yellow]NOT clean: abort file present (crash, or a broker is running)[/yellow]"
    console.print(f"  last shutdown  {shutdown}", highlight=False)
    lock = info["lock"]
    if lock["held"]:
        console.print(f"  lock           [yellow]held by {escape(output.printable(lock['holder']))}: it is using "
                      "this store[/yellow]", highlight=False)
    else:
        console.print("  lock           free", highlight=False)
    for line in info["unchecked"]:
        console.print(f"  [yellow]{escape(line)}[/yellow]", highlight=False)
    _show_census(info["census"])
    if info["queues"]:
        batch = any(q["cqType"] == "BatchCQ" for q in info["queues"])     # a type column when it tells
        table = output.TableStream("queues", [("topic", {}), ("queue", {"justify": "right"}),
                                              *([("type", {})] if batch else []),
                                              ("files", {"justify": "right"}),
                                              ("min offset", {"justify": "right"}),
                                              ("max offset", {"justify": "right"}),
                                              ("messages", {"justify": "right"})])
        for q in info["queues"]:
            table.add(q["topic"], q["queueId"], *([q["cqType"]] if batch else []), q["files"], q["minOffset"],
                      q["maxOffset"], q["maxOffset"] - q["minOffset"])
        table.flush()


def _show_census(entries) -> None:
    """What the store holds, beyond the lines above: every file and folder, and mqtool's grasp of it."""
    table = output.TableStream("store contents", [("path", {}), ("feature", {}), ("status", {}),
                                                  ("files", {"justify": "right"}), ("size", {"justify": "right"}),
                                                  ("what", {})])
    for e in entries:
        table.add(e["path"], e["feature"], e["status"], e["files"], humanize.naturalsize(e["bytes"], binary=True),
                  e["what"])
    table.flush()
