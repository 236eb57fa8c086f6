"""The commitlog as a sequence of entries: the one walker every command uses.

`walk` goes through the files of a commitlog queue in order and yields each
Record, each Blank, and a Problem for anything that is neither.  After damage
it resynchronises on the next offset where a record with a valid magic code
and a matching body CRC starts, and says how many bytes it skipped.  Checks
of single records that do not stop the walk (CRC, physical-offset field) are
in `record_problems`, shared by dump, verify-crc and recovery.
"""

from __future__ import annotations

import os

from mqtool.formats import commitlog as fmt
from mqtool.formats import dledger as dledger_format
from mqtool.formats import sysflag
from mqtool.formats.commitlog import Blank, Record, RecordError
from mqtool.formats.written import written_end
from mqtool.storage import dledger, fsutil
from mqtool.storage.mappedfile import POPULATE_STEP, MappedFile
from mqtool.storage.mappedfilequeue import MappedFileQueue
from mqtool.storage.walkitems import EndOfData, Problem
from mqtool.storage.walkitems import first_nonzero as _first_nonzero

_MAGIC_PATTERNS = tuple(m.to_bytes(4, "big") for m in fmt.MESSAGE_MAGICS)


def record_problems(record: Record, check_crc: bool = True) -> list[tuple[str, str]]:
    """Checks of one structurally valid record: (kind, message) for each failure."""
    found = []
    if check_crc:
        computed = record.computed_body_crc()
        if computed != record.body_crc:
            found.append(("crc-mismatch", f"body CRC {record.body_crc} stored, {computed} computed"))
    if record.physical_offset != record.offset:
        found.append(("offset-mismatch", f"physicalOffset field says {record.physical_offset}, "
                                         f"the record is at {record.offset}"))
    if record.queue_offset < 0 or record.queue_id < 0:
        found.append(("bad-queue", f"queueId {record.queue_id} / queueOffset {record.queue_offset}"))
    if not sysflag.is_dispatched_to_consume_queue(record.sys_flag) and record.queue_offset != 0:
        found.append(("bad-queue", f"a prepared/rollback record carries queueOffset "
                                   f"{record.queue_offset}, expected 0"))
    return found


def _file_head(mf: MappedFile, size: int) -> bytes:
    """The file's first bytes, read with pread, not through the mapping: a touched
    mapping keeps a whole folio (up to megabytes) of every file resident until the
    walk gets there, so memory would grow with the number of files."""
    try:
        fd = fsutil.open_read(mf.path)
    except OSError:
        return bytes(mf.buf[:size])
    try:
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)


def _entry_ok(buf, pos: int, limit: int, base: int) -> bool:
    """Does a valid record or BLANK start at pos?"""
    try:
        return isinstance(fmt.decode_entry(buf, pos, limit, base), (Record, Blank))
    except RecordError:
        return False


def _entry_after_zeros(buf, first: int, bad: int, limit: int, base: int) -> int:
    """Where the entry whose first non-zero byte is buf[bad] starts: the first position in
    [first, bad) holding a structurally valid record or BLANK, else bad itself."""
    for candidate in range(first, bad):
        try:
            entry = fmt.decode_entry(buf, candidate, limit, base)
        except RecordError:
            continue
        if isinstance(entry, (Record, Blank)):
            return candidate
    return bad


def resync(buf, start: int, limit: int, base: int, check_crc: bool = True) -> int:
    """The next position >= start where a valid record begins (-1 if none).

    Valid means the magic code matches, the record parses and, with check_crc,
    its body CRC checks.  Candidates are found with mmap's C-level find on the
    magic bytes, so skipping a large damaged region is fast.
    """
    pos = start
    while pos < limit:
        hits = [h for h in (buf.find(p, pos + 4, limit) for p in _MAGIC_PATTERNS) if h >= 0]
        if not hits:
            return -1
        candidate = min(hits) - 4
        try:
            entry = fmt.decode_entry(buf, candidate, limit, base)
        except RecordError:
            entry = None
        if isinstance(entry, Record) and (not check_crc or entry.crc_ok()):
            return candidate
        pos = candidate + 1
    return -1


CHUNK_RECORDS = 1 << 16


