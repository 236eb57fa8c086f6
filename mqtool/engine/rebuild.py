"""Rebuilding consume queues (and the index) from the commitlog, and salvaging a damaged store.

rebuild: the commitlog is the truth.  Its valid prefix (up to the first
damage, as a broker's recovery would see it) is dispatched again into a
staging directory inside the store (outside consumequeue/ and index/, so a
broker never sees half a rebuild); then each rebuilt queue replaces the old
one, which goes to the quarantine.  The files are those a broker writes for
the same commitlog, byte for byte.

salvage: every intact record of a damaged store (magic code and CRC check)
is copied, as it is, into a new store, skipping damaged regions the way the
walker resynchronises; the source is only read.  The new store is built aside, in
.<OUT>.salvage-<pid>-<ms>/ next to OUT, and renamed to OUT only when complete: a
killed salvage leaves no OUT, and the next one clears what it left.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from mqtool.engine import recovery
from mqtool.engine.dispatch import Dispatcher
from mqtool.engine.indexservice import IndexService
from mqtool.engine.message import MessageInner
from mqtool.engine.quarantine import Quarantine
from mqtool.engine.redispatch import part_tasks, redispatch, scanned_on
from mqtool.engine.storecheckpoint import StoreCheckpoint
from mqtool.errors import RefusedError
from mqtool.native.warmup import Stopwatch
from mqtool.formats import batchconsumequeue as batch_format
from mqtool.formats.commitlog import Record
from mqtool.storage import batchqueue, census, commitlog, consumequeueext, dledger, fsutil, topics
from mqtool.storage.commitlog import Problem
from mqtool.storage.layout import list_store_files


@dataclass
class RebuildReport:
    start: int
    end: int
    records: int = 0
    units: int = 0
    keys: int = 0
    queues: list = field(default_factory=list)           # (topic, queue id, units)
    removed_queues: list = field(default_factory=list)   # queues on disk with no record left
    unsafe_topics: dict = field(default_factory=dict)
    stop: Problem | None = None
    seconds: float = 0.0          # the rebuild
    load_seconds: float = 0.0     # loading the compiled kernels first (about 0.15 s in a fresh process)
    quarantine: str | None = None
    cleared: list = field(default_factory=list)   # killed runs' staging folders cleared first (census)

    def to_json(self) -> dict:
        return {"type": "rebuild", "start": self.start, "end": self.end, "records": self.records,
                "units": self.units, "keys": self.keys,
                "queues": [{"topic": t, "queueId": q, "units": u} for t, q, u in self.queues],
                "removedQueues": [{"topic": t, "queueId": q} for t, q in self.removed_queues],
                "unsafeTopics": self.unsafe_topics,
                "stop": self.stop.to_json() if self.stop else None, "seconds": round(self.seconds, 3),
                "loadSeconds": round(self.load_seconds, 3), "quarantine": self.quarantine,
                "clearedStaging": self.cleared}


def rebuild(layout, *, topics_wanted=None, with_index: bool = False, dry_run: bool = False,
            keep_old: bool = True, quarantine_dir=None, clock=None, on_progress=None,
            engine=None) -> RebuildReport:
    """Rebuild consume queues (all, or those of topics_wanted) and, with_index, the index.
    The caller has claimed the store (store.claim_store: the census, then the lock).  engine
    (a SparkEngine): the commitlog's parts are
    walked, checked and parsed as its tasks; the files are written here, in commitlog order."""
    with_ext = consumequeueext.in_use(layout, "rebuild-cq")
    from mqtool.native import appendkernels, fastscan

    config = layout.config
    stopwatch = Stopwatch().warm_up(fastscan.warm_up, *([appendkernels.warm_up_index] if with_index else []))
    queue = commitlog.open_queue(layout, strict=True)
    try:
        if queue.empty_file is not None:
            raise RefusedError("a 0-byte newest commitlog file (a crash while it was being created, or "
                               "lost data): run `mqtool recover` first", path=queue.empty_file)
        files = queue.files
        start = files[0].file_from_offset if files else 0
        if dry_run or not files:
            end, _, stop, _ = recovery.walk_for_recovery(queue, 0, config.checkCRCOnRecover)
            report = RebuildReport(start, end, stop=stop, load_seconds=stopwatch.load_seconds)
            killed = [s for s in census.take(layout).staging if not s.alive]
            if dry_run:
                report.cleared = [f"would clear {s.name}/, the staging folder of a killed rebuild-cq run "
                                  f"(process {s.pid})" for s in killed]
            else:
                report.cleared = census.clear_killed_staging(layout.root)
            report.seconds = stopwatch.seconds
            return report
        report = RebuildReport(start, start, load_seconds=stopwatch.load_seconds)
        report.cleared = census.clear_killed_staging(layout.root)
        stage = layout.root / census.staging_name(os.getpid(), int(time.time() * 1000))
        stage.mkdir()
        try:
            checkpoint = StoreCheckpoint(layout.checkpoint_path, five_longs=config.is_5x)
            index = None
            if with_index:
                index = IndexService(stage / "index", config.maxHashSlotNum, config.maxIndexNum,
                                     clock=clock or _Clock(), checkpoint=checkpoint)
            dispatcher = Dispatcher(stage / "consumequeue", config.consume_queue_file_size(), index_service=index,
                                    checkpoint=checkpoint, message_index_enable=with_index,
                                    multi_dispatch=census.multi_dispatch(layout),
                                    ext_dir=stage / "consumequeue_ext" if with_ext else None,
                                    ext_file_size=layout.consume_queue_ext_file_size(),
                                    batch_dir=stage / "batchconsumequeue", batch_topics=batchqueue.topic_names(layout),
                                    batch_file_size=batchqueue.file_size(layout))
            wanted = set(topics_wanted) if topics_wanted else None
            entries = None
            if engine is not None:
                entries = scanned_on(engine, layout, part_tasks(queue, start, config.checkCRCOnRecover, True))
            done = redispatch(queue, dispatcher, start, dledger.dispatch_end(layout, queue), config.delay_levels_ms(),
                              index=with_index,
                              topic_filter=(lambda t: t in wanted) if wanted else None, on_progress=on_progress,
                              check_crc=config.checkCRCOnRecover, stop_at_damage=True, entries=entries)
            report.records, report.units, report.keys = done.records, done.units, done.keys
            report.end = done.end
            report.stop = done.problems[0] if done.problems else None
            report.unsafe_topics = done.unsafe_topics
            for (topic, queue_id), cq in sorted(dispatcher.queues.items()):
                last = cq.files.last_file
                count = (last.file_from_offset + last.wrote_position) // 20 - cq.min_offset() if last else 0
                report.queues.append((topic, queue_id, count))
            for (topic, queue_id), bq in sorted(dispatcher.batch_queues.items()):
                report.queues.append((topic, queue_id, bq.files.max_wrote_offset // batch_format.UNIT_SIZE))
            dispatcher.flush(0)
            if index is not None:
                index.flush()
            built = set(dispatcher.queues)
            dispatcher.close()
            if index is not None:
                index.close()
            quarantine = Quarantine(layout.root, base_dir=quarantine_dir, enabled=keep_old, clock=clock)
            report.removed_queues = _swap_in(layout, stage, built, wanted, with_index, quarantine)
            if with_ext:
                _swap_in_tree(layout.consumequeue_ext_dir, stage / "consumequeue_ext", wanted, quarantine,
                              "consume queue extension file replaced by rebuild-cq")
            _swap_in_tree(batchqueue.directory(layout), stage / "batchconsumequeue", wanted, quarantine,
                          "batch consume queue file replaced by rebuild-cq")
            report.quarantine = str(quarantine.dir) if quarantine.dir else None
            checkpoint.flush()
            checkpoint.close()
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    finally:
        queue.close()
    report.seconds = stopwatch.seconds
    return report


def _swap_in(layout, stage: Path, built: set, wanted, with_index: bool, quarantine) -> list:
    """Old queues (and index files) to the quarantine, rebuilt ones in their place."""
    removed = []
    for topic, queue_id, directory in layout.consume_queues():
        if wanted is not None and topic not in wanted:
            continue
        for info in layout.consume_queue_files(directory):
            quarantine.move_file(info.path, "consume queue file replaced by rebuild-cq")
        if (topic, queue_id) not in built:
            removed.append((topic, queue_id))
            _remove_empty(directory)
    for topic, queue_id in sorted(built):
        _move_in(stage / "consumequeue" / topic / str(queue_id), layout.consumequeue_dir / topic / str(queue_id))
    if with_index:
        for info in layout.index_files():
            quarantine.move_file(info.path, "index file replaced by rebuild-cq --index")
        _move_in(stage / "index", layout.index_dir)
    return removed


def _swap_in_tree(root: Path, staged: Path, wanted, quarantine, reason: str) -> None:
    """The old files of the rebuilt topics' queues under root (extension files, batch consume
    queues: <topic>/<queueId>/) to the quarantine, the rebuilt ones from staged in their place."""
    for topic in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if wanted is not None and topic.name not in wanted:
            continue
        for directory in sorted(p for p in topic.iterdir() if p.is_dir()):
            for info in list_store_files(directory):
                quarantine.move_file(info.path, reason)
            _remove_empty(directory)
    for topic in sorted(staged.iterdir()) if staged.is_dir() else []:
        for source in sorted(topic.iterdir()):
            _move_in(source, root / topic.name / source.name)


def _move_in(source: Path, target: Path) -> None:
    """The staged files of source (if any) into target, made if need be; then target's entries
    are made durable."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(source.iterdir()) if source.is_dir() else []:
        os.replace(path, target / path.name)
    fsutil.fsync_dir(target)


