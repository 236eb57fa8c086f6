"""`dump` as a table: each kind of file, how it is opened (a store's files of that kind, or one
file on its own) and the walker that turns it into plain events (mqtool/forensics/dumpwalk.py,
and timerwalk.py for the timer store).  mqtool/commands/dump.py parses the options;
mqtool/cli/dumpview.py and timershow.py render the events (a table or JSON lines).

A walker yields tuples whose first item names the event; what each kind yields is in its
walker's docstring.  Every walker ends with the summary its kind shows, if it has one.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from mqtool.errors import NotAStoreError, ProblemsFound, UsageError
from mqtool.forensics import dumpwalk, timerwalk
from mqtool.forensics.dumpwalk import Tally
from mqtool.storage.fsutil import relative_paths
from mqtool.forensics.filters import Filters
from mqtool.formats import index as index_format
from mqtool.formats.filenames import is_index_name, is_offset_name
from mqtool.storage import batchqueue, census, commitlog, consumequeue, dledger, timerstore
from mqtool.storage.indexfile import IndexFile
from mqtool.storage.mappedfilequeue import MappedFileQueue
from mqtool.storage.settings import open_layout, parse_settings

COLUMNAR_JSON = True  # False: JSON lines record by record (the reference the tests compare with)
COLUMNAR_FROM = 64 << 20  # commitlog bytes from which JSON lines take the columnar path (below, loading
                          # its compiled kernels, ~0.5 s, costs more than the record-by-record path)


@dataclass(frozen=True)
class DumpOptions:
    """What the command line asks of a dump (the same for every kind)."""

    filters: Filters
    json: bool = False
    body: str | None = None     # text, hex or base64; None: bodies left out
    crc: bool = True            # recompute body CRCs
    progress: bool = False
    slots: bool = False         # index: also the non-empty hash slots
    limit: int | None = None


@dataclass(frozen=True)
class FileArgs:
    """One file dumped on its own, and the settings given for it (--config, --set)."""

    path: Path
    config_path: str | None
    settings: tuple

    def config(self):
        from mqtool.storage.config import config_for_store

        return config_for_store(None, self.config_path, parse_settings(self.settings))

    def layout(self, root: Path):
        return open_layout(str(root), self.config_path, self.settings, must_exist=False)


@dataclass(frozen=True)
class DumpKind:
    """open_store(layout) and open_file(FileArgs): context managers giving what walk(source, dump)
    walks; open_file None: the kind has no file of its own to dump."""

    open_store: Callable
    open_file: Callable | None
    walk: Callable


class Dump:
    """One dump: its events, and after them the tally (counts, --limit, the first problem)."""

    def __init__(self, kind: str, options: DumpOptions, *, layout=None, file: FileArgs | None = None):
        self.kind, self.options, self.layout, self.file = kind, options, layout, file
        self.tally = Tally(options.limit)
        self.display = relative_paths(layout.root if layout is not None else None)

    def events(self) -> Iterator[tuple]:
        spec = DUMP_KINDS[self.kind]
        if self.layout is not None:
            opened = spec.open_store(self.layout)
        elif spec.open_file is None:
            raise UsageError(f"unknown kind {self.kind}")
        else:
            opened = spec.open_file(self.file)
        with opened as source:
            yield from spec.walk(source, self)

    def problems_found(self) -> ProblemsFound | None:
        """The error dump ends with when anything failed a check (naming the first problem)."""
        problems = self.tally.problems
        if not problems:
            return None
        where, offset, what = self.tally.first_problem or (None, None, None)
        first = f"{what} ({problems} problem(s) found; see the entries marked above)" if what else \
            f"{problems} problem(s) found; see the entries marked above"
        return ProblemsFound(first, path=where, offset=offset)


def infer_kind(path: Path) -> str:
    """The kind of a store's file, from its name and place."""
    folder = path.parent.parent if path.parent.name == dledger.INDEX_DIR else path.parent
    if (folder / dledger.DATA_DIR).is_dir() and dledger.is_dledger_dir(folder):
        raise UsageError(f"{path} is one of DLedger's own files (state or entry index): `mqtool dump STORE "
                         "dledger` shows them with the entries, `mqtool info STORE` the state")
    if path.name in ("checkpoint", "timerwheel", "timercheck"):
        return path.name
    if path.name in ("timermetrics", "timermetrics.bak"):
        return "timermetrics"
    if is_offset_name(path.name) and path.parent.name == "timerlog":
        return "timerlog"     # not a commitlog: 52-byte timer units
    if is_offset_name(path.name) and len(path.parents) >= 3 and path.parent.parent.parent.name == "batchconsumequeue":
        return "batchconsumequeue"    # 46-byte batch units
    if path.suffix == ".json":
        return "config"
    if is_index_name(path.name) or path.parent.name == "index":
        return "index"
    if is_offset_name(path.name):
        if len(path.parents) >= 3 and path.parent.parent.parent.name == "consumequeue":
            return "consumequeue"
        return "commitlog"
    raise UsageError(f"cannot tell what kind of file {path} is; give KIND "
                     f"({', '.join(KINDS)})")


