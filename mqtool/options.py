"""Options shared by the commands (the pip-tools way: declared once, reused by name)."""

from __future__ import annotations

from datetime import datetime, timezone

import click

from mqtool.config import config_for_store
from mqtool.errors import UsageError
from mqtool.layout import StoreLayout, discover


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


def parse_settings(settings) -> dict[str, str]:
    result = {}
    for item in settings or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        result[key.strip()] = value.strip()
    return result


def open_layout(store: str, config_path: str | None, settings, *, must_exist: bool = True) -> StoreLayout:
    """Resolve STORE plus --config/--set into a discovered store layout."""
    overrides = parse_settings(settings)
    config = config_for_store(store, config_path, overrides)
    given = bool(config_path) or any(k.startswith("mappedFileSize") or k in ("maxHashSlotNum", "maxIndexNum")
                                     for k in overrides)
    return discover(config, config_given=given, must_exist=must_exist)


def parse_time(text: str | None, what: str) -> int | None:
    """Epoch milliseconds from epoch ms, epoch seconds with a decimal point, or ISO 8601 (UTC unless
    the text says otherwise)."""
    if text is None:
        return None
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{what} {text!r}: expected epoch milliseconds or an ISO 8601 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)
