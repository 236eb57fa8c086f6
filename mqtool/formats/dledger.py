"""DLedger's own files (openmessaging DLedger 0.3.1.2, the version rocketmq-all-5.3.3 uses).

In DLedger mode (enableDLegerCommitLog) a broker keeps no commitlog/: every message is the body
of one DLedger entry in `<root>/dledger-<selfId>/data/<20-digit start offset>` files.  All
big-endian (DLedgerEntryCoder):

    entry:      magic i32 (1) | size i32 (48 + body length) | index i64 | term i64 | pos i64
                | channel i32 | chainCrc i32 | bodyCrc i32 | bodyLength i32 | body
    blank:      magic i32 (-1) | size i32 (the bytes left in the file), then zeros
    index unit: magic i32 | pos i64 | size i32 | index i64 | term i64      (32 bytes)

An entry that does not fit in what is left of a file with MIN_BLANK_LEN to spare is preceded
by a blank that fills the file and goes into the next one.  A file's unwritten tail is zeros
(magic 0).  The body is exactly one commitlog record (formats/commitlog.py) whose
physicalOffset field is the entry's pos + BODY_OFFSET: that is the message's offset in the
RocketMQ sense (consume queue units, index entries and msgIds use it).  The unit of entry i is
at byte i * 32 of the index files.  `checkpoint` (committedIndex, endIndex) and `currterm`
(voteLeader, currTerm) are Java properties text.

`ENTRY_HEADER`, `BLANK`, `INDEX_UNIT` and `PROPERTIES` are the reference schemas;
`decode_header` and `decode_index_unit` are the fast decoders, checked against them in
tests/test_dledger.py.
"""

from __future__ import annotations

from typing import NamedTuple

from construct import Adapter, Const, GreedyString, Int32sb, Int64sb, Struct

from mqtool.formats.fixedfields import fixed_struct, numpy_dtype, offsets, widths
from mqtool.formats.javastr import parse_properties as parse_java_properties

MAGIC_1 = 1                  # DLedgerMmapFileStore.MAGIC_1 (= CURRENT_MAGIC)
BLANK_MAGIC = -1             # MmapFileList.BLANK_MAGIC_CODE
MIN_BLANK_LEN = 8            # MmapFileList.MIN_BLANK_LEN
HEADER_SIZE = 48             # DLedgerEntry.BODY_OFFSET: where the body (the commitlog record) starts
POS_OFFSET = 24              # DLedgerEntry.POS_OFFSET
INDEX_UNIT_SIZE = 32         # DLedgerMmapFileStore.INDEX_UNIT_SIZE
INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024   # DLedgerConfig.mappedFileSizeForEntryIndex default

ENTRY_HEADER = Struct(
    "magic" / Int32sb,
    "size" / Int32sb,
    "index" / Int64sb,
    "term" / Int64sb,
    "pos" / Int64sb,
    "channel" / Int32sb,
    "chainCrc" / Int32sb,
    "bodyCrc" / Int32sb,
    "bodyLength" / Int32sb,
)



HEADER_FIELDS = widths(ENTRY_HEADER, ("magic", "size", "index", "term", "pos"))   # what the ledger checks read
ENTRY_FIELD_AT = offsets(ENTRY_HEADER)   # what the compiled walk reads

BLANK = Struct(
    "magic" / Const(BLANK_MAGIC, Int32sb),
    "size" / Int32sb,
)

INDEX_UNIT = Struct(
    "magic" / Int32sb,
    "pos" / Int64sb,
    "size" / Int32sb,
    "index" / Int64sb,
    "term" / Int64sb,
)


class _Properties(Adapter):
    """Java properties text as IOUtils.properties2String writes it (`key=value` lines) <-> an
    ordered dict of strings, read as java.util.Properties reads it (javastr.parse_properties)."""

    def _decode(self, obj, context, path):
        return {key: value for _, key, value in parse_java_properties(obj)}

    def _encode(self, obj, context, path):
        return "".join(f"{k}={v}\n" for k, v in obj.items())


UNIT_FIELDS = widths(INDEX_UNIT)


def index_unit_dtype():
    """INDEX_UNIT as a numpy record type (big-endian), for a block of units at once."""
    return numpy_dtype(INDEX_UNIT)


PROPERTIES = _Properties(GreedyString("latin-1"))
"""`checkpoint` (committedIndex, endIndex) and `currterm` (voteLeader, currTerm)."""

COMMITTED_INDEX_KEY = "committedIndex"   # DLedgerMmapFileStore
END_INDEX_KEY = "endIndex"
TERM_KEY = "currTerm"                    # MemberState
VOTE_LEADER_KEY = "voteLeader"


class EntryHeader(NamedTuple):
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_length: int


class IndexUnit(NamedTuple):
    magic: int
    pos: int
    size: int
    index: int
    term: int


_HEADER = fixed_struct(ENTRY_HEADER)
_UNIT = fixed_struct(INDEX_UNIT)
_MAGIC_SIZE = fixed_struct(BLANK)       # an entry's first 8 bytes are laid out as a blank's
assert _HEADER.size == HEADER_SIZE and _UNIT.size == INDEX_UNIT_SIZE and ENTRY_FIELD_AT["pos"] == POS_OFFSET


def decode_header(buf, pos: int) -> EntryHeader:
    """The 48-byte entry header at buf[pos:] (the caller checks 48 bytes are there)."""
    return EntryHeader(*_HEADER.unpack_from(buf, pos))


def decode_magic_size(buf, pos: int) -> tuple[int, int]:
    """(magic, size): the first 8 bytes of an entry or a blank."""
    return _MAGIC_SIZE.unpack_from(buf, pos)


def decode_index_unit(buf, pos: int) -> IndexUnit:
    return IndexUnit(*_UNIT.unpack_from(buf, pos))


def encode_header(header: EntryHeader) -> bytes:
    return _HEADER.pack(*header)


def encode_index_unit(unit: IndexUnit) -> bytes:
    return _UNIT.pack(*unit)


def parse_properties(data: bytes) -> dict[str, str]:
    return PROPERTIES.parse(data)


def header_problem(header: EntryHeader, absolute_pos: int, room: int) -> str | None:
    """Why an entry header is not one DLedgerMmapFileStore.recover accepts at absolute_pos with
    room bytes left in its file (None when it is): the magic, the size against the header and
    the body length, the pos field against where it is."""
    if header.magic != MAGIC_1:
        return f"bad magic {header.magic}"
    if header.size <= HEADER_SIZE:
        return f"size {header.size} is not above the {HEADER_SIZE}-byte header"
    if header.body_length + HEADER_SIZE != header.size:
        return f"size {header.size} != {HEADER_SIZE} + body length {header.body_length}"
    if header.pos != absolute_pos:
        return f"pos field {header.pos} != where the entry is ({absolute_pos})"
    if header.size > room:
        return f"size {header.size} does not fit: {room} bytes left in the file"
    return None
