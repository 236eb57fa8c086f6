"""`mqtool rebuild-cq STORE`: consume queues (and with --index the index) built again from the commitlog."""

from __future__ import annotations

import click

from mqtool.cli import options, output, requires
from mqtool.storage.layout import discover


@click.command("rebuild-cq")
@options.store_argument
@options.config_option
@options.json_option
@click.option("--topic", "topics", multiple=True, help="Only this topic's queues (repeatable).")
@click.option("--index", "with_index", is_flag=True, help="Rebuild the index files too (all topics).")
@click.option("--dry-run", is_flag=True, help="Say what would be rebuilt; change nothing.")
@click.option("--no-quarantine", is_flag=True, help="Delete the replaced files instead of keeping them.")
@click.option("--quarantine-dir", type=click.Path(file_okay=False, path_type=str),
              help="Keep the replaced files here instead of STORE/quarantine/.")
@options.spark_options
@options.progress_option
@requires.run
def cli(run, store, config_path, settings, as_json, topics, with_index, dry_run, no_quarantine, quarantine_dir,
        engine, master, spark_conf, progress):
    """Rebuild consume queues (with --index, the index too).

    The files are written byte for byte as a broker writes them.

    The commitlog's valid records (up to the first damage: run `recover` first on a damaged
    store) are dispatched again into a staging directory; then the rebuilt queues replace the
    old ones, which go to the quarantine.  A record whose topic cannot be a directory name is
    reported and never becomes a path.  Refused (exit 3) while a broker holds the lock.
    With --engine spark the commitlog is read, checked and parsed by Spark tasks (which must see
    the store at the same path); the files are written here, the same bytes as --engine local.
    """
    from mqtool.engine import rebuild

    if with_index and topics:
        raise click.UsageError("--index rebuilds the whole index: it cannot be limited with --topic")
    config = run.write_config(store, config_path, settings)
    layout = discover(config, config_given=True)
    sizes = _sizes_used(config, with_index)
    for what, size, origin in sizes:
        if origin == "RocketMQ's default":
            output.note(f"warning: {what} of {size} bytes, RocketMQ's default: the store has none to read the "
                        "size off and no --config/--set gave it; a broker configured otherwise refuses them")
    with run.claim(layout, "rebuild-cq", write=not dry_run):   # the census, then the lock
        runner = run.open_engine(engine, master=master, spark_conf=spark_conf) if engine == "spark" and not dry_run \
            else None
        try:
            total = sum(f.size for f in layout.commitlog_files())
            with output.progress(total, "rebuild-cq", enabled=progress) as bar:
                report = rebuild.rebuild(layout, topics_wanted=topics or None, with_index=with_index,
                                         dry_run=dry_run, keep_old=not no_quarantine, quarantine_dir=quarantine_dir,
                                         on_progress=bar.advance, engine=runner)
        finally:
            if runner is not None:
                runner.close()
    if as_json:
        output.emit_json({**report.to_json(), "dryRun": dry_run,
                          "fileSizes": [{"files": what, "size": size, "from": origin} for what, size, origin in sizes]})
    else:
        console = output.stdout()
        verb = "would rebuild" if dry_run else "rebuilt"
        console.print(f"{verb} from commitlog offsets {report.start}..{report.end}: {report.records:,} records, "
                      f"{report.units:,} consume queue units, {report.keys:,} index keys "
                      f"in {report.seconds:.2f} s", highlight=False, markup=False)
        for what, size, origin in sizes:
            console.print(f"  {what}: {size} bytes ({origin})", highlight=False, markup=False)
        if report.stop is not None:
            console.print(f"  the commitlog is damaged at {report.stop.path} byte {report.stop.file_offset} "
                          f"({report.stop.kind}); later records were not dispatched: run `mqtool recover`",
                          highlight=False, markup=False)
        for line in report.cleared:
            console.print(f"  {line}", highlight=False, markup=False)
        for topic, queue_id, units in report.queues:
            console.print(f"  {topic}/{queue_id}: {units:,} units", highlight=False, markup=False)
        for topic, queue_id in report.removed_queues:
            console.print(f"  {topic}/{queue_id}: no records left; queue removed", highlight=False, markup=False)
        for topic, count in report.unsafe_topics.items():
            console.print(f"  refused {count} record(s) of topic {topic!r}: not a valid topic name",
                          highlight=False, markup=False)
        if report.quarantine:
            console.print(f"  replaced files are kept in {report.quarantine}", highlight=False, markup=False)
    if report.stop is not None or report.unsafe_topics:
        from mqtool.errors import ProblemsFound

        raise ProblemsFound("the commitlog has problems (see above); the rebuilt queues cover its valid part")


def _sizes_used(config, with_index: bool) -> list[tuple[str, int, str]]:
    """(files, size, where the size came from) for the files rebuild-cq writes."""
    origins = config.origins
    sizes = [("consume queue files", config.consume_queue_file_size(),
              origins.get("mappedFileSizeConsumeQueue", "RocketMQ's default"))]
    if with_index:
        from mqtool.formats.index import file_size

        origin = origins.get("maxHashSlotNum", "RocketMQ's default")
        if origin == "RocketMQ's default":
            origin = origins.get("maxIndexNum", origin)
        sizes.append(("index files", file_size(config.maxHashSlotNum, config.maxIndexNum), origin))
    return sizes
