"""Socket addresses as the commitlog stores them: 4 or 16 address bytes, then a 4-byte port.

Text form is Java's InetSocketAddress form, which the broker prints and the
fixtures record: `1.2.3.4:5`, and for IPv6 eight uncompressed groups in
brackets, `[2001:db8:0:0:0:0:0:1]:61001`.
"""

from __future__ import annotations

import ipaddress
import struct
from functools import lru_cache


def format_address(address: bytes) -> str:
    """Java's InetAddress.getHostAddress() of raw address bytes."""
    if len(address) == 4:
        return ".".join(str(b) for b in address)
    if len(address) == 16:
        groups = struct.unpack(">8H", address)
        if groups[:5] == (0, 0, 0, 0, 0) and groups[5] == 0xFFFF:
            # Java turns an IPv4-mapped IPv6 address into an Inet4Address.
            return ".".join(str(b) for b in address[12:])
        return ":".join(format(g, "x") for g in groups)
    raise ValueError(f"an address has 4 or 16 bytes, not {len(address)}")


def format_host(address: bytes, port: int) -> str:
    text = format_address(address)
    if len(address) == 16 and ":" in text:
        return f"[{text}]:{port}"
    return f"{text}:{port}"


@lru_cache(maxsize=4096)
def parse_host(text: str, width: int | None = None) -> tuple[bytes, int]:
    """`ip:port` or `[ipv6]:port` to (address bytes, port).

    width forces 4 or 16 address bytes (the sysflag decides the width on disk);
    an IPv4 address in a 16-byte field is stored IPv4-mapped.
    """
    text = text.strip()
    if text.startswith("["):
        close = text.find("]")
        if close < 0 or text[close + 1:close + 2] != ":":
            raise ValueError(f"bad host {text!r}: expected [ipv6]:port")
        host, port_text = text[1:close], text[close + 2:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ValueError(f"bad host {text!r}: expected ip:port")
    try:
        addr = ipaddress.ip_address(host)
        port = int(port_text)
    except ValueError as exc:
        raise ValueError(f"bad host {text!r}: {exc}") from None
    if not -(1 << 31) <= port < (1 << 31):
        raise ValueError(f"bad host {text!r}: port out of range")
    packed = addr.packed
    if width == 16 and len(packed) == 4:
        packed = ipaddress.IPv6Address("::ffff:" + host).packed
    elif width == 4 and len(packed) == 16:
        mapped = ipaddress.IPv6Address(packed).ipv4_mapped
        if mapped is None:
            raise ValueError(f"host {text!r} is IPv6 but the field holds IPv4")
        packed = mapped.packed
    return packed, port


def is_ipv6(text: str) -> bool:
    return text.strip().startswith("[")


_V4_MAPPED_PREFIX = bytes(10) + b"\xff\xff"


@lru_cache(maxsize=4096)
def java_host(text: str, v6_flag: bool = False) -> tuple[bytes, int, bool]:
    """(address bytes, port, is IPv6) as a broker stores a host: Java turns an IPv4-mapped
    IPv6 address into IPv4, and a sysFlag that already says IPv6 widens an IPv4 address."""
    address, port = parse_host(text)
    if len(address) == 16 and address.startswith(_V4_MAPPED_PREFIX):
        address = address[12:]
    if len(address) == 4 and v6_flag:
        address = _V4_MAPPED_PREFIX + address
    return address, port, len(address) == 16
