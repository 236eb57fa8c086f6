"""A DLedger store's files (formats/dledger.py): where they are, the entry walk, the index units,
and the committed index.

`walk_entries` is the one walk over DLedger data files: entries in order, a blank ends its file,
zeros end the data.  It accepts what DLedgerMmapFileStore.recover accepts (magic, size against
the header and body length, the pos field) and resynchronises after damage on the next entry
whose pos field says where it is.  The commitlog walker (storage/commitlog.py) reads the record
in each entry's body through it, so every reader of the commitlog sees a DLedger store as its
records at entry pos + 48.

Facts from openmessaging DLedger 0.3.1.2 (DLedgerMmapFileStore, MemberState, MmapFileList) and
rocketmq-all-5.3.3 (DLedgerCommitLog): the committed index comes from `checkpoint` (capped at the
ledger's end); a broker's reput reads the entries up to the end of the committed one
(getData stops at committedPos); after a crash (abort file) DLedgerCommitLog's recovery
dispatches every entry the walk accepts, committed or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqtool.errors import NotAStoreError
from mqtool.formats import dledger as fmt
from mqtool.formats import commitlog as commitlog_format
from mqtool.formats.commitlog import Blank
from mqtool.formats.written import written_end
from mqtool.storage import fsutil
from mqtool.storage.mappedfilequeue import MappedFileQueue
from mqtool.storage.walkitems import EndOfData, Problem
from mqtool.storage.walkitems import first_nonzero as _first_nonzero

DATA_DIR, INDEX_DIR = "data", "index"
CHECKPOINT, CURRTERM = "checkpoint", "currterm"
_HEAD = fmt.BLANK.sizeof()     # the first 8 bytes: an entry's magic and size, a record's totalSize and magic
assert _HEAD == commitlog_format.BLANK_HEADER_SIZE


def is_dledger_dir(path: Path, names: set[str] | None = None) -> bool:
    """Is this folder (its entry names given, or listed) a DLedger store's (dledger-<selfId>/, or
    DLedger's own <group>-<selfId>/ holding data/ with index/ or currterm)?"""
    if names is None:
        try:
            names = {n for n, *_ in fsutil.scandir(path)}
        except OSError:
            return False
    return Path(path).name.startswith("dledger") or (DATA_DIR in names and (INDEX_DIR in names or CURRTERM in names))


def is_data_file(path) -> bool:
    """Is this file a DLedger data file: in the data/ folder of a DLedger folder, or (a data folder
    moved by storePathDLedgerCommitLog) one that starts with an entry's magic?  Not one that
    starts with a plain commitlog record (moved_by_hand)."""
    try:
        head = fsutil.read_small(path, _HEAD)
    except OSError:
        head = b""
    if _in_data_folder(path):
        return not _plain_head(head)
    return len(head) == _HEAD and fmt.decode_magic_size(head, 0)[0] == fmt.MAGIC_1


def _plain_head(head: bytes) -> bool:
    """Do these first 8 bytes begin a plain commitlog record or BLANK (its magic where an entry has
    its size: the test DLedgerCommitLog.checkMessageAndReturnSize makes)?"""
    return commitlog_format.begins_record(head)


def _in_data_folder(path) -> bool:
    parent = Path(path).parent
    return parent.name == DATA_DIR and is_dledger_dir(parent.parent)


def moved_by_hand(path) -> bool:
    """A file in DLedger's data folder that starts with a plain commitlog record: old commitlog
    files moved there by hand.  It is read as a commitlog file (as DLedgerCommitLog reads such
    records), and named: DLedger's own recovery would take it for damage and cut it."""
    if not _in_data_folder(path):
        return False
    try:
        return _plain_head(bytes(fsutil.read_small(path, _HEAD)))
    except OSError:
        return False


MOVED_BY_HAND = ("a plain commitlog file in DLedger's data folder (moved there by hand): read as the old "
                 "commitlog below dividedCommitlogOffset; DLedger's own recovery would cut it as damage, so "
                 "move it back to commitlog/")


