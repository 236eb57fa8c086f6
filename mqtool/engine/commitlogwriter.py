"""Appending messages to the commitlog, as CommitLog.asyncPutMessage does.

Per message: the store time and body CRC are set; a delayed message (delay
level > 0, not a prepared/rollback record) moves to SCHEDULE_TOPIC_XXXX,
queue level-1, with REAL_TOPIC/REAL_QID added and its properties
re-serialised; IPv6 hosts set their sysFlag bits; the record is encoded
outside the lock.  Under the lock it gets its queue offset (per topic and
queue; prepared and rollback records get 0 and do not advance it), its
physical offset and the store time, and is appended to the last file, or,
when record + 8 bytes do not fit, a BLANK record closes the file and the
record goes into a new one.

Checks, in the broker's order: topic name (a topic is a directory name),
properties longer than 32767 characters (MESSAGE_ILLEGAL), properties longer
than 32767 UTF-8 bytes (PROPERTIES_SIZE_EXCEEDED), a body over maxMessageSize
or a record over maxMessageSize + 64 KiB (MESSAGE_ILLEGAL).
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

from mqtool.engine.javamap import properties_to_string
from mqtool.engine.message import MESSAGE_ILLEGAL, PROPERTIES_SIZE_EXCEEDED, PUT_OK, MessageInner, PutResult
from mqtool.formats import sysflag
from mqtool.formats.commitlog import (
    BLANK,
    END_FILE_MIN_BLANK_LENGTH,
    HEAD_FORMAT,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LENGTH,
    STORE_TIMESTAMP_FORMAT,
    TAIL_FORMAT,
    record_length,
)
from mqtool.formats.crc import body_crc
from mqtool.formats.hosts import java_host
from mqtool.formats.javastr import java_length, tags_code
from mqtool.formats.properties import DELAY, KEYS, REAL_QID, REAL_TOPIC, TAGS, UNIQ_KEY, delay_level
from mqtool.storage import topics
from mqtool.formats.topicnames import SCHEDULE_TOPIC
from mqtool.storage.dispatchrequest import DispatchRequest

# the record's runs of fixed-size fields (formats/commitlog.py derives them from the schema)
_HEAD = struct.Struct(HEAD_FORMAT)                  # totalSize .. bornTimestamp
_STORE_TIMESTAMP = struct.Struct(STORE_TIMESTAMP_FORMAT)
_TAIL = struct.Struct(TAIL_FORMAT)                  # reconsumeTimes, preparedTransactionOffset, bodyLength
_I32 = struct.Struct(">i")                          # a host's port
_I16 = struct.Struct(">h")                          # the V2 topic length, the properties length
_U8 = struct.Struct(">B")                           # the V1 topic length


@dataclass(slots=True)
class Encoded:
    """A record encoded outside the lock, waiting for its offsets and store time.

    The record is head (packed under the lock, with queue offset, physical
    offset) + born host + store time (also under the lock) + rest."""

    msg: MessageInner
    length: int
    magic: int
    crc: int
    sys_flag: int
    born: bytes
    rest: bytes
    topic: str
    queue_id: int
    counts: bool          # advances its queue's offset (not prepared/rollback)
    store_address: bytes
    store_port: int
    dispatch: DispatchRequest


def rewrite_delayed(props, topic: str, queue_id: int, max_level: int, *, trailing_separator: bool):
    """The store's delay step: (properties string, topic, queue, level) for a delayed message, else None.

    The level is clamped to the highest (DELAY keeps its place in the map),
    REAL_TOPIC and REAL_QID are put, the map is serialised again (so a WAIT the
    broker put back reappears) and the message moves to SCHEDULE_TOPIC_XXXX,
    queue level-1."""
    level = delay_level(props.get(DELAY))
    if level <= 0:
        return None
    if level > max_level:
        level = max_level
        props[DELAY] = str(level)
    props[REAL_TOPIC] = topic
    props[REAL_QID] = str(queue_id)
    return (properties_to_string(props, trailing_separator=trailing_separator),
            SCHEDULE_TOPIC, level - 1, level)


class CommitLogWriter:
    def __init__(self, queue, config, clock, store_host: str):
        self.queue = queue
        self.config = config
        self.clock = clock
        self.store_host = store_host
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.lock = threading.Lock()
        self.delay_levels = config.delay_levels_ms()
        self.max_body = config.maxMessageSize
        self.max_record = config.maxMessageSize + 64 * 1024
        self.five = config.is_5x

    # ----------------------------------------------------------------- encode
    def encode(self, msg: MessageInner) -> Encoded | PutResult:
        """Validate and encode one message (no lock needed); a PutResult means refused."""
        problem = topics.topic_problem(msg.topic, topics.LONGEST_DIRECTORY_NAME if self.five else topics.TOPIC_MAX_LENGTH)
        if problem is not None:
            return PutResult(MESSAGE_ILLEGAL, topic=msg.topic, queue_id=msg.queue_id, remark=problem)
        text = msg.properties_string or ""
        if len(text) > MAX_PROPERTIES_LENGTH // 2 and java_length(text) > MAX_PROPERTIES_LENGTH:
            return PutResult(MESSAGE_ILLEGAL, topic=msg.topic, queue_id=msg.queue_id,
                             remark="properties longer than 32767 characters")
        if sysflag.is_dispatched_to_consume_queue(msg.sys_flag) and msg.delay_level > 0 \
                and not msg.verbatim:
            self._rewrite_delayed(msg)
        topic, queue_id = msg.topic, msg.queue_id
        props = (msg.properties_string or "").encode("utf-8", "surrogatepass")
        if len(props) > MAX_PROPERTIES_LENGTH:
            return PutResult(PROPERTIES_SIZE_EXCEEDED, topic=topic, queue_id=queue_id,
                             remark=f"properties are {len(props)} UTF-8 bytes, more than 32767")
        body = msg.body if type(msg.body) is bytes else bytes(msg.body)
        if len(body) > self.max_body:
            return PutResult(MESSAGE_ILLEGAL, topic=topic, queue_id=queue_id,
                             remark=f"body of {len(body)} bytes exceeds maxMessageSize {self.max_body}")
        sys_flag = msg.sys_flag
        store_host = msg.store_host or self.store_host
        born_addr, born_port, v6 = java_host(msg.born_host, bool(sys_flag & sysflag.BORNHOST_V6))
        if v6:
            sys_flag |= sysflag.BORNHOST_V6
        store_addr, store_port, v6 = java_host(store_host, bool(sys_flag & sysflag.STOREHOST_V6))
        if v6:
            sys_flag |= sysflag.STOREHOST_V6
        topic_bytes = topic.encode("utf-8")
        magic = MAGIC_V2 if (self.five and self.config.autoMessageVersionOnTopicLen
                             and len(topic) > 127) else MAGIC_V1
        length = record_length(sys_flag, len(body), len(topic_bytes), len(props), magic)
        if length > self.max_record:
            return PutResult(MESSAGE_ILLEGAL, topic=topic, queue_id=queue_id,
                             remark=f"record of {length} bytes exceeds the maximum")
        rest = b"".join((
            store_addr, _I32.pack(store_port), _TAIL.pack(msg.reconsume_times, msg.prepared_transaction_offset,
                                                          len(body)),
            body, _I16.pack(len(topic_bytes)) if magic == MAGIC_V2 else _U8.pack(len(topic_bytes)),
            topic_bytes, _I16.pack(len(props)), props))
        properties = msg.properties
        dispatch = DispatchRequest(topic, queue_id, -1, length, tags_code(properties.get(TAGS)), 0, 0,
                                   properties.get(KEYS, "") or "", properties.get(UNIQ_KEY),
                                   sys_flag, msg.prepared_transaction_offset)
        return Encoded(msg, length, magic, body_crc(body), sys_flag, born_addr + _I32.pack(born_port), rest,
                       topic, queue_id, sysflag.is_dispatched_to_consume_queue(sys_flag),
                       store_addr, store_port, dispatch)

    def _rewrite_delayed(self, msg: MessageInner) -> None:
        delayed = rewrite_delayed(msg.properties, msg.topic, msg.queue_id, len(self.delay_levels),
                                  trailing_separator=self.five)
        if delayed is not None:
            msg.properties_string, msg.topic, msg.queue_id, _ = delayed

    # ----------------------------------------------------------------- append
    def append(self, enc: Encoded) -> PutResult:
        """Append one encoded record; the caller holds self.lock."""
        return self.append_many([enc])[0]

    def append_many(self, encoded: list[Encoded]) -> list[PutResult]:
        """Append records in order, one write per file touched; the caller holds self.lock."""
        queue = self.queue
        table = self.topic_queue_table
        now = self.clock.now_ms
        mf = queue.get_last_mapped_file(0)
        total = sum(enc.length for enc in encoded)
        queue.make_room(mf, total)
        base, pos, size = mf.file_from_offset, mf.wrote_position, mf.file_size
        chunks: list[bytes] = []
        results: list[PutResult] = []
        last_ts = 0
        for enc in encoded:
            length = enc.length
            if length + END_FILE_MIN_BLANK_LENGTH > size - pos:
                chunks.append(BLANK.build({"totalSize": size - pos}))   # only its 8 header bytes
                mf.append(b"".join(chunks))
                mf.wrote_position = size  # the BLANK declares the rest of the file
                mf.store_timestamp = last_ts or mf.store_timestamp
                chunks = []
                mf = queue.get_last_mapped_file(0)
                queue.make_room(mf, total)
                base, pos, size = mf.file_from_offset, mf.wrote_position, mf.file_size
            msg = enc.msg
            store_ts = msg.store_timestamp if msg.store_timestamp is not None else now()
            key = (enc.topic, enc.queue_id)
            queue_offset = table.get(key, 0) if enc.counts else 0
            wrote_offset = base + pos
            chunks.append(_HEAD.pack(length, enc.magic, enc.crc, enc.queue_id, msg.flag, queue_offset,
                                     wrote_offset, enc.sys_flag, msg.born_timestamp))
            chunks.append(enc.born)
            chunks.append(_STORE_TIMESTAMP.pack(store_ts))
            chunks.append(enc.rest)
            pos += length
            last_ts = store_ts
            if enc.counts:
                table[key] = queue_offset + 1
            d = enc.dispatch
            d.commitlog_offset = wrote_offset
            d.store_timestamp = store_ts
            d.queue_offset = queue_offset
            if enc.topic == SCHEDULE_TOPIC and msg.delay_level > 0:   # the delivery time is the tags code
                level = min(msg.delay_level, len(self.delay_levels))
                d.tags_code = store_ts + self.delay_levels[level - 1]
            results.append(PutResult(PUT_OK, wrote_offset, length, enc.store_address, queue_offset, store_ts,
                                     enc.topic, enc.queue_id, None, enc.store_port))
        if chunks:
            mf.append(b"".join(chunks))
            mf.store_timestamp = last_ts
        return results
