"""Round trips for every on-disk schema, the fast decoders against the schemas, and known values.

Hypothesis builds values, and for each schema checks that build-then-parse gives the
value back and parse-then-build gives the same bytes.  The fast decoders (struct based,
used by the hot loops) must agree with the construct schemas field for field.  Known
values come from the fixture files written by real RocketMQ (expected-read.jsonl,
features/NOTES.md), never from our own code.
"""

from __future__ import annotations

import base64
import ipaddress
import re
import struct
from datetime import timezone

import pytest
from construct import ConstructError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mqtool.formats import (
    checkpoint,
    commitlog,
    configjson,
    consumequeue,
    filenames,
    hosts,
    index,
    javastr,
    msgid,
    properties,
    sysflag,
)
from mqtool.formats.commitlog import (
    BLANK,
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    RECORD,
    RECORD_HEADER,
    Blank,
    Record,
    RecordError,
    decode_entry,
    record_length,
)
from mqtool.formats.crc import body_crc

from conftest import UNDAMAGED, expected_read, fixture_dir

settings.register_profile("mqtool", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("mqtool")

I32 = st.integers(-(1 << 31), (1 << 31) - 1)
I64 = st.integers(-(1 << 63), (1 << 63) - 1)
U16 = st.integers(0, 0xFFFF)


def plain(container) -> dict:
    """A construct Container as a plain dict (nested), without construct's private keys."""
    if isinstance(container, dict):
        return {k: plain(v) for k, v in container.items() if not k.startswith("_")}
    if isinstance(container, list):
        return [plain(v) for v in container]
    return container


def utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


# ------------------------------------------------------------------ strategies

def addresses(width: int):
    return st.binary(min_size=width, max_size=width)


@st.composite
def host_text(draw, v6: bool):
    """A host as the schema shows it, for an address field of 4 or 16 bytes."""
    address = draw(addresses(16 if v6 else 4))
    return hosts.format_host(address, draw(I32))


@st.composite
def records(draw, magic=None, min_topic=0):
    """RECORD fields for a valid record: V1 or V2, IPv4 or IPv6 hosts, any body."""
    magic = draw(st.sampled_from([MAGIC_V1, MAGIC_V2])) if magic is None else magic
    born_v6 = draw(st.booleans())
    store_v6 = draw(st.booleans())
    flag_bits = draw(I32) & ~(sysflag.BORNHOST_V6 | sysflag.STOREHOST_V6)
    sys_flag = flag_bits | (sysflag.BORNHOST_V6 if born_v6 else 0) | (sysflag.STOREHOST_V6 if store_v6 else 0)
    if sys_flag >= 1 << 31:
        sys_flag -= 1 << 32
    topic_limit = commitlog.MAX_TOPIC_LENGTH_V1 if magic == MAGIC_V1 else 1200
    topic = draw(st.text(min_size=min_topic, max_size=max(topic_limit, min_topic))
                 .filter(lambda t: utf8_len(t) <= topic_limit))
    props = draw(st.one_of(
        st.text(max_size=200),
        st.dictionaries(st.text(min_size=1, max_size=12).filter(lambda s: not set(s) & {"\x01", "\x02"}),
                        st.text(min_size=1, max_size=20).filter(lambda s: not set(s) & {"\x01", "\x02"}),
                        max_size=6).map(properties.encode_properties),
    ))
    fields = {
        "magicCode": magic,
        "queueId": draw(I32), "flag": draw(I32), "queueOffset": draw(I64),
        "physicalOffset": draw(I64), "sysFlag": sys_flag, "bornTimestamp": draw(I64),
        "bornHost": draw(host_text(born_v6)), "storeTimestamp": draw(I64),
        "storeHost": draw(host_text(store_v6)), "reconsumeTimes": draw(I32),
        "preparedTransactionOffset": draw(I64),
        "body": draw(st.one_of(st.just(b""), st.binary(max_size=600))),
        "topic": topic,
        "properties": props,
    }
    if draw(st.booleans()):
        fields["bodyCRC"] = draw(I32)  # as stored, even when it does not match the body
    if magic == MAGIC_V1 and draw(st.booleans()):
        del fields["magicCode"]  # the schema's default
    return fields


# ------------------------------------------------------------- commitlog RECORD

@given(records())
def test_record_build_then_parse_gives_the_fields_back(fields):
    data = RECORD.build(fields)
    parsed = plain(RECORD.parse(data))
    expected = dict(fields)
    expected.setdefault("bodyCRC", body_crc(fields["body"]))
    expected.setdefault("magicCode", MAGIC_V1)
    expected["totalSize"] = len(data)
    assert parsed == expected
    assert RECORD.build(parsed) == data
    assert commitlog.encode_record(fields) == data
    # the size is CommitLog.calMsgLength of the parts
    assert len(data) == record_length(fields["sysFlag"], len(fields["body"]), utf8_len(fields["topic"]),
                                      utf8_len(fields["properties"]), expected["magicCode"])


@given(records())
def test_record_layout_fields_sit_where_the_broker_writes_them(fields):
    data = RECORD.build(fields)
    total, magic, crc, queue_id, flag, queue_offset, physical, sys_flag, born_ts = \
        struct.unpack_from(">iIiiiqqiq", data, 0)
    assert (total, magic, queue_id, flag, queue_offset, physical, sys_flag, born_ts) == (
        len(data), fields.get("magicCode", MAGIC_V1), fields["queueId"], fields["flag"], fields["queueOffset"],
        fields["physicalOffset"], fields["sysFlag"], fields["bornTimestamp"])
    born_width = 16 if fields["sysFlag"] & sysflag.BORNHOST_V6 else 4
    store_width = 16 if fields["sysFlag"] & sysflag.STOREHOST_V6 else 4
    pos = 48 + born_width + 4 + 8 + store_width + 4 + 4 + 8
    (body_len,) = struct.unpack_from(">i", data, pos)
    assert body_len == len(fields["body"])
    pos += 4 + body_len
    if fields.get("magicCode") == MAGIC_V2:
        (topic_len,) = struct.unpack_from(">h", data, pos)
        pos += 2
    else:
        (topic_len,) = struct.unpack_from(">b", data, pos)
        pos += 1
    assert data[pos:pos + topic_len] == fields["topic"].encode("utf-8")
    pos += topic_len
    (props_len,) = struct.unpack_from(">h", data, pos)
    assert data[pos + 2:] == fields["properties"].encode("utf-8")
    assert pos + 2 + props_len == len(data)


def fields_at_the_layout_offsets(data: bytes) -> dict:
    """The fields of the record `data`, read at the offsets and in the formats commitlog.py derives
    from RECORD (the layout the compiled kernels, the writers and recovery read and write by)."""
    cl = commitlog
    out = {name: struct.unpack_from(fmt, data, at)[0] for name, (at, fmt) in cl.HEAD_FIELDS.items() if fmt}
    assert [cl.TOTAL_SIZE_AT, cl.MAGIC_AT, cl.BODY_CRC_AT, cl.QUEUE_ID_AT, cl.FLAG_AT, cl.QUEUE_OFFSET_AT,
            cl.PHYSICAL_OFFSET_AT, cl.SYS_FLAG_AT, cl.BORN_TIMESTAMP_AT, cl.BORN_HOST_AT] == [
        at for at, _ in cl.HEAD_FIELDS.values()]

    def host(at, bit):
        size = cl.HOST_V6_SIZE if out["sysFlag"] & bit else cl.HOST_V4_SIZE
        port = at + size - cl.HOST_PORT_SIZE
        return hosts.format_host(data[at:port], int.from_bytes(data[port:at + size], "big", signed=True)), at + size

    out["bornHost"], store_ts = host(cl.BORN_HOST_AT, sysflag.BORNHOST_V6)
    (out["storeTimestamp"],) = struct.unpack_from(cl.STORE_TIMESTAMP_FORMAT, data, store_ts)
    out["storeHost"], tail = host(store_ts + cl.STORE_HOST_AFTER_BORN_HOST, sysflag.STOREHOST_V6)
    out["reconsumeTimes"], out["preparedTransactionOffset"], body_len = struct.unpack_from(cl.TAIL_FORMAT, data, tail)
    assert (struct.unpack_from(">i", data, tail + cl.RECONSUME_TIMES_IN_TAIL)[0],
            struct.unpack_from(">q", data, tail + cl.PREPARED_OFFSET_IN_TAIL)[0],
            struct.unpack_from(">i", data, tail + cl.BODY_LENGTH_IN_TAIL)[0]) == (
        out["reconsumeTimes"], out["preparedTransactionOffset"], body_len)
    body = tail + cl.BODY_IN_TAIL
    out["body"] = data[body:body + body_len]
    width = cl.topic_length_size(out["magicCode"])
    assert width == (cl.TOPIC_LENGTH_SIZE_V2 if out["magicCode"] == MAGIC_V2 else cl.TOPIC_LENGTH_SIZE_V1)
    at = body + body_len
    topic_len = int.from_bytes(data[at:at + width], "big", signed=True)
    out["topic"] = data[at + width:at + width + topic_len].decode("utf-8", "surrogateescape")
    at += width + topic_len
    props_len = int.from_bytes(data[at:at + cl.PROPERTIES_LENGTH_SIZE], "big", signed=True)
    out["properties"] = data[at + cl.PROPERTIES_LENGTH_SIZE:].decode("utf-8", "surrogateescape")
    assert at + cl.PROPERTIES_LENGTH_SIZE + props_len == len(data) == out["totalSize"]
    return out


def fixture_records(name: str, extracted):
    """The bytes of every record of a fixture's first commitlog file, as the broker wrote them."""
    data = sorted((extracted(name) / "commitlog").iterdir())[0].read_bytes()
    pos = 0
    while pos + 8 <= len(data):
        total, magic = struct.unpack_from(">iI", data, pos)
        if magic not in (MAGIC_V1, MAGIC_V2):
            break
        yield data[pos:pos + total]
        pos += total


@pytest.mark.parametrize("name", ["features", "basic5"])
def test_layout_offsets_derived_from_the_schema_read_real_records(name, extracted):
    """The offsets commitlog.py derives from RECORD, read on records a broker wrote (features has
    IPv6 born hosts), give what RECORD.parse gives, field for field."""
    seen = set()
    for data in fixture_records(name, extracted):
        parsed = plain(RECORD.parse(data))
        assert fields_at_the_layout_offsets(data) == parsed
        seen.add(parsed["sysFlag"] & sysflag.BORNHOST_V6)
    assert seen == ({0, sysflag.BORNHOST_V6} if name == "features" else {0})


@given(records())
def test_layout_offsets_derived_from_the_schema_read_every_variant(fields):
    """The same for records of every variant the schema builds: V1 and V2 (a topic length of 1 or
    2 bytes), IPv4 and IPv6 born and store hosts."""
    data = RECORD.build(fields)
    assert fields_at_the_layout_offsets(data) == plain(RECORD.parse(data))


def test_index_layout_offsets_derived_from_the_schema_read_a_real_index_file(extracted):
    raw = sorted((extracted("basic") / "index").iterdir())[0].read_bytes()
    header = plain(index.HEADER.parse(raw))
    slots = (len(raw) - index.HEADER_SIZE) // (index.SLOT_SIZE + 4 * index.ENTRY_SIZE)
    assert index.file_size(slots, 4 * slots) == len(raw)
    assert [header[name] for name in index.HEADER_NAMES] == list(index.HEADER_STRUCT.unpack_from(raw, 0))
    first = index.HEADER_SIZE + slots * index.SLOT_SIZE
    for number in range(1, header["indexCount"]):
        at = first + number * index.ENTRY_SIZE
        entry = plain(index.ENTRY.parse(raw[at:at + index.ENTRY_SIZE]))
        assert entry == {"keyHash": struct.unpack_from(">i", raw, at + index.KEY_HASH_AT)[0],
                         "phyOffset": struct.unpack_from(">q", raw, at + index.PHY_OFFSET_AT)[0],
                         "timeDiff": struct.unpack_from(">i", raw, at + index.TIME_DIFF_AT)[0],
                         "prevIndex": struct.unpack_from(">i", raw, at + index.PREV_INDEX_AT)[0]}
    assert header["indexCount"] > 1
    import numpy as np      # the numpy reader of many entries at once, from the same schema

    count = header["indexCount"]
    block = np.frombuffer(raw, dtype=index.entry_dtype(), count=count - 1, offset=first + index.ENTRY_SIZE)
    assert [{name: int(row[name]) for name in block.dtype.names} for row in block] == [
        plain(index.ENTRY.parse(raw[first + n * index.ENTRY_SIZE:])) for n in range(1, count)]


def test_fixed_fields_reads_every_fixed_schema_as_the_schema_does(extracted):
    """formats/fixedfields, the one reading of a schema's layout: its struct, offsets, widths and
    numpy type read the broker's bytes as the schema parses them, and a schema with a field of
    variable size is refused."""
    import numpy as np

    from mqtool.formats import dledger, fixedfields

    raw = sorted((extracted("basic") / "index").iterdir())[0].read_bytes()
    slots = (len(raw) - index.HEADER_SIZE) // (index.SLOT_SIZE + 4 * index.ENTRY_SIZE)
    entries = raw[index.HEADER_SIZE + slots * index.SLOT_SIZE:]
    data = next((extracted("dledger1")).glob("dledger-*/data/00000000000000000000")).read_bytes()
    units = next((extracted("dledger1")).glob("dledger-*/index/00000000000000000000")).read_bytes()
    cases = [(index.HEADER, raw), (index.ENTRY, entries[index.ENTRY_SIZE:]), (RECORD_HEADER, bytes(
        extracted("basic").joinpath("commitlog", "00000000000000000000").read_bytes()[:8])),
             (dledger.ENTRY_HEADER, data), (dledger.INDEX_UNIT, units)]
    for schema, buf in cases:
        parsed = plain(schema.parse(buf))
        assert parsed and list(fixedfields.fixed_struct(schema).unpack_from(buf, 0)) == list(parsed.values())
        assert {name: int.from_bytes(buf[at:at + width], "big", signed=name != "magicCode")
                for name, (at, width) in fixedfields.widths(schema).items()} == parsed
        assert fixedfields.offsets(schema) == {name: at for name, (at, _) in fixedfields.widths(schema).items()}
        row = np.frombuffer(buf, dtype=fixedfields.numpy_dtype(schema), count=1)[0]
        assert {name: int(row[name]) for name in parsed} == parsed
    with pytest.raises(ValueError):
        fixedfields.fixed_struct(RECORD)


@given(records(), st.binary(max_size=64), st.binary(max_size=64), st.integers(0, 1 << 40))
def test_fast_decoder_agrees_with_the_schema(fields, before, after, base):
    data = RECORD.build(fields)
    buf = before + data + after
    entry = decode_entry(buf, len(before), len(buf), base)
    assert isinstance(entry, Record)
    assert entry.offset == base + len(before)
    assert entry.total_size == len(data)
    assert entry.to_schema_dict() == plain(RECORD.parse(data))
    assert entry.version == (2 if fields.get("magicCode") == MAGIC_V2 else 1)
    assert entry.crc_ok() == (plain(RECORD.parse(data))["bodyCRC"] == body_crc(fields["body"]))


@given(records(), st.data())
def test_fast_decoder_refuses_a_cut_record_cleanly(fields, data):
    raw = RECORD.build(fields)
    cut = data.draw(st.integers(8, len(raw) - 1))
    with pytest.raises(RecordError) as err:
        decode_entry(raw, 0, cut)
    assert err.value.offset == 0
    assert err.value.kind == "bad-size"


@given(records(), st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4))
def test_damaged_records_decode_the_same_both_ways_or_fail_cleanly(fields, flips):
    """Whatever decode_entry accepts, RECORD parses to the same fields and rebuilds byte for byte."""
    raw = bytearray(RECORD.build(fields))
    for pos, value in flips:
        raw[pos % len(raw)] = value
    raw = bytes(raw)
    try:
        entry = decode_entry(raw, 0, len(raw))
    except RecordError as err:
        assert err.offset == 0 and err.reason and "\n" not in err.reason
        return
    if entry is None or isinstance(entry, Blank):
        return
    chunk = raw[:entry.total_size]
    parsed = plain(RECORD.parse(chunk))
    assert entry.to_schema_dict() == parsed
    assert RECORD.build(parsed) == chunk


