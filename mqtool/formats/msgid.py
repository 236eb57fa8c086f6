"""Message ids.

Offset message id (MessageDecoder.createMessageId): the store host's address
bytes, its port (4 bytes) and the record's commitlog offset (8 bytes), as upper
hex: 32 characters for IPv4, 56 for IPv6.

Unique key, the client's msgId (MessageClientIDSetter, property UNIQ_KEY): the
producer's address (4 or 16 bytes), pid (2), class-loader hash (4), milliseconds
since the start of the month the producer started in (4), and a counter (2).
Both kinds are 32 hex characters for IPv4, so only the context tells them apart.
"""

from __future__ import annotations

import string
import struct
from dataclasses import dataclass

from mqtool.formats.hosts import format_address, format_host

_OFFSET_TAIL = struct.Struct(">iq")
_UNIQ_TAIL = struct.Struct(">HiiH")


def _hex_bytes(text: str, what: str) -> bytes:
    text = text.strip()
    if not text or any(c not in string.hexdigits for c in text):
        raise ValueError(f"{what} {text!r} is not hexadecimal")
    if len(text) not in (32, 56):
        raise ValueError(f"{what} {text!r} has {len(text)} hex digits; expected 32 (IPv4) or 56 (IPv6)")
    return bytes.fromhex(text)


def encode_offset_msgid(store_address: bytes, store_port: int, commitlog_offset: int) -> str:
    return (store_address + _OFFSET_TAIL.pack(store_port, commitlog_offset)).hex().upper()


@dataclass(frozen=True)
class OffsetMsgId:
    store_address: bytes
    store_port: int
    commitlog_offset: int

    @property
    def store_host(self) -> str:
        return format_host(self.store_address, self.store_port)

    def encode(self) -> str:
        return encode_offset_msgid(self.store_address, self.store_port, self.commitlog_offset)


def decode_offset_msgid(text: str) -> OffsetMsgId:
    raw = _hex_bytes(text, "message id")
    width = len(raw) - 12
    port, offset = _OFFSET_TAIL.unpack_from(raw, width)
    return OffsetMsgId(raw[:width], port, offset)


@dataclass(frozen=True)
class UniqKey:
    address: bytes
    pid: int
    class_loader_hash: int
    millis_since_month_start: int
    counter: int

    @property
    def ip(self) -> str:
        return format_address(self.address)

    def encode(self) -> str:
        return (self.address + _UNIQ_TAIL.pack(self.pid, self.class_loader_hash,
                                               self.millis_since_month_start, self.counter)).hex().upper()


def decode_uniq_key(text: str) -> UniqKey:
    raw = _hex_bytes(text, "unique key")
    width = len(raw) - 12
    pid, loader, millis, counter = _UNIQ_TAIL.unpack_from(raw, width)
    return UniqKey(raw[:width], pid, loader, millis, counter)