def moved_files(layout) -> list[Path]:
    """The files of a DLedger store's data folders (layout's, not the old commitlog's) that
    moved_by_hand names, in name order: what info and verify-crc name and the writers refuse."""
    if layout.dledger_dir is None:
        return []
    found = []
    for folder in layout.commitlog_dirs:
        if folder in layout.old_commitlog_dirs:
            continue
        try:
            listing = sorted(fsutil.scandir(folder))
        except OSError:
            continue
        found += [folder / name for name, is_file, _, _ in listing if is_file and moved_by_hand(folder / name)]
    return found


# ------------------------------------------------------------------ a broker switched to DLedger
# DLedgerCommitLog (5.3.3) keeps the old commitlog's files and starts DLedger's data at
# dividedCommitlogOffset, the end of the old last file: getData / getMessage read an offset below
# it from the old commitlog, at or above it from DLedger's entries.  The files of both are one
# commitlog queue here (layout: the old folders first); which part an offset is in is the kind of
# the file holding it (holds_entries), and the division is where the first DLedger file starts.
# Every reader walks that one queue (storage/commitlog.walk picks each file's walk by its kind).

OLD, DLEDGER = "commitlog", "dledger"


def holds_entries(mf) -> bool:
    """Is mf (a commitlog queue's MappedFile) a DLedger data file, its records in entries at
    pos + 48, rather than a plain commitlog file (asked once per MappedFile)?"""
    known = getattr(mf, "dledger", None)
    if known is None:
        known = mf.dledger = is_data_file(mf.path)
    return known


def division(queue) -> int | None:
    """dividedCommitlogOffset: where the first DLedger data file starts when plain commitlog files
    come before it (a broker switched to DLedger mode), else None (a store of one kind)."""
    first = next((i for i, mf in enumerate(queue.files) if holds_entries(mf)), None)
    return queue.files[first].file_from_offset if first else None


def part_of(queue, offset: int) -> str | None:
    """Which part of the commitlog holds offset: OLD (plain records) or DLEDGER (entries), None
    when no file does."""
    mf = queue.find_by_offset(offset)
    return None if mf is None else DLEDGER if holds_entries(mf) else OLD


def parts(queue):
    """(the old commitlog's files, DLedger's data files) of a commitlog queue, each a queue of its
    own (MappedFileQueue.part: the same files).  A store of one kind: the other part is empty."""
    return (queue.part([mf for mf in queue.files if not holds_entries(mf)]),
            queue.part([mf for mf in queue.files if holds_entries(mf)]))


def data_part(queue):
    """DLedger's data files of a commitlog queue (the queue itself when it holds nothing else)."""
    return queue if all(holds_entries(mf) for mf in queue.files) else parts(queue)[1]


def switch_pending(layout, queue) -> bool:
    """A store switched to DLedger mode whose DLedger folder holds no data yet: the broker's next
    start recovers the old commitlog (normally, even after a crash), writes a BLANK at its end and
    divides there (DLedgerCommitLog.recover)."""
    return layout.is_mixed() and not any(holds_entries(mf) for mf in queue.files)


def recovered_part(queue):
    """The files DLedgerCommitLog.recover walks: DLedger's data files once there are any; else the
    whole queue (the old commitlog, recovered as a plain one: isInrecoveringOldCommitlog)."""
    return data_part(queue) if any(holds_entries(mf) for mf in queue.files) else queue


@dataclass
class Entry:
    """One DLedger entry: where it is and its header.  The record (its body) is at offset + 48."""

    offset: int          # absolute DLedger offset (the entry's pos)
    file_pos: int        # position in its file
    header: fmt.EntryHeader
    path: str

    @property
    def record_offset(self) -> int:
        return self.offset + fmt.HEADER_SIZE

    @property
    def end(self) -> int:
        return self.offset + self.header.size