# ----------------------------------------------------------------- commitlog

@contextmanager
def _commitlog_store(layout):
    with commitlog.open_queue(layout) as queue:
        yield queue, layout.config.delay_levels_ms()


@contextmanager
def _commitlog_file(file: FileArgs):
    with MappedFileQueue([file.path], file.path.stat().st_size, strict=False) as queue:
        yield queue, file.config().delay_levels_ms()


def _walk_commitlog(source, dump: Dump):
    """("begin", bytes to walk, delay levels, columnar), ("progress", bytes walked), then
    dumpwalk.walk_commitlog's events (a BLANK after --limit is left out) and ("summary", dict).
    columnar: runs of records come as chunks (JSON lines of a large commitlog)."""
    queue, delay_levels = source
    options, tally = dump.options, dump.tally
    records, blanks, problems = tally.records, tally.blanks, tally.problems   # this walk's counts are the rise
    total = sum(mf.file_size for mf in queue.files)
    scanner = None
    if options.json and COLUMNAR_JSON and total >= COLUMNAR_FROM:
        from mqtool.native import fastscan as scanner
    yield "begin", total, delay_levels, scanner is not None
    walked = []
    for event in dumpwalk.walk_commitlog(queue, options.filters, tally, check_crc=options.crc,
                                         display=dump.display, on_progress=walked.append, scanner=scanner):
        if walked:
            yield "progress", walked[-1]
            walked.clear()
        if event[0] != "blank" or not tally.full():
            yield event
    stopped = tally.stopped_at
    summary = {"type": "summary", "kind": "commitlog", "records": tally.records - records,
               "blanks": tally.blanks - blanks, "problems": tally.problems - problems, "shown": tally.shown,
               "endOffset": tally.end_offset, "complete": stopped is None}
    if stopped is not None:
        summary["stoppedAt"] = stopped
    yield "summary", summary


# -------------------------------------------------------------- consume queue

@contextmanager
def _queues_store(layout):
    consumequeue.require_files(layout)
    yield lambda filters: consumequeue.open_all(layout, topics=filters.topics, queue_ids=filters.queue_ids)


@contextmanager
def _queue_file(file: FileArgs):
    yield lambda filters: [consumequeue.ConsumeQueue.of_file(file.path)]


def _walk_queues(open_queues, dump: Dump):
    """dumpwalk.walk_queue's events, queue after queue (each closed after its walk).  open_queues:
    filters -> the queues (a store's opens only the topics and queue ids the filters keep)."""
    for cq in open_queues(dump.options.filters):
        try:
            yield from dumpwalk.walk_queue(cq, dump.options.filters, dump.tally, dump.display)
        finally:
            cq.close()
        if dump.tally.full():
            break


# ---------------------------------------------------------------------- index

@contextmanager
def _index_store(layout):
    slots, entries = layout.index_geometry()
    yield slots, entries, (info.path for info in layout.index_files())


@contextmanager
def _index_file(file: FileArgs):
    if file.config_path or file.settings:
        config = file.config()
        geometry = config.maxHashSlotNum, config.maxIndexNum
    else:
        size = file.path.stat().st_size
        geometry = index_format.geometry_for_size(size)
        if geometry is None:
            raise UsageError(f"{file.path}: cannot infer maxHashSlotNum/maxIndexNum from {size} bytes; "
                             "use --config or --set maxHashSlotNum=.. --set maxIndexNum=..")
    yield geometry[0], geometry[1], [file.path]


def _walk_index(source, dump: Dump):
    """Per file: ("problem", Problem) when it cannot be opened, or ("index_header", path, IndexFile,
    header, size note), ("index_entry", entry, store time ms) for each entry kept,
    ("index_entries_end",), then with --slots ("index_slot", number, entry) per non-empty slot."""
    slots, entries, paths = source
    tally, display = dump.tally, dump.display
    for path in paths:
        if tally.full():
            break
        try:
            ix = IndexFile(path, slots, entries)
        except NotAStoreError as exc:
            tally.problems += 1
            tally.note_problem(display(path), exc.offset, "bad-index-file")
            yield "problem", commitlog.Problem("bad-index-file", display(path), exc.offset or 0, 0, exc.message)
            continue
        try:
            header = ix.header()
            size_note = None
            if not ix.size_ok:
                tally.problems += 1
                tally.note_problem(display(path), None, "bad-file-size")
                size_note = f"file is {ix.size} bytes, expected {ix.expected_size}"
            yield "index_header", path, ix, header, size_note
            for entry, time_ms in dumpwalk.index_entries(ix, header, dump.options.filters, tally):
                yield "index_entry", entry, time_ms
            yield ("index_entries_end",)
            if dump.options.slots:
                for number in range(slots):
                    value = ix.slot(number)
                    if value:
                        yield "index_slot", number, value
        finally:
            ix.close()


