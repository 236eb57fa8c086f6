"""Records as blocks of row columns: the one columnar read path of export, stats, the Spark
source and `dump --json`.

A Block holds the rows of a run of records (a fastscan Chunk, cut by the
filters) column by column, with the stable names of messageview.message_fields
and the pipeline's row schema: numpy arrays for numbers, (int32 offsets, UTF-8
bytes) for text, as Arrow lays them out, so pipeline/arrow.py wraps them
without copying and native/jsonlines.py renders JSON from them.  Values are
decoded by compiled code (native/columnar.py); what is rare stays with the
reference code: the messages of failed checks (storage.commitlog.record_problems),
tagsCode when a record's TAGS or DELAY is not plain (dispatchrequest), and the
short texts of sysFlag and magicCode (one per distinct value).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mqtool.formats import commitlog as fmt
from mqtool.formats import sysflag
from mqtool.native import columnar
from mqtool.storage import commitlog, dispatchrequest


@dataclass
class Block:
    """n rows.  numbers: name -> numpy array; texts: name -> (offsets, data, valid or None);
    props: the properties map (entry offsets, key offsets, key data, value offsets, value data);
    problems: row -> [(kind, message)] for the rows that failed a check (ok is False there)."""

    n: int
    path: str
    numbers: dict
    texts: dict
    props: tuple
    problems: dict = field(default_factory=dict)
    topic_hash: object = None    # a 64-bit hash of each row's topic (fastscan's), to group rows by topic

    def topics(self) -> list:
        """[(topic, row numbers)] in order of first appearance."""
        hashes, first, inverse = np.unique(self.topic_hash, return_index=True, return_inverse=True)
        order = np.argsort(first)
        rows = np.argsort(inverse, kind="stable")
        bounds = np.cumsum(np.bincount(inverse, minlength=len(hashes)))
        groups = np.split(rows, bounds[:-1])
        return [(self.text("topic", int(first[k])), groups[k]) for k in order.tolist()]

    def text(self, name: str, i: int):
        off, data, valid = self.texts[name]
        if valid is not None and not valid[i]:
            return None
        return bytes(data[off[i]:off[i + 1]]).decode("utf-8")


def _texts_of(values: list[str], codes) -> tuple:
    """A text column of few distinct values: values[codes[i]] for each row, as offsets and data."""
    encoded = [v.encode("utf-8") for v in values]
    lengths = np.array([len(v) for v in encoded], dtype=np.int32)[codes]
    off = np.zeros(len(codes) + 1, dtype=np.int32)
    np.cumsum(lengths, out=off[1:])
    table = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    starts = np.concatenate([[0], np.cumsum([len(v) for v in encoded])])[codes]
    if len(codes) == 0:
        return off, np.zeros(0, np.uint8), None
    index = np.repeat(starts - off[:-1], lengths) + np.arange(off[-1])
    return off, table[index], None


def _few(values, describe) -> tuple:
    if len(values) and values.min() == values.max():     # one value in every row, the usual case
        text = np.frombuffer(describe(int(values[0])).encode("utf-8"), dtype=np.uint8)
        data = np.empty((len(values), len(text)), dtype=np.uint8)
        data[:] = text
        return np.arange(len(values) + 1, dtype=np.int32) * np.int32(len(text)), data.reshape(-1), None
    distinct, codes = np.unique(values, return_inverse=True)
    return _texts_of([describe(int(v)) for v in distinct], codes)


def topic_names(chunk) -> dict:
    """topic_hash -> topic, for the distinct topics of a chunk."""
    hashes, first = np.unique(chunk.columns["topic_hash"], return_index=True)
    return {int(h): chunk.topic(int(i)) for h, i in zip(hashes, first)}


def keep_mask(chunk, filters, names: dict | None = None):
    """The records of a chunk that the filters keep (None: all of them)."""
    c = chunk.columns
    masks = []
    if filters.topics is not None:
        names = names or topic_names(chunk)
        wanted = [h for h, t in names.items() if t in filters.topics]
        masks.append(np.isin(c["topic_hash"], np.array(wanted, dtype=np.int64)))
    if filters.queue_ids is not None:
        masks.append(np.isin(c["queue_id"], np.array(sorted(filters.queue_ids), dtype=np.int64)))
    for column, (lo, hi) in (("store_ts", filters.time_range), ("offset", filters.offset_range),
                             ("queue_offset", filters.queue_offset_range)):
        if lo is not None:
            masks.append(c[column] >= lo)
        if hi is not None:
            masks.append(c[column] <= hi)
    if not masks:
        return None
    return np.logical_and.reduce(masks)


class _Checked:
    """What record_problems reads of a record, from the columns."""

    def __init__(self, offset, physical, queue_id, queue_offset, sys_flag, stored, computed):
        self.offset, self.physical_offset, self.queue_id = offset, physical, queue_id
        self.queue_offset, self.sys_flag, self.body_crc = queue_offset, sys_flag, stored
        self._computed = computed

    def computed_body_crc(self) -> int:
        return self._computed


def suspects(c: dict, crc_bad=None):
    """The records of fastscan columns that may fail one of record_problems' checks (a superset:
    which fail, and why, is record_problems' answer).  crc_bad: the rows whose CRC is wrong,
    when CRCs are checked."""
    suspect = (c["physical"] != c["offset"]) | (c["queue_offset"] < 0) | (c["queue_id"] < 0)
    suspect |= ~sysflag.is_dispatched_to_consume_queue(c["sys_flag"]) & (c["queue_offset"] != 0)
    if crc_bad is not None:
        suspect |= crc_bad
    return suspect


def problems_of(c: dict, stored, computed, check_crc: bool) -> dict:
    """row -> record_problems of the rows that fail a check."""
    suspect = suspects(c, stored != computed if check_crc else None)
    found = {}
    for i in np.flatnonzero(suspect).tolist():
        got = commitlog.record_problems(_Checked(int(c["offset"][i]), int(c["physical"][i]), int(c["queue_id"][i]),
                                                 int(c["queue_offset"][i]), int(c["sys_flag"][i]), int(stored[i]),
                                                 int(computed[i])), check_crc)
        if got:
            found[i] = got
    return found


def chunk_problems(chunk, base: int, check_crc: bool) -> dict:
    """row -> record_problems of the records of a chunk that fail a check (the suspects decoded
    by the reference decoder).  base: the commitlog offset of the chunk's file."""
    c = chunk.columns
    found = {}
    for i in np.flatnonzero(suspects(c, ~c["crc_ok"] if check_crc else None)).tolist():
        pos = int(c["offset"][i]) - base
        got = commitlog.record_problems(fmt.decode_entry(chunk.buf.data, pos, pos + int(c["size"][i]), base),
                                        check_crc)
        if got:
            found[i] = got
    return found