def header_at(buf, pos: int, limit: int, base: int):
    """(header, why not) of an entry at pos: why DLedger's recovery would not take it, or None."""
    if limit - pos < fmt.HEADER_SIZE:
        return None, f"{limit - pos} bytes left, an entry header needs {fmt.HEADER_SIZE}"
    header = fmt.decode_header(buf, pos)
    return header, fmt.header_problem(header, base + pos, limit - pos)


_MAGIC_BYTES = fmt.MAGIC_1.to_bytes(4, "big")


def resync(buf, start: int, limit: int, base: int) -> int:
    """The next position >= start where an entry DLedger's recovery accepts begins, or -1."""
    pos = start
    while pos < limit:
        hit = buf.find(_MAGIC_BYTES, pos, limit)
        if hit < 0:
            return -1
        header, why = header_at(buf, hit, limit, base)
        if header is not None and why is None:
            return hit
        pos = hit + 1
    return -1


def entry_start(buf, start: int, limit: int, base: int) -> int:
    """Where the walk of a file part from `start` begins: start itself when an entry begins there,
    else the entry whose record begins at start (start - 48), else start."""
    if start <= 0:
        return 0
    if header_at(buf, start, limit, base)[1] is None:
        return start
    if start >= fmt.HEADER_SIZE and header_at(buf, start - fmt.HEADER_SIZE, limit, base)[1] is None:
        return start - fmt.HEADER_SIZE
    return start


def walk_entries(mf, *, start: int = 0, stop: int | None = None, is_last: bool = True,
                 display_path: str | None = None, resync_after_damage: bool = True, aligned: bool = False):
    """Yield the entries of one DLedger data file from file position start on: Entry, Blank (the
    file's end), Problem, and EndOfData where the written data ends in this file.  stop: end at
    this position (an entry boundary).  Without resync_after_damage the walk ends at the first
    entry DLedger's recovery would not accept.  aligned: start is where an entry (or a blank, or
    the zeros after the data) is, as the walk itself found; else see entry_start."""
    buf = mf.buf
    limit = mf.file_size if stop is None else stop
    base = mf.file_from_offset
    path = display_path or str(mf.path)
    if not aligned:
        mf.advise_sequential()
    pos = start if aligned else entry_start(buf, start, limit, base)
    while pos < limit:
        mf.drop_pages_before(pos)
        if limit - pos < 8:
            magic, size = (0, 0) if not any(buf[pos:limit]) else (None, None)
        else:
            magic, size = fmt.decode_magic_size(buf, pos)
        if magic == fmt.BLANK_MAGIC:
            if size < fmt.MIN_BLANK_LEN or size != mf.file_size - pos:
                yield Problem("bad-blank", path, pos, base + pos,
                              f"DLedger blank declares {size} bytes but {mf.file_size - pos} remain in the file")
            mf.drop_pages_before(mf.file_size)
            yield Blank(base + pos, size)
            return
        if magic == 0:
            bad = _first_nonzero(buf, pos, limit, mf)
            if bad < 0:
                if stop is None and not is_last:
                    yield Problem("missing-blank", path, pos, base + pos,
                                  "the file's entries end without a blank, but a later file follows")
                yield EndOfData(base + pos, path)
                return
            nxt = resync(buf, max(pos, bad - 3), limit, base)
            if nxt < 0:
                end = written_end(buf, bad, limit)
                yield Problem("data-after-end", path, bad, base + bad,
                              f"{end - bad} non-zero bytes after the end of the data at {base + pos}",
                              skipped=end - bad)
                yield EndOfData(base + pos, path)
                return
            yield Problem("zero-gap", path, pos, base + pos,
                          f"{nxt - pos} zero bytes where a DLedger entry was expected; entries follow",
                          skipped=nxt - pos)
            pos = nxt
            continue
        header, why = header_at(buf, pos, limit, base) if magic is not None else (None, "stray bytes")
        if why is None:
            yield Entry(base + pos, pos, header, path)
            pos += header.size
            continue
        kind = "bad-entry"
        if not resync_after_damage:
            yield Problem(kind, path, pos, base + pos, f"DLedger entry: {why}")
            return
        nxt = resync(buf, pos + 1, limit, base)
        if nxt < 0:
            end = written_end(buf, pos, limit)
            damaged_end = end if end > pos else pos + 8
            yield Problem(kind, path, pos, base + pos,
                          f"DLedger entry: {why}; {damaged_end - pos} damaged bytes, no valid entry after them",
                          skipped=damaged_end - pos)
            if _first_nonzero(buf, damaged_end, limit, mf) < 0:
                yield EndOfData(base + pos, path)
            return
        yield Problem(kind, path, pos, base + pos,
                      f"DLedger entry: {why}; skipped {nxt - pos} bytes to the next valid entry at {base + nxt}",
                      skipped=nxt - pos)
        pos = nxt
    mf.drop_pages_before(limit)
    if stop is None and pos >= limit and not is_last:
        yield Problem("missing-blank", path, limit, base + limit, "the file is full but does not end with a blank")


