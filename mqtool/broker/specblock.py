"""Blocks of JSON lines to ColumnBatch runs: the common lines without any Python per line.

A block of whole lines is scanned by compiled code (mqtool/native/specscan.py): each
line is FAST (a flat object of the common fields, ASCII text without escapes, numbers in
range) or not.  Here the few distinct topics and born hosts of a block are checked once
each (a topic a producer may not send to, a host that is not one: those lines are not
fast), and a run of fast lines becomes one ColumnBatch, its stored properties made from
the same per-shape template as specbatch's plain lines.  Every other line is left to
the caller's reference path (specbatch.parse_line, SpecBatcher), which words errors.
tests/test_specblock.py checks that both paths store the same bytes.
"""

from __future__ import annotations

import numpy as np

from mqtool.broker.spec import DEFAULT_BORN_HOST, RANGES
from mqtool.broker.specbatch import Plan, SpecBatcher, host_flag
from mqtool.engine.batchappend import ColumnBatch
from mqtool.formats import sysflag
from mqtool.native import specscan as ss
from mqtool.storage.topics import producer_refused

I64 = np.int64
FAST, SLOW, BLANK = ss.FAST, ss.SLOW, ss.BLANK
LOW, HIGH = (np.array([RANGES[f][k] for f in ss.NUMBERS], dtype=np.int64) for k in (0, 1))
TOO_LONG = 3    # a line longer than the caller allows: refused when reached


class Block:
    """Whole lines (the last one may lack its newline), scanned; line i is number first + i."""

    def __init__(self, data, first: int, status, starts, ends, present, text_off, text_len, numbers,
                 topic_id, topic_names, host_id, hosts, host_flags):
        self.data, self.first, self.status, self.starts, self.ends = data, first, status, starts, ends
        self.present, self.text_off, self.text_len, self.numbers = present, text_off, text_len, numbers
        self.topic_id, self.topic_names, self.host_id, self.hosts = topic_id, topic_names, host_id, hosts
        self.host_flags = host_flags
        self.slow = np.flatnonzero(status != FAST)
        self._status = status.tolist()      # the per-line path asks line by line: Python values
        self._bounds = self._text = None

    def __len__(self) -> int:
        return len(self.starts)

    def fast(self, i: int) -> bool:
        return self._status[i] == FAST

    def too_long(self, i: int) -> bool:
        return self._status[i] == TOO_LONG

    def line(self, i: int) -> bytes:
        if self._text is None:      # the first line asked for: the block as bytes, once
            self._text, self._bounds = self.data.tobytes(), list(zip(self.starts.tolist(), self.ends.tolist()))
        start, end = self._bounds[i]
        return self._text[start:end]

    def run_end(self, i: int, limit: int) -> int:
        """The end of the run of fast lines from line i, at most limit."""
        k = np.searchsorted(self.slow, i)
        end = int(self.slow[k]) if k < len(self.slow) else len(self)
        return min(end, limit)


