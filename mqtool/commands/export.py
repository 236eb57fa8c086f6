"""`mqtool export STORE... --out DIR`: the commitlog records as Parquet or JSON lines, per topic.

One row per record with the columns of the `rocketmq` data source
(README.md), under DIR/topic=<name>/.  Damaged records are exported too,
with ok = false and their problems; export itself exits 0 once the output is
written (gate on damage with `stats` or `dump`).
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import click

from mqtool.cli import options, output, requires
from mqtool.errors import RefusedError, UsageError
from mqtool.forensics.filters import Filters
from mqtool.pipeline import plan as pipeline
from mqtool.pipeline import exporter


@click.command("export")
@options.stores_argument
@options.config_option
@click.option("--out", "-o", "out", required=True, type=click.Path(path_type=str),
              help="The output directory (one topic=<name>/ directory per topic).")
@click.option("--format", "fmt", type=click.Choice(exporter.FORMATS), default="parquet", show_default=True,
              help="The files written: Parquet (the `export` extra: pyarrow) or JSON lines.")
@click.option("--with-body", is_flag=True, help="Also export each body, as stored (binary; base64 in JSON).")
@click.option("--overwrite", is_flag=True, help="Replace DIR if it exists and is not empty.")
@options.filter_options
@options.engine_options
@options.json_option
@requires.run
def cli(run, stores, config_path, settings, out, fmt, with_body, overwrite, topics, since, until, engine, jobs,
        master, spark_conf, as_json):
    """Commitlog records as Parquet or JSON lines, per topic.

    STORE is a store directory, NAME=DIR, or a directory with one store per broker; the rows of
    all of them go into one output, each with its broker name.
    """
    found = pipeline.find_stores(stores, config_path, settings)
    run.reading([s.layout() for s in found])
    filters = Filters.from_options(topics, since=since, until=until)
    target = Path(out).absolute()
    _check_target(target, found, overwrite)
    if fmt == "parquet" and engine == "local":
        try:
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise UsageError("--format parquet needs pyarrow: pip install 'mqtool[spark]' "
                             "(or use --format jsonl)") from None
    # loading the compiled kernels is start-up, timed on its own (Spark's workers load their own)
    run.warm_up(*([lambda: exporter.warm_up(fmt, with_body)] if engine == "local" else []))
    runner = run.open_engine(engine, jobs, master, spark_conf)
    try:
        if engine == "spark":
            if target.is_dir() and not any(target.iterdir()):
                target.rmdir()  # Spark refuses an existing directory unless it overwrites
            counts = runner.export(found, str(target), fmt, with_body, filters, overwrite)
        else:
            if target.exists():
                shutil.rmtree(target)
            target.mkdir(parents=True)
            parts = pipeline.commitlog_parts(found, filters)
            write = functools.partial(exporter.export_part, out=str(target), fmt=fmt, with_body=with_body,
                                      filters=filters)
            counts = {None: 0}
            for part_counts in runner.map(write, parts):
                for topic, n in part_counts.items():
                    counts[topic] = counts.get(topic, 0) + n
            (target / "_SUCCESS").touch()
    finally:
        runner.close()
    damaged = counts.pop(None)
    rows = sum(counts.values())
    summary = {"type": "export", "out": str(target), "format": fmt, "engine": engine, "rows": rows,
               "damagedRows": damaged, "topics": dict(sorted(counts.items(), key=lambda kv: str(kv[0]))),
               **run.timings()}
    if as_json:
        output.emit_json(summary)
        return
    table = output.TableStream(f"exported to {target}", [("topic", {}), ("rows", {"justify": "right"}),
                                                        ("directory", {})])
    for topic, n in summary["topics"].items():
        table.add(topic, f"{n:,}", exporter.topic_dir(Path(""), topic))
    table.flush()
    output.note(f"{rows:,} rows in {len(counts)} topic(s), {fmt}"
                + (f"; {damaged} damaged record(s) exported with ok = false" if damaged else ""))


def _check_target(target: Path, stores, overwrite: bool) -> None:
    """Refuse to write over data that is not ours to replace."""
    for store in stores:
        root = Path(store.root)
        if target == root or root in target.parents or target in root.parents:
            raise RefusedError("the output directory overlaps a store being exported", path=target)
    if (target / "commitlog").exists():
        raise RefusedError("the output directory holds a store; refusing to write there", path=target)
    if target.exists() and not target.is_dir():
        raise UsageError("--out must be a directory", path=target)
    if target.exists() and any(target.iterdir()) and not overwrite:
        raise RefusedError("the output directory exists and is not empty (use --overwrite to replace it)",
                           path=target)