# ------------------------------------------------------------------ the state files
@dataclass
class PropertyFile:
    path: Path
    size: int
    values: dict

    def to_json(self) -> dict:
        return {"file": self.path.name, "fileSize": self.size, "values": self.values}


def read_properties(path: Path) -> PropertyFile | None:
    """A DLedger property file, or None when it is not there.  Unreadable: NotAStoreError naming it."""
    try:
        data = fsutil.read_small(path, 1 << 16)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise NotAStoreError(f"cannot read: {exc.strerror}", path=path) from None
    return PropertyFile(path, len(data), fmt.parse_properties(bytes(data)))


def _long(props: PropertyFile | None, key: str) -> int | None:
    if props is None or not props.values.get(key, "").strip():
        return None
    try:
        return int(props.values[key])
    except ValueError:
        raise NotAStoreError(f"{key}={props.values[key]!r} is not a number", path=props.path) from None


@dataclass
class State:
    """What a DLedger folder's property files say (DLedgerMmapFileStore.loadCheckPoint,
    MemberState.loadTerm: neither falls back to the .bak)."""

    dir: Path
    self_id: str
    checkpoint: PropertyFile | None
    currterm: PropertyFile | None

    @property
    def committed_index(self) -> int | None:
        return _long(self.checkpoint, fmt.COMMITTED_INDEX_KEY)

    @property
    def end_index(self) -> int | None:
        return _long(self.checkpoint, fmt.END_INDEX_KEY)

    @property
    def term(self) -> int:
        return _long(self.currterm, fmt.TERM_KEY) or 0

    @property
    def vote_leader(self) -> str | None:
        return (self.currterm.values.get(fmt.VOTE_LEADER_KEY) or None) if self.currterm else None

    def to_json(self) -> dict:
        return {"dledgerDir": str(self.dir), "selfId": self.self_id, "currTerm": self.term,
                "voteLeader": self.vote_leader, "committedIndex": self.committed_index,
                "checkpointEndIndex": self.end_index}


def self_id_of(directory: Path) -> str:
    """dledger-<selfId> (DLedgerCommitLog's storeBaseDir) or <group>-<selfId>."""
    name = Path(directory).name
    return name.split("-", 1)[1] if "-" in name else name


def read_state(directory: Path) -> State:
    directory = Path(directory)
    return State(directory, self_id_of(directory), read_properties(directory / CHECKPOINT),
                 read_properties(directory / CURRTERM))


