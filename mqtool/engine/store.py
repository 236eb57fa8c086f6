"""The embedded message store: open (lock, load, recover), put, reclaim, close; and the one gate
every writer passes (claim_store: the census's refusal, then the lock).

Opening does what a broker's DefaultMessageStore does: take a POSIX lock on `lock` (lock_store,
so mqtool and a broker exclude each other; refused with exit 3 if someone holds it), load the
commitlog, consume queues, checkpoint and index files (refusing files whose size or name a broker
would refuse), recover (engine/recovery.py: normal, or abnormal when `abort` is there), create
`abort`, and start the flush services (engine/flush.py) and the dispatch (engine/dispatch.py,
engine/indexservice.py).  Puts go through the commitlog writer (engine/commitlogwriter.py; batches
through engine/batchappend.py's compiled path), reclaim runs engine/reclaim/ (reclaim_dry_run: its
plan on a read-only view).  A clean close stops the services, flushes everything, writes the
checkpoint and removes `abort`; a crash leaves `abort` behind.
"""

from __future__ import annotations

import os
from pathlib import Path

from mqtool.engine import epochfile, reclaim, recovery
from mqtool.engine.clock import SystemClock
from mqtool.engine.combine import Combiner
from mqtool.engine.commitlogwriter import CommitLogWriter, Encoded
from mqtool.engine.diskusage import DiskUsage
from mqtool.engine.dispatch import Dispatcher, FlushConsumeQueueService
from mqtool.engine.flush import (
    FLUSH_DISK_TIMEOUT,
    CommitRealTimeService,
    FlushRealTimeService,
    GroupCommitService,
    TransientStorePool,
)
from mqtool.engine.indexservice import IndexService
from mqtool.engine.message import PUT_OK, MessageInner, PutResult
from mqtool.engine.quarantine import Quarantine
from mqtool.engine.storecheckpoint import StoreCheckpoint
from mqtool.errors import NotAStoreError, RefusedError
from mqtool.formats import markers
from mqtool.formats.consumequeue import UNIT_SIZE
from mqtool.formats.filenames import is_offset_name
from mqtool.storage import batchqueue, census, consumequeueext
from mqtool.storage.config import StoreConfig
from mqtool.storage.layout import describe_holder, discover
from mqtool.storage.mappedfilequeue import MappedFileQueue

FAST_BATCH = 64   # put_many batches from this size on take the compiled path (mqtool/engine/batchappend.py)