class _ReadAhead:
    """A compiled walk of one file (walk_file and its DLedger form), a chunk at a time, and the
    pages it reads next: the file as one uint8 array; before each chunk the pages of the last one
    are let go and, once the walk passes what was mapped, the next stretch is mapped in one go
    (MappedFile.populate): POPULATE_STEP bytes first, then about as many as a chunk read.  With
    copies, the bytes are copied into a window instead (the scanner's scan_copies over
    MappedFile.read_into): no page tables to build and let go, and the window stays in the cache."""

    def __init__(self, mf: MappedFile, pos: int, scanner, copies: bool = False):
        import numpy as np

        self.mf = mf
        self.scanner = scanner
        self.array = np.frombuffer(mf.buf, dtype=np.uint8) if mf.file_size else np.zeros(0, dtype=np.uint8)
        self.window = np.empty(scanner.WINDOW_BYTES, dtype=np.uint8) if copies else None
        self.populated = pos
        self.ahead = POPULATE_STEP

    def scan(self, pos: int, limit: int, base: int, check_crc: bool, chunk_records: int | None,
             parse_props: bool, path: str, entries: bool = False):
        """The next chunk from pos: the scanner's scan (scan_dledger: entries) over the file's
        pages, those of the last chunk let go first and the next stretch mapped when the walk
        reaches it; or over copies of them."""
        cap = chunk_records or CHUNK_RECORDS
        if self.window is not None:
            chunk = self.scanner.scan_copies(self.mf.read_into, self.window, self.array, pos, limit, base, check_crc,
                                             cap, parse_props, entries)
        else:
            self.mf.drop_pages_before(pos, step=0)
            if pos >= self.populated:
                self.populated = pos + self.ahead
                self.mf.populate(pos, min(self.ahead, limit - pos))
            kernel = self.scanner.scan_dledger if entries else self.scanner.scan
            chunk = kernel(self.array, pos, limit, base, check_crc, cap, parse_props)
        if chunk.count:
            chunk.path = path
            self.ahead = min(POPULATE_STEP, max(chunk.stop - pos, 1 << 20))   # about a chunk's bytes next
        return chunk