# ------------------------------------------------------------------ index units
class IndexUnits:
    """The entry index files (DLedger's `index/`): unit i at byte i * 32 across the files."""

    def __init__(self, files, file_size: int | None = None, writable: bool = False):
        """files: the index files (layout.dledger_index_files()); writable: for recover, which
        writes the units DLedger's recovery writes."""
        files = sorted(files, key=lambda f: f.name)
        size = file_size or fsutil.common_size([f.size for f in files], fmt.INDEX_FILE_SIZE)
        self.queue = MappedFileQueue([f.path for f in files], size, writable=writable, strict=False)

    def unit(self, index: int) -> fmt.IndexUnit | None:
        """The unit of entry index, None when no file holds its bytes."""
        offset = index * fmt.INDEX_UNIT_SIZE
        mf = self.queue.find_by_offset(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + fmt.INDEX_UNIT_SIZE > mf.file_size:
            return None
        return fmt.decode_index_unit(mf.buf, pos)

    def units(self):
        """(file, position, unit) of every unit up to the first zero one (DLedger writes them in order)."""
        for mf in self.queue.files:
            for pos in range(0, mf.file_size - fmt.INDEX_UNIT_SIZE + 1, fmt.INDEX_UNIT_SIZE):
                unit = fmt.decode_index_unit(mf.buf, pos)
                if unit.magic == 0 and unit.size == 0 and unit.pos == 0:
                    return
                yield mf, pos, unit
                if pos % (1 << 20) == 0:
                    mf.drop_pages_before(pos)

    def close(self) -> None:
        self.queue.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_fields(buf, positions, fields) -> dict:
    """Integer fields (name -> (offset, width)) of records at file positions (an int64 array) of
    buf, read for all positions at once."""
    import numpy as np

    array = np.frombuffer(buf, dtype=np.uint8)
    out = {}
    for name, (at, width) in fields.items():
        value = np.zeros(len(positions), dtype=np.int64)
        for k in range(width):      # a byte at a time (one small gather each), most significant first
            value = (value << 8) | array[positions + (at + k)]
        if width == 4:              # signed
            value = np.where(value >= 1 << 31, value - (1 << 32), value)
        out[name] = value
    return out


def gather_units(units: "IndexUnits", index):
    """The index units of entries `index` (an int64 array): fmt.UNIT_FIELDS arrays, and `present`
    (False where no index file holds the unit)."""
    import numpy as np

    n = len(index)
    out = {name: np.zeros(n, dtype=np.int64) for name in fmt.UNIT_FIELDS}
    out["present"] = np.zeros(n, dtype=np.bool_)
    offsets = index * fmt.INDEX_UNIT_SIZE
    for mf in units.queue.files:
        inside = (offsets >= mf.file_from_offset) & (offsets + fmt.INDEX_UNIT_SIZE <= mf.file_from_offset + mf.file_size)
        if not inside.any():
            continue
        at = offsets[inside] - mf.file_from_offset
        if (np.diff(at) == fmt.INDEX_UNIT_SIZE).all():    # consecutive entries (the rule): one block
            block = np.frombuffer(mf.buf, dtype=fmt.index_unit_dtype(), count=len(at), offset=int(at[0]))
            got = {name: block[name].astype(np.int64) for name in fmt.UNIT_FIELDS}
            del block
        else:
            got = read_fields(mf.buf, at, fmt.UNIT_FIELDS)
        for name, values in got.items():
            out[name][inside] = values
        out["present"][inside] = True
    return out


def chain_problems(index, term, prev: tuple | None) -> list:
    """check_entries' checks of entries against the ones before them (index, term: int64 arrays
    in entry order; prev: (index, term) of the entry before them, or None): each index follows
    the one before by one, no term goes down.  (row, kind, message, expected, found) per problem."""
    import numpy as np

    before_index = np.concatenate([[prev[0] if prev else index[0] - 1], index[:-1]])
    before_term = np.concatenate([[prev[1] if prev else term[0]], term[:-1]])
    found = []
    for row in np.flatnonzero(index != before_index + 1):
        found.append((int(row), "entry-index-gap", f"entry index {index[row]} follows {before_index[row]}",
                      int(before_index[row] + 1), int(index[row])))
    for row in np.flatnonzero(term < before_term):
        found.append((int(row), "entry-term-back", f"term {term[row]} after term {before_term[row]}",
                      int(before_term[row]), int(term[row])))
    return found


def check_entries(headers: dict, units: "IndexUnits", prev: tuple | None):
    """The ledger checks of one file's run of entries (headers: fmt.HEADER_FIELDS arrays, entry
    order; prev: (index, term) of the entry before them, or None): each index follows the one
    before by one, no term goes down, each index unit says the entry's magic, pos, size, index
    and term (what DLedgerMmapFileStore.recover compares).  Returns (row, kind, message, expected,
    found) per problem, in row order."""
    import numpy as np

    index = headers["index"]
    if not len(index):
        return []
    found = chain_problems(index, headers["term"], prev)
    rows = _rows_to_check(units, headers)
    unit = gather_units(units, index[rows])
    mine = {name: headers[name][rows] for name in fmt.UNIT_FIELDS}
    written = unit["present"] & ((unit["magic"] != 0) | (unit["size"] != 0) | (unit["pos"] != 0))
    for k in np.flatnonzero(~written):      # no index file holds it, or zeros: not written (yet)
        found.append((int(rows[k]), "index-unit-mismatch", f"entry {mine['index'][k]}: no index unit", None, None))
    for name in ("magic", "size", "index", "term", "pos"):
        for k in np.flatnonzero(written & (unit[name] != mine[name])):
            found.append((int(rows[k]), "index-unit-mismatch",
                          f"entry {mine['index'][k]}: index unit {name} {unit[name][k]} != the entry's {mine[name][k]}",
                          int(mine[name][k]), int(unit[name][k])))
    return sorted(found, key=lambda f: f[0])


def _rows_to_check(units: "IndexUnits", headers: dict):
    """The rows of headers whose index units may disagree with them: where the entries are
    consecutive (the rule) and their units in one index file, the units are compared with the
    units the headers make as one block of bytes, and only the rows that differ are left (most
    often none); else every row."""
    import numpy as np

    index = headers["index"]
    n = len(index)
    every = np.arange(n)
    first = int(index[0]) * fmt.INDEX_UNIT_SIZE
    mf = units.queue.find_by_offset(first) if first >= 0 else None
    if (mf is None or first + n * fmt.INDEX_UNIT_SIZE > mf.file_end_offset or int(index[-1]) - int(index[0]) != n - 1
            or not (np.diff(index) == 1).all()):
        return every
    made = np.empty(n, dtype=fmt.index_unit_dtype())
    for name in fmt.UNIT_FIELDS:
        made[name] = headers[name]
    words = fmt.INDEX_UNIT_SIZE // 8
    block = np.frombuffer(mf.buf, dtype=np.uint64, count=n * words, offset=first - mf.file_from_offset)
    differ = (block.reshape(n, words) != made.view(np.uint64).reshape(n, words)).any(axis=1)
    del block
    return np.flatnonzero(differ)


# ------------------------------------------------------------------ the ledger at a glance
@dataclass
class Ledger:
    """A DLedger store's ledger as its files say: the first and last entries the walk accepts, the
    committed index from the checkpoint (capped at the end, as updateCommittedIndex caps it) and
    where the committed entries end (committedPos: the broker's max commitlog offset)."""

    state: State
    begin_index: int = -1
    end_index: int = -1
    end_term: int = -1
    data_end: int = 0          # the end of the last entry
    committed_pos: int = -1    # the end of the committed index's entry (-1: none committed)

    @property
    def committed_index(self) -> int:
        ci = self.state.committed_index
        return -1 if ci is None or self.end_index < 0 else min(ci, self.end_index)

    @property
    def uncommitted(self) -> int:
        return self.end_index - self.committed_index if self.end_index >= 0 else 0

    def to_json(self) -> dict:
        out = self.state.to_json()
        out.update({"ledgerBeginIndex": self.begin_index, "ledgerEndIndex": self.end_index,
                    "ledgerEndTerm": self.end_term, "committedIndex": self.committed_index,
                    "committedPos": self.committed_pos, "dataEnd": self.data_end,
                    "uncommittedEntries": self.uncommitted})
        return out


def read_ledger(layout, queue, end: tuple | None = None) -> Ledger:
    """The ledger of layout (a DLedger store) whose data files queue holds: the first file's first
    entry, the last file with entries walked, and the committed entry's index unit (a glance,
    not a verify: `verify-crc` checks every entry).  end: (the last entry's index, its term, where
    it ends) when the caller has walked the entries already (engine/recovery.ledger_cut, compiled):
    then they are not walked again here, an entry at a time."""
    ledger = Ledger(read_state(layout.dledger_dir))
    queue = data_part(queue)
    files = queue.files
    if not files:
        return ledger
    for item in walk_entries(files[0], stop=None, is_last=len(files) == 1):
        if isinstance(item, Entry):
            ledger.begin_index = item.header.index
        break
    if end is not None:
        ledger.end_index, ledger.end_term, ledger.data_end = end
    else:
        for mf in reversed(files):
            last = None
            for item in walk_entries(mf, is_last=mf is files[-1], resync_after_damage=False):
                if not isinstance(item, Entry):
                    continue
                if last is not None and not follows(item.header, last.header):
                    break        # DLedger's recovery ends the data here (index + 1, term never back)
                last = item
            if last is not None:
                ledger.end_index, ledger.end_term, ledger.data_end = last.header.index, last.header.term, last.end
                break
    if ledger.committed_index >= 0:
        ledger.committed_pos = entry_end(layout, queue, ledger.committed_index)
    return ledger


def first_entry(queue) -> bytes | None:
    """Entry 0, header and body, while the first data file still holds it (None otherwise): the
    replicas of one DLedger group hold the same bytes there (the leader's entry, copied), two
    groups never do (its record has its own store time, host and message id)."""
    files = queue.files
    if not files or files[0].file_from_offset != 0:
        return None
    for item in walk_entries(files[0], stop=None, is_last=len(files) == 1):
        if isinstance(item, Entry) and item.header.index == 0:
            return bytes(files[0].buf[item.file_pos:item.file_pos + item.header.size])
        return None
    return None


def follows(header, before) -> bool:
    """Does an entry follow the one before it in a ledger, as DLedgerMmapFileStore.recover asks
    (index one more, term not lower)?  The vectorised form is chain_problems."""
    return header.index == before.index + 1 and header.term >= before.term


def entry_end(layout, queue, index: int) -> int:
    """The end (pos + size) of entry `index` in the data files of queue, -1 when none holds it.
    Its index unit says where it is when the entry there agrees (the unit of an entry written just
    before a crash may be missing or stale: DLedger's recovery rewrites it from the data, so the
    data is walked then)."""
    queue = data_part(queue)
    with IndexUnits(layout.dledger_index_files()) as units:
        unit = units.unit(index)
    if unit is not None and unit.magic == fmt.MAGIC_1:
        mf = queue.find_by_offset(unit.pos)
        if mf is not None:
            header, why = header_at(mf.buf, unit.pos - mf.file_from_offset, mf.file_size, mf.file_from_offset)
            if why is None and (header.index, header.size) == (index, unit.size):
                return unit.pos + unit.size
    holding = None     # the last file whose first entry is at or below index
    for mf in queue.files:
        header, why = header_at(mf.buf, 0, mf.file_size, mf.file_from_offset)
        if why is None and header.index <= index:
            holding = mf
    if holding is not None:
        for item in walk_entries(holding, resync_after_damage=False, is_last=holding is queue.files[-1]):
            if isinstance(item, Entry) and item.header.index == index:
                return item.end
    return -1


def dispatch_end(layout, queue, end: tuple | None = None) -> int | None:
    """Where a broker's dispatch of the DLedger store `layout` ends: after a clean shutdown, the
    end of the committed entries (committedPos: ReputMessageService reads no further, as
    DLedgerCommitLog.getData stops there); None (every entry the walk accepts) after a crash
    (abort file: dledgerRecoverAbnormally dispatches them all), without a committed index in the
    checkpoint (the node commits its entries once it leads), or for a plain store.  end: the
    ledger's end when the caller has walked the entries (read_ledger's)."""
    if not layout.is_dledger() or layout.abort_path.exists():
        return None
    ledger = read_ledger(layout, queue, end)
    return ledger.committed_pos if ledger.committed_index >= 0 else None
