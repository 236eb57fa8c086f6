"""Options shared by the commands (the pip-tools way: declared once, reused by name).

click declarations only: what the values mean (settings, layouts, times) is
mqtool/storage/settings.py's."""

from __future__ import annotations

import click


def store_argument(func):
    return click.argument("store", metavar="STORE", type=click.Path(path_type=str))(func)


def config_option(func):
    func = click.option("--config", "-c", "config_path", metavar="BROKER_CONF",
                        type=click.Path(dir_okay=False, path_type=str),
                        help="The broker's broker.conf: store paths, file sizes, flush and clean settings.")(func)
    func = click.option("--set", "settings", metavar="KEY=VALUE", multiple=True,
                        help="Override one store setting by its RocketMQ name, e.g. "
                             "--set mappedFileSizeCommitLog=65536 (repeatable).")(func)
    return func


def json_option(func):
    return click.option("--json", "as_json", is_flag=True,
                        help="One JSON object per line on stdout, with stable field names.")(func)


def progress_option(func):
    return click.option("--progress/--no-progress", default=True, show_default=True,
                        help="A progress bar on stderr (only ever shown on a terminal).")(func)
