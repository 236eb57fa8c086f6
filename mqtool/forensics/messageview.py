"""A record as the operator sees it: stable JSON fields and the body in a chosen form.

Field names follow RocketMQ's MessageExt (topic, queueId, queueOffset,
commitLogOffset, storeSize, bodyCRC, ...), so JSON from mqtool lines up with
what a broker or its admin tools print.  Compressed bodies are shown as
stored and, in bodyDecompressed, unpacked with the codec the sysFlag names.
"""

from __future__ import annotations

import base64
import functools
import zlib

from mqtool.formats import properties as props
from mqtool.formats import sysflag
from mqtool.formats.commitlog import MAGIC_V2, Record
from mqtool.formats.hosts import format_host
from mqtool.formats.msgid import encode_offset_msgid

BODY_FORMATS = ("text", "hex", "base64")
MAX_DECOMPRESSED = 64 * 1024 * 1024

# A store holds few distinct hosts and sysFlags: format each once, not once per record.
_host_text = functools.lru_cache(maxsize=1024)(format_host)
_sys_flag_text = functools.lru_cache(maxsize=1024)(sysflag.describe)


def render_body(body: bytes, how: str) -> str:
    if how == "hex":
        return body.hex()
    if how == "text":
        return body.decode("utf-8", "replace")
    return base64.b64encode(body).decode("ascii")


def decompress(body: bytes, codec: str) -> bytes:
    """Unpack a body the way the 4.9.8/5.x consumer does; ValueError when it cannot."""
    try:
        if codec == "ZLIB":
            d = zlib.decompressobj()
            out = d.decompress(body, MAX_DECOMPRESSED)
            return out
        if codec == "LZ4":
            import lz4.frame

            return lz4.frame.decompress(body)
        if codec == "ZSTD":
            import zstandard

            return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    except Exception as exc:  # each codec has its own error types
        raise ValueError(f"{codec} body does not decompress: {exc}") from None
    raise ValueError(f"unknown compression {codec}")


def message_fields(record: Record, *, body: str | None = "base64") -> dict:
    """The record's fields under stable names (body omitted when body is None)."""
    properties_string = record.properties_string
    properties = props.decode_properties(properties_string)
    out = {
        "topic": record.topic,
        "queueId": record.queue_id,
        "queueOffset": record.queue_offset,
        "commitLogOffset": record.offset,
        "physicalOffset": record.physical_offset,
        "storeSize": record.total_size,
        "magicCode": f"0x{record.magic:08X}",
        "version": 2 if record.magic == MAGIC_V2 else 1,
        "bodyCRC": record.body_crc,
        "bodyCRCRecomputed": record.computed_body_crc(),
        "flag": record.flag,
        "sysFlag": record.sys_flag,
        "sysFlagText": _sys_flag_text(record.sys_flag),
        "bornTimestamp": record.born_timestamp,
        "bornHost": _host_text(record.born_address, record.born_port),
        "storeTimestamp": record.store_timestamp,
        "storeHost": _host_text(record.store_address, record.store_port),
        "reconsumeTimes": record.reconsume_times,
        "preparedTransactionOffset": record.prepared_transaction_offset,
        "tags": properties.get(props.TAGS),
        "keys": properties.get(props.KEYS),
        "properties": properties,
        "propertiesString": properties_string,
        "bodyLength": len(record.body),
        "msgId": encode_offset_msgid(record.store_address, record.store_port, record.offset),
        "uniqKey": properties.get(props.UNIQ_KEY),
    }
    if body is not None:
        out["body"] = render_body(record.body, body)
        unpacked = decompressed_field(record.body, record.sys_flag, body)
        if unpacked:
            out[unpacked[0]] = unpacked[1]
    return out


def decompressed_field(body: bytes, sys_flag: int, how: str) -> tuple[str, str] | None:
    """("bodyDecompressed", the unpacked body shown as `how`) for a compressed body, or
    ("bodyDecompressError", why) when it does not unpack; None for a body that is not compressed."""
    codec = sysflag.compression_type(sys_flag)
    if not codec or not body:
        return None
    try:
        return "bodyDecompressed", render_body(decompress(body, codec), how)
    except ValueError as exc:
        return "bodyDecompressError", str(exc)
