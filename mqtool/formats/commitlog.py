"""Commitlog records: MessageVersion V1 and V2, and the BLANK end-of-file record.

Layout (big-endian), as CommitLog.DefaultAppendMessageCallback writes it:

    totalSize i32 | magicCode u32 | bodyCRC i32 | queueId i32 | flag i32
    queueOffset i64 | physicalOffset i64 | sysFlag i32 | bornTimestamp i64
    bornHost (4+4 or 16+4) | storeTimestamp i64 | storeHost (4+4 or 16+4)
    reconsumeTimes i32 | preparedTransactionOffset i64
    bodyLength i32, body | topicLength (i8 in V1, i16 in V2), topic
    propertiesLength i16, properties

V2 (magic 0xDAA320AB) differs only in the 2-byte topic length; only 5.x
brokers write or read it.  A BLANK record (magic 0xCBD43194) closes a file
whose remaining space is too small for the next record: its size field is the
number of bytes left, but only its 8 header bytes are written.

`RECORD` is the reference schema.  `decode_record` is the fast decoder used by
the hot loops; tests/test_formats_roundtrip.py checks it against `RECORD`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from construct import (
    Adapter,
    Bytes,
    Const,
    Default,
    GreedyBytes,
    IfThenElse,
    Int8sb,
    Int16sb,
    Int32sb,
    Int32ub,
    Int64sb,
    OneOf,
    Prefixed,
    Rebuild,
    Struct,
    this,
)

from mqtool.formats import fixedfields, sysflag
from mqtool.formats.crc import body_crc
from mqtool.formats.fixedfields import inner, struct_format
from mqtool.formats.hosts import format_host, parse_host
from mqtool.formats.properties import decode_properties

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194
MESSAGE_MAGICS = (MAGIC_V1, MAGIC_V2)

END_FILE_MIN_BLANK_LENGTH = 4 + 4  # CommitLog: a record needs length + 8 <= space left
MAX_TOPIC_LENGTH_V1 = 127  # Byte.MAX_VALUE
MAX_PROPERTIES_LENGTH = 32767  # Short.MAX_VALUE


def topic_length_size(magic: int) -> int:
    return TOPIC_LENGTH_SIZE_V2 if magic == MAGIC_V2 else TOPIC_LENGTH_SIZE_V1


def record_length(sys_flag: int, body_length: int, topic_length: int, properties_length: int,
                  magic: int = MAGIC_V1) -> int:
    """CommitLog.calMsgLength: the totalSize of a record with these parts (the layout below)."""
    born = HOST_V6_SIZE if sys_flag & sysflag.BORNHOST_V6 else HOST_V4_SIZE
    store = HOST_V6_SIZE if sys_flag & sysflag.STOREHOST_V6 else HOST_V4_SIZE
    return (BORN_HOST_AT + born + STORE_HOST_AFTER_BORN_HOST + store + BODY_IN_TAIL + max(body_length, 0)
            + topic_length_size(magic) + topic_length + PROPERTIES_LENGTH_SIZE + max(properties_length, 0))


class _Utf8(Adapter):
    """UTF-8 text, lossless: undecodable bytes survive a round trip as surrogate escapes."""

    def _decode(self, obj, context, path):
        return obj.decode("utf-8", "surrogateescape")

    def _encode(self, obj, context, path):
        return obj.encode("utf-8", "surrogateescape")


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


class _Host(Adapter):
    """A socket address shown in Java's text form, `ip:port` or `[v6]:port`."""

    def __init__(self, width: int):
        super().__init__(Struct("address" / Bytes(width), "port" / Int32sb))
        self.width = width

    def _decode(self, obj, context, path):
        return format_host(obj.address, obj.port)

    def _encode(self, obj, context, path):
        address, port = parse_host(obj, self.width)
        return {"address": address, "port": port}


def _host(v6_bit: int):
    return IfThenElse(lambda ctx: ctx.sysFlag & v6_bit, _Host(16), _Host(4))


def _total_size(ctx) -> int:
    # totalSize is built first, before magicCode's Default has filled the magic in
    return record_length(ctx.sysFlag, len(ctx.body), _utf8_len(ctx.topic),
                         _utf8_len(ctx.properties), ctx.get("magicCode", MAGIC_V1))