class BlockScanner:
    """Scans blocks of lines and makes ColumnBatches of their fast runs."""

    def __init__(self, batcher: SpecBatcher, max_line: int):
        self.batcher, self.max_line = batcher, max_line
        self.names = ss.field_names()
        self._topics: dict[str, bool] = {}             # topic -> may a producer send to it
        self._hosts: dict[bytes, int | None] = {}      # born host bytes -> its sysFlag bits, None: not a host
        # the stored properties of each shape (1: with tags, + 2: with keys) as template pieces
        pieces, starts, literals = [], [0], bytearray()
        for shape in range(4):
            fields = {"topic"} | ({"tags"} if shape & 1 else set()) | ({"keys"} if shape & 2 else set())
            template = Plan(fields, (), batcher.cluster, batcher.version).template
            for piece in template:
                if isinstance(piece, str):
                    data = piece.encode("utf-8")
                    pieces.append((-1, len(literals), len(data)))
                    literals += data
                else:
                    pieces.append((piece, 0, 0))     # 0: the tags, 1: the keys (a line without properties)
            starts.append(len(pieces))
        self.pieces = np.array(pieces, dtype=I64).reshape(-1, 3)
        self.piece_start = np.array(starts, dtype=I64)
        self.literals = np.frombuffer(bytes(literals) or b"\0", dtype=np.uint8)

    def scan(self, data, first: int) -> Block:
        """A block of data (whole lines, as a uint8 array) whose first line is number first."""
        ends = np.flatnonzero(data == 10)
        if not len(ends) or ends[-1] != len(data) - 1:
            ends = np.append(ends, len(data))
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
        n = len(ends)
        status = np.empty(n, dtype=np.int8)
        present = np.empty(n, dtype=I64)
        text_off = np.zeros((n, 5), dtype=I64)
        text_len = np.empty((n, 5), dtype=I64)
        numbers = np.empty((n, 5), dtype=I64)
        ss.scan_lines(data, ss.words(data), starts, ends, *self.names, LOW, HIGH, status, present, text_off, text_len, numbers)
        too_long = ends - starts + (ends < len(data)) > self.max_line
        if too_long.any():
            status[too_long] = TOO_LONG
        topic_id = np.empty(n, dtype=I64)
        firsts = ss.intern(data, text_off[:, ss.TOPIC], text_len[:, ss.TOPIC], status, topic_id)
        topic_names = [bytes(data[text_off[i, 0]:text_off[i, 0] + text_len[i, 0]]).decode("ascii") for i in firsts]
        for t, name in enumerate(topic_names):
            if not self._allowed(name):
                status[topic_id == t] = SLOW
        host_id = np.empty(n, dtype=I64)
        firsts = ss.intern(data, text_off[:, ss.HOST], text_len[:, ss.HOST], status, host_id)
        texts = [bytes(data[text_off[i, ss.HOST]:text_off[i, ss.HOST] + text_len[i, ss.HOST]]) for i in firsts]
        texts.append(DEFAULT_BORN_HOST.encode())       # the host of a line without one
        flags = [self._host(text) for text in texts]
        for h, flag in enumerate(flags):
            if flag is None:      # not a host: its lines are not fast, and it stands in the table as the default
                status[host_id == h] = SLOW
                texts[h], flags[h] = texts[-1], 0
        host_id[host_id < 0] = len(texts) - 1
        hosts = [(text.decode("ascii"), bool(flag & sysflag.BORNHOST_V6)) for text, flag in zip(texts, flags)]
        host_flags = np.array(flags, dtype=I64)
        return Block(data, first, status, starts, ends, present, text_off, text_len, numbers, topic_id, topic_names,
                     host_id, hosts, host_flags)

    def _allowed(self, topic: str) -> bool:
        """May a producer send to the topic?"""
        allowed = self._topics.get(topic)
        if allowed is None:
            allowed = self._topics[topic] = self.batcher.allow_system_topics or not producer_refused(topic)
        return allowed

    def _host(self, raw: bytes) -> int | None:
        flag = self._hosts.get(raw, False)
        if flag is False:
            flag = self._hosts[raw] = host_flag(raw.decode("ascii"))
        return flag

    def batch(self, block: Block, i: int, j: int) -> ColumnBatch:
        """The ColumnBatch of the fast lines i..j-1 of block."""
        rows = np.arange(i, j, dtype=I64)
        props, props_off, props_len, tags_code, key_hash, key_owner = ss.build_columns(
            block.data, rows, block.present, block.text_off, block.text_len, self.pieces, self.piece_start,
            self.literals)
        numbers = block.numbers[i:j]
        given = block.present[i:j]
        flag = numbers[:, ss.FLAG]
        store_ts = numbers[:, ss.STORE_TS].copy()
        return ColumnBatch(
            topic_names=block.topic_names, topic_id=block.topic_id[i:j], queue_ids=numbers[:, ss.QUEUE].copy(),
            body_buf=block.data, body_off=block.text_off[i:j, ss.BODY].copy(),
            body_len=np.maximum(block.text_len[i:j, ss.BODY], 0), props_buf=props, props_off=props_off,
            props_len=props_len, born_hosts=block.hosts, born_id=block.host_id[i:j],
            sys_flags=block.host_flags[block.host_id[i:j]], born_ts=numbers[:, ss.BORN_TS].copy(),
            flags=np.where(flag >= 1 << 31, flag - (1 << 32), flag), store_ts=store_ts,
            own_store_ts=(given & (1 << (5 + ss.STORE_TS))) != 0, reconsume=numbers[:, ss.RECONSUME].copy(),
            tags_code=tags_code, key_hash=key_hash, key_owner=key_owner)