@given(st.binary(max_size=300), st.integers(0, 300))
def test_fast_decoder_never_raises_anything_but_record_error(buf, pos):
    pos = min(pos, len(buf))
    try:
        entry = decode_entry(buf, pos, len(buf), 1000)
    except RecordError as err:
        assert err.offset == 1000 + pos
        assert err.kind in ("truncated", "bad-blank", "bad-magic", "bad-size", "bad-length")
        return
    assert entry is None or isinstance(entry, (Record, Blank))


@given(records(magic=MAGIC_V1))
def test_v1_and_v2_differ_only_in_the_topic_length_field(fields):
    v1 = RECORD.build(fields)
    v2 = RECORD.build(dict(fields, magicCode=MAGIC_V2))
    assert len(v2) == len(v1) + 1
    assert v2[4:8] == MAGIC_V2.to_bytes(4, "big") and v1[4:8] == MAGIC_V1.to_bytes(4, "big")
    topic_at = len(v1) - 2 - utf8_len(fields["properties"]) - utf8_len(fields["topic"]) - 1
    assert v1[8:topic_at] == v2[8:topic_at]
    assert v2[topic_at:topic_at + 2] == utf8_len(fields["topic"]).to_bytes(2, "big")
    assert v1[topic_at + 1:] == v2[topic_at + 2:]


