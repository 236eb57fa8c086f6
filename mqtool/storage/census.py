"""What a store holds, beyond commitlog and consume queues: every top-level file and folder and
every config/ file known by name and place, the broker feature it belongs to, and whether
mqtool understands it, only reads it, or does not know it.

RocketMQ 5.x stores carry more than a 4.x one (the timer store is on by default; LMQ, BatchCQ,
RocksDB consume queues, DLedger, the controller's epoch file).  `info` shows the census; each
writer asks `refusal()` before it changes anything, and refuses (exit 3) a store holding a
feature it cannot keep consistent, naming the feature and its setting.  Facts from the Java
source, tag rocketmq-all-5.3.3 (StorePathConfigHelper, BrokerPathConfigHelper,
MessageStoreConfig, TimerMessageStore, CompactionStore, RocksDBConsumeQueueStore).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.errors import RefusedError
from mqtool.formats import multidispatch
from mqtool.storage import dledger, fsutil
from mqtool.storage.layout import QUARANTINE_DIR, TRASH_DIR, dledger_dirs

UNDERSTOOD, READ_ONLY, UNKNOWN = "understood", "read-only", "unknown"

WRITERS = ("append", "recover", "rebuild-cq", "clean", "salvage")


@dataclass(frozen=True)
class Feature:
    name: str
    setting: str                 # the broker setting (or topic attribute) that makes it
    kept_by: frozenset           # the writers that keep it consistent
    status: str = UNDERSTOOD     # how far mqtool reads it
    why: dict = field(default_factory=dict)   # writer -> what it would get wrong (its refusal says so)


_ALL = frozenset(WRITERS)
FEATURES = {f.name: f for f in (
    Feature("store", "-", _ALL),
    Feature("mqtool", "-", _ALL),     # mqtool's own trash/ and quarantine/
    Feature("config", "-", _ALL, READ_ONLY),   # broker metadata JSON: read (with .bak), never written
    # the timer store: append, rebuild-cq and salvage do not touch what it points at; recover and
    # clean report the pending units they leave dangling and keep their records (quarantine, trash)
    Feature("timer", "timerWheelEnable", _ALL),
    # LMQ: verify-crc checks the %LMQ% units against their records' multi-dispatch properties;
    # recover and rebuild-cq multi-dispatch as the broker does; clean reclaims LMQ queue files as
    # any consume queue's (CleanConsumeQueueService).  append does not assign LMQ queue offsets,
    # salvage does not copy LMQ queues: they refuse
    Feature("lmq", "enableLmq / enableMultiDispatch", frozenset({"recover", "rebuild-cq", "clean"})),
    # consume queue extensions: verify-crc follows the addresses and checks the ext units;
    # recover cuts them where the kept units stop pointing and, like rebuild-cq, writes ext units
    # and addresses as the broker does (no filter bitmaps: refused)
    Feature("consumequeue-ext", "enableConsumeQueueExt", frozenset({"recover", "rebuild-cq"})),
    # BatchCQ: read and checked (dump, verify-crc); recover cuts batch queue units at or past its
    # cut (truncateDirtyLogicFiles), it and rebuild-cq dispatch batch topics into batchconsumequeue/,
    # clean reclaims batch queue files below the new minimum (deleteExpiredFile).  append and
    # salvage do not write batch queue units: they refuse
    Feature("batch-cq", "queue.type=BatchCQ", frozenset({"recover", "rebuild-cq", "clean"}), why={
        "append": "append writes no batch consume queue units (msgBaseOffset, batchSize) and would dispatch "
                  "the topic's records into consumequeue/",
        "salvage": "salvage copies no batch consume queue (its new store would dispatch the topic's records "
                   "into consumequeue/)"}),
    Feature("rocksdb-consumequeue", "storeType=defaultRocksDB", frozenset(), READ_ONLY),
    Feature("rocksdb-config", "RocksDB config storage", _ALL, READ_ONLY),
    # DLedger: every reader reads its entries' records (storage/dledger.py); recover and rebuild-cq
    # rebuild consume queues and index from the entries as a broker's start does.  Writing or
    # deleting entries needs DLedger's index units, term and checkpoint kept with them: refused
    Feature("dledger", "enableDLegerCommitLog", frozenset({"recover", "rebuild-cq"}), why={
        "append": "append writes commitlog records, not DLedger entries (header, index unit, term, "
                  "committed index): the group's replicas would disagree",
        "clean": "clean deletes whole commitlog files; DLedger's own cleaner also moves the ledger's begin "
                 "index and its index files, which clean does not",
        "salvage": "salvage writes a plain commitlog; a DLedger group's other replicas could not follow it"}),
    # a broker switched to DLedger mode: the old commitlog/ below dividedCommitlogOffset, DLedger's
    # entries above (storage/dledger.py's division).  Read, recovered and rebuilt as one commitlog;
    # clean expires the old files as DLedgerCommitLog.deleteExpiredFile does and keeps DLedger's
    Feature("dledger-switched", "enableDLegerCommitLog on a store with an old commitlog/ (dividedCommitlogOffset)",
            frozenset({"recover", "rebuild-cq", "clean"}), why={
        "append": "append writes commitlog records, not DLedger entries (header, index unit, term, committed "
                  "index), and the old commitlog below the division takes no more records",
        "salvage": "salvage writes a plain commitlog; a DLedger group's other replicas could not follow it"}),
    Feature("compaction", "cleanup.policy=COMPACTION", frozenset(), READ_ONLY),
    Feature("controller", "enableControllerMode", _ALL),
    Feature("transaction-table", "transaction/ (an old broker's state table)", frozenset(), READ_ONLY),
    Feature("unknown", "-", frozenset(), UNKNOWN),
)}

# top-level names: (feature, what it is)
_TOP = {
    "commitlog": ("store", "commitlog files"),
    "consumequeue": ("store", "consume queues"),
    "index": ("store", "index files"),
    "checkpoint": ("store", "the checkpoint"),
    "abort": ("store", "the abort marker (the broker did not shut down cleanly)"),
    "abort.bak": ("store", "5.x: the abort marker of the previous start"),
    "lock": ("store", "the lock file"),
    "config": ("store", "broker metadata"),
    TRASH_DIR: ("mqtool", "files `mqtool clean` staged (undo puts them back)"),
    QUARANTINE_DIR: ("mqtool", "bytes `mqtool recover` and `rebuild-cq` cut"),
    "lost+found": ("mqtool", "the file system's own folder"),
    "timerwheel": ("timer", "timer wheel: 7 x 86400 x 2 slots of 32 bytes"),
    "timerlog": ("timer", "timer log: 52-byte units pointing into the commitlog"),
    "consumequeue_ext": ("consumequeue-ext", "consume queue extensions (tags field holds an ext address)"),
    "batchconsumequeue": ("batch-cq", "batch consume queues (46-byte units)"),
    "compaction": ("compaction", "compacted topics' logs"),
    "epochFileCheckpoint": ("controller", "the controller's epoch file"),
    "epochFileCheckpoint.bak": ("controller", "the epoch file's previous version"),
    "brokerIdentity": ("controller", "the broker's controller identity"),
    "brokerIdentity.bak": ("controller", "the broker identity's previous version"),
    "transaction": ("transaction-table", "transaction state table and redo log"),
}

# config/ names: the broker's JSON files (each with its .bak, which a broker falls back to)
CONFIG_JSON = ("topics.json", "consumerOffset.json", "delayOffset.json", "subscriptionGroup.json",
               "topicQueueMapping.json", "lmqConsumerOffset.json", "consumerOrderInfo.json", "consumerFilter.json",
               "messageRequestMode.json", "transactionMetrics")
_CONFIG_TIMER = ("timercheck", "timermetrics")
_CONFIG_ROCKSDB_DIRS = ("consumerOffsets", "subscriptionGroups", "topics", "rdb")
_ROCKSDB_MARKERS = ("CURRENT", "IDENTITY", "OPTIONS-", "MANIFEST-")
LMQ_PREFIX = multidispatch.LMQ_PREFIX

# rebuild-cq stages its files in .rebuild-<pid>-<epoch ms>/ inside the store (mqtool/engine/rebuild.py)
_STAGING = re.compile(r"\.rebuild-(\d{1,10})-\d{1,20}\Z")


def staging_name(pid: int, millis: int) -> str:
    return f".rebuild-{pid}-{millis}"


def staging_pid(name: str) -> int | None:
    """The pid of the rebuild-cq run whose staging folder this is, or None when it is not one."""
    match = _STAGING.match(name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class Staging:
    """A rebuild-cq staging folder: its name, the run's pid, and whether that process is running
    (a dead run's staging is cleared by the next writer that holds the lock: rebuild-cq, recover)."""

    name: str
    pid: int
    alive: bool

    def to_json(self) -> dict:
        return {"path": self.name + "/", "pid": self.pid, "running": self.alive}

    def note(self) -> str:
        if self.alive:
            return f"{self.name}/: the staging folder of a rebuild-cq run (process {self.pid} is running)"
        return (f"{self.name}/: the staging folder of a killed rebuild-cq run (process {self.pid} is not running); "
                "the next rebuild-cq or recover clears it")


@dataclass
class Entry:
    """One thing in the store: a file or folder, the feature it belongs to, and mqtool's grasp of it."""

    path: str            # relative to the store's root
    feature: str
    what: str
    status: str
    files: int = 0
    bytes: int = 0

    def to_json(self) -> dict:
        return {"path": self.path, "feature": self.feature, "setting": FEATURES[self.feature].setting,
                "status": self.status, "what": self.what, "files": self.files, "bytes": self.bytes}


@dataclass(frozen=True)
class Link:
    """A symbolic link inside the store where mqtool writes (see `links`)."""

    path: str            # relative to the store's root
    target: str
    what: str            # what it leads to: a folder, a regular file, a dangling link...

    def to_json(self) -> dict:
        return {"path": self.path, "target": self.target, "what": self.what}

    def problem(self) -> str:
        return (f"{self.path}: a symbolic link to {self.target} ({self.what}); mqtool does not write through "
                "links in a store (only commitlog folders may be links, where storePathCommitLog puts them)")


@dataclass
class Census:
    root: Path
    entries: list[Entry] = field(default_factory=list)
    configured: set = field(default_factory=set)   # features the broker's settings turn on
    links: list[Link] = field(default_factory=list)
    declared: dict = field(default_factory=dict)    # feature -> where the broker's metadata declares it
    staging: list = field(default_factory=list)     # rebuild-cq staging folders (Staging)
    moved: list = field(default_factory=list)       # plain commitlog files in DLedger's data folder

    @property
    def features(self) -> set:
        return {e.feature for e in self.entries} | self.configured | set(self.declared)

    def unknown(self) -> list[Entry]:
        return [e for e in self.entries if e.status == UNKNOWN]

    def problems(self) -> list[str]:
        return ([f"{e.path}: not a file or folder of a RocketMQ store that mqtool knows" for e in self.unknown()]
                + [link.problem() for link in self.links])

    def refusal(self, writer: str) -> str | None:
        """Why `writer` must not change this store (the first reason), or None."""
        for link in self.links:
            return f"{link.problem()}: {writer} refused, nothing was changed"
        for path in self.moved:
            return f"{path}: {dledger.MOVED_BY_HAND}; {writer} refused, nothing was changed"
        for entry in self.unknown():
            return (f"{entry.path} is not part of a RocketMQ store that mqtool knows; {writer} cannot keep it "
                    "consistent (move it out of the store, or see `mqtool info`)")
        for name in self.not_kept(writer):
            feature = FEATURES[name]
            where = (", ".join(e.path for e in self.entries if e.feature == name) or self.declared.get(name)
                     or "the broker's settings")
            why = f": {feature.why[writer]}" if writer in feature.why else ""
            return (f"the store uses {name} ({feature.setting}: {where}), which {writer} cannot keep "
                    f"consistent{why}")
        return None

    def not_kept(self, writer: str) -> list[str]:
        """The store's features (unknown files aside) that `writer` does not keep consistent."""
        return [name for name in sorted(self.features)
                if name not in ("unknown", "mqtool") and writer not in FEATURES[name].kept_by]

    def refuse_unsafe(self, writer: str) -> None:
        reason = self.refusal(writer)
        if reason:
            raise RefusedError(reason, path=self.root)


def clear_killed_staging(root: Path) -> list[str]:
    """Remove the staging folders of killed rebuild-cq runs; a line for each, saying so.

    The caller holds the store's lock, so no other run is going on: every staging folder but this
    process's own is a killed run's (whatever its pid names now).  What it holds is rebuilt from
    the commitlog by any rebuild-cq: nothing of the store's data is lost with it."""
    import shutil

    cleared = []
    try:
        listing = fsutil.scandir(root)
    except OSError:
        return cleared
    for name, _, is_dir, _ in sorted(listing):
        pid = staging_pid(name)
        if not is_dir or pid is None or pid == os.getpid() or os.path.islink(root / name):
            continue
        shutil.rmtree(root / name, ignore_errors=True)
        cleared.append(f"cleared {name}/, the staging folder of a killed rebuild-cq run (process {pid}): "
                       "its files are rebuilt from the commitlog by any rebuild-cq")
    if cleared:
        fsutil.fsync_dir(root)
    return cleared


def _is_rocksdb(directory: Path) -> bool:
    try:
        names = [name for name, *_ in fsutil.scandir(directory)]
    except OSError:
        return False
    return any(name == m or (m.endswith("-") and name.startswith(m)) for name in names for m in _ROCKSDB_MARKERS)


def rocksdb_consume_queues(layout) -> bool:
    return "rocksdb-consumequeue" in _settings_features(layout.config) or _is_rocksdb(layout.consumequeue_dir)


def _has_compacted_topics(directory: Path) -> bool:
    """CompactionStore keeps compacted topics in compactionLog/ and compactionCq/; a 5.x broker
    leaves position-checkpoint alone there when no topic is compacted."""
    for sub in ("compactionLog", "compactionCq"):
        try:
            if fsutil.scandir(directory / sub):
                return True
        except OSError:
            continue
    return False


def _settings_features(config) -> set:
    """Features the broker's settings turn on, whether or not their files exist yet."""
    on = set()
    if config.enableDLegerCommitLog or config.storePathDLedgerCommitLog:
        on.add("dledger")
    if config.enableConsumeQueueExt:
        on.add("consumequeue-ext")
    if config.storeType.strip().lower() == "defaultrocksdb":
        on.add("rocksdb-consumequeue")
    if config.enableLmq or config.enableMultiDispatch:
        on.add("lmq")
    if config.enableControllerMode:
        on.add("controller")
    return on


def multi_dispatch(layout):
    """The broker's multi-dispatch settings (mqtool/formats/multidispatch.py), or None when it
    does not multi-dispatch.  enableMultiDispatch and enableLmq as given (--config/--set); a
    setting not given is taken as on when the store holds LMQ queues (a broker wrote them with
    both on), else off (RocketMQ's default)."""
    config = layout.config
    has_lmq = None

    def setting(given: bool | None) -> bool:
        nonlocal has_lmq
        if given is not None:
            return given
        if has_lmq is None:
            has_lmq = bool(_lmq_names(layout.consumequeue_dir))
        return has_lmq

    if not setting(config.enableMultiDispatch):
        return None
    return multidispatch.Settings(enable_lmq=setting(config.enableLmq), is_5x=config.is_5x)


def _lmq_names(cq_dir: Path) -> list[str]:
    try:
        listing = fsutil.scandir(cq_dir)
    except OSError:
        return []
    return [name for name, _, is_dir, _ in listing if is_dir and name.startswith(LMQ_PREFIX)]


def without_features(config):
    """config with the settings that turn consume-queue features on cleared (a new store that holds
    plain consume queues only, as salvage --drop-features writes)."""
    return config.replace(enableConsumeQueueExt=False, storeType="default", enableLmq=False,
                          enableMultiDispatch=False)


def take(layout) -> Census:
    """The census of the store `layout` describes (reads names and sizes only)."""
    root = layout.root
    census = Census(root)
    census.configured = _settings_features(layout.config)
    # a switched store, or one whose old commitlog files clean staged in trash/ (its undo puts them back)
    switched = layout.is_mixed() or (layout.dledger_dir is not None
                                     and layout.trash_holds(layout.config.commitlog_dirs()))
    if switched and "dledger" in census.configured:
        census.configured = (census.configured - {"dledger"}) | {"dledger-switched"}
    commitlog_dirs = {Path(d) for d in layout.commitlog_dirs + layout.readonly_commitlog_dirs}
    dledger_folders = set(dledger_dirs(root, layout.config))
    try:
        listing = fsutil.scandir(root)
    except OSError:
        listing = []
    for name, is_file, is_dir, st in sorted(listing):
        path = root / name
        if path in commitlog_dirs:
            feature, what = "store", ("the old commitlog's files, below dividedCommitlogOffset (a broker switched "
                                      "to DLedger mode)" if switched else "commitlog files")
        elif name in _TOP:
            feature, what = _TOP[name]
        elif path in dledger_folders and switched:
            feature, what = "dledger-switched", ("DLedger entries holding the commitlog's records above "
                                                 "dividedCommitlogOffset, their index and state")
        elif path in dledger_folders:
            feature, what = "dledger", "DLedger entries holding the commitlog's records, their index and state"
        elif is_dir and (pid := staging_pid(name)) is not None:
            staged = Staging(name, pid, fsutil.process_alive(pid))
            census.staging.append(staged)
            feature, what = "mqtool", ("rebuild-cq's staging (its run is going on)" if staged.alive else
                                       "the staging of a killed rebuild-cq run: the next rebuild-cq or recover "
                                       "clears it")
        elif is_dir:
            feature, what = "unknown", "a folder mqtool does not know"
        else:
            feature, what = "unknown", "a file mqtool does not know"
        if name == "consumequeue" and is_dir and _is_rocksdb(path):
            feature, what = "rocksdb-consumequeue", "consume queues in RocksDB (CURRENT, MANIFEST-*, *.sst)"
        if name == "compaction" and is_dir and not _has_compacted_topics(path):
            feature, what = "store", "5.x: the compaction service's positions (no compacted topic)"
        files, size = fsutil.tree_size(path) if is_dir else (1, st.st_size if st else 0)
        if not is_file and not is_dir:
            feature, what, files, size = "unknown", "neither a regular file nor a folder", 0, 0
        census.entries.append(Entry(name + ("/" if is_dir else ""), feature, what, FEATURES[feature].status,
                                    files, size))
        if name == "config" and is_dir:
            census.entries.extend(_config_entries(path))
        if name == "consumequeue" and feature == "store":
            census.entries.extend(_lmq_entries(path))
    census.links = links(layout)
    census.moved = dledger.moved_files(layout)
    batch = batch_topics(layout)
    if batch:
        census.declared["batch-cq"] = "config/topics.json: " + ", ".join(batch[:5]) + (" ..." if len(batch) > 5 else "")
    for extra_dir in commitlog_dirs:
        if extra_dir.parent != root and extra_dir.is_dir() and extra_dir.parent not in dledger_folders:
            files, size = fsutil.tree_size(extra_dir)
            census.entries.append(Entry(str(extra_dir) + "/", "store", "commitlog files (storePathCommitLog)",
                                        UNDERSTOOD, files, size))
    return census


def batch_topics(layout) -> list[str]:
    """Topics config/topics.json (or its .bak) declares BatchCQ (attributes queue.type=BatchCQ): a
    broker dispatches them into batchconsumequeue/, never consumequeue/, even before the folder
    exists (QueueTypeUtils.getCQType).  An unreadable topics.json declares nothing here."""
    from mqtool.errors import MqError
    from mqtool.storage.metafiles import load_config_json

    try:
        doc, _, _ = load_config_json(layout.config_dir / "topics.json")
    except (MqError, OSError):
        return []
    table = doc.get("topicConfigTable") if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        return []
    return sorted(str(name) for name, config in table.items() if isinstance(config, dict)
                  and isinstance(config.get("attributes"), dict)
                  and config["attributes"].get("queue.type") == "BatchCQ")


def _config_entries(config_dir: Path) -> list[Entry]:
    out = []
    for name, is_file, is_dir, st in sorted(fsutil.scandir(config_dir)):
        base = name[:-4] if name.endswith(".bak") else name[:-4] if name.endswith(".tmp") else name
        if is_file and base in CONFIG_JSON:
            feature, what = "config", "broker metadata JSON" + (" (backup)" if name != base else "")
        elif is_file and base in _CONFIG_TIMER:
            feature, what = "timer", "timer store checkpoint" if base == "timercheck" else "timer metrics"
        elif is_dir and name in _CONFIG_ROCKSDB_DIRS:
            feature, what = "rocksdb-config", "broker metadata in RocksDB"
        else:
            feature, what = "unknown", "a config file mqtool does not know"
        files, size = fsutil.tree_size(config_dir / name) if is_dir else (1, st.st_size)
        out.append(Entry(f"config/{name}" + ("/" if is_dir else ""), feature, what, FEATURES[feature].status,
                         files, size))
    return out


def _lmq_entries(cq_dir: Path) -> list[Entry]:
    """LMQ queues live among the consume queues, as %LMQ%<name>/0/ (MixAll.LMQ_PREFIX)."""
    lmq = _lmq_names(cq_dir)
    if not lmq:
        return []
    files = size = 0
    for name in lmq:
        f, s = fsutil.tree_size(cq_dir / name)
        files, size = files + f, size + s
    return [Entry(f"consumequeue/{LMQ_PREFIX}*/", "lmq", f"{len(lmq)} LMQ queue(s) (multi-dispatched units)",
                  FEATURES["lmq"].status, files, size)]


def links(layout) -> list[Link]:
    """The symbolic links where writers write: the store's own entries (checkpoint, lock, abort,
    index/, consumequeue/, quarantine/, trash/, config/...), the files of the commitlog, the index
    and every consume queue, and the topic and queue folders.

    The one rule for writing through links: never.  A write through a link lands outside the
    store (a `lock` link turns its target's first bytes into "lock"; an `abort` link overwrites
    its target), or in a place a broker's config never puts store files.  The one exception is
    what a broker's config itself may put anywhere: the commitlog folders (storePathCommitLog,
    readOnlyCommitLogStorePaths), so `commitlog -> /data2/commitlog` is fine."""
    root = Path(layout.root)
    allowed = {Path(d) for d in layout.commitlog_dirs + layout.readonly_commitlog_dirs}
    found = []

    def look(directory: Path) -> None:
        for name, target in sorted(fsutil.symlinks(directory).items()):
            path = directory / name
            if path not in allowed:
                what = fsutil.what_is(path) or "a regular file"
                found.append(Link(fsutil.shown_path(path, root), target, what))

    look(root)
    for directory in sorted(allowed):
        look(directory)
    for sub in ("index", "config"):
        look(root / sub)
    cq = root / "consumequeue"
    if not os.path.islink(cq) and os.path.isdir(cq):
        look(cq)
        for topic, _, topic_is_dir, _ in _listing(cq):
            if topic_is_dir and not os.path.islink(cq / topic):
                look(cq / topic)
                for queue, _, queue_is_dir, _ in _listing(cq / topic):
                    if queue_is_dir and not os.path.islink(cq / topic / queue):
                        look(cq / topic / queue)
    return found


def _listing(directory: Path) -> list:
    try:
        return fsutil.scandir(directory)
    except OSError:
        return []


