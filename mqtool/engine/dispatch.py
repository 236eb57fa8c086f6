"""From commitlog records to consume-queue units and index entries (CommitLogDispatcher).

Every stored record is dispatched once: a unit into its topic/queue's consume
queue (prepared and rollback records get none) and its keys into the index.
The store dispatches right after each append, and recovery re-dispatches the
commitlog from a point it trusts.  A topic only becomes a directory when it is
a valid topic name, whatever a (possibly damaged) commitlog says.
"""

from __future__ import annotations

import time
from pathlib import Path

from mqtool.engine.dispatchrule import by_record, decide, queue_directory, refused
from mqtool.engine.flush import RETRY_TIMES_OVER, ServiceThread
from mqtool.formats import multidispatch
from mqtool.storage.batchqueue import BatchQueue
from mqtool.storage.consumequeue import ConsumeQueue
from mqtool.storage.consumequeueext import ExtQueue
from mqtool.storage.dispatchrequest import DispatchRequest


class UnsafeTopic(Exception):
    """A record's topic cannot be a directory name; it is reported, never dispatched."""


class Dispatcher:
    def __init__(self, consumequeue_dir: Path, cq_file_size: int, *, index_service=None,
                 checkpoint=None, message_index_enable: bool = True, on_create=None, writable: bool = True,
                 multi_dispatch: multidispatch.Settings | None = None, ext_dir: Path | None = None,
                 ext_file_size: int = 0, batch_dir: Path | None = None, batch_topics=frozenset(),
                 batch_file_size: int = 0):
        self.consumequeue_dir = Path(consumequeue_dir)
        self.cq_file_size = cq_file_size
        self.index = index_service
        self.checkpoint = checkpoint
        self.message_index_enable = message_index_enable
        self.on_create = on_create
        self.writable = writable     # False: queues are mapped read-only (a recovery's dry run)
        self.multi_dispatch = multi_dispatch   # enableMultiDispatch on: LMQ units too (census.multi_dispatch)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.unsafe_names: dict[str, int] = {}   # multi-dispatch queue names that cannot be directories
        self.ext_dir = Path(ext_dir) if ext_dir is not None else None   # enableConsumeQueueExt: ext units
        self.ext_file_size = ext_file_size
        self.ext_queues: dict[tuple[str, int], ExtQueue] = {}
        # BatchCQ topics (queue.type=BatchCQ) go to batch_dir/<topic>/<queueId>/, never consume queues
        self.batch_dir = Path(batch_dir) if batch_dir is not None else None
        self.batch_topics = frozenset(batch_topics) if self.batch_dir is not None else frozenset()
        self.batch_file_size = batch_file_size
        self.batch_queues: dict[tuple[str, int], BatchQueue] = {}

    def queue(self, topic: str, queue_id: int, *, create: bool = True) -> ConsumeQueue | None:
        key = (topic, queue_id)
        cq = self.queues.get(key)
        if cq is None and create:
            if refused(topic) or not queue_directory(queue_id):
                raise UnsafeTopic(f"topic {topic!r} / queue {queue_id} cannot be a consume queue directory")
            directory = self.consumequeue_dir / topic / str(queue_id)
            cq = ConsumeQueue(topic, queue_id, directory, self.cq_file_size, writable=self.writable,
                              strict=True, on_create=self.on_create)
            self.queues[key] = cq
        return cq

    def dispatch(self, req: DispatchRequest, *, own: bool = True, units: bool = True, keys: bool = True) -> int:
        """The record's unit, its multi-dispatched units and its keys, as a broker's reput puts them;
        returns the units put.  own=False leaves the record's own unit and keys out (a rebuild of
        other topics' queues still takes its multi-dispatched units); units / keys: write the
        queues' units / the index entries at all.  What goes where is dispatchrule.decide's."""
        decision = decide(req)
        if decision.refused:
            self.refuse(req.topic)
            return 0
        put = 0
        if units and req.topic in self.batch_topics:
            if own and decision.unit:
                put = self.put_batch(req)
        elif units and decision.unit:
            fresh = True
            if own:
                fresh = self.queue(req.topic, req.queue_id).put(req.commitlog_offset, req.size, self.own_tags(req),
                                                                req.queue_offset)
                put = 1
            if fresh:
                self.note_dispatched(req.store_timestamp)
                put += self.dispatch_multi(req)
        if keys and own and decision.indexed and self.message_index_enable and self.index is not None:
            self.index.build_index(req)
        return put

    def refuse(self, name: str, count: int = 1) -> None:
        """Count records (or multi-dispatch queue names) whose topic cannot be a directory."""
        self.unsafe_names[name] = self.unsafe_names.get(name, 0) + count

    def note_dispatched(self, store_timestamp: int) -> None:
        """The checkpoint's logics time follows the last record given a unit."""
        if self.checkpoint is not None:
            self.checkpoint.logics_msg_timestamp = store_timestamp

    def own_tags(self, req: DispatchRequest) -> int:
        """What the record's own unit holds as its tags code: with enableConsumeQueueExt the address
        of an ext unit (tags code, store time) appended first, as putMessagePositionInfoWrapper
        does (also for a record whose unit turns out to be there already)."""
        if self.ext_dir is None:
            return req.tags_code
        return self.ext_queue(req.topic, req.queue_id).put(req.tags_code, req.store_timestamp)

    def ext_queue(self, topic: str, queue_id: int) -> ExtQueue:
        """The extension file queue of a consume queue (its files loaded, when it has some)."""
        key = (topic, queue_id)
        queue = self.ext_queues.get(key)
        if queue is None:
            queue = ExtQueue(self.ext_dir / topic / str(queue_id), self.ext_file_size, writable=self.writable,
                             on_create=self.on_create)
            self.ext_queues[key] = queue
        return queue

    def batch_queue(self, topic: str, queue_id: int) -> BatchQueue:
        """A batch topic's queue (its files loaded, when it has some)."""
        key = (topic, queue_id)
        queue = self.batch_queues.get(key)
        if queue is None:
            if refused(topic) or not queue_directory(queue_id):
                raise UnsafeTopic(f"topic {topic!r} / queue {queue_id} cannot be a batch consume queue directory")
            queue = BatchQueue(topic, queue_id, self.batch_dir / topic / str(queue_id), self.batch_file_size,
                               writable=self.writable, on_create=self.on_create)
            self.batch_queues[key] = queue
        return queue

    def put_batch(self, req: DispatchRequest) -> int:
        """BatchConsumeQueue.putMessagePositionInfoWrapper: a record without INNER_BASE and INNER_NUM
        gets no unit; returns the units put."""
        if req.msg_base_offset < 0 or req.batch_size < 0:
            return 0
        self.batch_queue(req.topic, req.queue_id).put(req.commitlog_offset, req.size, req.tags_code,
                                                      req.store_timestamp, req.msg_base_offset, req.batch_size)
        self.note_dispatched(req.store_timestamp)
        return 1

    def dispatch_multi(self, req: DispatchRequest) -> int:
        """The units a broker with enableMultiDispatch adds after the record's own one (its tags
        code, not an ext address); a name that cannot be a directory is counted in unsafe_names,
        never made a path."""
        if self.multi_dispatch is None or req.multi is None:
            return 0
        put = 0
        for name, queue_id, queue_offset in multidispatch.targets(req.topic, req.queue_id, req.multi,
                                                                  self.multi_dispatch):
            if refused(name):
                self.refuse(name)
                continue
            self.queue(name, queue_id).put(req.commitlog_offset, req.size, req.tags_code, queue_offset)
            put += 1
        return put

    def dispatch_many(self, requests: list[DispatchRequest]) -> None:
        """dispatch() for a batch: units grouped per queue, keys hashed together."""
        if not requests:
            return
        if len(requests) == 1:
            self.dispatch(requests[0])
            return
        per_queue: dict[tuple[str, int], list] = {}
        last_ts = 0
        ext = self.ext_dir is not None
        if any(by_record(req, self.batch_topics, ext, self.multi_dispatch) for req in requests):
            for req in requests:        # one by one: the further queues' units in commitlog order
                self.dispatch(req)
            return
        indexed = []
        for req in requests:
            decision = decide(req)
            if decision.refused:
                self.refuse(req.topic)
                continue
            if decision.unit:
                per_queue.setdefault((req.topic, req.queue_id), []).append(
                    (req.commitlog_offset, req.size, req.tags_code, req.queue_offset))
                last_ts = req.store_timestamp
            indexed.append(req)
        for (topic, queue_id), units in per_queue.items():
            self.queue(topic, queue_id).put_many(units)
        if last_ts:
            self.note_dispatched(last_ts)
        if self.message_index_enable and self.index is not None:
            self.index.build_many(indexed)

    def flush(self, least_pages: int) -> None:
        for cq in list(self.queues.values()):
            cq.flush(least_pages)
        for queue in list(self.ext_queues.values()) + list(self.batch_queues.values()):
            queue.flush(least_pages)

    def max_physic_offset(self) -> int:
        return max((cq.max_physic_offset for cq in self.queues.values()), default=-1)

    def close(self) -> None:
        for cq in self.queues.values():
            cq.close()
        for queue in list(self.ext_queues.values()) + list(self.batch_queues.values()):
            queue.close()
        self.queues, self.ext_queues, self.batch_queues = {}, {}, {}