def walk_file(mf: MappedFile, *, start: int = 0, check_crc: bool = True, is_last: bool = True,
              display_path: str | None = None, resync_after_damage: bool = True, scanner=None,
              stop: int | None = None, parse_props: bool = False, chunk_records: int | None = None,
              copies: bool = False):
    """Yield the entries of one commitlog file from byte `start` on.

    Yields Record, Blank, Problem and finally EndOfData when the written data
    ends inside this file.  Without resync_after_damage the walk ends at the
    first damaged entry (what a broker's recovery does).  stop: end the walk
    at this position, a record boundary (a part of a file checked on its own);
    the end-of-file checks are then left to the part that ends the file.  scanner: the
    compiled scanner (mqtool.native.fastscan, handed in by the layers above: storage does
    not load compiled code); runs of valid records then come as its Chunk columns (body
    CRCs in the crc_ok column) instead of Record objects, the rest of the walk is the same.
    parse_props (with a scanner): the chunks come parsed (Chunk.parsed), in the same pass.
    chunk_records: records a chunk at most (CHUNK_RECORDS by default; a chunk's file pages are let go
    once the next is asked for).  copies (with a scanner): the scanner reads copies of the file's
    bytes, a window at a time, instead of its mapping: quicker for a walk that needs no record's
    bytes once its chunk is checked (verify-crc); a chunk's buf is still the mapping, which then
    maps a page where a reader asks for it.
    """
    if is_dledger_file(mf):
        yield from _walk_dledger_file(mf, start=start, stop=stop, check_crc=check_crc, is_last=is_last,
                                      display_path=display_path, resync_after_damage=resync_after_damage,
                                      scanner=scanner, parse_props=parse_props, chunk_records=chunk_records,
                                      copies=copies)
        return
    buf = mf.buf
    limit = mf.file_size if stop is None else stop
    base = mf.file_from_offset
    path = display_path or str(mf.path)
    mf.advise_sequential()
    pos = start
    pages = _ReadAhead(mf, pos, scanner, copies) if scanner else None
    while pos < limit:
        if scanner:
            chunk = pages.scan(pos, limit, base, check_crc, chunk_records, parse_props, path)
            if chunk.count:
                yield chunk
                pos = chunk.stop
            if chunk.kind in (scanner.FULL, scanner.REACHED_LIMIT):
                continue
            if chunk.kind == scanner.BLANK:
                entry = Blank(base + pos, chunk.blank_size)
            elif chunk.kind == scanner.ZEROS:
                entry = fmt.END_OF_DATA
            else:   # the reference decoder says exactly what is wrong
                try:
                    entry = fmt.decode_entry(buf, pos, limit, base)
                except RecordError as err:
                    entry = err
        else:
            mf.drop_pages_before(pos)
            try:
                entry = fmt.decode_entry(buf, pos, limit, base)
            except RecordError as err:
                entry = err
        if isinstance(entry, Record):
            yield entry
            pos += entry.total_size
            continue
        if isinstance(entry, Blank):
            mf.drop_pages_before(limit)  # the file is done: keep none of it resident
            yield entry
            return
        if entry is fmt.END_OF_DATA:
            bad = _first_nonzero(buf, pos, limit, mf)
            if bad < 0:
                if not is_last:
                    yield Problem("missing-blank", path, pos, base + pos,
                                  "the file's data ends without a BLANK record, but a later file follows")
                yield EndOfData(base + pos, path)
                mf.drop_pages_before(limit)
                return
            # zeros, then more bytes: report the zero gap only if data follows it.  The next
            # entry may begin up to 3 bytes before `bad` (its totalSize starts with zero bytes).
            nxt = _entry_after_zeros(buf, max(pos, bad - 3), bad, limit, base)
            if not _entry_ok(buf, nxt, limit, base) and resync(buf, nxt + 1, limit, base, check_crc) < 0:
                # nothing valid follows: these are stray bytes after the end of the data
                last = written_end(buf, bad, limit)
                yield Problem("data-after-end", path, bad, base + bad,
                              f"{last - bad} non-zero bytes after the end of the data at {base + pos}",
                              skipped=last - bad)
                yield EndOfData(base + pos, path)
                mf.drop_pages_before(limit)
                return
            if nxt > pos:
                yield Problem("zero-gap", path, pos, base + pos,
                              f"{nxt - pos} zero bytes where a record was expected; data follows",
                              skipped=nxt - pos)
            pos = nxt
            continue
        # a damaged entry: report it, then look for the next valid record
        err = entry
        if not resync_after_damage:
            yield Problem(err.kind, path, pos, base + pos, err.reason)
            return
        nxt = resync(buf, pos + 1, limit, base, check_crc)
        if nxt < 0:
            last = written_end(buf, pos, limit)
            damaged_end = last if last > pos else pos + 8
            if getattr(err, "truncated", None):      # a true record the file's end cuts off, nothing after it
                yield Problem("truncated", path, pos, base + pos, err.truncated, skipped=damaged_end - pos)
            else:
                yield Problem(err.kind, path, pos, base + pos,
                              f"{err.reason}; {damaged_end - pos} damaged bytes, no valid record after them",
                              skipped=damaged_end - pos)
            if _first_nonzero(buf, damaged_end, limit, mf) < 0:
                yield EndOfData(base + pos, path)
            return
        yield Problem(err.kind, path, pos, base + pos,
                      f"{err.reason}; skipped {nxt - pos} bytes to the next valid record at "
                      f"{base + nxt}", skipped=nxt - pos)
        pos = nxt
    mf.drop_pages_before(limit)
    if stop is None and pos >= limit and not is_last:
        yield Problem("missing-blank", path, limit, base + limit,
                      "the file is full but does not end with a BLANK record")


is_dledger_file = dledger.holds_entries     # the kind of a commitlog file: plain records, or entries