RECORD = Struct(
    "totalSize" / Rebuild(Int32sb, _total_size),
    "magicCode" / Default(OneOf(Int32ub, MESSAGE_MAGICS), MAGIC_V1),
    "bodyCRC" / Default(Int32sb, lambda ctx: body_crc(ctx.body)),
    "queueId" / Int32sb,
    "flag" / Int32sb,
    "queueOffset" / Int64sb,
    "physicalOffset" / Int64sb,
    "sysFlag" / Int32sb,
    "bornTimestamp" / Int64sb,
    "bornHost" / _host(sysflag.BORNHOST_V6),
    "storeTimestamp" / Int64sb,
    "storeHost" / _host(sysflag.STOREHOST_V6),
    "reconsumeTimes" / Int32sb,
    "preparedTransactionOffset" / Int64sb,
    "body" / Prefixed(Int32sb, GreedyBytes),
    "topic" / IfThenElse(this.magicCode == MAGIC_V2,
                         _Utf8(Prefixed(Int16sb, GreedyBytes)),
                         _Utf8(Prefixed(Int8sb, GreedyBytes))),
    "properties" / _Utf8(Prefixed(Int16sb, GreedyBytes)),
)
"""One message record; parse(bytes) and build(dict) are exact inverses."""

BLANK = Struct(
    "totalSize" / Int32sb,
    "magicCode" / Const(BLANK_MAGIC, Int32ub),
)
"""The end-of-file marker; totalSize is the space left in the file."""

RECORD_HEADER = Struct("totalSize" / Int32sb, "magicCode" / Int32ub)
"""The 8 bytes every entry starts with: enough to tell a record, a BLANK or garbage apart."""
BLANK_HEADER_SIZE = RECORD_HEADER.sizeof()   # a BLANK record writes only these: totalSize and magic


# ---------------------------------------------------------------- the layout, from RECORD
# Where each field lies, derived from the schema above: the one statement of the record's layout
# that the compiled kernels (native/, forensics/verify/kernels.py), the writers and recovery read
# fields by.  A record is three runs of fixed-size fields with a variable part after each: the
# head (totalSize .. bornTimestamp) then bornHost, storeTimestamp then storeHost, the tail
# (reconsumeTimes, preparedTransactionOffset, bodyLength) then the body, topic and properties.
# tests/test_formats_roundtrip.py checks these against RECORD.parse of real records.

def _field(name: str):
    return next(sub for sub in RECORD.subcons if sub.name == name)


def _run(first: str) -> dict:
    """The run of fixed-size fields from `first` on (fixedfields.run): name -> (offset from the
    run's start, struct format), up to the first field of variable size (format None)."""
    names = [sub.name for sub in RECORD.subcons]
    return fixedfields.run(RECORD.subcons[names.index(first):])


HEAD_FIELDS = _run("totalSize")           # totalSize .. bornTimestamp, then bornHost
STORE_FIELDS = _run("storeTimestamp")     # from the end of bornHost: storeTimestamp, then storeHost
TAIL_FIELDS = _run("reconsumeTimes")      # from the end of storeHost: .., bodyLength, then the body

TOTAL_SIZE_AT = HEAD_FIELDS["totalSize"][0]
MAGIC_AT = HEAD_FIELDS["magicCode"][0]
BODY_CRC_AT = HEAD_FIELDS["bodyCRC"][0]
QUEUE_ID_AT = HEAD_FIELDS["queueId"][0]
FLAG_AT = HEAD_FIELDS["flag"][0]
QUEUE_OFFSET_AT = HEAD_FIELDS["queueOffset"][0]
PHYSICAL_OFFSET_AT = HEAD_FIELDS["physicalOffset"][0]
SYS_FLAG_AT = HEAD_FIELDS["sysFlag"][0]
BORN_TIMESTAMP_AT = HEAD_FIELDS["bornTimestamp"][0]
BORN_HOST_AT = HEAD_FIELDS["bornHost"][0]
HOST_V4_SIZE = inner(_field("bornHost")).elsesubcon.sizeof()     # address and port
HOST_V6_SIZE = inner(_field("bornHost")).thensubcon.sizeof()
HOST_PORT_SIZE = next(sub for sub in inner(_field("bornHost")).elsesubcon.subcon.subcons
                      if sub.name == "port").sizeof()                  # after the address
STORE_HOST_AFTER_BORN_HOST = STORE_FIELDS["storeHost"][0]       # storeTimestamp lies between
RECONSUME_TIMES_IN_TAIL = TAIL_FIELDS["reconsumeTimes"][0]       # the tail starts where storeHost ends
PREPARED_OFFSET_IN_TAIL = TAIL_FIELDS["preparedTransactionOffset"][0]
BODY_LENGTH_IN_TAIL = TAIL_FIELDS["body"][0]
BODY_IN_TAIL = BODY_LENGTH_IN_TAIL + inner(_field("body")).lengthfield.sizeof()
TOPIC_LENGTH_SIZE_V1 = inner(inner(_field("topic")).elsesubcon).lengthfield.sizeof()
TOPIC_LENGTH_SIZE_V2 = inner(inner(_field("topic")).thensubcon).lengthfield.sizeof()
PROPERTIES_LENGTH_SIZE = inner(_field("properties")).lengthfield.sizeof()


