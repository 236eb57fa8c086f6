"""Options shared by the commands (the pip-tools way: declared once, reused by name): every option
more than one command takes is declared here, and only here.

click declarations only: what the values mean (settings, layouts, times) is
mqtool/storage/settings.py's."""

from __future__ import annotations

import click

from mqtool.cli.output import note


def store_argument(func):
    return click.argument("store", metavar="STORE", type=click.Path(path_type=str), callback=_not_empty)(func)


def _not_empty(ctx, param, value):
    """An empty STORE ('') would be the current directory: never a store given by accident."""
    if value is not None and not str(value).strip():
        raise click.BadParameter("an empty path", ctx=ctx, param=param)
    return value


def config_option(func):
    func = click.option("--config", "-c", "config_path", metavar="BROKER_CONF",
                        type=click.Path(dir_okay=False, path_type=str),
                        help="The broker's broker.conf: store paths, file sizes, flush and clean settings.")(func)
    func = click.option("--set", "settings", metavar="KEY=VALUE", multiple=True, callback=_check_settings,
                        help="Override one store setting by its RocketMQ name, e.g. "
                             "--set mappedFileSizeCommitLog=65536 (repeatable).")(func)
    return func


def _check_settings(ctx, param, values):
    """A bad value is a usage error (exit 2) before anything runs; a key mqtool does not know is
    most likely a typo: said on stderr, and the command goes on."""
    from mqtool.storage.config import StoreConfig, apply_settings, unknown_settings
    from mqtool.storage.settings import parse_settings

    settings = parse_settings(values)
    apply_settings(StoreConfig(), settings, "--set")
    for key in unknown_settings(settings):
        note(f"warning: --set {key}: not a setting mqtool knows or uses (a typo?); ignored")
    return values


def json_option(func):
    return click.option("--json", "as_json", is_flag=True,
                        help="One JSON object per line on stdout, with stable field names.")(func)


def progress_option(func):
    return click.option("--progress/--no-progress", default=True, show_default=True,
                        help="A progress bar on stderr (only ever shown on a terminal).")(func)


def prometheus_option(func):
    return click.option("--prometheus", "prometheus", metavar="FILE", type=click.Path(dir_okay=False, path_type=str),
                        help="Also write the results as metrics in node_exporter's textfile collector format "
                             "(written to a temporary file and renamed, so a scrape never reads half a file).")(func)


def stores_argument(func):
    """STORE...: the pipeline commands' stores (export, stats)."""
    return click.argument("stores", metavar="STORE...", nargs=-1, required=True,
                          type=click.Path(path_type=str))(func)


def time_options(func):
    """--since and --until: a window of store times, since inclusive, until exclusive."""
    func = click.option("--until", metavar="TIME", help="Only store times < this.")(func)
    return click.option("--since", metavar="TIME",
                        help="Only store times >= this (epoch ms or ISO 8601, UTC unless a zone is given).")(func)


def filter_options(func):
    """--topic, --since and --until: which messages (forensics.filters.Filters)."""
    func = time_options(func)
    return click.option("--topic", "topics", multiple=True, help="Only this topic (repeatable).")(func)


def deprecated_alias(old: str, new: str, dest: str, **kwargs):
    """A hidden option under an old name that still works: given, it says on stderr that `new`
    replaces it; the command reads it as `dest`."""
    def warn(ctx, param, value):
        if value is not None:
            note(f"warning: {old} is deprecated; use {new}")
        return value

    return click.option(old, dest, hidden=True, callback=warn, expose_value=True, **kwargs)


def body_options(func):
    """--body and --no-body: how message bodies are shown."""
    from mqtool.forensics.messageview import BODY_FORMATS

    func = click.option("--body", "body_format", type=click.Choice(BODY_FORMATS),
                        help="How to show bodies: text, hex or base64 (default: text in tables, "
                             "base64 in JSON).")(func)
    return click.option("--no-body", is_flag=True, help="Leave bodies out.")(func)


def jobs_option(what: str):
    """-j/--jobs N, one default for every command: 1 (this process, this thread); 0 takes one
    per CPU this process may use.  what: what the N workers are."""
    def decorate(func):
        return click.option("--jobs", "-j", type=click.IntRange(min=0), default=1, show_default=True,
                            metavar="N", callback=_jobs,
                            help=f"{what} (0: one per CPU this process may use).")(func)
    return decorate


def _jobs(ctx, param, value):
    if value == 0:
        from mqtool.pipeline.local import default_jobs   # at use: the pool's module, only for -j 0

        return default_jobs()
    return value


ENGINES = ("local", "spark")


def spark_options(func):
    """--engine, --master and --spark-conf."""
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


def engine_options(func):
    """--engine, --master, --spark-conf and --jobs (processes of the local engine)."""
    return spark_options(jobs_option("--engine local: read in this many processes")(func))


def check_engine(engine, master, spark_conf) -> None:
    """The engine options that go together: --jobs only for --engine local, --master and
    --spark-conf only for --engine spark."""
    from click.core import ParameterSource

    from mqtool.errors import UsageError

    ctx = click.get_current_context(silent=True)
    jobs_given = ctx is not None and ctx.get_parameter_source("jobs") == ParameterSource.COMMANDLINE
    if engine == "spark" and jobs_given:
        raise UsageError("--jobs is for --engine local; Spark's cores come from --master (local[N])")
    if engine == "local" and (master or spark_conf):
        raise UsageError("--master and --spark-conf need --engine spark")


def at_option(func):
    """--at TIME: the moment what is due, waiting or stuck is judged at (epoch ms), now by default."""
    return click.option("--at", "now_ms", metavar="TIME", callback=_moment,
                        help="Judge what is due, overdue or waiting as of TIME (epoch ms or ISO 8601) instead "
                             "of now: for a broker that stopped, the time it stopped.")(func)


def _moment(ctx, param, value):
    import time

    from mqtool.storage.settings import parse_time

    moment = parse_time(value, "--at")
    return int(time.time() * 1000) if moment is None else moment
