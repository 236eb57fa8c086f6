"""The store as reclaim sees it (StoreView): the open store's live queues, or a read-only view
of a store on disk for `clean` and its dry runs.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from mqtool.errors import MqError

# ---------------------------------------------------------------------- the store as reclaim sees it

@dataclass
class StoreView:
    """What the rules need of a store: its files (live objects of an open store, or read-only
    maps for a dry run), its clock and disk probe, and the lock appends take."""

    config: object
    layout: object
    clock: object
    disk_usage: object
    commitlog: object                    # MappedFileQueue
    queues: dict                         # (topic, queueId) -> ConsumeQueue
    index_files: list                    # IndexFile, oldest first
    lock: object = field(default_factory=contextlib.nullcontext)
    adopt: object = None                 # gives new trash directories the store's owner
    writable: bool = True
    batch_queues: dict = field(default_factory=dict)   # (topic, queueId) -> BatchQueue (BatchCQ topics)


@contextlib.contextmanager
def readonly_view(layout, config, *, clock, disk_usage, leave_out=()):
    """A view over a store nobody has open, mapped read-only: for plans (--dry-run) that must
    change nothing, not even by recovering.  leave_out: commitlog files a recovery would remove
    (beyond its cut), which a real run never sees."""
    from mqtool.storage import batchqueue, commitlog, consumequeue
    from mqtool.storage.indexfile import IndexFile

    queue = commitlog.open_queue(layout)
    for mf in [mf for mf in queue.files if mf.path in leave_out]:
        queue.files.remove(mf)
        mf.close()
    queues, index_files, batch = {}, [], {}
    try:
        for cq in consumequeue.open_all(layout):
            queues[(cq.topic, cq.queue_id)] = cq
        size = batchqueue.file_size(layout)
        for topic, queue_id, directory in batchqueue.queues(layout):
            batch[(topic, queue_id)] = batchqueue.BatchQueue(topic, queue_id, directory, size)
        slots, entries = layout.index_geometry()
        for info in layout.index_files():
            try:
                index_files.append(IndexFile(info.path, slots, entries))
            except MqError:
                continue
        yield StoreView(config=config, layout=layout, clock=clock, disk_usage=disk_usage, commitlog=queue,
                        queues=queues, index_files=index_files, writable=False, batch_queues=batch)
    finally:
        queue.close()
        for cq in list(queues.values()) + list(batch.values()):
            cq.close()
        for f in index_files:
            f.close()