class MessageStore:
    def __init__(self, config: StoreConfig, *, clock=None, quarantine_dir=None, keep_cut_bytes: bool = True,
                 start_services: bool = True, store_host: str | None = None, disk_usage: DiskUsage | None = None,
                 writer: str = "append"):
        self.config = config
        self.writer_name = writer   # the command this store serves: the census refuses what it cannot keep
        self.clock = clock or SystemClock()
        self.disk_usage = disk_usage or DiskUsage()   # the reclaim rules' disk probe (tests pass their own)
        self.reclaimer: reclaim.Reclaimer | None = None
        self.root = Path(config.storePathRootDir)
        self.quarantine_dir = quarantine_dir
        self.keep_cut_bytes = keep_cut_bytes
        self.start_services = start_services
        self.store_host = store_host or f"{config.brokerIP1}:{config.listenPort}"
        self.opened = False
        self.last_exit_ok = True
        self.recovery_plan: recovery.RecoveryPlan | None = None
        self.notes: list[str] = []   # what opening did beside the recovery plan (the epoch file)
        self.dropped_index_files: list[Path] = []
        self._lock_fd = -1
        self._services = []
        self._owner = None
        self._combiner = Combiner(self.put_many)

    # ------------------------------------------------------------------ open
    def open(self, *, recovery_mode: str = "auto", dry_run: bool = False) -> "MessageStore":
        """Open the store (see the module docstring).  recovery_mode "normal" or "abnormal"
        overrides the choice the abort file makes.  dry_run: only plan the recovery
        (self.recovery_plan), change nothing, and leave the store closed again."""
        config = self.config
        if not dry_run:
            self.root.mkdir(parents=True, exist_ok=True)
        self.layout = discover(config, config_given=True, must_exist=dry_run)
        self._remember_owner()
        self._take_lock(write=not dry_run)
        try:
            self._load_and_recover(recovery_mode, dry_run)
        except BaseException:
            self._release_lock()
            raise
        if dry_run:
            self._unload()
            self._release_lock()
            return self
        self._attach_reclaim()
        self._write_abort()
        if self.start_services:
            self._start_services()
            self._start_reclaim_service()
        self.opened = True
        return self

    def _remember_owner(self) -> None:
        st = os.stat(self.root)
        self._owner = (st.st_uid, st.st_gid)

    def adopt(self, path) -> None:
        """Give a new file or directory the store directory's owner (when we may)."""
        uid, gid = self._owner
        try:
            st = os.stat(path)
            if (st.st_uid, st.st_gid) != (uid, gid) and os.geteuid() == 0:
                os.chown(path, uid, gid)
        except OSError:
            pass

    def _take_lock(self, write: bool = True) -> None:
        self._lock_fd = claim_store(self.layout, self.writer_name, write=write)
        if write:
            self.adopt(self.layout.lock_path)

    def _release_lock(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)   # closing drops the POSIX lock
            self._lock_fd = -1

    def _load_and_recover(self, recovery_mode: str = "auto", dry_run: bool = False) -> None:
        config = self.config
        layout = self.layout
        self.last_exit_ok = not layout.abort_path.exists()
        abnormal = {"auto": not self.last_exit_ok, "normal": False, "abnormal": True}[recovery_mode]
        self.pool = None
        if (config.transientStorePoolEnable and config.flushDiskType == "ASYNC_FLUSH"
                and config.brokerRole != "SLAVE"):
            self.pool = TransientStorePool(config.transientStorePoolSize, config.mappedFileSizeCommitLog)
        files = [f.path for f in layout.commitlog_files()]
        for f in layout.commitlog_files():
            if not is_offset_name(f.name):
                raise NotAStoreError("commitlog directory holds a file whose name is not an offset "
                                     "(a broker refuses to load it)", path=f.path)
        self.commitlog_queue = MappedFileQueue(
            files, config.mappedFileSizeCommitLog, writable=not dry_run, strict=True,
            directories=layout.commitlog_dirs, write_buffers=self.pool, on_create=self.adopt,
            preallocate=True,
            warm_ahead=(config.flushLeastPagesWhenWarmMapedFile * 4096 if config.warmMapedFileEnable else 0),
            append_with_pwrite=config.flushDiskType == "SYNC_FLUSH")
        self.checkpoint = StoreCheckpoint(layout.checkpoint_path, five_longs=config.is_5x, read_only=dry_run)
        if not dry_run:
            self.adopt(layout.checkpoint_path)
        self.index = IndexService(layout.index_dir, config.maxHashSlotNum, config.maxIndexNum,
                                  clock=self.clock, checkpoint=self.checkpoint, on_create=self.adopt)
        with_ext = consumequeueext.in_use(layout, self.writer_name)   # census: only writers that keep it
        self.dispatcher = Dispatcher(layout.consumequeue_dir, config.consume_queue_file_size(),
                                     index_service=self.index, checkpoint=self.checkpoint,
                                     message_index_enable=config.messageIndexEnable,
                                     on_create=self._adopt_tree, writable=not dry_run,
                                     multi_dispatch=census.multi_dispatch(layout),
                                     ext_dir=layout.consumequeue_ext_dir if with_ext else None,
                                     ext_file_size=layout.consume_queue_ext_file_size(),
                                     batch_dir=batchqueue.directory(layout),
                                     batch_topics=batchqueue.topic_names(layout),
                                     batch_file_size=batchqueue.file_size(layout))
        for topic, queue_id, _ in batchqueue.queues(layout):
            self.dispatcher.batch_queue(topic, queue_id)
        for topic, queue_id, _ in layout.consume_queues():
            self.dispatcher.queue(topic, queue_id)
            if with_ext and layout.consume_queue_ext_dir(topic, queue_id).is_dir():
                self.dispatcher.ext_queue(topic, queue_id)
        self.dropped_index_files = self.index.load(not abnormal, self.checkpoint.index_msg_timestamp,
                                                   writable=not dry_run)
        self.quarantine = Quarantine(self.root, base_dir=self.quarantine_dir, enabled=self.keep_cut_bytes,
                                     clock=self.clock)
        self.recovery_plan = recovery.plan(self, abnormal=abnormal)
        if dry_run:
            self._trim_epoch_file(dry_run=True)
            return
        recovery.apply(self, self.recovery_plan, self.quarantine)
        self._trim_epoch_file(dry_run=False)
        self.notes.extend(census.clear_killed_staging(self.root))   # the lock is ours: no run is going on
        self.writer = CommitLogWriter(self.commitlog_queue, config, self.clock, self.store_host)
        self.writer.topic_queue_table = {key: cq_max_offset(cq) for key, cq in self.dispatcher.queues.items()}

    def _trim_epoch_file(self, dry_run: bool) -> None:
        """Controller mode: epoch entries starting at or after a cut go, as the broker cuts them."""
        plan = self.recovery_plan
        self.notes = []
        if plan.data_end > plan.cut or plan.removed_files:
            note = epochfile.after_cut(self.layout, plan.cut, dry_run=dry_run)
            if note:
                self.notes.append(note)

    def _unload(self) -> None:
        """Unmap everything loaded, without flushing or writing anything."""
        self.checkpoint.close()
        self.dispatcher.close()
        self.index.close()
        self.commitlog_queue.close()
        if self.pool is not None:
            self.pool.close()

    def _adopt_tree(self, path) -> None:
        path = Path(path)
        for p in (path.parent.parent, path.parent, path):
            self.adopt(p)

    def _write_abort(self) -> None:
        # 5.x writes its pid; 4.x leaves it empty, but a broker only checks that it exists,
        # and the pid lets `info` name the process holding the lock
        content = str(os.getpid()).encode()
        with open(self.layout.abort_path, "wb") as fh:
            fh.write(content)
            fh.flush()
            os.fsync(fh.fileno())
        self.adopt(self.layout.abort_path)

    def _start_services(self) -> None:
        config = self.config
        on_flushed = self._physic_flushed
        if config.flushDiskType == "SYNC_FLUSH":
            self.flusher = GroupCommitService(self.commitlog_queue, on_flushed, config.syncFlushTimeout)
            self._services.append(self.flusher)
            self.committer = None
        else:
            self.flusher = FlushRealTimeService(self.commitlog_queue, config, on_flushed)
            self._services.append(self.flusher)
            self.committer = None
            if self.pool is not None:
                self.committer = CommitRealTimeService(self.commitlog_queue, config, self.flusher)
                self._services.append(self.committer)
        self.cq_flusher = FlushConsumeQueueService(self.dispatcher, self.checkpoint, config, self.writer.lock)
        self._services.append(self.cq_flusher)
        for service in self._services:
            service.start()

    def _physic_flushed(self, store_timestamp: int) -> None:
        self.checkpoint.physic_msg_timestamp = store_timestamp

    # ------------------------------------------------------------------- put
    def put(self, msg: MessageInner, *, wait_for_flush: bool = True) -> PutResult:
        """Put one message (a producer's send).

        Concurrent callers are combined (mqtool/engine/combine.py): one of them takes every
        message queued so far and puts them as one batch (one append pass, one fsync
        under SYNC_FLUSH) while the others sleep until their result is there.  A lone
        producer puts its message itself."""
        if not wait_for_flush:
            return self.put_many([msg], wait_for_flush=False)[0]
        return self._combiner.submit(msg)

    def put_many(self, messages, *, wait_for_flush: bool = True) -> list[PutResult]:
        """Put messages in order; with SYNC_FLUSH one group-commit request covers them all."""
        if not self.opened:
            raise RefusedError("the store is not open")
        # -- reclaim hook: above diskSpaceWarningLevelRatio puts are refused, saying why (mqtool/engine/reclaim/)
        refused = self.reclaimer.refuse_puts(len(messages))
        if refused is not None:
            return refused
        # -- end of reclaim hook
        if len(messages) >= FAST_BATCH:
            from mqtool.engine.batchappend import PlainBatch

            batch = PlainBatch.of_messages(messages)
            results = None if batch is None else self._append_compiled(batch, wait_for_flush)
            if results is not None:
                return results
        return self._put_reference(messages, wait_for_flush)

    def _put_reference(self, messages, wait_for_flush: bool) -> list[PutResult]:
        """Messages put one by one through the reference encoder (puts already let through)."""
        writer = self.writer
        encoded = [writer.encode(m) for m in messages]
        results: list[PutResult] = []
        ready = [e for e in encoded if isinstance(e, Encoded)]
        with writer.lock:
            appended = iter(writer.append_many(ready))
            self.dispatcher.dispatch_many([e.dispatch for e in ready])
        for enc in encoded:
            results.append(next(appended) if isinstance(enc, Encoded) else enc)
        self._after_append(results, wait_for_flush)
        return results

    def put_batch(self, batch, *, wait_for_flush: bool = True):
        """Put a PlainBatch or ColumnBatch (mqtool/engine/batchappend.py): the compiled path when
        every message in it is plain, else put_many of its messages."""
        if not self.opened:
            raise RefusedError("the store is not open")
        refused = self.reclaimer.refuse_puts(len(batch))
        if refused is not None:
            return refused
        results = self._append_compiled(batch, wait_for_flush)
        if results is None:      # not plain: the reference path (the compiled one would refuse again)
            results = self._put_reference(batch.to_messages(), wait_for_flush)
        return results

    def _append_compiled(self, batch, wait_for_flush: bool):
        """The compiled append of a batch, or None when a message in it is not plain."""
        from mqtool.engine import batchappend

        append = batchappend.append_columns if isinstance(batch, batchappend.ColumnBatch) else batchappend.append_batch
        with self.writer.lock:
            appended = append(self.writer, batch)
            if appended is not None:
                results, columns = appended
                batchappend.dispatch_columns(self.dispatcher, columns)
        if appended is None:
            return None
        return self._after_append(results, wait_for_flush) or results

    def _after_append(self, results, wait_for_flush: bool) -> None:
        if not self.start_services or not len(results):
            return
        if hasattr(results, "end_offset"):      # a compiled batch: every put is PUT_OK
            ok, end = results, results.end_offset()
        else:
            ok = [r for r in results if r.status == PUT_OK]
            if not ok:
                return
            end = max(r.wrote_offset + r.wrote_bytes for r in ok)
        if self.config.flushDiskType == "SYNC_FLUSH":
            if not wait_for_flush:
                self.flusher.wakeup()
                return
            if self.flusher.commit(end) != PUT_OK:
                if hasattr(results, "end_offset"):
                    results = list(results)
                for r in results:
                    if r.status == PUT_OK:
                        r.status = FLUSH_DISK_TIMEOUT
                return results
        elif self.committer is not None:
            self.committer.wakeup()
        else:
            self.flusher.wakeup()

    # --------------------------------------------------------------- reclaim
    # The rules are mqtool/engine/reclaim/'s; the store only wires them in: a Reclaimer over its live
    # files, the disk-full mark checked at open, and a service running them every
    # cleanResourceInterval ms, as a broker's cleanFilesPeriodically does.
    def _attach_reclaim(self) -> None:
        self.reclaimer = reclaim.Reclaimer(reclaim.StoreView(
            config=self.config, layout=self.layout, clock=self.clock, disk_usage=self.disk_usage,
            commitlog=self.commitlog_queue, queues=self.dispatcher.queues, index_files=self.index.files,
            lock=self.writer.lock, adopt=self.adopt, batch_queues=self.dispatcher.batch_queues))
        self.reclaimer.check_disk()

    def _start_reclaim_service(self) -> None:
        self.reclaim_service = reclaim.ReclaimService(self.reclaimer, self.config.cleanResourceInterval)
        self._services.append(self.reclaim_service)
        self.reclaim_service.start()

    def reclaim(self, policy: reclaim.Policy | None = None) -> reclaim.Report:
        """Run the reclaim rules now (what `mqtool clean` does); the default policy is a broker's."""
        return self.reclaimer.run(policy)

    def undo_reclaim(self, *, dry_run: bool = False) -> reclaim.Report:
        """Put files staged in STORE/trash/ back (`mqtool clean --undo`)."""
        return self.reclaimer.undo(dry_run=dry_run)

    # ----------------------------------------------------------------- close
    def flush_all(self) -> None:
        """Flush the commitlog, consume queues, index and checkpoint now."""
        with self.writer.lock:
            for _ in range(2):
                self.commitlog_queue.commit(0)
                self.commitlog_queue.flush(0)
            self.dispatcher.flush(0)
            self.index.flush()
        self.checkpoint.flush()

    def close(self) -> None:
        """A clean shutdown: everything flushed, checkpoint written, abort removed."""
        if not self.opened:
            return
        for service in reversed(self._services):
            service.shutdown()
        self._services = []
        self.flush_all()
        self.checkpoint.close()
        self.dispatcher.close()
        self.index.close()
        self.commitlog_queue.discard_preallocated()
        self.commitlog_queue.close()
        if self.pool is not None:
            self.pool.close()
        try:
            self.layout.abort_path.unlink()
        except FileNotFoundError:
            pass
        if self.config.is_5x:
            bak = self.root / markers.ABORT_BAK
            bak.touch()
            self.adopt(bak)
        from mqtool.storage import fsutil

        fsutil.fsync_dir(self.root)
        self._release_lock()
        self.opened = False

    def halt(self) -> None:
        """Stop as Runtime.halt would: no flush, no checkpoint, `abort` and any
        pre-created file stay behind (tests use it to make crashed stores)."""
        if not self.opened:
            return
        for service in self._services:
            service.halt()
        self._services = []
        self._unload()
        self._release_lock()
        self.opened = False

    def __enter__(self):
        return self.open() if not self.opened else self

    def __exit__(self, exc_type, exc, tb):
        self.close()