def tags_codes(chunk, c: dict, d: dict, names: dict, base: int, delay_levels) -> np.ndarray:
    """The consume queue's tagsCode of each record (dispatchrequest.tags_codes); records whose
    DELAY is not plain digits are asked of dispatchrequest.from_record itself."""
    rewritten = [h for h, t in names.items() if dispatchrequest.rewrites_tags_code(t)]
    if not rewritten:
        return d["tags_hash"].copy()
    codes, exact = dispatchrequest.tags_codes(d["tags_hash"], d["delay"],
                                              np.isin(c["topic_hash"], np.array(rewritten, dtype=np.int64)),
                                              c["store_ts"], list(delay_levels))
    for i in np.flatnonzero(exact).tolist():
        pos = int(c["offset"][i]) - base
        record = fmt.decode_entry(chunk.buf.data, pos, pos + int(c["size"][i]), base)
        codes[i] = dispatchrequest.from_record(record, list(delay_levels)).tags_code
    return codes


def block(chunk, base: int, delay_levels, *, keep=None, check_crc: bool = True, with_body: bool = False,
          names: dict | None = None) -> Block:
    """The rows of a chunk's records (those where keep is true) as a Block.  base: the
    commitlog offset of the chunk's file."""
    names = names or topic_names(chunk)
    if keep is not None:
        chunk = chunk.take(keep)
    c = chunk.columns
    d = columnar.decode_columns(chunk.buf, base, c, with_body, c["crc_ok"] if check_crc else None)
    problems = problems_of(c, d["stored_crc"], d["computed_crc"], check_crc)
    numbers = {name: make(c, base) for name, make in _SCAN_NUMBERS.items()}
    numbers.update({
        "bodyCRC": d["stored_crc"], "bodyCRCRecomputed": d["computed_crc"], "flag": d["flag"],
        "bornTimestamp": d["born_ts"], "reconsumeTimes": d["reconsume"], "preparedTransactionOffset": d["prepared"],
        "tagsCode": tags_codes(chunk, c, d, names, base, delay_levels), "ok": _ok(chunk.count, problems),
    })
    texts = {name: make(c) for name, make in _SCAN_TEXTS.items()}
    texts.update({
        "topic": (d["topic_off"], d["topic_data"], None),
        "bornHost": (d["born_off"], d["born_data"], None),
        "storeHost": (d["store_off"], d["store_data"], None),
        "propertiesString": (d["props_off"], d["props_data"], None),
        "msgId": (d["msgid_off"], d["msgid_data"], None),
    })
    for name in columnar.NAMED:
        texts[name] = (d[name + "_off"], d[name + "_data"], d[name + "_ok"])
    if with_body:
        texts["body"] = (d["body_off"], d["body_data"], None)
    props = (d["map_off"], d["key_off"], d["key_data"], d["val_off"], d["val_data"])
    return Block(chunk.count, chunk.path, numbers, texts, props, problems, c["topic_hash"])