@given(records(magic=MAGIC_V2, min_topic=128))
def test_v2_records_with_topics_over_127_characters(fields):
    data = RECORD.build(fields)
    assert plain(RECORD.parse(data))["topic"] == fields["topic"]
    entry = decode_entry(data, 0, len(data))
    assert entry.topic == fields["topic"] and entry.version == 2
    assert entry.to_schema_dict() == plain(RECORD.parse(data))


def test_ipv4_host_in_a_v6_field_is_stored_ipv4_mapped():
    fields = {"queueId": 1, "flag": 0, "queueOffset": 2, "physicalOffset": 3,
              "sysFlag": sysflag.BORNHOST_V6, "bornTimestamp": 4, "bornHost": "10.0.0.1:7",
              "storeTimestamp": 5, "storeHost": "[2001:db8:0:0:0:0:0:1]:61001", "reconsumeTimes": 0,
              "preparedTransactionOffset": 0, "body": b"", "topic": "T", "properties": ""}
    with pytest.raises(ValueError):  # an IPv6 store host needs the STOREHOST_V6 bit
        RECORD.build(fields)
    fields["sysFlag"] |= sysflag.STOREHOST_V6
    data = RECORD.build(fields)
    assert data[48:68] == ipaddress.IPv6Address("::ffff:10.0.0.1").packed + (7).to_bytes(4, "big")
    parsed = plain(RECORD.parse(data))
    assert parsed["bornHost"] == "10.0.0.1:7"       # Java shows a mapped address as IPv4
    assert parsed["storeHost"] == "[2001:db8:0:0:0:0:0:1]:61001"
    assert RECORD.build(parsed) == data
    assert decode_entry(data, 0, len(data)).to_schema_dict() == parsed


