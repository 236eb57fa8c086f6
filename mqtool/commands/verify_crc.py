"""`mqtool verify-crc STORE`: every CRC, every offset, every cross-reference; exit 1 on any problem."""

from __future__ import annotations

import click

from mqtool.cli import metrics, options, output, requires
from mqtool.errors import ProblemsFound, UsageError
from mqtool.forensics import storeinfo
from mqtool.storage import census
from mqtool.storage.settings import open_layout

SCOPE_CHOICES = ("commitlog", "cq", "index", "timer", "all")


@click.command("verify-crc")
@options.store_argument
@options.config_option
@options.json_option
@options.prometheus_option
@click.option("--scope", "scope", type=click.Choice(SCOPE_CHOICES), multiple=True, default=("all",),
              show_default=True, help="What to check (repeatable): the commitlog's records and CRCs, consume "
                                      "queue units against the records, index entries against the records, the "
                                      "timer store (all: when the store has one).")
@options.jobs_option("--engine local: check files and parts of files in this many threads (the checks run "
                     "in compiled code that releases the GIL)")
@click.option("--no-crc", is_flag=True, help="Skip body CRCs (structure and cross-checks only).")
@options.spark_options
@options.progress_option
@requires.run
def cli(run, store, config_path, settings, as_json, prometheus, scope, jobs, no_crc, engine, master, spark_conf,
        progress):
    """Check every record, CRC, queue unit and index entry.

    Check a store without changing it: records, body CRCs, consume queues, index, timer store.

    Each problem is reported with its kind, file, byte offset, and what was expected and
    found; a summary follows.  Exit 0 when everything checks, 1 when anything is wrong.
    With --engine spark every file part is a Spark task; the executors must see the store at
    the same path (one machine with local[N], or a shared file system).
    """
    from mqtool.forensics import verify

    layout = open_layout(store, config_path, settings)
    every = verify.all_scopes(layout) if "all" in scope else ()
    scopes = tuple(s for s in verify.SCOPES if s in scope or s in every)
    if not scopes:
        raise UsageError("--scope: nothing to check")
    found = census.take(layout)
    notes = storeinfo.unchecked(found)
    held = layout.in_use()
    in_use = None
    if held is not None:     # read-only, so not refused; but a writer's work in flight looks like damage
        in_use = held["holder"]
        output.note(f"warning: the store is in use ({in_use} holds its lock file): what it is writing while "
                    "this runs can show up as problems; check a stopped store or a copy")
    if "rocksdb-consumequeue" in found.features and "cq" in scopes:
        scopes = tuple(s for s in scopes if s != "cq")
        notes.append("consume queues are in RocksDB (storeType=defaultRocksDB): the cq scope was not checked")
    table = None if as_json else output.TableStream("problems", [
        ("scope", {}), ("kind", {}), ("file", {}), ("byte", {"justify": "right"}),
        ("offset", {"justify": "right"}), ("expected", {}), ("found", {}), ("what", {})])
    first = []

    def on_finding(finding: verify.Finding) -> None:
        if not first:
            first.append(finding)
        if as_json:
            output.emit_json(finding.to_json())
        else:
            table.add(finding.scope, finding.kind, finding.file, finding.file_offset, finding.offset,
                      _short(finding.expected), _short(finding.found), finding.message)

    # a file the store should not hold, and a link writers would write through (they refuse the
    # store): problems, counted as every other finding is
    store_findings = [verify.Finding("store", "unknown-file", entry.path, None, None,
                                     "not a file or folder of a RocketMQ store that mqtool knows")
                      for entry in found.unknown()]
    store_findings += [verify.Finding("store", "symbolic-link", link.path, None, None, link.problem())
                       for link in found.links]
    for finding in store_findings:
        on_finding(finding)
    total = _total_bytes(layout, scopes)
    runner = run.open_engine(engine, master=master, spark_conf=spark_conf) if engine == "spark" else None
    try:
        with output.progress(total, "verify", enabled=progress) as bar:
            summary = verify.verify(layout, scopes=scopes, check_crc=not no_crc, jobs=jobs,
                                    on_finding=on_finding, on_progress=bar.advance, engine=runner)
    finally:
        if runner is not None:
            runner.close()
    for finding in store_findings:
        summary.count(finding)
    problems = summary.problems
    if summary.division and not as_json:
        output.note(storeinfo.division_text(summary.division))
    if summary.uncommitted and not as_json:     # in JSON: the summary's dledgerUncommittedEntries
        output.note(f"{summary.uncommitted} DLedger entries past the committed index: uncommitted (a quorum has "
                    "not confirmed them yet), not damage; a broker dispatches them only after a crash")
    if as_json:
        output.emit_json({**summary.to_json(), "unchecked": notes,
                          "inUseBy": held and (f"process {held['pid']}" if held["pid"] else "another process"),
                          "inUseCommand": held and held["command"], "staging": [s.to_json() for s in found.staging]})
    else:
        for line in notes:
            output.note(f"not checked: {line}")
        for staged in found.staging:
            output.note(f"note: {staged.note()}")
        table.flush()
        speed = f", {summary.bytes / summary.seconds / 1e6:,.0f} MB/s" if summary.seconds else ""
        output.note(f"checked {', '.join(scopes)}: {summary.files} files, {summary.bytes:,} bytes, "
                    f"{summary.records:,} records, {summary.units:,} consume queue units, {summary.entries:,} "
                    f"index entries" + (f", {summary.timer_units:,} timer units" if "timer" in scopes else "")
                    + f" in {summary.seconds:.2f} s{speed}; {problems} problem(s)"
                    + (f", {summary.skipped:,} damaged bytes skipped" if summary.skipped else ""))
    if prometheus:
        metrics.write(prometheus, metrics.verify_metrics(layout.root, summary.to_json()))
    if problems:
        f = first[0]
        where = f"{f.file} at byte {f.file_offset}" if f.file_offset is not None else f"{f.file}"
        raise ProblemsFound(f"{where}: {f.kind} ({problems} problem(s) found"
                            + (f"; the store was in use by {in_use} meanwhile)" if in_use else ")"))


def _short(value) -> str:
    if value is None:
        return ""
    text = str(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _total_bytes(layout, scopes) -> int:
    total = 0
    if "commitlog" in scopes or "cq" in scopes:
        total += sum(f.size for f in layout.commitlog_files())
    if "cq" in scopes:
        for _, _, directory in layout.consume_queues():
            total += sum(f.size for f in layout.consume_queue_files(directory))
    if "index" in scopes:
        total += sum(f.size for f in layout.index_files())
    if "timer" in scopes:
        total += sum(f.size for f in layout.timerlog_files())
    return total or 1



