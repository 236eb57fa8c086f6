"""A mapped-file queue: the ordered files of one commitlog or one consume queue.

Files are named by the offset of their first byte and have one fixed size,
so file i covers [name_i, name_i + size).  Loading checks what a broker's
load checks (numeric names, equal sizes); forensic readers load with
strict=False and get the deviations as `problems` instead of a refusal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mqtool.errors import NotAStoreError
from mqtool.formats.filenames import is_offset_name, name_to_offset, offset_to_name
from mqtool.storage import fsutil
from mqtool.storage.mappedfile import MappedFile


@dataclass
class LoadProblem:
    kind: str
    path: Path
    offset: int | None
    message: str


class MappedFileQueue:
    def __init__(self, paths: list[Path], file_size: int, *, writable: bool = False,
                 strict: bool = True, directories: list[Path] | None = None, write_buffers=None,
                 on_create=None, preallocate: bool = False, warm_ahead: int = 0,
                 append_with_pwrite: bool = False, read_small: bool = False):
        """paths: the files to load.  directories: where new files go when the
        queue rolls (several for a multi-path commitlog, chosen round-robin by
        file index as MultiPathMappedFileQueue does).  write_buffers: a
        TransientStorePool to take write buffers from.  on_create(path): called
        for every new file (to give it the store's owner and mode).
        preallocate: like the broker's AllocateMappedFileService, create the
        file after the new one as well, so the next roll finds it ready; a
        clean close removes it again (discard_preallocated).  warm_ahead: with
        warmMapedFileEnable, how many bytes ahead of the appends files are
        pre-written (see MappedFile.warm_to and make_room).  append_with_pwrite:
        see MappedFile.append_with_pwrite (the store sets it under SYNC_FLUSH).  read_small:
        see MappedFile (small files read only are read, not mapped)."""
        self.file_size = file_size
        self.writable = writable
        self.strict = strict
        self.directories = [d if isinstance(d, Path) else Path(d) for d in (directories or [])]
        self.write_buffers = write_buffers
        self.on_create = on_create
        self.files: list[MappedFile] = []
        self.problems: list[LoadProblem] = []
        self.flushed_where = 0
        self.committed_where = 0
        self.store_timestamp = 0
        self.preallocate = preallocate
        self.warm_ahead = warm_ahead
        self.append_with_pwrite = append_with_pwrite
        self.read_small = read_small
        self._preallocated: MappedFile | None = None
        paths = sorted(paths, key=lambda p: p.name)
        self.empty_file = None   # strict: a 0-byte newest file, left by a crash, not loaded
        if strict:
            paths, self.empty_file = fsutil.empty_last_file(paths, is_offset_name)
        self._load(paths)
        if writable:
            for mf in self.files:  # as MappedFileQueue.doLoad: recovery sets the real positions
                mf.set_positions(mf.file_size)

    def _load(self, paths: list[Path]) -> None:
        for path in paths:
            if not is_offset_name(path.name):
                if self.strict:
                    raise NotAStoreError("file name is not a 20-digit offset (a broker refuses to load "
                                         "this directory)", path=path)
                self.problems.append(LoadProblem("bad-file-name", path, None,
                                                 "file name is not a 20-digit offset; skipped"))
                continue
            if int(path.name) + self.file_size > JAVA_LONG_MAX:
                message = "file name is an offset a broker cannot hold (its end passes 2^63 - 1)"
                if self.strict:
                    raise NotAStoreError(message, path=path)
                self.problems.append(LoadProblem("bad-file-name", path, None, message + "; skipped"))
                continue
            mf = MappedFile(path, self.file_size, writable=self.writable, strict=self.strict,
                            read_small=self.read_small)
            mf.append_with_pwrite = self.append_with_pwrite
            if mf.size_mismatch:
                self.problems.append(LoadProblem(
                    "bad-file-size", path, mf.file_from_offset,
                    f"file is {mf.file_size} bytes, expected {self.file_size}"))
            if self.file_size and mf.file_from_offset % self.file_size:
                self.problems.append(LoadProblem(
                    "misaligned-file", path, mf.file_from_offset,
                    f"start offset {mf.file_from_offset} is not a multiple of the file size {self.file_size}"))
            if self.files:
                expected = self.files[-1].file_from_offset + self.file_size
                if mf.file_from_offset != expected:
                    kind = "file-gap" if mf.file_from_offset > expected else "file-overlap"
                    self.problems.append(LoadProblem(
                        kind, path, mf.file_from_offset,
                        f"file starts at {mf.file_from_offset}, the previous file ends at {expected}"))
            self.files.append(mf)

    # ------------------------------------------------------------------ queries
    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self):
        return iter(self.files)

    @property
    def min_offset(self) -> int:
        """The first byte the queue holds (-1 when empty), as getMinOffset."""
        return self.files[0].file_from_offset if self.files else -1

    @property
    def last_file(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def find_by_offset(self, offset: int) -> MappedFile | None:
        """The file holding offset, or None when it is outside the queue."""
        if not self.files or offset < self.files[0].file_from_offset:
            return None
        index = (offset - self.files[0].file_from_offset) // self.file_size
        if 0 <= index < len(self.files):
            candidate = self.files[index]
            if candidate.file_from_offset <= offset < candidate.file_from_offset + candidate.file_size:
                return candidate
        for mf in self.files:  # holes or odd sizes: fall back to a scan
            if mf.file_from_offset <= offset < mf.file_from_offset + mf.file_size:
                return mf
        return None

    def part(self, files: list[MappedFile]) -> "MappedFileQueue":
        """A queue of some of this queue's files (the same MappedFile objects, no load problems):
        closing it closes nothing, the files stay this queue's."""
        view = object.__new__(MappedFileQueue)
        view.__dict__.update(self.__dict__)
        view.files, view.problems, view._preallocated, view.empty_file = list(files), [], None, None
        view.close = lambda: None
        return view

    def index_of(self, mf: MappedFile) -> int:
        return self.files.index(mf)

    @property
    def max_offset(self) -> int:
        """getMaxOffset: the end of what readers may read."""
        last = self.last_file
        return last.file_from_offset + last.read_position() if last else 0

    @property
    def max_wrote_offset(self) -> int:
        last = self.last_file
        return last.file_from_offset + last.wrote_position if last else 0

    # ------------------------------------------------------------------ writing
    def get_last_mapped_file(self, start_offset: int = 0, create: bool = True) -> MappedFile | None:
        """The file to append to, rolling to a new one named by its start offset
        when the last is full (or the queue is empty: the first file starts at the
        file boundary at or below start_offset)."""
        last = self.last_file
        if last is not None and not last.is_full():
            return last
        if not create:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.file_size
        else:
            create_offset = last.file_from_offset + self.file_size
        return self._create(create_offset, first_in_queue=last is None)

    def _path_for(self, offset: int) -> Path:
        directory = self.directories[(offset // self.file_size) % len(self.directories)]
        directory.mkdir(parents=True, exist_ok=True)
        return directory / offset_to_name(offset)

    def _new_file(self, offset: int) -> MappedFile:
        path = self._path_for(offset)
        mf = MappedFile(path, self.file_size, create=True)
        mf.append_with_pwrite = self.append_with_pwrite
        if self.on_create is not None:
            self.on_create(path)
        return mf

    def _create(self, offset: int, first_in_queue: bool) -> MappedFile:
        ready = self._preallocated
        if ready is not None and ready.file_from_offset == offset:
            mf, self._preallocated = ready, None
        else:
            self.discard_preallocated()
            mf = self._new_file(offset)
        if self.write_buffers is not None:
            mf.write_buffer = self.write_buffers.borrow()
        mf.first_create_in_queue = first_in_queue
        self.files.append(mf)
        if self.preallocate:
            self._preallocated = self._new_file(offset + self.file_size)
        return mf

    def make_room(self, mf: MappedFile, nbytes: int) -> None:
        """Called before nbytes are appended to mf: with warm-up on, pre-write what they
        will land on plus warm_ahead bytes, in one go (one fdatasync per warm_ahead)."""
        if self.warm_ahead and mf.wrote_position + nbytes > mf.warmed_to:
            mf.warm_to(mf.wrote_position + nbytes + self.warm_ahead)

    def discard_preallocated(self) -> None:
        """Delete a pre-created, never used next file (a clean shutdown does)."""
        if self._preallocated is not None:
            self._preallocated.destroy(0)
            self._preallocated = None

    def flush(self, least_pages: int) -> bool:
        """Flush the file holding flushed_where; True when nothing moved."""
        mf = self.find_by_offset(self.flushed_where) or (self.files[0] if self.flushed_where == 0
                                                         and self.files else None)
        if mf is None:
            return True
        timestamp = mf.store_timestamp
        where = mf.file_from_offset + mf.flush(least_pages)
        unchanged = where == self.flushed_where
        self.flushed_where = where
        if least_pages == 0:
            self.store_timestamp = timestamp
        return unchanged

    def commit(self, least_pages: int) -> bool:
        """Commit the write buffer of the file holding committed_where; True when nothing moved."""
        mf = self.find_by_offset(self.committed_where) or (self.files[0] if self.committed_where == 0
                                                           and self.files else None)
        if mf is None:
            return True
        where = mf.file_from_offset + mf.commit(least_pages)
        unchanged = where == self.committed_where
        self.committed_where = where
        if mf.write_buffer is not None and mf.committed_position == mf.file_size:
            self.write_buffers.give_back(mf.write_buffer)
            mf.write_buffer = None
        return unchanged

    def truncate_dirty_files(self, offset: int, remove=None) -> list[Path]:
        """truncateDirtyFiles: cut the queue at offset.  The file holding offset
        gets its positions set there (the caller decides about the bytes after
        it); whole files beyond it leave the queue through remove(mf) (default:
        delete).  Returns their paths."""
        removed = []
        keep = []
        for mf in self.files:
            if mf.file_from_offset + mf.file_size > offset:
                if offset >= mf.file_from_offset:
                    mf.set_positions(offset - mf.file_from_offset)
                    keep.append(mf)
                    continue
                removed.append(mf.path)
                if remove is not None:
                    mf.close()
                    remove(mf)
                else:
                    mf.destroy(0)
            else:
                keep.append(mf)
        self.files = keep
        return removed

    def set_where(self, offset: int) -> None:
        self.flushed_where = self.committed_where = offset

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        if self._preallocated is not None:
            self._preallocated.close()
            self._preallocated = None
        self.files = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


JAVA_LONG_MAX = (1 << 63) - 1   # offsets are Java longs


def name_offset(path: Path) -> int:
    return name_to_offset(path.name)