def test_v1_refuses_a_topic_longer_than_127_bytes_and_v2_takes_it():
    base = {"queueId": 0, "flag": 0, "queueOffset": 0, "physicalOffset": 0, "sysFlag": 0,
            "bornTimestamp": 0, "bornHost": "1.2.3.4:5", "storeTimestamp": 0, "storeHost": "1.2.3.4:6",
            "reconsumeTimes": 0, "preparedTransactionOffset": 0, "body": b"x", "properties": ""}
    with pytest.raises(ConstructError):
        RECORD.build(dict(base, magicCode=MAGIC_V1, topic="t" * 128))
    data = RECORD.build(dict(base, magicCode=MAGIC_V2, topic="t" * 128))
    assert plain(RECORD.parse(data))["topic"] == "t" * 128
    assert decode_entry(data, 0, len(data)).topic == "t" * 128


@given(st.integers(commitlog.BLANK_HEADER_SIZE, 1 << 30))
def test_blank_round_trip(size):
    data = BLANK.build({"totalSize": size})
    assert data == size.to_bytes(4, "big") + BLANK_MAGIC.to_bytes(4, "big")
    assert plain(BLANK.parse(data)) == {"totalSize": size, "magicCode": BLANK_MAGIC}
    assert BLANK.build(plain(BLANK.parse(data))) == data
    assert plain(RECORD_HEADER.parse(data)) == {"totalSize": size, "magicCode": BLANK_MAGIC}
    assert RECORD_HEADER.build(plain(RECORD_HEADER.parse(data))) == data
    assert commitlog.decode_record_header(data, 0) == (size, BLANK_MAGIC) and commitlog.begins_record(data)


def test_record_header_tells_a_record_from_a_dledger_entry(extracted):
    """decode_record_header / begins_record, what storage asks of a file's first 8 bytes (a
    commitlog file moved into DLedger's data/, the BLANK a switch to DLedger leaves): a broker's
    record and a broker's DLedger entry, and the ends of a record's header."""
    from mqtool.formats import dledger

    record = extracted("basic").joinpath("commitlog", "00000000000000000000").read_bytes()[:64]
    parsed = plain(RECORD_HEADER.parse(record))
    assert commitlog.decode_record_header(record, 0) == (parsed["totalSize"], parsed["magicCode"])
    assert parsed["magicCode"] in commitlog.MESSAGE_MAGICS and commitlog.begins_record(record)
    entry = next(extracted("dledger1").glob("dledger-*/data/00000000000000000000")).read_bytes()[:64]
    assert dledger.decode_magic_size(entry, 0)[0] == dledger.MAGIC_1 and not commitlog.begins_record(entry)
    assert commitlog.begins_record(entry[dledger.HEADER_SIZE:])      # the record in the entry's body
    assert not commitlog.begins_record(record[:7]) and not commitlog.begins_record(bytes(8))


@given(st.integers(8, 4096), st.integers(0, 1 << 40))
def test_fast_decoder_reads_a_blank_that_fills_the_rest_of_the_file(space, base):
    buf = BLANK.build({"totalSize": space}) + bytes(space - 8)
    entry = decode_entry(buf, 0, len(buf), base)
    assert isinstance(entry, Blank) and entry.total_size == space and entry.offset == base
    with pytest.raises(RecordError) as err:
        decode_entry(buf + b"\0", 0, len(buf) + 1, base)  # declares less than the space left
    assert err.value.kind == "bad-blank"


def test_zero_header_is_end_of_data():
    assert decode_entry(bytes(100), 0, 100) is commitlog.END_OF_DATA
    assert decode_entry(bytes(100), 95, 100) is commitlog.END_OF_DATA


# ------------------------------------------------------------------ consume queue

UNITS = st.fixed_dictionaries({"commitLogOffset": I64, "size": I32, "tagsCode": I64})
HEADER_FIELDS = ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount",
                 "indexCount")
ENTRY_FIELDS = ("keyHash", "phyOffset", "timeDiff", "prevIndex")


def values(d: dict, fields) -> tuple:
    return tuple(d[f] for f in fields)


@given(UNITS)
def test_cq_unit_round_trip_and_fast_struct(unit):
    data = consumequeue.UNIT.build(unit)
    assert len(data) == consumequeue.UNIT_SIZE
    assert plain(consumequeue.UNIT.parse(data)) == unit
    assert consumequeue.UNIT_STRUCT.pack(unit["commitLogOffset"], unit["size"], unit["tagsCode"]) == data
    assert consumequeue.UNIT_STRUCT.unpack(data) == (unit["commitLogOffset"], unit["size"], unit["tagsCode"])


@given(st.binary(min_size=20, max_size=20))
def test_cq_unit_parse_then_build_gives_the_bytes(data):
    parsed = plain(consumequeue.UNIT.parse(data))
    assert consumequeue.UNIT.build(parsed) == data
    assert consumequeue.UNIT_STRUCT.unpack(data) == values(parsed, ("commitLogOffset", "size", "tagsCode"))