# ----------------------------------------------------------------- small files

def _path_of(path):
    return nullcontext(path)


def _walk_checkpoint(path, dump: Dump):
    """("checkpoint", JSON line, fields as read)."""
    from mqtool.forensics import storeinfo
    from mqtool.storage import metafiles

    cp = metafiles.read_checkpoint(path)
    line = {"type": "checkpoint", "file": dump.display(path), **cp}
    if cp["fileSize"] != 4096:
        dump.tally.problems += 1
        dump.tally.note_problem(dump.display(path), None, "bad-file-size")
        line["problem"] = f"checkpoint is {cp['fileSize']} bytes, expected 4096"
    for name in ("physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"):
        line[name + "Iso"] = storeinfo.iso(cp[name])
    yield "checkpoint", line, cp


def _config_files(layout):
    """Each config JSON file, then the .bak a broker falls back to (those that exist)."""
    for name in census.CONFIG_JSON:
        for path in (layout.config_dir / name, layout.config_dir / (name + ".bak")):
            if path.name.endswith(".json") or path.name.endswith(".json.bak"):
                if path.exists():
                    yield path


def _walk_config(paths, dump: Dump):
    """("config", path, content as JSON) per file, ("problem", Problem) for one that cannot be read
    (it is counted, and the dump goes on: to the .bak, say)."""
    from mqtool.storage import metafiles

    for path in paths:
        try:
            doc = metafiles.read_config_json(path)
        except NotAStoreError as exc:
            dump.tally.problems += 1
            dump.tally.note_problem(dump.display(path), exc.offset, "bad-config-file")
            yield "problem", commitlog.Problem("bad-config-file", dump.display(path), exc.offset or 0, 0, exc.message)
            continue
        yield "config", path, _jsonable(doc)


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _dledger_store(layout):
    if not layout.is_dledger():
        raise NotAStoreError("not a DLedger store (no dledger-<selfId>/ with data/ here)", path=layout.root)
    return nullcontext(layout)


def _batch_store(layout):
    if not batchqueue.queues(layout):
        raise NotAStoreError("no batch consume queue here (no batchconsumequeue/<topic>/<queueId>/)",
                             path=layout.root)
    return nullcontext(dumpwalk.store_batch_queues(layout))


def _timer_store(layout):
    if not timerstore.exists(layout):
        raise NotAStoreError("no timer store here (timerWheelEnable is off, or a 4.x store)", path=layout.root)
    return timerwalk.store_view(layout)


@contextmanager
def _timerlog_store(layout):
    with _timer_store(layout) as view:
        yield view.ts, view


@contextmanager
def _timerlog_file(file: FileArgs):
    with timerstore.TimerStore(file.layout(file.path.parent.parent), paths=[file.path]) as ts:
        yield ts, None


@contextmanager
def _timerwheel_store(layout):
    with _timer_store(layout) as view:
        if view.ts.wheel() is None:
            raise NotAStoreError("no timerwheel in this store (timerWheelEnable is off, or a 4.x store)",
                                 path=layout.timerwheel_path)
        yield view


@contextmanager
def _timermetrics_store(layout):
    if not timerstore.exists(layout):
        yield layout, None
    else:
        with timerwalk.store_view(layout) as view:
            yield layout, view


@contextmanager
def _timermetrics_file(file: FileArgs):
    layout = file.layout(file.path.parent.parent)
    with timerwalk.store_view(layout) as view:
        yield layout, view


DUMP_KINDS = {
    "commitlog": DumpKind(_commitlog_store, _commitlog_file, _walk_commitlog),
    "consumequeue": DumpKind(_queues_store, _queue_file, _walk_queues),
    "index": DumpKind(_index_store, _index_file, _walk_index),
    "checkpoint": DumpKind(lambda layout: _path_of(layout.checkpoint_path), lambda f: _path_of(f.path),
                           _walk_checkpoint),
    "config": DumpKind(lambda layout: nullcontext(_config_files(layout)), lambda f: nullcontext([f.path]),
                       _walk_config),
    "timerlog": DumpKind(_timerlog_store, _timerlog_file, timerwalk.timerlog_events),
    "timerwheel": DumpKind(_timerwheel_store, lambda f: timerwalk.store_view(f.layout(f.path.parent)),
                           timerwalk.timerwheel_events),
    "timercheck": DumpKind(lambda layout: _path_of(layout.timercheck_path), lambda f: _path_of(f.path),
                           timerwalk.timercheck_events),
    "timermetrics": DumpKind(_timermetrics_store, _timermetrics_file, timerwalk.timermetrics_events),
    "batchconsumequeue": DumpKind(_batch_store, lambda f: nullcontext(dumpwalk.file_batch_queue(f.path)),
                                  dumpwalk.walk_batch_queues),
    "dledger": DumpKind(_dledger_store, None, dumpwalk.walk_dledger),
}
KINDS = tuple(DUMP_KINDS)
