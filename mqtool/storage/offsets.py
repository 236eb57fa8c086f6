"""The consumers' and the delay scheduler's progress, as a broker keeps it in config/: which files
hold it (consumerOffset.json, or lmqConsumerOffset.json with enableLmq; delayOffset.json for the 4.x
delay levels), each read as the broker reads it (a missing, empty or damaged file falls back to its
.bak, metafiles.load_config_json).  `clean` (who loses unread messages) and `lag` read them here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.errors import MqError
from mqtool.formats import configjson
from mqtool.formats.topicnames import SCHEDULE_TOPIC
from mqtool.storage import metafiles

OFFSETS, LMQ_OFFSETS, DELAY_OFFSETS = "consumerOffset.json", "lmqConsumerOffset.json", "delayOffset.json"
# what a file that is there and cannot be read raises on the way (a value that is no number, ...)
_BAD = (MqError, ValueError, TypeError, AttributeError, OverflowError)


@dataclass
class OffsetFile:
    name: str                  # consumerOffset.json, ... (in config/)
    exists: bool               # the file itself is there
    read: str | None = None    # the file read: it, its .bak, or None
    note: str | None = None    # what was fallen back to (metafiles.load_config_json's note)
    error: str | None = None   # neither it nor its .bak could be read

    def to_json(self) -> dict:
        return {"file": f"config/{self.name}", "exists": self.exists,
                "read": f"config/{self.read}" if self.read else None, "note": self.note, "error": self.error}


@dataclass
class ConsumerOffsets:
    """{(topic, group): {queueId: offset}} from the files read; a group found in two files
    counts at its lower offset (never hiding what it has not read)."""

    table: dict = field(default_factory=dict)
    files: list[OffsetFile] = field(default_factory=list)

    @property
    def known(self) -> bool:
        """Some file was read, so consumed can be told from unread."""
        return any(f.read for f in self.files)

    @property
    def unreadable(self) -> bool:
        return any(f.error for f in self.files)


def offset_files(layout) -> list[str]:
    """The files that hold the consumers' offsets: a broker with enableLmq keeps them all in
    lmqConsumerOffset.json (LmqConsumerOffsetManager), one without in consumerOffset.json; with
    the setting not given, whichever of the two are there (consumerOffset.json when neither is)."""
    enable_lmq = layout.config.enableLmq
    if enable_lmq is not None:
        return [LMQ_OFFSETS if enable_lmq else OFFSETS]
    there = [name for name in (OFFSETS, LMQ_OFFSETS) if (layout.config_dir / name).exists()]
    return there or [OFFSETS]


def _load(layout, name: str):
    """(document or None, OffsetFile) for config/<name>; a file that cannot be read is said, not raised."""
    path = layout.config_dir / name
    found = OffsetFile(name, path.exists())
    try:
        doc, read, found.note = metafiles.load_config_json(path)
        found.read = read.name if read is not None else None
        return doc, found
    except _BAD as exc:
        found.error = str(exc)
        return None, found


def consumer_offsets(layout) -> ConsumerOffsets:
    result = ConsumerOffsets()
    for name in offset_files(layout):
        doc, found = _load(layout, name)
        result.files.append(found)
        try:
            table = configjson.consumer_offsets(doc) if doc is not None else {}
        except _BAD as exc:
            found.error, found.read = str(exc), None
            continue
        for reader, offsets in table.items():
            mine = result.table.setdefault(reader, {})
            for queue_id, offset in offsets.items():
                mine[queue_id] = min(offset, mine.get(queue_id, offset))
    return result


def delay_offsets(layout) -> tuple[dict[int, int], OffsetFile]:
    """delayOffset.json's offsetTable ({delay level: offset}, ScheduleMessageService): the delay
    scheduler's progress in SCHEDULE_TOPIC_XXXX, whose queue level - 1 holds the level's messages."""
    doc, found = _load(layout, DELAY_OFFSETS)
    try:
        table = configjson.whole_numbers(configjson.offset_table(doc, "offsetTable", "{delayLevel: offset}"),
                                         "offsetTable", "{delayLevel: offset}")
    except _BAD as exc:
        found.error, found.read = str(exc), None
        return {}, found
    return table, found


def level_queue(level: int) -> int:
    """The SCHEDULE_TOPIC_XXXX queue of a delay level (ScheduleMessageService.delayLevel2QueueId)."""
    return level - 1