HEAD_FORMAT = struct_format(HEAD_FIELDS, "bornTimestamp")
STORE_TIMESTAMP_FORMAT = struct_format(STORE_FIELDS, "storeTimestamp")    # ">q"
TAIL_FORMAT = struct_format(TAIL_FIELDS, "preparedTransactionOffset") + inner(_field("body")).lengthfield.fmtstr[1:]

MIN_RECORD_LENGTH = record_length(0, 0, 0, 0)
assert BLANK.sizeof() == BLANK_HEADER_SIZE


# ---------------------------------------------------------------- fast decoder

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_ENTRY_HEADER = fixedfields.fixed_struct(RECORD_HEADER)
_PHYSICAL = struct.Struct(HEAD_FIELDS["physicalOffset"][1])
_PHYSICAL_END = PHYSICAL_OFFSET_AT + _PHYSICAL.size
_HOST_BITS = sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6


def _fixed_part(sys_flag: int) -> struct.Struct:
    """Everything from totalSize up to and including bodyLength, for these host widths."""
    born = "16si" if sys_flag & sysflag.BORNHOST_V6 else "4si"
    store = "16si" if sys_flag & sysflag.STOREHOST_V6 else "4si"
    return struct.Struct(HEAD_FORMAT + born + STORE_TIMESTAMP_FORMAT[1:] + store + TAIL_FORMAT[1:])


_FIXED = {bits: _fixed_part(bits)
          for bits in (0, sysflag.BORNHOST_V6, sysflag.STOREHOST_V6, _HOST_BITS)}


@dataclass(slots=True)
class Record:
    """A decoded message record. `offset` is where it was found in the commitlog."""

    offset: int
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_address: bytes
    born_port: int
    store_timestamp: int
    store_address: bytes
    store_port: int
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes
    topic_bytes: bytes
    properties_bytes: bytes

    @property
    def version(self) -> int:
        return 2 if self.magic == MAGIC_V2 else 1

    @property
    def topic(self) -> str:
        return self.topic_bytes.decode("utf-8", "replace")

    @property
    def properties_string(self) -> str:
        return self.properties_bytes.decode("utf-8", "replace")

    @property
    def properties(self) -> dict[str, str]:
        return decode_properties(self.properties_string)

    @property
    def born_host(self) -> str:
        return format_host(self.born_address, self.born_port)

    @property
    def store_host(self) -> str:
        return format_host(self.store_address, self.store_port)

    def computed_body_crc(self) -> int:
        return body_crc(self.body)

    def crc_ok(self) -> bool:
        return self.computed_body_crc() == self.body_crc

    def to_schema_dict(self) -> dict:
        """The same record in the shape RECORD.parse returns (for cross-checks)."""
        return {
            "totalSize": self.total_size, "magicCode": self.magic, "bodyCRC": self.body_crc,
            "queueId": self.queue_id, "flag": self.flag, "queueOffset": self.queue_offset,
            "physicalOffset": self.physical_offset, "sysFlag": self.sys_flag,
            "bornTimestamp": self.born_timestamp, "bornHost": self.born_host,
            "storeTimestamp": self.store_timestamp, "storeHost": self.store_host,
            "reconsumeTimes": self.reconsume_times,
            "preparedTransactionOffset": self.prepared_transaction_offset,
            "body": bytes(self.body),
            "topic": self.topic_bytes.decode("utf-8", "surrogateescape"),
            "properties": self.properties_bytes.decode("utf-8", "surrogateescape"),
        }


class Blank:
    """A BLANK end-of-file record found at `offset`, declaring `total_size` bytes."""

    __slots__ = ("offset", "total_size")

    def __init__(self, offset: int, total_size: int):
        self.offset = offset
        self.total_size = total_size


class RecordError(Exception):
    """Bytes at `offset` are not a valid record; `reason` says why in one line."""

    def __init__(self, offset: int, reason: str, kind: str):
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.kind = kind
        self.truncated: str | None = None    # bad-size: what to say when this is where the file was cut


END_OF_DATA = None
"""decode_entry's answer for all-zero space: the file's written part ends here."""


def decode_record_header(buf, pos: int) -> tuple[int, int]:
    """(totalSize, magicCode): the 8 bytes (RECORD_HEADER) every record and BLANK starts with, at
    buf[pos:] (the caller checks they are there)."""
    return _ENTRY_HEADER.unpack_from(buf, pos)