def _walk_dledger_file(mf: MappedFile, *, start: int, stop: int | None, check_crc: bool, is_last: bool,
                       display_path: str | None, resync_after_damage: bool, scanner, parse_props: bool,
                       chunk_records: int | None, copies: bool = False):
    """walk_file of a DLedger data file: the entries (storage/dledger.walk_entries), and in each
    entry's body the one commitlog record it holds, at entry pos + 48.  Blanks, problems and the
    end of the data come as the entry walk finds them; a body that is not exactly one valid
    record is a problem of its entry.  With a scanner, runs of sound entries are read by its
    compiled entry walk (scan_dledger: each body handed to the record scanner as a region) and
    come as Chunks; the reference walk takes over wherever it stops."""
    buf = mf.buf
    base = mf.file_from_offset
    limit = mf.file_size if stop is None else stop
    path = display_path or str(mf.path)
    mf.advise_sequential()
    pos = dledger.entry_start(buf, start, limit, base)
    pages = _ReadAhead(mf, pos, scanner, copies) if scanner else None
    while True:
        if scanner and pos < limit:
            chunk = pages.scan(pos, limit, base, check_crc, chunk_records, parse_props, path, entries=True)
            if chunk.count:
                yield chunk
                pos = chunk.stop
            if chunk.kind == scanner.FULL:
                continue
        # the reference walk: up to the next sound entry (then the scanner again), or the file's end
        for item in dledger.walk_entries(mf, start=pos, stop=stop, is_last=is_last, display_path=path,
                                         resync_after_damage=resync_after_damage, aligned=True):
            if not isinstance(item, dledger.Entry):
                yield item
                continue
            body, end = item.file_pos + dledger_format.HEADER_SIZE, item.file_pos + item.header.size
            pos = end
            try:
                record = fmt.decode_entry(buf, body, end, base)
            except RecordError as err:
                record = err
            if isinstance(record, Record) and record.total_size == end - body:
                yield record
                if scanner:
                    break
                continue
            why = record.reason if isinstance(record, RecordError) else (
                f"a record of {record.total_size} bytes in a body of {end - body}" if isinstance(record, Record)
                else "no record")
            yield Problem("bad-entry-body", path, body, base + body,
                          f"the body of DLedger entry {item.header.index} (at {item.offset}) is not one record: "
                          f"{why}", skipped=end - body)
        else:
            return


def walk(queue: MappedFileQueue, *, start: int | None = None, end: int | None = None,
         check_crc: bool = True, path_display=None, aligned: bool = False, scanner=None,
         resync_after_damage: bool = True, parse_props: bool = False, chunk_records: int | None = None):
    """Yield every entry of the commitlog in [start, end).  Load problems (bad
    names, sizes, gaps) come first, as Problems.

    Without `aligned` the walk begins at the start of the file holding `start`
    and drops what lies before it, so any offset works; with `aligned` the
    caller promises `start` is a record boundary and the walk begins there.
    scanner: valid records come as the compiled scanner's Chunk columns (see walk_file),
    parsed too with parse_props, at most chunk_records a chunk.
    """
    for lp in queue.problems:
        yield Problem(lp.kind, _display(lp.path, path_display), 0, lp.offset if lp.offset is not None else -1,
                      lp.message)
    files = queue.files
    # Files after the last one that starts with data are pre-allocated and empty (a broker
    # creates the next file ahead of time): the data legitimately ends before them.
    last_data = last_data_file(queue)
    ended = False
    for i, mf in enumerate(files):
        if end is not None and mf.file_from_offset >= end:
            return
        if start is not None and mf.file_from_offset + mf.file_size <= start:
            continue
        first = 0
        if aligned and start is not None and mf.file_from_offset <= start:
            first = start - mf.file_from_offset
        for entry in walk_file(mf, start=first, check_crc=check_crc, is_last=(i >= last_data),
                               display_path=_display(mf.path, path_display), scanner=scanner,
                               resync_after_damage=resync_after_damage, parse_props=parse_props,
                               chunk_records=chunk_records):
            if isinstance(entry, EndOfData):
                if ended:
                    continue
                ended = True
            offset = getattr(entry, "offset", None)
            if start is not None and offset is not None and offset < start:
                continue
            if end is not None and offset is not None and offset >= end:
                return
            if scanner and isinstance(entry, scanner.Chunk):
                offsets = entry.columns["offset"]
                inside = offsets == offsets
                if start is not None:
                    inside &= offsets >= start
                if end is not None:
                    inside &= offsets < end
                if not inside.all():
                    entry = entry.take(inside)
                    if entry.count:
                        yield entry
                    if end is not None and (offsets >= end).any():
                        return
                    continue
            yield entry


def last_data_file(queue: MappedFileQueue) -> int:
    """The index of the last file that starts with data; files after it are pre-allocated."""
    return max((i for i, mf in enumerate(queue.files) if any(_file_head(mf, 8))), default=len(queue.files) - 1)


