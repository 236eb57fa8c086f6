"""What a command line says about a store: STORE, --config and --set become a StoreConfig and a
discovered StoreLayout; times given as --since/--until become epoch milliseconds.

Every command resolves its store here, so that a setting means the same to all of them.
"""

from __future__ import annotations

from datetime import datetime, timezone

from mqtool.errors import UsageError
from mqtool.storage import fsutil
from mqtool.storage.config import SIZE_SETTINGS, config_for_store, read_broker_conf
from mqtool.storage.layout import StoreLayout, discover


def parse_settings(settings) -> dict[str, str]:
    result = {}
    for item in settings or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r}: expected KEY=VALUE")
        result[key.strip()] = value.strip()
    return result


def given_setting(config_path: str | None, settings, key: str) -> str | None:
    """A setting's value when --set or the broker.conf gives it (None when only a default would):
    e.g. brokerName, which names a store's rows where the broker's configuration says it."""
    overrides = parse_settings(settings)
    if key in overrides:
        return overrides[key]
    if config_path:
        found = [value.strip() for _, name, value in read_broker_conf(config_path) if name == key]
        return found[-1] if found else None      # as java.util.Properties: the last line of a key wins
    return None


def open_layout(store: str, config_path: str | None, settings, *, must_exist: bool = True) -> StoreLayout:
    """Resolve STORE plus --config/--set into a discovered store layout."""
    overrides = parse_settings(settings)
    config = config_for_store(store, config_path, overrides)
    # a broker.conf gives every size (absent ones are the broker's defaults); --set only its own
    sizes = frozenset(SIZE_SETTINGS) if config_path else frozenset(k for k in overrides if k in SIZE_SETTINGS)
    return discover(config, config_given=bool(config_path), must_exist=must_exist, sizes_given=sizes)


def store_config_for_write(store: str, config_path: str | None, settings):
    """The StoreConfig a command that writes uses: the broker.conf and --set values, with
    file sizes and the store format read off an existing store when not given, so that
    mqtool never writes files of another size than the store already has."""
    overrides = parse_settings(settings)
    config = config_for_store(store, config_path, overrides)
    in_conf = set()
    if config_path:
        in_conf = {key for _, key, _ in read_broker_conf(config_path)}
    origins = {name: "--set" if name in overrides else "broker.conf" if name in in_conf else "RocketMQ's default"
               for name in SIZE_SETTINGS}
    root = config.root
    if not root.exists() or not fsutil.scandir(root):   # (scandir: no access time changes)
        return config.replace(origins=origins)
    layout = discover(config, config_given=False, must_exist=True)
    given = set(overrides) | in_conf
    changes = {}
    if "mappedFileSizeCommitLog" not in given and layout.commitlog_files():
        changes["mappedFileSizeCommitLog"] = layout.commitlog_file_size()
    if "mappedFileSizeConsumeQueue" not in given and layout.consume_queues():
        changes["mappedFileSizeConsumeQueue"] = layout.consume_queue_file_size()
    if "mappedFileSizeConsumeQueueExt" not in given and layout.consumequeue_ext_dir.is_dir():
        changes["mappedFileSizeConsumeQueueExt"] = layout.consume_queue_ext_file_size()
    if not given & {"maxHashSlotNum", "maxIndexNum"} and layout.index_files():
        changes["maxHashSlotNum"], changes["maxIndexNum"] = layout.index_geometry()
    if "storeFormat" not in given and ((root / "abort.bak").exists() or (root / "compaction").is_dir()):
        changes["storeFormat"] = "5"
    origins.update({name: "the store's files" for name in changes if name in origins})
    return config.replace(origins=origins, **changes)


def iso(millis: int | None) -> str | None:
    """A time (epoch ms) in the one form mqtool writes times, in JSON, tables and messages alike:
    ISO 8601 in UTC with milliseconds and a Z (2026-11-22T00:38:25.524Z), what parse_time reads
    back; None for 0, None or a value that is no time (a damaged field)."""
    if not millis:
        return None
    try:
        return datetime.fromtimestamp(millis / 1000, timezone.utc).isoformat(timespec="milliseconds")[:-6] + "Z"
    except (OverflowError, ValueError, OSError):
        return None


def duration(ms: int) -> str:
    """A span for people: 42 s, 3 min 5 s, 2 h 40 min, 3 d 4 h."""
    secs = max(ms, 0) // 1000
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60), ("min", 60, "s", 1)):
        if secs >= size:
            return f"{secs // size} {unit} {secs % size // sub_size} {sub}"
    return f"{secs} s"


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
