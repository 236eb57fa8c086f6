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
from mqtool.formats.filenames import is_offset_name, name_to_offset
from mqtool.mappedfile import MappedFile


@dataclass
class LoadProblem:
    kind: str
    path: Path
    offset: int | None
    message: str


class MappedFileQueue:
    def __init__(self, paths: list[Path], file_size: int, *, writable: bool = False,
                 strict: bool = True):
        self.file_size = file_size
        self.writable = writable
        self.strict = strict
        self.files: list[MappedFile] = []
        self.problems: list[LoadProblem] = []
        self._load(sorted(paths, key=lambda p: p.name))

    def _load(self, paths: list[Path]) -> None:
        for path in paths:
            if not is_offset_name(path.name):
                if self.strict:
                    raise NotAStoreError("file name is not a 20-digit offset (a broker refuses to load "
                                         "this directory)", path=path)
                self.problems.append(LoadProblem("bad-file-name", path, None,
                                                 "file name is not a 20-digit offset; skipped"))
                continue
            mf = MappedFile(path, self.file_size, writable=self.writable, strict=self.strict)
            if mf.size_mismatch:
                self.problems.append(LoadProblem(
                    "bad-file-size", path, mf.file_from_offset,
                    f"file is {mf.file_size} bytes, expected {self.file_size}"))
            if mf.file_from_offset % self.file_size and self.file_size:
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

    def index_of(self, mf: MappedFile) -> int:
        return self.files.index(mf)

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.files = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def name_offset(path: Path) -> int:
    return name_to_offset(path.name)