def _remove_empty(directory: Path) -> None:
    try:
        directory.rmdir()
        directory.parent.rmdir()
    except OSError:
        pass


class _Clock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


# -------------------------------------------------------------------- salvage

@dataclass
class SalvageReport:
    copied: int = 0
    skipped_records: int = 0          # structurally whole, but the body CRC fails
    skipped_bytes: int = 0
    damage: list = field(default_factory=list)      # Problems met
    unsafe_topics: dict = field(default_factory=dict)
    dangling_prepared: int = 0        # commit/rollback records whose prepared record was lost

    def to_json(self) -> dict:
        return {"type": "salvage", "copied": self.copied, "skippedRecords": self.skipped_records,
                "skippedBytes": self.skipped_bytes, "damage": [p.to_json() for p in self.damage],
                "unsafeTopics": self.unsafe_topics, "danglingPrepared": self.dangling_prepared}


def _salvage_staging(target: Path) -> re.Pattern:
    return re.compile(re.escape(f".{target.name}.salvage-") + r"(\d{1,10})-\d{1,20}\Z")


def killed_salvages(target: Path) -> list[tuple[Path, int]]:
    """(folder, pid) of the partial new stores killed salvage runs into target left beside it
    (their process is not running)."""
    pattern = _salvage_staging(target)
    found = []
    try:
        names = os.listdir(target.parent)
    except OSError:
        return found
    for name in sorted(names):
        match = pattern.match(name)
        path = target.parent / name
        if match and path.is_dir() and not path.is_symlink() and not fsutil.process_alive(int(match.group(1))):
            found.append((path, int(match.group(1))))
    return found