def reclaim_dry_run(config, layout, policy, *, undo: bool, clock, disk_usage):
    """`clean --dry-run`: the reclaim run's (or --undo's) report, planned on a read-only view of
    a store nobody holds (refused, exit 3, while a process holds its lock); a crashed store is
    planned on what its recovery (which the real run does first) leaves."""
    held = layout.in_use()
    if held is not None:
        raise RefusedError(f"the store is in use: {held['holder']} holds its lock file", path=layout.lock_path)
    leave_out = ()
    if layout.abort_path.exists():
        plan = MessageStore(config, writer="clean", clock=clock, disk_usage=disk_usage, start_services=False).open(
            dry_run=True).recovery_plan
        leave_out = set(plan.removed_files) | set(plan.empty_files)
    with reclaim.readonly_view(layout, config, clock=clock, disk_usage=disk_usage, leave_out=leave_out) as view:
        worker = reclaim.Reclaimer(view)
        return worker.undo(dry_run=True) if undo else worker.run(policy)


def claim_store(layout, writer: str, *, write: bool = True) -> int:
    """The gate every writer passes, in this order: refuse what the writer cannot keep
    consistent (the census), then take the lock (lock_store; its descriptor is returned).  A
    refused run has changed nothing."""
    census.take(layout).refuse_unsafe(writer)
    return lock_store(layout, write=write)


def lock_store(layout, *, write: bool = True) -> int:
    """Take the store's lock as a broker does, or refuse (exit 3) naming who holds it.

    Returns the descriptor to close to let go (-1 when a dry run finds no lock file: then
    there is nothing to lock and nothing is created).  write: create the file and write
    `lock` into it, as a broker's start does; a dry run leaves even its time alone, and opens it
    read-only with a read lock, so it needs no write access to the store."""
    path = layout.lock_path
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644) if write else os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return -1
    if not markers.try_lock(fd, shared=not write):
        os.close(fd)
        who = describe_holder(layout.lock_owner(markers.lock_holder(path)))["holder"]
        raise RefusedError(f"the store is in use: {who} holds its lock file", path=path)
    if write:
        os.pwrite(fd, markers.LOCK_CONTENT, 0)
        os.fsync(fd)
    return fd


def cq_max_offset(cq) -> int:
    """The next queue offset of a consume queue (its max offset in queue)."""
    last = cq.files.last_file
    if last is None:
        return 0
    return (last.file_from_offset + last.wrote_position) // UNIT_SIZE