# The row columns a chunk's scan gives without decoding its records, each from the scan's columns c
# (and the file's commitlog offset base): block() and scanned_block() both make them here.
_SCAN_NUMBERS = {
    "fileOffset": lambda c, base: c["offset"] - base, "queueId": lambda c, base: c["queue_id"].astype(np.int32),
    "queueOffset": lambda c, base: c["queue_offset"], "commitLogOffset": lambda c, base: c["offset"],
    "physicalOffset": lambda c, base: c["physical"], "storeSize": lambda c, base: c["size"].astype(np.int32),
    "version": lambda c, base: np.where(c["magic"] == fmt.MAGIC_V2, 2, 1).astype(np.int32),
    "sysFlag": lambda c, base: c["sys_flag"].astype(np.int32), "storeTimestamp": lambda c, base: c["store_ts"],
    "bodyLength": lambda c, base: c["body_len"].astype(np.int32),
    "dispatchedToConsumeQueue": lambda c, base: _dispatched(c["sys_flag"]),
}
_SCAN_TEXTS = {
    "magicCode": lambda c: _few(c["magic"], lambda m: f"0x{m:08X}"),
    "sysFlagText": lambda c: _few(c["sys_flag"], sysflag.describe),
}
# what a query of only these needs skips columnar.decode_columns (the rows are the same, their checks too)
SCANNED = frozenset({"broker", "store", "file", "topic", "ok", "problems", *_SCAN_NUMBERS, *_SCAN_TEXTS})


def scanned_block(chunk, base: int, columns, *, keep=None, check_crc: bool = True, names: dict | None = None) -> Block:
    """block() holding only `columns` (all in SCANNED), from the scan's columns: no record is
    decoded but those that may fail a check (chunk_problems)."""
    names = names or topic_names(chunk)
    if keep is not None:
        chunk = chunk.take(keep)
    c = chunk.columns
    wanted = set(columns)
    problems = chunk_problems(chunk, base, check_crc) if wanted & {"ok", "problems"} else {}
    numbers = {name: make(c, base) for name, make in _SCAN_NUMBERS.items() if name in wanted}
    if "ok" in wanted:
        numbers["ok"] = _ok(chunk.count, problems)
    texts = {name: make(c) for name, make in _SCAN_TEXTS.items() if name in wanted}
    if "topic" in wanted:
        texts["topic"] = _few(c["topic_hash"], names.__getitem__)
    return Block(chunk.count, chunk.path, numbers, texts, (None,) * 5, problems, c["topic_hash"])


def _dispatched(sys_flag):
    tx = sys_flag & sysflag.TRANSACTION_MASK
    return (tx == sysflag.TRANSACTION_NOT_TYPE) | (tx == sysflag.TRANSACTION_COMMIT)


def _ok(n: int, problems: dict):
    ok = np.ones(n, dtype=np.bool_)
    if problems:
        ok[list(problems)] = False
    return ok


def row_ranges(chunk, with_body: bool, rows: int, max_bytes: int = 64 << 20):
    """[lo, hi) ranges of a chunk's records of at most `rows` records and about max_bytes of text
    (so int32 offsets never overflow and a block stays small)."""
    c = chunk.columns
    weight = 3 * (c["props_len"] + c["topic_len"]) + 200
    if with_body:
        weight = weight + c["body_len"]
    total = np.cumsum(weight)
    lo = 0
    while lo < chunk.count:
        before = total[lo - 1] if lo else 0
        hi = min(chunk.count, lo + rows, int(np.searchsorted(total, before + max_bytes, side="right")))
        hi = max(hi, lo + 1)
        yield lo, hi
        lo = hi


def blocks(chunk, base: int, delay_levels, *, keep=None, check_crc: bool = True, with_body: bool = False,
           rows: int = 16384, columns=None):
    """The Blocks of a chunk's records (those where keep is true), at most `rows` each (see
    row_ranges), in order.  columns: the row columns wanted (None: all of them); when the scan
    gives them all (SCANNED), the blocks hold only those and the records are not decoded."""
    names = topic_names(chunk)
    scanned = columns is not None and SCANNED.issuperset(columns)
    for lo, hi in row_ranges(chunk, with_body, rows):
        mask = np.zeros(chunk.count, dtype=np.bool_)
        mask[lo:hi] = True if keep is None else keep[lo:hi]
        if not mask.any():
            continue
        if scanned:
            yield scanned_block(chunk, base, columns, keep=mask, check_crc=check_crc, names=names)
        else:
            yield block(chunk, base, delay_levels, keep=mask, check_crc=check_crc, with_body=with_body,
                        names=names)
