"""Store layout discovery: where each kind of file lives, and which files are there.

A store root holds commitlog/, consumequeue/<topic>/<queueId>/, index/,
checkpoint, abort, lock and config/.  broker.conf may move the commitlog
(storePathCommitLog, several directories separated by commas) and add
read-only commitlog directories.  File sizes come from the configuration
when one is given, else from the files themselves (a store written with
64 KiB commitlog files is read as such without a broker.conf).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.errors import MqError, NotAStoreError
from mqtool.formats import index as index_format
from mqtool.formats.filenames import is_index_name, is_offset_name
from mqtool.storage import dledger, fsutil
from mqtool.storage.config import StoreConfig


@dataclass
class FileInfo:
    path: Path
    name: str
    size: int
    mtime: float


@dataclass
class StoreLayout:
    root: Path
    config: StoreConfig
    commitlog_dirs: list[Path]
    readonly_commitlog_dirs: list[Path] = field(default_factory=list)
    config_given: bool = False          # every size is the config's (a broker.conf, or a writer's)
    sizes_given: frozenset = frozenset()  # the sizes given one by one (--set); the others are read off the files
    _sizes: dict = field(default_factory=dict, repr=False, compare=False)   # _read_size's
    dledger_dir: Path | None = None     # DLedger mode: dledger-<selfId>/; commitlog_dirs is then its data/
    old_commitlog_dirs: list[Path] = field(default_factory=list)   # switched to DLedger: the old commitlog

    # ------------------------------------------------------------- fixed paths
    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

    @property
    def consumequeue_ext_dir(self) -> Path:
        return self.root / "consumequeue_ext"

    def consume_queue_ext_dir(self, topic: str, queue_id: int) -> Path:
        return self.consumequeue_ext_dir / topic / str(queue_id)

    def consume_queue_ext_file_size(self) -> int:
        if self._given("mappedFileSizeConsumeQueueExt"):
            return self.config.mappedFileSizeConsumeQueueExt
        return self._read_size(self.consumequeue_ext_dir, self.config.mappedFileSizeConsumeQueueExt)

    def _read_size(self, base: Path, default: int) -> int:
        """queue_file_size, read once per layout (every queue's reader asks; a store's queue files
        keep their size)."""
        if (base, default) not in self._sizes:
            self._sizes[(base, default)] = queue_file_size(base, default)
        return self._sizes[(base, default)]

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.root / "abort"

    @property
    def lock_path(self) -> Path:
        return self.root / "lock"

    @property
    def config_dir(self) -> Path:
        return self.root / "config"

    # ------------------------------------------------------------------ listing
    def commitlog_files(self) -> list[FileInfo]:
        """Every commitlog file across all directories, ordered by start offset.

        Files whose name is not a 20-digit offset are returned too (a broker
        refuses to load them); `is_offset_name` tells them apart.
        """
        files = []
        for directory in self.commitlog_dirs + self.readonly_commitlog_dirs:
            files.extend(list_store_files(directory))
        return sorted(files, key=lambda f: f.name)

    def consume_queues(self) -> list[tuple[str, int, Path]]:
        """(topic, queueId, directory) for every queue directory on disk."""
        return queue_dirs(self.consumequeue_dir)

    def consume_queue_files(self, queue_dir: Path) -> list[FileInfo]:
        return sorted(list_store_files(queue_dir), key=lambda f: f.name)

    def index_files(self) -> list[FileInfo]:
        return sorted((f for f in list_store_files(self.index_dir)), key=lambda f: f.name)

    # -------------------------------------------------------------- file sizes
    def _given(self, name: str) -> bool:
        return self.config_given or name in self.sizes_given

    def commitlog_file_size(self) -> int:
        if self._given("mappedFileSizeCommitLog"):
            return self.config.mappedFileSizeCommitLog
        return _common_size([f for f in self.commitlog_files() if is_offset_name(f.name)],
                            self.config.mappedFileSizeCommitLog)

    def consume_queue_file_size(self) -> int:
        if self._given("mappedFileSizeConsumeQueue"):
            return self.config.consume_queue_file_size()
        return self._read_size(self.consumequeue_dir, self.config.consume_queue_file_size())

    @property
    def timerwheel_path(self) -> Path:
        return self.root / "timerwheel"

    @property
    def timerlog_dir(self) -> Path:
        return self.root / "timerlog"

    @property
    def timercheck_path(self) -> Path:
        return self.config_dir / "timercheck"

    def timerlog_files(self) -> list[FileInfo]:
        return sorted(list_store_files(self.timerlog_dir), key=lambda f: f.name)

    def timerlog_file_size(self) -> int:
        if self._given("mappedFileSizeTimerLog"):
            return self.config.mappedFileSizeTimerLog
        return _common_size([f for f in self.timerlog_files() if is_offset_name(f.name)],
                            self.config.mappedFileSizeTimerLog)

    def timer_precision_ms(self) -> int:
        """MessageStoreConfig.setTimerPrecisionMs: the largest of 100, 200, 500, 1000 not above the value."""
        value = self.config.timerPrecisionMs
        return max([p for p in (100, 200, 500, 1000) if p <= value] or [100])

    def index_geometry(self) -> tuple[int, int]:
        """(maxHashSlotNum, maxIndexNum) of the index files.

        Without a configuration the sizes are read off the files, assuming the
        broker's ratio maxIndexNum = 4 x maxHashSlotNum; other shapes need
        --config.
        """
        config = self.config
        slots_given, entries_given = self._given("maxHashSlotNum"), self._given("maxIndexNum")
        if slots_given and entries_given:
            return config.maxHashSlotNum, config.maxIndexNum
        # a file shorter than the header says nothing about the geometry (it is reported
        # as damaged when it is read)
        files = [f for f in self.index_files()
                 if is_index_name(f.name) and f.size >= index_format.HEADER_SIZE]
        default = (config.maxHashSlotNum, config.maxIndexNum)
        if not files:
            return default
        size = max(set(f.size for f in files), key=[f.size for f in files].count)
        if size == index_format.file_size(*default):
            return default
        if slots_given or entries_given:   # one given: the other is what the file size leaves room for
            rest = size - index_format.HEADER_SIZE
            if slots_given:
                entries, odd = divmod(rest - config.maxHashSlotNum * index_format.SLOT_SIZE, index_format.ENTRY_SIZE)
                return (config.maxHashSlotNum, entries) if entries > 0 and not odd else default
            slots, odd = divmod(rest - config.maxIndexNum * index_format.ENTRY_SIZE, index_format.SLOT_SIZE)
            return (slots, config.maxIndexNum) if slots > 0 and not odd else default
        geometry = index_format.geometry_for_size(size)
        if geometry is None:
            raise NotAStoreError(
                f"index files of {size} bytes do not fit maxIndexNum = 4 x maxHashSlotNum; "
                "give the broker's settings with --config", path=files[0].path)
        return geometry

    def dledger_index_files(self) -> list[FileInfo]:
        """DLedger mode: the entry index files (dledger-<selfId>/index/)."""
        return sorted(list_store_files(self.dledger_dir / dledger.INDEX_DIR), key=lambda f: f.name)

    def is_dledger(self) -> bool:
        """DLedger mode: the commitlog is DLedger's data files, each message the body of an entry
        (storage/dledger.py); every reader of the commitlog reads it as one."""
        return self.dledger_dir is not None

    @property
    def trash_dir(self) -> Path:
        return self.root / TRASH_DIR

    def trash_holds(self, folders) -> bool:
        """Does the trash hold files staged from any of these folders (clean's, waiting for their
        delay or for --undo)?"""
        for folder in folders:
            try:
                if fsutil.scandir(self.trash_dir / kept_place(self.root, folder)):
                    return True
            except OSError:
                pass
        return False

    def is_mixed(self) -> bool:
        """A broker switched to DLedger mode: the old commitlog's files below dividedCommitlogOffset,
        DLedger's entries above (commitlog.division says where)."""
        return self.dledger_dir is not None and bool(self.old_commitlog_dirs)

    # ------------------------------------------------------------------- state
    def is_locked(self) -> int | None:
        from mqtool.formats.markers import lock_holder

        return lock_holder(self.lock_path)

    def lock_owner(self, holder: int | None) -> int | None:
        """The pid of the process holding the lock (holder: what is_locked() or lock_holder()
        said): the pid the lock names, else the one in the abort file (an open-file-description
        lock, mqtool's own, names none); None when neither names one."""
        from mqtool.formats.markers import parse_abort

        if holder is not None and holder > 0:
            return holder
        try:
            return parse_abort(fsutil.read_small(self.abort_path, 64))
        except (OSError, MqError):
            return None

    def in_use(self) -> dict | None:
        """Who holds the store's lock, or None when nobody does: {"pid", "command", "holder"}, the
        pid by lock_owner (None: not named), the command line /proc shows for it (None when it
        does not), and the two as words for a message ("process 42 (mqtool append S)")."""
        holder = self.is_locked()
        if holder is None:
            return None
        return describe_holder(self.lock_owner(holder))


