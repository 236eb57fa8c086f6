"""compress() against the bodies the 4.9.8 producer codecs stored in the features fixture."""

from __future__ import annotations

import base64
import os

import pytest

from mqtool.broker.compression import CODECS, compress, compression_flags, decompress, should_compress
from mqtool.formats import sysflag

from conftest import expected_read, fixture_dir, load_jsonl


def spec_body(line) -> bytes:
    if "bodyBase64" in line:
        return base64.b64decode(line["bodyBase64"])
    if "bodyPattern" in line:
        unit = line["bodyPattern"]["text"].encode("utf-8")
        size = line["bodyPattern"]["size"]
        return (unit * (size // len(unit) + 1))[:size]
    return line.get("body", "").encode("utf-8")


def compressed_lines():
    spec = load_jsonl(fixture_dir("features") / "spec.jsonl")
    puts = {w["index"]: w for w in load_jsonl(fixture_dir("features") / "write.jsonl") if w["type"] == "put"}
    messages = {m["commitLogOffset"]: m for m in expected_read("features") if m["type"] == "message"}
    rows = []
    for index, line in enumerate(spec):
        if line.get("compress"):
            rows.append((index, line, messages[puts[index]["wroteOffset"]]))
    return rows


def test_fixture_has_all_three_codecs():
    assert sorted(line["compress"] for _, line, _ in compressed_lines()) == sorted(CODECS)


@pytest.mark.parametrize("row", compressed_lines(), ids=lambda row: row[1]["compress"])
def test_compress_matches_stored_body(row):
    index, line, message = row
    body = spec_body(line)
    stored = base64.b64decode(message["body"])
    codec = line["compress"]
    assert should_compress(body)
    assert compress(body, codec) == stored
    assert decompress(stored, codec) == body
    assert message["sysFlag"] & (sysflag.COMPRESSED | sysflag.COMPRESSION_TYPE_MASK) == compression_flags(codec)
    assert sysflag.compression_type(message["sysFlag"]) == codec


def test_frame_headers():
    body = b"x" * 5000
    assert compress(body, "ZLIB")[:2] == b"\x78\x5e"
    # LZ4 frame: magic, FLG 0x60 (independent blocks, no checksums, no size), BD 0x70 (4 MB), HC, ..., end mark
    lz4 = compress(body, "LZ4")
    assert lz4[:7] == bytes.fromhex("04224d18607073") and lz4[-4:] == b"\0\0\0\0"
    # zstd frame: magic, FHD 0 (no content size, no checksum), ..., an empty last raw block
    zstd = compress(body, "ZSTD")
    assert zstd[:5] == bytes.fromhex("28b52ffd00") and zstd[-3:] == b"\x01\x00\x00"


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 70000, 300000])
def test_round_trip(codec, size):
    body = (os.urandom(size // 2) + b"abc" * size)[:size]
    assert decompress(compress(body, codec), codec) == body


def test_threshold_and_flags():
    assert not should_compress(b"a" * 4095) and should_compress(b"a" * 4096)
    assert {c: compression_flags(c) for c in CODECS} == {"ZLIB": 0x301, "LZ4": 0x101, "ZSTD": 0x201}
    with pytest.raises(ValueError):
        compress(b"", "SNAPPY")