@given(st.lists(UNITS, max_size=20), st.binary(max_size=19), st.data())
def test_decode_units_reads_whole_units_only(units, tail, data):
    buf = b"".join(consumequeue.UNIT.build(u) for u in units) + tail
    got = list(consumequeue.decode_units(buf))
    assert got == [(u["commitLogOffset"], u["size"], u["tagsCode"]) for u in units]
    start = data.draw(st.integers(0, len(units))) * consumequeue.UNIT_SIZE
    assert list(consumequeue.decode_units(buf, start)) == got[start // consumequeue.UNIT_SIZE:]


# -------------------------------------------------------------------------- index

HEADERS = st.fixed_dictionaries({"beginTimestamp": I64, "endTimestamp": I64, "beginPhyOffset": I64,
                                 "endPhyOffset": I64, "hashSlotCount": I32, "indexCount": I32})
ENTRIES = st.fixed_dictionaries({"keyHash": I32, "phyOffset": I64, "timeDiff": I32, "prevIndex": I32})


@given(HEADERS)
def test_index_header_round_trip_and_fast_struct(header):
    data = index.HEADER.build(header)
    assert len(data) == index.HEADER_SIZE
    assert plain(index.HEADER.parse(data)) == header
    assert index.HEADER_STRUCT.pack(*values(header, HEADER_FIELDS)) == data
    assert index.HEADER_STRUCT.unpack(data) == values(header, HEADER_FIELDS)


@given(ENTRIES)
def test_index_entry_round_trip_and_fast_struct(entry):
    data = index.ENTRY.build(entry)
    assert len(data) == index.ENTRY_SIZE
    assert plain(index.ENTRY.parse(data)) == entry
    assert index.ENTRY_STRUCT.pack(*values(entry, ENTRY_FIELDS)) == data
    assert index.ENTRY_STRUCT.unpack(data) == values(entry, ENTRY_FIELDS)


@st.composite
def index_files(draw):
    slots = draw(st.integers(1, 8))
    count = draw(st.integers(1, 8))
    value = {"header": draw(HEADERS), "slots": draw(st.lists(I32, min_size=slots, max_size=slots)),
             "entries": draw(st.lists(ENTRIES, min_size=count, max_size=count))}
    return slots, count, value


@given(index_files())
def test_index_file_schema_round_trip(case):
    slots, count, value = case
    schema = index.index_file_schema(slots, count)
    data = schema.build(value)
    assert len(data) == index.file_size(slots, count)
    assert plain(schema.parse(data)) == value
    assert schema.build(plain(schema.parse(data))) == data
    # the position helpers point at what the schema wrote
    for number, slot in enumerate(value["slots"]):
        pos = index.slot_position(number)
        assert struct.unpack_from(">i", data, pos)[0] == slot
    for number, entry in enumerate(value["entries"]):
        pos = index.entry_position(slots, number)
        assert index.ENTRY_STRUCT.unpack_from(data, pos) == values(entry, ENTRY_FIELDS)
    assert index.HEADER_STRUCT.unpack_from(data, 0) == values(value["header"], HEADER_FIELDS)
    # INDEX_FILE: the same file, preceded by its two sizes
    whole = {"hashSlotNum": slots, "indexNum": count, "file": value}
    framed = index.INDEX_FILE.build(whole)
    assert framed == struct.pack(">ii", slots, count) + data
    assert plain(index.INDEX_FILE.parse(framed)) == whole
    assert index.INDEX_FILE.build(plain(index.INDEX_FILE.parse(framed))) == framed


@given(st.integers(1, 6), st.integers(1, 6), st.data())
def test_index_file_parse_then_build_gives_the_bytes(slots, count, data):
    raw = data.draw(st.binary(min_size=index.file_size(slots, count), max_size=index.file_size(slots, count)))
    schema = index.index_file_schema(slots, count)
    assert schema.build(plain(schema.parse(raw))) == raw
    framed = struct.pack(">ii", slots, count) + raw
    assert index.INDEX_FILE.build(plain(index.INDEX_FILE.parse(framed))) == framed


# --------------------------------------------------------------------- checkpoint

CHECKPOINTS = st.fixed_dictionaries({name: I64 for name in checkpoint.FIELDS_5X})


@given(CHECKPOINTS)
def test_checkpoint_round_trip(cp):
    data = checkpoint.CHECKPOINT.build(cp)
    assert len(data) == checkpoint.FILE_SIZE
    assert data[:40] == struct.pack(">5q", *(cp[name] for name in checkpoint.FIELDS_5X))
    assert data[40:] == bytes(checkpoint.FILE_SIZE - 40)  # the rest of the page is zero
    assert plain(checkpoint.CHECKPOINT.parse(data)) == cp
    assert checkpoint.CHECKPOINT.build(plain(checkpoint.CHECKPOINT.parse(data))) == data


@given(st.binary(min_size=40, max_size=40))
def test_checkpoint_parse_then_build_gives_the_bytes(head):
    data = head + bytes(checkpoint.FILE_SIZE - 40)
    assert checkpoint.CHECKPOINT.build(plain(checkpoint.CHECKPOINT.parse(data))) == data


@pytest.mark.parametrize("name", UNDAMAGED)
def test_checkpoint_of_each_fixture_parses_to_what_the_broker_read(name, extracted):
    raw = (extracted(name) / "checkpoint").read_bytes()
    pre = next(l for l in expected_read(name) if l["type"] == "pre")
    assert len(raw) == pre["checkpoint"]["fileSize"] == checkpoint.FILE_SIZE
    parsed = plain(checkpoint.CHECKPOINT.parse(raw))
    for field in checkpoint.FIELDS_4X:
        assert parsed[field] == pre["checkpoint"][field], field
    assert checkpoint.CHECKPOINT.build(parsed) == raw


# --------------------------------------------------------------------- config JSON

def typed(value):
    """value with every leaf tagged by its type, so True != 1 and 1.0 != 1 in comparisons."""
    if isinstance(value, dict):
        return ("dict", [(typed(k), typed(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [typed(v) for v in value])
    return (type(value).__name__, value)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20))
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=10), children, max_size=4),
        st.dictionaries(st.integers(-(1 << 40), 1 << 40), children, max_size=4),   # written bare
        st.dictionaries(st.one_of(st.text(max_size=6), st.integers(-99, 99)), children, max_size=4),
    ),
    max_leaves=25,
)


@given(JSON_VALUES)
@example({"offsetTable": {"TopicA@groupA": {0: 12, 1: 3}, "%RETRY%g@g": {0: 0}}})
@example({"offsetTable": {}})
@example({1: {"a": [1, 2.5, None, True, "x\ny\"z\\"]}, "1": []})
def test_configjson_round_trip(value):
    text = configjson.dumps(value)
    back = configjson.loads(text)
    assert typed(back) == typed(value)
    assert configjson.dumps(back) == text


def test_configjson_writes_int_keys_bare_and_string_keys_quoted():
    text = configjson.dumps({"offsetTable": {"T@g": {0: 12, 1: 3}}})
    assert text == '{\n\t"offsetTable":{\n\t\t"T@g":{0:12,1:3\n\t\t}\n\t}\n}'
    assert configjson.loads(text) == {"offsetTable": {"T@g": {0: 12, 1: 3}}}


@pytest.mark.parametrize("name", ["basic", "features", "multifile"])
def test_configjson_reproduces_the_fixture_file_byte_for_byte(name, extracted):
    raw = (extracted(name) / "config" / "delayOffset.json").read_text(encoding="utf-8")
    assert configjson.dumps(configjson.loads(raw)) == raw
    assert configjson.loads(raw) == {"offsetTable": {}}


@pytest.mark.parametrize("text", ["[" * 5000, '{"a":' * 3000, "{" + "1:{" * 3000])
def test_configjson_deep_nesting_is_a_config_json_error(text):
    with pytest.raises(configjson.ConfigJsonError) as err:
        configjson.loads(text)
    assert "nested too deeply" in str(err.value)


