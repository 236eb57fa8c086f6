"""LMQ stores built from the Java source's facts, in the fixtures' shape: a spec (the messages and
the LMQ queues each names), the files, and what a broker would read.

The commitlog records are put by `mqtool append` on a store without multi-dispatch, carrying the
properties a broker with enableMultiDispatch and enableLmq gives them at put time
(INNER_MULTI_DISPATCH as sent; INNER_MULTI_QUEUE_OFFSET: each LMQ queue's next offset, counted
from 0, as MultiDispatch.wrapMultiDispatch (4.9.8) and LmqDispatch.wrapLmqDispatch (5.3.3)
assign them).  The LMQ consume queues are written here with struct, as
ConsumeQueue.multiDispatchLmqQueue puts them: consumequeue/<name>/0/, one 20-byte unit
(commitlog offset, size, the record's tags hashCode) at each assigned offset, files of the
store's consume queue file size named by their first byte.  Nothing here uses mqtool's LMQ code.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from helpers.timergen import string_hash

UNIT = struct.Struct(">qiq")


@dataclass
class Lmq:
    """One message: its topic, queue and tags, and the LMQ queues it is sent to."""

    topic: str
    queue_id: int
    tags: str
    lmq: list = field(default_factory=list)
    offset: int = -1
    size: int = 0
    lmq_offsets: list = field(default_factory=list)


def spec(messages: list[Lmq]) -> list[dict]:
    """The append spec: the broker's multi-dispatch properties, the LMQ queue offsets counted here."""
    nxt: dict[str, int] = {}
    lines = []
    for m in messages:
        m.lmq_offsets = []
        for name in m.lmq:
            m.lmq_offsets.append(nxt.get(name, 0))
            nxt[name] = m.lmq_offsets[-1] + 1
        props = {}
        if m.lmq:
            props = {"INNER_MULTI_DISPATCH": ",".join(m.lmq),
                     "INNER_MULTI_QUEUE_OFFSET": ",".join(str(o) for o in m.lmq_offsets)}
        lines.append({"topic": m.topic, "queueId": m.queue_id, "tags": m.tags, "body": f"lmq {m.tags}",
                      "properties": props})
    return lines


def append_messages(run_cli, store: Path, messages: list[Lmq], tmp: Path, *args) -> None:
    """Put the records through `mqtool append` and note where each one went."""
    path = tmp / "lmq-spec.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in spec(messages)))
    # the multi-dispatch properties are a broker's: append stores them only when told to
    result = run_cli("append", store, "--input", path, "--json", "--allow-system-topics", *args)
    assert result.code == 0, result.err
    for m, line in zip(messages, result.json_lines()):
        assert line["status"] == "PUT_OK"
        m.offset, m.size = line["wroteOffset"], line["wroteBytes"]


def broker_view(messages: list[Lmq]) -> dict:
    """{LMQ name: [(queue offset, commitlog offset, size, tags code)]}: what a broker reads."""
    view: dict[str, list] = {}
    for m in messages:
        for name, queue_offset in zip(m.lmq, m.lmq_offsets):
            view.setdefault(name, []).append((queue_offset, m.offset, m.size, string_hash(m.tags)))
    return view


def lmq_files(messages: list[Lmq], file_size: int) -> dict:
    """{relative path: bytes} of every LMQ consume queue file."""
    files: dict[str, bytearray] = {}
    for name, units in broker_view(messages).items():
        for queue_offset, offset, size, tags in units:
            pos = queue_offset * UNIT.size
            first = pos - pos % file_size
            data = files.setdefault(f"consumequeue/{name}/0/{first:020d}", bytearray(file_size))
            data[pos - first:pos - first + UNIT.size] = UNIT.pack(offset, size, tags)
    return {path: bytes(data) for path, data in files.items()}


def write_lmq_queues(store: Path, messages: list[Lmq], file_size: int) -> dict:
    files = lmq_files(messages, file_size)
    for path, data in files.items():
        (store / path).parent.mkdir(parents=True, exist_ok=True)
        (store / path).write_bytes(data)
    return files