def describe_holder(pid: int | None) -> dict:
    """{"pid", "command", "holder"} of a lock holder named by lock_owner (see in_use)."""
    command = fsutil.process_command(pid) if pid else None
    if pid and command:
        words = f"process {pid} ({command if len(command) <= 120 else command[:117] + '...'})"
    elif pid:
        words = f"process {pid}"
    else:
        words = "another process (it names no pid: another host, or one that wrote no abort file)"
    return {"pid": pid, "command": command, "holder": words}


def _scan(directory: Path, lister=None):
    """The entries of a store folder (as lister gives them: fsutil.scandir, or scandir_kinds
    without each entry's stat); none when it does not exist.  Something else standing where the
    folder should be (a file, a dangling link) is unreadable input (exit 4)."""
    try:
        return (lister or fsutil.scandir)(directory)
    except FileNotFoundError:
        if os.path.islink(directory):
            raise NotAStoreError(f"{fsutil.what_is(directory)} where a folder of the store should be",
                                 path=directory) from None
        return []
    except NotADirectoryError:
        raise NotAStoreError(f"{fsutil.what_is(directory) or 'a file'} where a folder of the store should be",
                             path=directory) from None
    except PermissionError as exc:
        raise NotAStoreError(f"cannot list directory: {exc.strerror}", path=directory) from None