def salvage_into(layout, config, *, open_store, on_progress=None) -> tuple[SalvageReport, list[str]]:
    """salvage() into the new store config.storePathRootDir (OUT, missing or empty), built aside
    and renamed into place when complete.  open_store(config) opens a MessageStore.  Returns the
    report and what was cleared first (partial stores of killed runs into the same OUT)."""
    target = Path(config.storePathRootDir)
    cleared = []
    for path, pid in killed_salvages(target):
        shutil.rmtree(path, ignore_errors=True)
        cleared.append(f"cleared {path}, the partial new store of a killed salvage (process {pid}); "
                       "this run starts over")
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = target.parent / f".{target.name}.salvage-{os.getpid()}-{int(time.time() * 1000)}"
    try:
        with open_store(config.replace(storePathRootDir=str(stage))) as engine:
            report = salvage(layout, engine, on_progress=on_progress)
        try:
            os.rename(stage, target)     # an empty OUT is replaced; a non-empty one (made meanwhile) is not
        except OSError as exc:
            raise RefusedError(f"OUT is no longer a new or empty directory ({exc.strerror}); nothing was "
                               "put there", path=target) from None
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    fsutil.fsync_dir(target.parent)
    return report, cleared


def salvage(layout, target_store, *, batch: int = 1024, on_progress=None) -> SalvageReport:
    """Copy every intact record of layout's commitlog into target_store (an open MessageStore)."""
    report = SalvageReport()
    moved: dict[int, int] = {}    # old commitlog offset -> new, for preparedTransactionOffset
    pending: list[tuple[int, MessageInner]] = []

    def flush() -> None:
        results = target_store.put_many([m for _, m in pending])
        for (old, _), result in zip(pending, results):
            if result.ok:
                moved[old] = result.wrote_offset
                report.copied += 1
        pending.clear()

    queue = commitlog.open_queue(layout)
    try:
        for entry in commitlog.walk(queue, check_crc=True):
            if isinstance(entry, Problem):
                report.damage.append(entry)
                report.skipped_bytes += entry.skipped
                continue
            if not isinstance(entry, Record):
                continue
            if on_progress is not None:
                on_progress(entry.total_size)
            if not entry.crc_ok():
                report.skipped_records += 1
                report.skipped_bytes += entry.total_size
                continue
            topic = entry.topic
            if not topics.is_safe_directory_name(topic):
                report.unsafe_topics[topic] = report.unsafe_topics.get(topic, 0) + 1
                continue
            prepared = entry.prepared_transaction_offset
            if prepared:
                if pending and prepared in {old for old, _ in pending}:
                    flush()
                if prepared in moved:
                    prepared = moved[prepared]
                else:
                    report.dangling_prepared += 1
            pending.append((entry.offset, MessageInner(
                topic=topic, queue_id=entry.queue_id, body=bytes(entry.body), properties=entry.properties,
                properties_string=entry.properties_string, flag=entry.flag, sys_flag=entry.sys_flag,
                born_timestamp=entry.born_timestamp, born_host=entry.born_host, store_host=entry.store_host,
                reconsume_times=entry.reconsume_times, prepared_transaction_offset=prepared,
                store_timestamp=entry.store_timestamp, verbatim=True)))
            if len(pending) >= batch:
                flush()
        if pending:
            flush()
    finally:
        queue.close()
    return report

