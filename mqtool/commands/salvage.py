"""`mqtool salvage STORE OUT`: every intact message of a damaged store, copied into a new store."""

from __future__ import annotations

from pathlib import Path

import click

from mqtool.cli import options, output, requires
from mqtool.errors import ProblemsFound, RefusedError, UsageError
from mqtool.storage import census
from mqtool.storage.settings import open_layout


@click.command("salvage")
@options.store_argument
@click.argument("out", metavar="OUT", type=click.Path(file_okay=False, path_type=str))
@options.config_option
@options.json_option
@options.progress_option
@click.option("--drop-features", is_flag=True,
              help="Salvage a store whose features the new store does not carry (LMQ queues, consume queue "
                   "extensions, batch queues, RocksDB consume queues): OUT gets plain consume queues only.")
@requires.run
def cli(run, store, out, config_path, settings, as_json, progress, drop_features):
    """Copy every intact message of a damaged store into a new one.

    Copy every intact message (magic code and body CRC check) of STORE into a new store OUT.

    OUT is built aside (.OUT.salvage-<pid>-<ms>/ beside it) and appears only when complete; a
    killed run leaves no OUT, and the next run clears what it left and starts over.

    Damaged regions are skipped by resynchronising on the next valid record and reported.
    OUT gets fresh consume queues and index, and STORE's file sizes and format unless --set
    says otherwise; queue offsets are numbered again (no holes).  STORE is only read.
    Exit 1 when anything had to be skipped.
    """
    from mqtool.engine import rebuild

    target = Path(out).resolve()
    if target.exists() and any(target.iterdir()):
        raise UsageError(f"{out}: OUT must be a new or empty directory")
    source = open_layout(store, config_path, settings)
    run.reading([source])     # STORE is only read: a holder's work in flight is said, as every reader says it
    root = source.root.resolve()
    if target == root or root in target.parents or target in root.parents:
        raise RefusedError("OUT overlaps STORE, which salvage only reads", path=target)
    dropped = _not_carried(source)
    if dropped and not drop_features:
        raise RefusedError(f"the store uses {', '.join(dropped)}, which salvage does not carry into OUT (it "
                           "writes plain consume queues); give --drop-features to salvage the messages anyway",
                           path=source.root)
    for name in dropped:
        output.note(f"warning: {name} is not carried into {out} (--drop-features)")
    config = run.write_config(store, config_path, settings).replace(storePathRootDir=str(target),
                                                                     storePathCommitLog=None,
                                                                     readOnlyCommitLogStorePaths=None)
    if drop_features:
        config = census.without_features(config)
    total = sum(f.size for f in source.commitlog_files())
    with output.progress(total, "salvage", enabled=progress) as bar:
        report, cleared = rebuild.salvage_into(
            source, config, on_progress=bar.advance,
            open_store=lambda c: run.message_store(c, writer="salvage", start_services=False))
    for line in cleared:
        output.note(line)
    if as_json:
        output.emit_json({**report.to_json(), "clearedPartial": cleared})
    else:
        console = output.stdout()
        console.print(f"copied {report.copied:,} messages into {out}", highlight=False, markup=False)
        for problem in report.damage:
            console.print(f"  skipped {problem.skipped:,} bytes at {problem.path} byte {problem.file_offset}: "
                          f"{problem.kind}", highlight=False, markup=False)
        if report.skipped_records:
            console.print(f"  skipped {report.skipped_records} record(s) whose body CRC does not match",
                          highlight=False, markup=False)
        if report.dangling_prepared:
            console.print(f"  {report.dangling_prepared} commit/rollback record(s) refer to a prepared record "
                          "that was not recovered", highlight=False, markup=False)
    if report.damage or report.skipped_records or report.unsafe_topics:
        raise ProblemsFound(f"damaged data was skipped; {report.copied} messages were saved to {out}")


def _not_carried(source) -> list[str]:
    """The features of STORE that salvage's new store would not hold: salvage copies messages and
    builds plain consume queues and index from them, nothing else."""
    return [f"{name} ({census.FEATURES[name].setting})" for name in census.take(source).not_kept("salvage")]
