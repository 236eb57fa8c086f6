"""Options shared by the commands (the pip-tools way: declared once, reused by name).

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