def list_store_files(directory: Path) -> list[FileInfo]:
    """The files of a folder that holds only store files (commitlog, a consume queue, index).

    Anything else there (a folder, a dangling link, a FIFO) is a file the store cannot read: a
    broker fails to load the folder, and a command that skipped it would show a store with a
    hole and call it whole.  So it is unreadable input (exit 4), named, for every command."""
    files = []
    directory = Path(directory)
    for name, is_file, _, st in _scan(directory):
        if not is_file:
            _not_a_store_file(directory / name)
        files.append(FileInfo(directory / name, name, st.st_size, st.st_mtime))
    return files


def store_file_names(directory: Path) -> list[str]:
    """The names of list_store_files(directory), under the same rule, without a stat or a Path
    for each file (a reader opening thousands of small queues)."""
    names = []
    for name, is_file, _ in _scan(directory, fsutil.scandir_kinds):
        if not is_file:
            _not_a_store_file(Path(directory) / name)
        names.append(name)
    return names


def _not_a_store_file(path: Path):
    raise NotAStoreError(f"{fsutil.what_is(path)}, not a store file: a broker cannot load this folder "
                         "(move it out of the store; nothing was changed)", path=path)


def queue_dirs(base: Path) -> list[tuple[str, int, Path]]:
    """(topic, queueId, directory) of every <base>/<topic>/<queueId>/ folder: consume queues, their
    extensions and batch consume queues are laid out alike."""
    return sorted(_queue_dirs(base), key=lambda t: (t[0], t[1]))


def _queue_dirs(base: Path):
    for topic in _list_dirs(base):
        topic_dir = base / topic
        for queue in _list_dirs(topic_dir):
            if queue.isdigit():
                yield topic, int(queue), topic_dir / queue


def queue_file_size(base: Path, default: int) -> int:
    """The file size shared by the queue files under <base>/<topic>/<queueId>/ (the first 64 or so
    looked at, in name order, without listing every queue), or default when there are none."""
    sizes = []
    for _, _, directory in _queue_dirs(base):
        sizes.extend(f for f in sorted(list_store_files(directory), key=lambda f: f.name) if is_offset_name(f.name))
        if len(sizes) > 64:
            break
    return _common_size(sizes, default)


def _list_dirs(directory: Path) -> list[str]:
    return sorted(name for name, _, is_dir in _scan(directory, fsutil.scandir_kinds) if is_dir)


def _common_size(files: list[FileInfo], default: int) -> int:
    return fsutil.common_size([f.size for f in files], default)


def dledger_dirs(root: Path, config: StoreConfig) -> list[Path]:
    """Where a DLedger commitlog lives: storePathDLedgerCommitLog, and folders of the store in
    DLedger's own layout (<dLegerGroup>-<dLegerSelfId>/ holding data/ with index/ or currterm,
    e.g. RaftNode00-n0/; older ones named dledger-*)."""
    found = [Path(config.storePathDLedgerCommitLog)] if config.storePathDLedgerCommitLog else []
    for name in _list_dirs(root):
        if dledger.is_dledger_dir(root / name, {n for n, *_ in _scan(root / name)}):
            found.append(root / name)
    return [p for p in found if p.exists()]