def _display(path, path_display) -> str:
    return path_display(path) if path_display else str(path)


def open_queue(layout, *, strict: bool = False) -> MappedFileQueue:
    """The store's commitlog files as a read-only queue (forensic: strict=False).  In DLedger
    mode these are DLedger's data files (walk_file reads the records in their entries), after the
    old commitlog's files in a store switched to DLedger mode (see division)."""
    paths = [f.path for f in layout.commitlog_files()]
    return MappedFileQueue(paths, layout.commitlog_file_size(), writable=False, strict=strict)


def describe_division(queue: MappedFileQueue, pending: bool = False) -> dict | None:
    """Where a store switched to DLedger mode is divided (storage/dledger.py), None for a store of
    one kind: dividedCommitlogOffset, the old commitlog's files and where its records end (the
    BLANK DLedgerCommitLog.recover wrote there when DLedger started, or None when the old last file
    does not end with one), and DLedger's files.  The broker divides at the old last file's end:
    atOldEnd says whether the first DLedger file starts there.  pending (dledger.switch_pending):
    DLedger has no data yet, the broker's next start divides at the old last file's end."""
    divided = dledger.division(queue)
    old, entries = dledger.parts(queue)
    if pending and old.files:
        divided = old.files[-1].file_end_offset
    if divided is None:
        return None
    last = old.files[-1]
    blank = _switch_blank(last)
    # without that BLANK, where the written bytes end (the walks say what is there)
    data_end = blank.offset if blank is not None else last.file_from_offset + written_end(last.buf, 0, last.file_size)
    return {"dividedCommitlogOffset": divided, "atOldEnd": divided == last.file_end_offset,
            "oldFiles": len(old.files), "oldMinOffset": old.files[0].file_from_offset, "oldDataEnd": data_end,
            "blank": None if blank is None else {"offset": blank.offset, "size": blank.total_size,
                                                  "reachesFileEnd": blank.offset + blank.total_size == last.file_end_offset},
            "dledgerFiles": len(entries.files), "pending": pending,
            "setting": "enableDLegerCommitLog=true on a store that held a commitlog (DLedgerCommitLog.recover)"}


def _switch_blank(mf: MappedFile) -> Blank | None:
    """The BLANK that ends the written bytes of mf (what the switch to DLedger writes at the old
    commitlog's end: totalSize and magic, zeros after), found from the file's end, or None."""
    end = written_end(mf.buf, 0, mf.file_size)
    at = end - fmt.BLANK_HEADER_SIZE
    if at < 0:
        return None
    total_size, magic = fmt.decode_record_header(mf.buf, at)
    return Blank(mf.file_from_offset + at, total_size) if magic == fmt.BLANK_MAGIC else None


def record_at(queue, offset: int) -> Record | str:
    """The commitlog record starting at offset, or why there is none (one line)."""
    mf = queue.find_by_offset(offset)
    if mf is None:
        return "no commitlog file holds this offset"
    try:
        entry = fmt.decode_entry(mf.buf, offset - mf.file_from_offset, mf.file_size, mf.file_from_offset)
    except RecordError as exc:
        return f"no record starts here ({exc.reason})"
    if not isinstance(entry, Record):
        return "no record starts here (" + ("a BLANK end record" if entry is not None else "unwritten space") + ")"
    return entry


def rows_holding(mf: MappedFile, offsets, sizes, needle: bytes, *, first_only: bool = False) -> list[int]:
    """The rows of a run of records in mf (absolute offsets and sizes, in commitlog order) whose
    bytes hold needle: one byte search over the run's stretch (C speed), each row once.  A file
    whose bytes cannot be searched holds nothing."""
    import numpy as np

    if not len(offsets) or not hasattr(mf.buf, "find"):
        return []
    base = mf.file_from_offset
    pos, end = int(offsets[0]) - base, int(offsets[-1] + sizes[-1]) - base
    rows = []
    while (hit := mf.buf.find(needle, pos, end)) >= 0:
        row = int(np.searchsorted(offsets, hit + base, side="right")) - 1
        rows.append(row)
        if first_only:
            break
        pos = int(offsets[row] + sizes[row]) - base     # the next record
    return rows
