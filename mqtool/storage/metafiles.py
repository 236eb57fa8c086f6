"""The store's metadata files: checkpoint and config JSON (small files, read whole)."""

from __future__ import annotations

from pathlib import Path

from mqtool.errors import NotAStoreError
from mqtool.formats import checkpoint as fmt
from mqtool.formats import configjson
from mqtool.storage import fsutil


def read_checkpoint(path) -> dict:
    """The checkpoint's fields; a short file is reported with its length."""
    try:
        data = fsutil.read_small(path, fmt.FILE_SIZE + 1)
    except FileNotFoundError:
        raise NotAStoreError("checkpoint file is missing", path=path) from None
    except OSError as exc:
        raise NotAStoreError(f"cannot read checkpoint: {exc.strerror}", path=path) from None
    if len(data) < 24:
        raise NotAStoreError(f"checkpoint is {len(data)} bytes; it needs at least 24", path=path,
                             offset=len(data))
    padded = data[:fmt.FILE_SIZE].ljust(fmt.FILE_SIZE, b"\x00")
    parsed = fmt.CHECKPOINT.parse(padded)
    result = {name: parsed[name] for name in fmt.FIELDS_5X}
    result["fileSize"] = len(data)
    return result


def read_config_json(path):
    """A config/*.json file parsed with fastjson's quirks; None when it does not exist."""
    try:
        text = fsutil.read_whole(path, 256 << 20).decode("utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotAStoreError(f"cannot read config file: {exc}", path=path) from None
    except UnicodeDecodeError as exc:
        raise NotAStoreError(f"not UTF-8: {exc.reason}", path=path, offset=exc.start) from None
    if not text.strip():
        return None
    try:
        return configjson.loads(text)
    except configjson.ConfigJsonError as exc:
        # the parser counts characters; report the byte offset in the file
        offset = len(text[:exc.offset].encode("utf-8"))
        raise NotAStoreError(f"not fastjson: {exc.reason}", path=path, offset=offset) from None


def load_config_json(path):
    """A config JSON file as a broker loads it (ConfigManager.load): the file, or its .bak when the
    file is missing, empty or cannot be parsed.  Returns (document or None, the path read or None,
    a note saying what was fallen back to, or None).  Raises when neither can be read, where a
    broker's load would fail."""
    path = Path(path)
    backup = path.with_name(path.name + ".bak")
    try:
        doc = read_config_json(path)
        if doc is not None:
            return doc, path, None
        why = "is missing" if not fsutil.exists(path) else "is empty"
    except NotAStoreError as exc:
        why, damage = "cannot be read", exc
        try:
            doc = read_config_json(backup)
        except NotAStoreError:
            raise damage from None
        if doc is None:   # the broker's loadBak finds nothing and carries on with no entries
            return None, None, f"{path.name} {why} ({damage.message}) and {backup.name} holds nothing"
        return doc, backup, f"{path.name} {why} ({damage.message}): read {backup.name}, as a broker does"
    doc = read_config_json(backup)
    if doc is None:
        return None, None, None
    return doc, backup, f"{path.name} {why}: read {backup.name}, as a broker does"