def _dledger_store(root: Path, config: StoreConfig, commitlog_dirs: list[Path]):
    """(the DLedger folder, the commitlog folders, the old commitlog folders) of a store: in
    DLedger mode the folder is DLedgerCommitLog's storeBaseDir (<root>/dledger-<dLegerSelfId>) and
    the commitlog is its data/ (or storePathDLedgerCommitLog); else (None, commitlog_dirs, []).
    A DLedger store whose commitlog/ holds files too is a broker switched to DLedger mode
    (DLedgerCommitLog reads the old commitlog below dividedCommitlogOffset, DLedger's entries
    above): its commitlog is both, old folders first (storage/commitlog.py's division)."""
    found = [p for p in dledger_dirs(root, config) if p.is_dir() and (p / dledger.DATA_DIR).is_dir()]
    if config.dLegerSelfId:
        found = [p for p in found if dledger.self_id_of(p) == config.dLegerSelfId]
    if not found:
        return None, commitlog_dirs, []
    if len(found) > 1:
        raise NotAStoreError("several DLedger folders (" + ", ".join(p.name for p in found) +
                             "): say which with --set dLegerSelfId=<id>", path=root)
    data = Path(config.storePathDLedgerCommitLog) if config.storePathDLedgerCommitLog else found[0] / dledger.DATA_DIR
    old = [d for d in commitlog_dirs if d.is_dir() and d != data and list_store_files(d)]
    return found[0], old + [data], old


# ------------------------------------------------------------------ mqtool's trash
# `clean --delete-delay` stages a file in STORE/trash/ under its path in the store, or under
# external/<its absolute path> when it lies outside (a commitlog in storePathCommitLog may):
# engine/trash.py moves the files and keeps their manifest, census asks what waits there.  A
# quarantine run (engine/quarantine.py) keeps a repair's files in the same places.
TRASH_DIR = "trash"
QUARANTINE_DIR = "quarantine"   # a run per repair: STORE/quarantine/<time>/
TRASH_EXTERNAL = "external"


def store_relative(root: Path, path) -> str:
    """A file's path relative to the store root, as kept in a manifest (both resolved; the
    absolute path when it lies outside the store)."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path(root).resolve()))
    except ValueError:
        return str(path.resolve())


def kept_place(root: Path, path) -> str:
    """Where in a folder that keeps a store's files (STORE/trash/, a quarantine run's folder) a
    file (or folder) of the store goes: its path relative to the store, or external/<its absolute
    path> (the trash gives a staged file of a name already taken a .N suffix)."""
    rel = store_relative(root, path)
    return rel if not Path(rel).is_absolute() else os.path.join(TRASH_EXTERNAL, rel.lstrip("/"))


# what a writer creates in a new store before its first folder: a kill between the two leaves
# a store that holds nothing but these (or `mkdir d && : > d/lock`)
NEW_STORE_FILES = frozenset({"lock", "abort", "abort.bak"})


def is_new_store(root: Path) -> bool:
    """A folder holding only a new store's marker files (at least one): an empty store, which
    every command opens (a writer killed while creating the store left it)."""
    try:
        entries = fsutil.scandir(root)
    except OSError:
        return False
    return bool(entries) and all(is_file and name in NEW_STORE_FILES for name, is_file, _, _ in entries)


def discover(config: StoreConfig, *, config_given: bool = False, must_exist: bool = True,
             sizes_given=frozenset()) -> StoreLayout:
    """Find the store described by config; refuse what is not a (supported) store."""
    root = Path(config.storePathRootDir)
    if must_exist:
        if not root.exists():
            raise NotAStoreError("no such store directory", path=root)
        if not root.is_dir():
            raise NotAStoreError("not a directory (a store is a directory)", path=root)
        if not os.access(root, os.R_OK | os.X_OK):
            raise NotAStoreError("store directory is not readable", path=root)
    commitlog_dirs, readonly_dirs = config.commitlog_dirs(), config.readonly_commitlog_dirs()
    dledger_dir, old_dirs = None, []
    if root.is_dir():
        dledger_dir, commitlog_dirs, old_dirs = _dledger_store(root, config, commitlog_dirs)
        if dledger_dir is not None:
            readonly_dirs = []
    layout = StoreLayout(root=root, config=config, commitlog_dirs=commitlog_dirs,
                         readonly_commitlog_dirs=readonly_dirs, config_given=config_given,
                         sizes_given=frozenset(sizes_given), dledger_dir=dledger_dir, old_commitlog_dirs=old_dirs)
    if must_exist:
        markers = [layout.checkpoint_path, layout.consumequeue_dir, layout.index_dir]
        has_commitlog = any(d.is_dir() for d in layout.commitlog_dirs + layout.readonly_commitlog_dirs)
        if not has_commitlog and not any(p.exists() for p in markers) and not is_new_store(root):
            raise NotAStoreError("not a RocketMQ store: no commitlog/, consumequeue/, index/ or "
                                 "checkpoint here", path=root)
    return layout