@given(st.text(max_size=40))
def test_configjson_loads_fails_only_with_config_json_error(text):
    try:
        configjson.loads(text)
    except configjson.ConfigJsonError as err:
        assert 0 <= err.offset <= len(text)


# --------------------------------------------------------------------- properties

PROP_TEXT = st.text(min_size=1, max_size=15).filter(lambda s: "\x01" not in s and "\x02" not in s)
PROPS = st.dictionaries(PROP_TEXT, PROP_TEXT, max_size=10)


@given(PROPS, st.booleans())
def test_properties_encode_then_decode(pairs, trailing):
    text = properties.encode_properties(pairs, trailing_separator=trailing)
    assert properties.decode_properties(text) == pairs
    assert list(properties.decode_properties(text)) == list(pairs)  # order kept
    assert properties.encode_properties(properties.decode_properties(text), trailing_separator=trailing) == text
    if pairs:
        assert text.endswith("\x02") == trailing
    else:
        assert text == ""


def reference_decode(text: str) -> dict:
    """MessageDecoder.string2messageProperties restated: split on 0x02; a piece counts when its
    first 0x01 has a non-empty name before it and a non-empty value after it; later wins."""
    result = {}
    for piece in text.split("\x02"):
        name, sep, value = piece.partition("\x01")
        if sep and name and value:
            result[name] = value
    return result


@given(st.text(alphabet=st.sampled_from("\x01\x02abΩ𓀀"), max_size=30))
def test_properties_decode_follows_java_rules_on_any_text(text):
    decoded = properties.decode_properties(text)
    assert decoded == reference_decode(text)
    assert list(decoded.items()) == list(reference_decode(text).items())
    for name, value in decoded.items():
        assert name and value and "\x01" not in name and "\x02" not in name + value


def test_properties_decode_known_cases():
    dec = properties.decode_properties
    assert dec("a\x01b") == {"a": "b"}
    assert dec("a\x01b\x02") == {"a": "b"}                       # 5.x trailing separator
    assert dec("a\x01\x02b\x01c") == {"b": "c"}                  # empty value skipped
    assert dec("\x01x\x02b\x01c") == {"b": "c"}                  # empty name skipped
    assert dec("ab\x02c\x01d") == {"c": "d"}                     # no separator: skipped
    assert dec("k\x01v\x01w") == {"k": "v\x01w"}                 # the first 0x01 splits
    assert dec("k\x011\x02k\x012") == {"k": "2"}                 # later duplicate wins
    assert dec("") == {}


@pytest.mark.parametrize("name", UNDAMAGED)
def test_properties_of_every_fixture_message(name):
    messages = [l for l in expected_read(name) if l["type"] == "message"]
    messages += [l["message"] for l in expected_read(name) if l["type"] == "commitlog_record"]
    assert messages
    for m in messages:
        text = m["propertiesString"]
        assert properties.decode_properties(text) == m["properties"]
        # the stored order and separator style survive a re-encode
        again = properties.encode_properties(properties.decode_properties(text),
                                             trailing_separator=text.endswith("\x02"))
        assert again == text
    if name == "basic5":  # 5.x keeps the final separator, 4.9.8 drops it
        assert all(m["propertiesString"].endswith("\x02") for m in messages if m["propertiesString"])
    else:
        assert not any(m["propertiesString"].endswith("\x02") for m in messages)


# --------------------------------------------------------------------------- msgid

@given(st.sampled_from([4, 16]).flatmap(addresses), I32, I64)
def test_offset_msgid_round_trip(address, port, offset):
    text = msgid.encode_offset_msgid(address, port, offset)
    assert len(text) == (32 if len(address) == 4 else 56)
    assert text == text.upper()
    decoded = msgid.decode_offset_msgid(text)
    assert decoded == msgid.OffsetMsgId(address, port, offset)
    assert decoded.encode() == text
    assert msgid.decode_offset_msgid(text.lower()) == decoded


@given(st.sampled_from([4, 16]).flatmap(addresses), U16, I32, I32, U16)
def test_uniq_key_round_trip(address, pid, loader, millis, counter):
    key = msgid.UniqKey(address, pid, loader, millis, counter)
    text = key.encode()
    assert len(text) == (32 if len(address) == 4 else 56)
    assert msgid.decode_uniq_key(text) == key
    assert key.ip == hosts.format_address(address)


@given(st.sampled_from([16, 28]).flatmap(lambda n: st.binary(min_size=n, max_size=n)))
def test_msgid_hex_parse_then_encode_gives_the_text(raw):
    text = raw.hex().upper()
    assert msgid.decode_offset_msgid(text).encode() == text
    assert msgid.decode_uniq_key(text).encode() == text


@pytest.mark.parametrize("bad", ["", "XYZ", "7F00000100002A9F000000000000AD6", "00" * 17, "g" * 32])
def test_msgid_rejects_bad_text_with_value_error(bad):
    with pytest.raises(ValueError):
        msgid.decode_offset_msgid(bad)
    with pytest.raises(ValueError):
        msgid.decode_uniq_key(bad)


@pytest.mark.parametrize("name", UNDAMAGED)
def test_msgids_of_every_fixture_message(name):
    messages = [l for l in expected_read(name) if l["type"] == "message"]
    assert messages
    for m in messages:
        decoded = msgid.decode_offset_msgid(m["msgId"])
        assert decoded.store_host == m["storeHost"]
        assert decoded.commitlog_offset == m["commitLogOffset"]
        assert decoded.encode() == m["msgId"]
        if m["uniqKey"]:
            assert msgid.decode_uniq_key(m["uniqKey"]).encode() == m["uniqKey"]


# --------------------------------------------------------------------------- hosts

@given(addresses(4), I32)
def test_ipv4_host_round_trip(address, port):
    text = hosts.format_host(address, port)
    assert text == f"{ipaddress.IPv4Address(address)}:{port}"
    assert hosts.parse_host(text) == (address, port)
    assert hosts.parse_host(text, 4) == (address, port)
    assert not hosts.is_ipv6(text)


@given(addresses(16), I32)
def test_ipv6_host_round_trip(address, port):
    text = hosts.format_host(address, port)
    assert hosts.parse_host(text, 16) == (address, port)
    mapped = ipaddress.IPv6Address(address).ipv4_mapped
    if mapped is None:
        # Java's form: eight uncompressed lower-case hex groups in brackets
        groups = struct.unpack(">8H", address)
        assert text == "[" + ":".join(f"{g:x}" for g in groups) + f"]:{port}"
        assert hosts.parse_host(text) == (address, port)
        assert hosts.is_ipv6(text)
    else:
        # InetAddress turns an IPv4-mapped address into an Inet4Address
        assert text == f"{mapped}:{port}"
        assert hosts.parse_host(text) == (mapped.packed, port)


