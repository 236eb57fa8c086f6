"""Records built by hand with the commitlog schema (formats/commitlog.encode_record), and one-file
stores of them: what the columnar tests feed the kernels beside the fixtures."""

from __future__ import annotations

from pathlib import Path

from mqtool.formats.commitlog import encode_record


def record(offset: int, **fields) -> bytes:
    """One record at commitlog offset `offset`: plain defaults, then the fields given."""
    base = {"queueId": 1, "flag": 7, "queueOffset": 0, "physicalOffset": offset, "sysFlag": 0,
            "bornTimestamp": 1_700_000_000_000, "bornHost": "10.0.0.1:4000", "storeTimestamp": 1_700_000_000_123,
            "storeHost": "192.168.7.9:10911", "reconsumeTimes": 0, "preparedTransactionOffset": 0,
            "body": b"hello", "topic": "T", "properties": ""}
    base.update(fields)
    return encode_record(base)


def bad_utf8(raw: bytes) -> str:
    """Bytes that are not UTF-8, as a str the schema encodes back to them."""
    return raw.decode("utf-8", "surrogateescape")


def store_of(root: Path, cases, file_size: int = 65536) -> Path:
    """A store at root whose one commitlog file holds a record for each dict of fields."""
    data = b""
    for fields in cases:
        data += record(len(data), **fields)
    (root / "commitlog").mkdir(parents=True)
    (root / "commitlog" / "00000000000000000000").write_bytes(data + bytes(max(file_size, len(data)) - len(data)))
    return root