def begins_record(head) -> bool:
    """Do these bytes begin with a record's or a BLANK's header: 8 bytes whose magicCode is one of
    theirs (the test DLedgerCommitLog.checkMessageAndReturnSize makes)?"""
    return len(head) >= BLANK_HEADER_SIZE and decode_record_header(head, 0)[1] in (*MESSAGE_MAGICS, BLANK_MAGIC)


def decode_entry(buf, pos: int, limit: int, base_offset: int = 0):
    """Decode the entry at buf[pos:] without reading past buf[:limit].

    Returns a Record, a Blank, or END_OF_DATA (a zero header: the unwritten
    tail of a file); raises RecordError for anything else.  base_offset is the
    commitlog offset of buf[0], so records report absolute offsets.
    """
    offset = base_offset + pos
    if limit - pos < 8:
        if any(buf[pos:limit]):
            raise RecordError(offset, f"{limit - pos} stray bytes at the end of the file", "truncated")
        return END_OF_DATA
    total_size, magic = decode_record_header(buf, pos)
    if magic == BLANK_MAGIC:
        if total_size < BLANK_HEADER_SIZE or total_size != limit - pos:
            raise RecordError(offset, f"BLANK record declares {total_size} bytes but "
                                      f"{limit - pos} remain in the file", "bad-blank")
        return Blank(offset, total_size)
    if magic not in MESSAGE_MAGICS:
        if total_size == 0 and magic == 0:
            return END_OF_DATA
        raise RecordError(offset, f"bad magic code 0x{magic:08X} (totalSize {total_size})", "bad-magic")
    if total_size < MIN_RECORD_LENGTH or total_size > limit - pos:
        error = RecordError(offset, f"totalSize {total_size} does not fit: {limit - pos} bytes left "
                                    f"in the file, minimum record is {MIN_RECORD_LENGTH}", "bad-size")
        if total_size >= MIN_RECORD_LENGTH and limit - pos >= _PHYSICAL_END and \
                _PHYSICAL.unpack_from(buf, pos + PHYSICAL_OFFSET_AT)[0] == offset:
            # a true record's header (it names its own offset) that the file's end cuts off: when no
            # record follows (the walker's call), the file was truncated here
            error.truncated = (f"file truncated: it ends {limit - pos} bytes into the record here "
                               f"(totalSize {total_size})")
        raise error
    return _decode_record_body(buf, pos, total_size, magic, offset)


def _decode_record_body(buf, pos, total_size, magic, offset) -> Record:
    end = pos + total_size
    (sys_flag,) = _I32.unpack_from(buf, pos + SYS_FLAG_AT)
    fixed = _FIXED[sys_flag & _HOST_BITS]
    p = pos + fixed.size
    if p > end:
        raise RecordError(offset, f"record of {total_size} bytes too short for its header", "bad-length")
    (_, _, crc, queue_id, flag, queue_offset, physical_offset, _, born_ts, born_addr, born_port,
     store_ts, store_addr, store_port, reconsume, prepared, body_len) = fixed.unpack_from(buf, pos)
    if body_len < 0 or p + body_len > end:
        raise RecordError(offset, f"bodyLength {body_len} runs past the record's {total_size} bytes",
                          "bad-length")
    body = bytes(buf[p:p + body_len])
    p += body_len
    if magic == MAGIC_V2:
        if p + 2 > end:
            raise RecordError(offset, "record ends inside the topic length", "bad-length")
        (topic_len,) = _I16.unpack_from(buf, p)
        p += 2
    else:
        if p + 1 > end:
            raise RecordError(offset, "record ends inside the topic length", "bad-length")
        topic_len = buf[p]
        topic_len = topic_len - 256 if topic_len > 127 else topic_len
        p += 1
    if topic_len < 0 or p + topic_len + 2 > end:
        raise RecordError(offset, f"topicLength {topic_len} runs past the record", "bad-length")
    topic = bytes(buf[p:p + topic_len])
    p += topic_len
    (props_len,) = _I16.unpack_from(buf, p)
    p += 2
    if props_len < 0 or p + props_len != end:
        expected = record_length(sys_flag, body_len, topic_len, max(props_len, 0), magic)
        raise RecordError(offset, f"totalSize {total_size} disagrees with the record's parts "
                                  f"(they add up to {expected})", "bad-length")
    props = bytes(buf[p:end])
    return Record(offset, total_size, magic, crc, queue_id, flag, queue_offset, physical_offset,
                  sys_flag, born_ts, born_addr, born_port, store_ts, store_addr, store_port,
                  reconsume, prepared, body, topic, props)


def encode_record(fields: dict) -> bytes:
    """Build one record from RECORD-shaped fields (bodyCRC and magic may be left out)."""
    return RECORD.build(fields)