@given(st.text(max_size=30))
def test_parse_host_fails_only_with_value_error(text):
    try:
        address, port = hosts.parse_host(text)
    except ValueError:
        return
    assert len(address) in (4, 16) and -(1 << 31) <= port < (1 << 31)


@pytest.mark.parametrize("name", UNDAMAGED)
def test_hosts_of_every_fixture_message(name):
    messages = [l for l in expected_read(name) if l["type"] == "message"]
    seen_v6 = False
    for m in messages:
        for field, bit in (("bornHost", sysflag.BORNHOST_V6), ("storeHost", sysflag.STOREHOST_V6)):
            text = m[field]
            width = 16 if m["sysFlag"] & bit else 4
            address, port = hosts.parse_host(text, width)
            assert hosts.format_host(address, port) == text
            seen_v6 |= width == 16
    if name == "features":
        assert seen_v6


def test_features_ipv6_hosts_in_java_form():
    text = "[2001:db8:abcd:0:0:0:0:42]:62001"  # features/NOTES.md, lines 7 and 8
    assert text in (fixture_dir("features") / "NOTES.md").read_text(encoding="utf-8")
    address, port = hosts.parse_host(text, 16)
    assert address == ipaddress.IPv6Address("2001:db8:abcd::42").packed and port == 62001
    assert hosts.format_host(address, port) == text


# ------------------------------------------------------------------------ filenames

@given(st.integers(0, 10 ** 20 - 1))
def test_offset_file_name_round_trip(offset):
    name = filenames.offset_to_name(offset)
    assert len(name) == 20 and filenames.is_offset_name(name)
    assert filenames.name_to_offset(name) == offset


@given(st.text(max_size=22))
@example("00000000000000000000\n")
@example("٠" * 20)
@example("0" * 19)
@example("0" * 21)
def test_offset_file_names_are_exactly_twenty_ascii_digits(name):
    ok = len(name) == 20 and all(c in "0123456789" for c in name)
    assert filenames.is_offset_name(name) == ok
    if ok:
        assert filenames.offset_to_name(filenames.name_to_offset(name)) == name
    else:
        with pytest.raises(ValueError):
            filenames.name_to_offset(name)


def test_negative_offset_has_no_file_name():
    with pytest.raises(ValueError):
        filenames.offset_to_name(-1)


@given(st.integers(0, 253402300799999))
def test_index_file_name_round_trip(millis):
    name = filenames.index_name(millis, timezone.utc)
    assert filenames.is_index_name(name)
    moment = filenames.index_name_time(name).replace(tzinfo=timezone.utc)
    assert int(moment.timestamp()) * 1000 + moment.microsecond // 1000 == millis


@given(st.text(max_size=18))
@example("20261122000510622\n")
def test_index_file_names_are_seventeen_ascii_digits(name):
    ok = len(name) == 17 and all(c in "0123456789" for c in name)
    assert filenames.is_index_name(name) == ok


@pytest.mark.parametrize("name", UNDAMAGED)
def test_fixture_file_names(name, extracted):
    store = extracted(name)
    pre = next(l for l in expected_read(name) if l["type"] == "pre")
    for f in pre["indexFiles"]:
        assert filenames.is_index_name(f["name"])
        created = filenames.index_name_time(f["name"]).replace(tzinfo=timezone.utc)
        # the JVM ran in UTC: the file is named when its first key arrives
        assert abs(created.timestamp() * 1000 - f["beginTimestamp"]) < 60_000
    for q in pre["consumeQueueDirs"]:
        for file_name in q["files"]:
            assert filenames.is_offset_name(file_name)
            assert filenames.name_to_offset(file_name) % 20 == 0
    offsets = [filenames.name_to_offset(p.name) for p in sorted((store / "commitlog").iterdir())]
    assert offsets[0] == 0
    assert all(b - a == 65536 for a, b in zip(offsets, offsets[1:]))


# ----------------------------------------------------------------- javastr (hashes)

NOTES = None


def notes() -> str:
    global NOTES
    if NOTES is None:
        NOTES = (fixture_dir("features") / "NOTES.md").read_text(encoding="utf-8")
    return NOTES


def test_colliding_index_keys_from_notes():
    m = re.search(r"`(GlobalOrders#\S+?)` and `(GlobalOrders#\S+?)` have the same Java hashCode \((\d+)\)",
                  notes())
    assert m, "NOTES.md no longer documents the collision"
    first, second, value = m.group(1), m.group(2), int(m.group(3))
    assert {first, second} == {"GlobalOrders#Ωa", "GlobalOrders#ΪB"}
    assert javastr.java_hash(first) == javastr.java_hash(second) == value
    assert javastr.index_key_hash(first) == javastr.index_key_hash(second) == value


def test_min_value_and_zero_hash_keys_from_notes():
    m = re.search(r"`(hash-min-[^`]+)`: `(GlobalOrders#[^`]+)`\.hashCode\(\) is Integer\.MIN_VALUE", notes())
    assert m
    min_key = m.group(2)
    assert min_key == "GlobalOrders#" + m.group(1)
    assert javastr.java_hash(min_key) == -(1 << 31)
    assert javastr.index_key_hash(min_key) == 0          # Math.abs leaves it negative: RocketMQ uses 0
    m = re.search(r"`(hash-zero-[^`]+)` has hashCode 0", notes())
    assert m
    zero_key = "GlobalOrders#" + m.group(1)
    assert javastr.java_hash(zero_key) == 0
    assert javastr.index_key_hash(zero_key) == 0


def test_slot_mates_from_notes():
    m = re.search(r"`(slot-mate-\d+)` \(hash (\d+)\) and `(slot-mate-\d+)` \(hash (\d+)\) "
                  r"share slot (\d+)", notes())
    assert m
    slots = next(l for l in expected_read("features") if l["type"] == "open")["config"]["maxHashSlotNum"]
    for key, value in ((m.group(1), int(m.group(2))), (m.group(3), int(m.group(4)))):
        assert javastr.index_key_hash("GlobalOrders#" + key) == value
        assert value % slots == int(m.group(5))
    assert m.group(2) != m.group(4)


