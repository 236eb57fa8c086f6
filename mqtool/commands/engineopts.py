"""Options of the pipeline commands (export, stats): which stores, and which engine runs them."""

from __future__ import annotations

import click

from mqtool.pipeline import engines as pipeline

ENGINES = ("local", "spark")


def stores_argument(func):
    return click.argument("stores", metavar="STORE...", nargs=-1, required=True,
                          type=click.Path(path_type=str))(func)


def engine_options(func):
    """--engine, --master, --spark-conf and --jobs (processes of the local engine)."""
    func = click.option("--jobs", "-j", type=click.IntRange(min=1), metavar="N",
                        help="--engine local: processes to use (default: the CPUs this process may "
                             "use; 1 runs in this process).")(func)
    return spark_options(func)


def spark_options(func):
    """--engine, --master and --spark-conf: for commands that keep their own --jobs."""
    func = click.option("--spark-conf", "spark_conf", metavar="KEY=VALUE", multiple=True,
                        help="A Spark setting for --engine spark (repeatable), e.g. "
                             "spark.executor.memory=4g.")(func)
    func = click.option("--master", metavar="URL",
                        help="Where --engine spark runs: local[*] (default), spark://host:7077, yarn, "
                             "k8s://https://host:443.")(func)
    func = click.option("--engine", type=click.Choice(ENGINES), default="local", show_default=True,
                        help="local: plain Python on this machine (no Java); spark: Apache Spark "
                             "through PySpark (the `spark` extra, Java 17+).")(func)
    return func


def filter_options(func):
    func = click.option("--until", help="Only store times < this (epoch ms or ISO 8601, UTC by default).")(func)
    func = click.option("--since", help="Only store times >= this.")(func)
    func = click.option("--topic", "topics", multiple=True, help="Only this topic (repeatable).")(func)
    return func


def check_engine(engine, master, spark_conf, *, jobs_given: bool) -> None:
    """The engine options that go together: --jobs only for --engine local, --master and
    --spark-conf only for --engine spark."""
    from mqtool.errors import UsageError

    if engine == "spark" and jobs_given:
        raise UsageError("--jobs is for --engine local; Spark's cores come from --master (local[N])")
    if engine == "local" and (master or spark_conf):
        raise UsageError("--master and --spark-conf need --engine spark")


def open_engine(engine, jobs, master, spark_conf):
    check_engine(engine, master, spark_conf, jobs_given=bool(jobs))
    return pipeline.open_engine(engine, jobs=jobs, master=master, conf=spark_conf)
