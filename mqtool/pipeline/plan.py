"""Planning a read: the stores named on the command line (or in a Spark load), and one
partition per file of each (a commitlog file, a consume queue file), described by small
picklable objects that every engine hands to its workers.  Nothing here reads records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from mqtool.errors import NotAStoreError, UsageError
from mqtool.forensics.filters import Filters
from mqtool.formats.filenames import is_offset_name
from mqtool.storage import batchqueue, commitlog, fsutil
from mqtool.storage.layout import is_new_store
from mqtool.storage.settings import given_setting, open_layout


@dataclass(frozen=True)
class Store:
    """One store to read: its root, the name rows carry as `broker`, and --config/--set."""

    broker: str
    root: str
    config_path: str | None = None
    settings: tuple[str, ...] = ()

    def layout(self):
        return open_layout(self.root, self.config_path, self.settings)


def _looks_like_store(path: Path) -> bool:
    return (any((path / name).exists() for name in ("commitlog", "consumequeue", "checkpoint", "index"))
            or is_new_store(path))


def _default_name(path: Path) -> str:
    """A store called `store` (RocketMQ's default) is named after its parent: broker-a/store -> broker-a."""
    path = path.resolve()
    return path.parent.name if path.name == "store" and path.parent.name else path.name


def find_stores(paths, config_path: str | None = None, settings=()) -> list[Store]:
    """The stores named by paths: each a store, `NAME=PATH`, or a directory holding one store per
    broker (DIR/broker-a/ or DIR/broker-a/store/), named after those directories."""
    found: list[Store] = []
    for given in paths:
        given = str(given)
        name = None
        if "=" in given and not os.path.exists(given):
            name, given = given.split("=", 1)
            if not name or not given:
                raise UsageError(f"{name}={given}: expected NAME=DIR, both given")
        path = Path(given)
        if not path.exists():
            raise NotAStoreError("no such store directory", path=path)
        if _looks_like_store(path) or name or not path.is_dir():
            # one store: the broker's name where its configuration says it, else the folder's
            named = name or (given_setting(config_path, settings, "brokerName") if len(paths) == 1 else None)
            found.append(Store(named or _default_name(path), str(path.resolve()), config_path, tuple(settings)))
            continue
        children = []
        for child in sorted(path / name for name, _, is_dir, _ in fsutil.scandir(path) if is_dir):
            if _looks_like_store(child):
                children.append(Store(child.name, str(child.resolve()), config_path, tuple(settings)))
            elif _looks_like_store(child / "store"):
                children.append(Store(child.name, str((child / "store").resolve()), config_path,
                                      tuple(settings)))
        if not children:
            raise NotAStoreError("not a RocketMQ store, nor a directory of stores (one per broker)", path=path)
        found.extend(children)
    names = [s.broker for s in found]
    for name in names:
        if names.count(name) > 1:
            raise UsageError(f"two stores are named {name!r}; name them as NAME=PATH")
    return found



def dledger_replicas(found: list[Store]) -> tuple[list[Store], list[dict]]:
    """Stores that are replicas of one DLedger group (the same entry 0: dledger.first_entry) hold
    the same messages: each group is counted once, from the replica with the most entries (ties:
    the first given).  Returns the stores to count and, per group of two or more, a `replicas`
    line saying which was counted and what the others hold; the group is named after the
    broker's configuration (brokerName) when it says it, else the counted replica."""
    from mqtool.storage import dledger

    groups: dict[bytes, list] = {}
    keep: list = []
    for store in found:
        layout = store.layout()
        first = None
        if layout.is_dledger() and not layout.is_mixed():
            queue = commitlog.open_queue(layout)
            try:
                first = dledger.first_entry(queue)
                entries = dledger.read_ledger(layout, queue).end_index + 1 if first is not None else 0
            finally:
                queue.close()
        if first is None:
            keep.append(store)
        else:
            if first not in groups:
                keep.append(first)     # its place in the order: the group's
            groups.setdefault(first, []).append((store, entries))
    out, lines = [], []
    for item in keep:
        if isinstance(item, Store):
            out.append(item)
            continue
        members = groups[item]
        counted, entries = max(members, key=lambda m: m[1])     # max keeps the first of equals
        if len(members) > 1:
            name = given_setting(counted.config_path, counted.settings, "brokerName") or counted.broker
            counted = replace(counted, broker=name)
            lines.append({"type": "replicas", "broker": name, "counted": counted.root, "entries": entries,
                          "replicas": [{"store": s.root, "entries": n} for s, n in members]})
        out.append(counted)
    return out, lines


@dataclass(frozen=True)
class CommitLogPart:
    """One commitlog file of one store, as a unit of work.  `is_last` is the walker's notion:
    no later file holds data (so a missing BLANK here is not damage).  `load_problems` are the
    store's file-level problems (bad names, sizes, gaps), carried by its first partition."""

    broker: str
    store: str
    path: str | None
    display: str
    file_from: int
    file_size: int
    is_last: bool
    delay_levels: tuple[int, ...]
    index: int = 0
    load_problems: tuple[tuple[str, str, int, str], ...] = ()


@dataclass(frozen=True)
class QueuePart:
    """One consume queue file, or one batch consume queue file (kind BatchCQ)."""

    broker: str
    store: str
    topic: str
    queue_id: int
    path: str
    display: str
    file_size: int
    index: int = 0
    kind: str = "SimpleCQ"


def _starts_with_data(path: Path) -> bool:
    """Whether the file's first 8 bytes are not all zero (read with pread, not a mapping)."""
    fd = fsutil.open_read(path)
    try:
        return any(os.pread(fd, 8, 0))
    finally:
        os.close(fd)


def commitlog_parts(stores, filters: Filters | None = None) -> list[CommitLogPart]:
    """One partition per commitlog file of every store, in store and offset order; files whose
    offsets the filters rule out are left out."""
    filters = filters or Filters()
    parts: list[CommitLogPart] = []
    for store in stores:
        if filters.brokers is not None and store.broker not in filters.brokers:
            continue
        layout = store.layout()
        show = fsutil.relative_paths(layout.root)
        delay = tuple(layout.config.delay_levels_ms())
        # the queue checks names, sizes and gaps as a broker's load does; its mappings are not read
        with commitlog.open_queue(layout) as queue:
            loads = tuple((lp.kind, show(lp.path), lp.offset if lp.offset is not None else -1, lp.message)
                          for lp in queue.problems)
            files = [(Path(mf.path), mf.file_from_offset, mf.file_size) for mf in queue.files]
            size = queue.file_size
        with_data = [i for i, (path, _, _) in enumerate(files) if _starts_with_data(path)]
        last_data = with_data[-1] if with_data else len(files) - 1
        mine = []
        for i, (path, start, real_size) in enumerate(files):
            if filters.file_ok(start, start + real_size):
                mine.append(CommitLogPart(store.broker, str(layout.root), str(path), show(path), start, size,
                                          i >= last_data, delay))
        if loads:
            if mine:
                mine[0] = _replace(mine[0], load_problems=loads)
            else:
                mine.append(CommitLogPart(store.broker, str(layout.root), None, "", 0, size, True, delay,
                                          load_problems=loads))
        parts.extend(mine)
    return [_replace(p, index=i) for i, p in enumerate(parts)]


def queue_parts(stores, filters: Filters | None = None) -> list[QueuePart]:
    """One partition per consume queue file of every store (topic and queue filters applied)."""
    filters = filters or Filters()
    parts = []
    for store in stores:
        if filters.brokers is not None and store.broker not in filters.brokers:
            continue
        layout = store.layout()
        show = fsutil.relative_paths(layout.root)
        kinds = [("SimpleCQ", layout.consume_queue_file_size(), layout.consume_queues(), layout.consume_queue_files),
                 ("BatchCQ", batchqueue.file_size(layout), batchqueue.queues(layout), batchqueue.files)]
        for kind, size, queues, files in kinds:
            for topic, queue_id, directory in queues:
                if filters.topics is not None and topic not in filters.topics:
                    continue
                if filters.queue_ids is not None and queue_id not in filters.queue_ids:
                    continue
                for info in files(directory):
                    if is_offset_name(info.name):
                        parts.append(QueuePart(store.broker, str(layout.root), topic, queue_id, str(info.path),
                                               show(info.path), size, kind=kind))
    return [_replace(p, index=i) for i, p in enumerate(parts)]


def _replace(part, **changes):
    return replace(part, **changes)