def test_multi_tags_tags_code_from_notes():
    m = re.search(r"MULTI_TAGS sysFlag \(2\) with tags `([^`]+)`\. tagsCode is the plain hashCode of the "
                  r"whole string, (-?\d+)", notes())
    assert m
    tags, value = m.group(1), int(m.group(2))
    assert tags == "日本||Ελλάδα||مصر"
    assert javastr.java_hash(tags) == javastr.tags_code(tags) == value
    record = next(l for l in expected_read("features") if l["type"] == "commitlog_record"
                  and l["message"]["sysFlag"] & sysflag.MULTI_TAGS)
    assert record["message"]["properties"]["TAGS"] == tags
    assert record["dispatch"]["tagsCode"] == value


@pytest.mark.parametrize("name", UNDAMAGED + ["garbage-tail", "flipped-body-byte"])
def test_index_query_hashes_and_slots(name):
    lines = expected_read(name)
    slots = next(l for l in lines if l["type"] == "open")["config"]["maxHashSlotNum"]
    queries = [l for l in lines if l["type"] == "index_query"]
    assert queries
    for q in queries:
        assert q["indexKey"] == index.index_key(q["topic"], q["key"])
        assert javastr.index_key_hash(q["indexKey"]) == q["keyHash"], q["indexKey"]
        assert q["keyHash"] % slots == q["slot"]


@pytest.mark.parametrize("name", UNDAMAGED)
def test_tags_codes_of_plain_records(name):
    checked = 0
    for line in expected_read(name):
        if line["type"] != "commitlog_record" or line["message"]["topic"] == "SCHEDULE_TOPIC_XXXX":
            continue  # delayed messages carry their delivery time as tagsCode
        tags = line["message"]["properties"].get("TAGS")
        assert line["dispatch"]["tagsCode"] == javastr.tags_code(tags)
        checked += bool(tags)
    assert checked


@given(st.text(max_size=40))
def test_java_hash_matches_the_polynomial_over_utf16_units(text):
    units = [int.from_bytes(text.encode("utf-16-be", "surrogatepass")[i:i + 2], "big")
             for i in range(0, 2 * javastr.java_length(text), 2)]
    n = len(units)
    value = sum(u * pow(31, n - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    expected = value - (1 << 32) if value >= 1 << 31 else value
    assert javastr.java_hash(text) == expected
    assert 0 <= javastr.index_key_hash(text) < 1 << 31
    assert javastr.java_length(text) == sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def test_java_hash_known_values():
    assert javastr.java_hash("") == 0
    assert javastr.java_hash("Aa") == javastr.java_hash("BB") == 2112  # README: `Aa` and `BB` collide
    assert "`Aa` and `BB`" in (fixture_dir("basic").parent / "README.md").read_text(encoding="utf-8")
    assert javastr.tags_code(None) == javastr.tags_code("") == 0


# ------------------------------------------------------- body CRC and record sizes

def fixture_messages(name):
    """(record message, body bytes or None) for every commitlog record of a fixture."""
    lines = expected_read(name)
    bodies = {l["commitLogOffset"]: l["body"] for l in lines if l["type"] == "message"}
    for l in lines:
        if l["type"] == "commitlog_record":
            msg = l["message"]
            body = msg.get("body", bodies.get(l["offset"]))
            yield l, msg, None if body is None else base64.b64decode(body)


@pytest.mark.parametrize("name", UNDAMAGED)
def test_body_crc_of_every_fixture_record(name):
    checked = 0
    for _, msg, body in fixture_messages(name):
        if body is None:
            continue
        assert len(body) == msg["bodyLength"]
        assert body_crc(body) == msg["bodyCRC"] == msg["bodyCRCRecomputed"]
        checked += 1
    assert checked


def test_empty_body_crc_is_zero_in_the_fixture():
    empty = [msg for _, msg, body in fixture_messages("features") if body == b""]
    assert empty and all(m["bodyCRC"] == 0 for m in empty)
    assert body_crc(b"") == 0


@pytest.mark.parametrize("name", UNDAMAGED)
def test_record_length_is_the_store_size_of_every_fixture_record(name):
    records = list(fixture_messages(name))
    assert records
    for line, msg, _ in records:
        size = record_length(msg["sysFlag"], msg["bodyLength"], utf8_len(msg["topic"]),
                             utf8_len(msg["propertiesString"]), MAGIC_V1)
        assert size == msg["storeSize"] == line["size"], line["offset"]


@pytest.mark.parametrize("name", ["basic", "features", "basic5", "multifile"])
def test_fixture_records_decode_the_same_both_ways_and_rebuild_exactly(name, extracted):
    """Every record RocketMQ wrote: decode_entry == RECORD.parse, and RECORD.build gives the bytes."""
    expected = {l["offset"]: l for l in expected_read(name) if l["type"] == "commitlog_record"}
    found = 0
    for path in sorted((extracted(name) / "commitlog").iterdir()):
        buf = path.read_bytes()
        base = filenames.name_to_offset(path.name)
        pos = 0
        while pos < len(buf):
            entry = decode_entry(buf, pos, len(buf), base)
            if not isinstance(entry, Record):
                break
            raw = buf[pos:pos + entry.total_size]
            parsed = plain(RECORD.parse(raw))
            assert entry.to_schema_dict() == parsed
            assert RECORD.build(parsed) == raw
            want = expected[entry.offset]["message"]
            for ours, theirs in (("topic", "topic"), ("bodyCRC", "bodyCRC"), ("bornHost", "bornHost"),
                                 ("storeHost", "storeHost"), ("totalSize", "storeSize"),
                                 ("properties", "propertiesString"), ("queueOffset", "queueOffset")):
                assert parsed[ours] == want[theirs], (entry.offset, ours)
            found += 1
            pos += entry.total_size
    assert found == len(expected)


@pytest.mark.parametrize("text, bits, value", [
    ("5", 64, 5), ("+5", 64, 5), ("05", 64, 5), ("-0", 64, 0),
    ("9223372036854775807", 64, (1 << 63) - 1), ("-9223372036854775808", 64, -(1 << 63)),
    ("9223372036854775808", 64, None), ("32767", 16, 32767), ("-32768", 16, -32768), ("32768", 16, None),
    ("", 64, None), ("+", 64, None), (" 5", 64, None), ("5 ", 64, None), ("5\n", 64, None), ("1e3", 64, None),
    ("1_000", 64, None), ("\uff15", 64, 5), ("-\u0665", 64, -5),   # Long.parseLong takes any decimal digit
])
def test_java_integers_parse_as_java_parses_them(text, bits, value):
    assert javastr.parse_java_integer(text, bits) == value
