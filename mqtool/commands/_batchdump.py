"""How `dump` shows batch consume queues (5.x BatchCQ topics): one row per 46-byte unit."""

from __future__ import annotations

from mqtool.cli import output
from mqtool.forensics import storeinfo
from mqtool.formats import batchconsumequeue as fmt
from mqtool.formats.filenames import name_to_offset
from mqtool.storage import batchqueue


def dump_batch_queues(queues, filters, ctx, display) -> None:
    """queues: (topic, queueId, [(FileInfo, units)]) as batchqueue reads them."""
    tally = ctx["tally"]
    table = None if ctx["json"] else output.TableStream("batchconsumequeue", [
        ("topic", {}), ("queue", {"justify": "right"}), ("msgBaseOffset", {"justify": "right"}),
        ("batch", {"justify": "right"}), ("commitlog offset", {"justify": "right"}), ("size", {"justify": "right"}),
        ("tagsCode", {"justify": "right"}), ("store time (UTC)", {}), ("file", {}), ("byte", {"justify": "right"})])
    for topic, queue_id, files in queues:
        if not filters.queue_ok(topic, queue_id):
            continue
        for info, units in files:
            for n, unit in enumerate(units.tolist()):
                if tally.full():
                    break
                offset, size, tags, store_time, base, batch, compacted, reserved = unit
                if not (filters.offset_ok(offset) and filters.time_ok(store_time) and filters.queue_offset_ok(base)):
                    continue
                tally.records += 1
                tally.shown += 1
                at = n * fmt.UNIT_SIZE
                if ctx["json"]:
                    output.emit_json({"type": "batch_unit", "topic": topic, "queueId": queue_id,
                                      "file": display(info.path), "fileOffset": at,
                                      "logicalOffset": name_to_offset(info.name) + at, "commitLogOffset": offset,
                                      "size": size, "tagsCode": tags, "storeTimestamp": store_time,
                                      "msgBaseOffset": base, "batchSize": batch, "compactedOffset": compacted,
                                      "reserved": reserved})
                else:
                    table.add(topic, queue_id, base, batch, offset, size, tags, storeinfo.iso(store_time),
                              display(info.path), at)
    if ctx["json"]:
        output.emit_json({"type": "summary", "kind": "batchconsumequeue", "units": tally.records,
                          "shown": tally.shown})
    else:
        table.flush()
        output.note(f"{tally.records} batch consume queue units")


def store_queues(layout):
    for topic, queue_id, directory in batchqueue.queues(layout):
        yield topic, queue_id, batchqueue.queue_units(directory)


def file_queue(path):
    topic, queue = path.parent.parent.name, path.parent.name
    yield topic, int(queue) if queue.isdigit() else -1, [(_info(path), batchqueue.read_units(path))]


def _info(path):
    from mqtool.storage.layout import FileInfo

    st = path.stat()
    return FileInfo(path, path.name, st.st_size, st.st_mtime)
