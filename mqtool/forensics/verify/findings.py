"""What verify-crc reports and passes between its tasks: Finding, the queue runs and
pointers a task hands on, TaskResult; the problem kinds and their messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.forensics.verify import kernels
from mqtool.storage.mappedfile import PAGE_SIZE, drop_pages

SCOPES = ("commitlog", "cq", "index", "timer")

UNIT_PROBLEMS = {
    kernels.UNIT_NOT_A_RECORD: ("unit-not-a-record", "no valid record starts at the unit's commitlog offset"),
    kernels.UNIT_SIZE_MISMATCH: ("unit-size-mismatch", "the unit's size is not the record's size"),
    kernels.UNIT_WRONG_TOPIC: ("unit-wrong-topic", "the record belongs to another topic"),
    kernels.UNIT_WRONG_QUEUE: ("unit-wrong-queue", "the record belongs to another queue"),
    kernels.UNIT_WRONG_QUEUE_OFFSET: ("unit-wrong-queue-offset", "the record's queue offset is not the unit's"),
    kernels.UNIT_WRONG_TAGS_CODE: ("unit-wrong-tags-code", "the unit's tags code is not the record's"),
    kernels.UNIT_NOT_DISPATCHED: ("unit-not-dispatched",
                                   "the unit points at a prepared or rollback record, which never get one"),
}
ENTRY_PROBLEMS = {
    kernels.ENTRY_NOT_A_RECORD: ("entry-not-a-record", "no valid record starts at the entry's commitlog offset"),
    kernels.ENTRY_WRONG_HASH: ("entry-wrong-hash", "no key of the record hashes to the entry's hash"),
    kernels.ENTRY_NOT_INDEXED: ("entry-not-indexed", "the entry points at a rollback record, which is never indexed"),
}


@dataclass
class Finding:
    """One problem: what, where (file and byte offset), what was expected and what was found."""

    scope: str
    kind: str
    file: str | None
    file_offset: int | None
    offset: int | None
    message: str
    expected: object = None
    found: object = None
    skipped: int = 0

    def to_json(self) -> dict:
        out = {"type": "problem", "scope": self.scope, "kind": self.kind, "file": self.file,
               "fileOffset": self.file_offset, "offset": self.offset, "message": self.message}
        if self.expected is not None or self.found is not None:
            out["expected"], out["found"] = self.expected, self.found
        if self.skipped:
            out["skippedBytes"] = self.skipped
        return out


@dataclass
class QueueRun:
    """What one part of the commitlog says about one queue: its first and last queue offsets, and
    the queue offset the next record must have (last + 1, or + INNER_NUM after an inner batch)."""

    topic: str
    queue_id: int
    first: int
    first_offset: int
    last: int
    last_offset: int
    next: int = -1

    def __post_init__(self):
        if self.next < 0:
            self.next = self.last + 1


@dataclass
class Pointers:
    """A consume queue or index file, and the span of commitlog offsets its entries point at:
    a commitlog part checks the entries pointing into it while its pages are in memory."""

    kind: str                 # "cq" or "index"
    path: str
    low: int
    high: int
    topic: str = ""
    queue_id: int = 0
    logical0: int = 0         # cq: the queue offset of the file's first unit
    first: int = 0            # the first and one past the last entry that point anywhere,
    last: int = 0             #   sorted by commitlog offset between them (else sorted is False)
    sorted: bool = True
    slots: int = 0            # index: maxHashSlotNum, maxIndexNum, the header's beginTimestamp,
    index_num: int = 0        #        beginTimestamp and endTimestamp, and indexCount
    begin_timestamp: int = 0
    end_timestamp: int = 0
    count: int = 0


@dataclass
class TaskResult:
    findings: list[Finding] = field(default_factory=list)
    bytes: int = 0
    records: int = 0
    blanks: int = 0
    units: int = 0
    entries: int = 0
    skipped: int = 0
    timer_units: int = 0
    timer: dict | None = None                         # the timer task: timerview.summary
    runs: dict = field(default_factory=dict)         # (topic hash, queue id) -> QueueRun (commitlog tasks)
    data_end: int | None = None                       # commitlog tasks: where the data ends in this file
    queue_max: dict = field(default_factory=dict)    # (topic, queue id) -> max offset (cq tasks)
    queue_min: dict = field(default_factory=dict)    # (topic, queue id) -> first unit's offset
    pointers: list = field(default_factory=list)     # cq and index tasks: Pointers of their files
    files: int = 0
    ledger: object = None      # commitlog tasks of a DLedger store: their dledgerscan.LedgerPart


class PointerFiles:
    """The queue and index files a commitlog task checks against its records, each mapped once a
    task (not once a stretch of records); release() lets the pages read go after each stretch, so
    memory stays flat (only those: letting a whole index file's mapping go costs more than
    reading what it holds for a stretch)."""

    def __init__(self):
        self.files = {}
        self.read = {}      # path -> the bytes of it read since the last release, (from, to)

    def get(self, path: str, open_file):
        """The file at path, opened by open_file() the first time."""
        file = self.files.get(path)
        if file is None:
            file = self.files[path] = open_file()
        return file

    def reading(self, path: str, start: int = 0, stop: int | None = None) -> None:
        """Bytes [start, stop) of the file at path (to its end: None) are read in this stretch."""
        stop = len(self.files[path].buf) if stop is None else stop
        low, high = self.read.get(path, (start, stop))
        self.read[path] = (min(low, start), max(high, stop))

    def release(self) -> None:
        for path, (start, stop) in self.read.items():
            buf = self.files[path].buf
            start -= start % PAGE_SIZE
            drop_pages(buf, start, min(stop + PAGE_SIZE - 1, len(buf)), 0, at_end=True)
        self.read.clear()

    def close(self) -> None:
        for file in self.files.values():
            file.close()
        self.files.clear()