class FlushConsumeQueueService(ServiceThread):
    """Flushes consume queues every flushIntervalConsumeQueue ms (least pages
    flushConsumeQueueLeastPages, everything every flushConsumeQueueThoroughInterval),
    then the checkpoint, whose logics time is the one taken before that flush."""

    name = "FlushConsumeQueueService"

    def __init__(self, dispatcher: Dispatcher, checkpoint, config, lock):
        super().__init__()
        self.dispatcher = dispatcher
        self.checkpoint = checkpoint
        self.config = config
        self.lock = lock
        self.last_flush_timestamp = 0

    def do_flush(self, retry: int) -> None:
        least = 0 if retry == RETRY_TIMES_OVER else self.config.flushConsumeQueueLeastPages
        logics = 0
        now = int(time.monotonic() * 1000)
        if now >= self.last_flush_timestamp + self.config.flushConsumeQueueThoroughInterval:
            self.last_flush_timestamp = now
            least = 0
            logics = self.checkpoint.logics_msg_timestamp
        with self.lock:
            self.dispatcher.flush(least)
        if least == 0:
            if logics > 0:
                self.checkpoint.logics_msg_timestamp = logics
            self.checkpoint.flush()

    def run(self) -> None:
        while not self.stopped:
            self.wait_for_running(self.config.flushIntervalConsumeQueue)
            self.do_flush(1)
        if not self.halted:
            self.do_flush(RETRY_TIMES_OVER)
