"""verify-crc: check every byte of a store and every reference between its files.

Read-only.  Four scopes, each split into independent tasks (one commitlog
file, one consume queue, one index file, parts of big commitlog files) so that
`--jobs` can spread them over threads (the per-record work runs in compiled
kernels that release the GIL, so threads share the cores without the cost of
forking and pickling):

- commitlog: the walker's structural checks (magic, sizes, BLANK records,
  non-zero bytes after the data, files without their BLANK, zero gaps), the
  body CRC of every record, the physical-offset field, and queue offsets that
  go up one by one in every queue (prepared and rollback records carry 0 and
  are skipped, as the broker skips them).  After damage the walk goes on at
  the next valid record and says how many bytes it skipped.
- cq: every consume-queue unit points at a record of its topic and queue, at
  its queue offset, of its size and tags code; no unit is invalid or missing
  between the first and the last; every queue holds every record the
  commitlog has for it.
- index: every entry points at a record whose `topic#key` hashes to it; the
  header (counts, first and last offsets and times) and the slot chains agree
  with the entries.
- timer (5.x): timerlog units, wheel slots and the timer checkpoint against each
  other and the commitlog (mqtool/forensics/verify/timer.py).

The per-record work runs in compiled kernels (mqtool/native/fastscan.py); this
module decides what is a problem and how to say it.
"""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqtool.forensics.verify import batchqueues
from mqtool.forensics.verify.commitlog import commitlog_task, merge_runs
from mqtool.forensics.verify.findings import SCOPES, Finding, Pointers, TaskResult
from mqtool.forensics.verify.index import index_task, read_entries
from mqtool.forensics.verify.queues import cq_task, read_units
from mqtool.forensics.verify.timer import timer_task
from mqtool.formats import index as index_format
from mqtool.formats.consumequeue import UNIT_SIZE
from mqtool.formats.filenames import is_index_name, name_to_offset
from mqtool.native import fastscan
from mqtool.native.warmup import Stopwatch
from mqtool.storage import batchqueue, census, commitlog, dledger, timerstore
from mqtool.storage.fsutil import relative_paths, shown_path
from mqtool.storage.indexfile import IndexFile
from mqtool.storage.mappedfile import MappedFile

# ------------------------------------------------------------------- driving

@dataclass
class Summary:
    scopes: tuple
    files: int = 0
    bytes: int = 0
    records: int = 0
    blanks: int = 0
    units: int = 0
    entries: int = 0
    skipped: int = 0
    timer_units: int = 0
    timer: dict | None = None    # the timer store as a broker's recovery leaves it (timerview.summary)
    problems: int = 0
    by_kind: dict = field(default_factory=dict)
    seconds: float = 0.0         # the checking
    load_seconds: float = 0.0    # loading the compiled kernels first (about 0.15 s in a fresh process)
    uncommitted: int | None = None   # DLedger: entries past the committed index
    division: dict | None = None     # switched to DLedger: commitlog.describe_division

    def add(self, result: TaskResult, counted: bool = True) -> None:
        """counted False: a commitlog part run only for the cross-checks (its bytes are not the
        scope's)."""
        if counted:
            self.files += result.files
            self.bytes += result.bytes
        self.records += result.records
        self.blanks += result.blanks
        self.units += result.units
        self.entries += result.entries
        self.skipped += result.skipped
        self.timer_units += result.timer_units
        if result.timer is not None:
            self.timer = result.timer

    def count(self, finding: Finding) -> None:
        self.problems += 1
        self.by_kind[finding.kind] = self.by_kind.get(finding.kind, 0) + 1

    def to_json(self) -> dict:
        return {"type": "summary", "scopes": list(self.scopes), "files": self.files, "bytes": self.bytes,
                "records": self.records, "blanks": self.blanks, "units": self.units, "entries": self.entries,
                "timerUnits": self.timer_units, "skippedBytes": self.skipped, "problems": self.problems, "problemsByKind": self.by_kind,
                "seconds": round(self.seconds, 3), "loadSeconds": round(self.load_seconds, 3),
                "mbPerSecond": round(self.bytes / self.seconds / 1e6, 1) if self.seconds else None,
                "timer": self.timer,
                **({"dledgerUncommittedEntries": self.uncommitted} if self.uncommitted is not None else {}),
                **({"division": self.division} if self.division is not None else {})}


def all_scopes(layout) -> tuple:
    """What `--scope all` checks: every scope, the timer's only where the store has a timer store."""
    return tuple(s for s in SCOPES if s != "timer" or timerstore.exists(layout))


def verify(layout, *, scopes=SCOPES, check_crc: bool = True, jobs: int = 1, on_finding=None,
           on_progress=None, engine=None) -> Summary:
    """Run the checks of the given scopes; findings go to on_finding as they are known.

    First every consume queue and index file is checked on its own (and says where its entries
    point); then every commitlog part, with the entries pointing into it.  on_progress(bytes)
    is called as tasks finish.  With jobs > 1 tasks run in that many threads; with an engine
    (pipeline.LocalEngine or spark.engine.SparkEngine) they are its partitions, so on Spark the
    checks run on the executors (which must see the store at the same path)."""
    summary = Summary(tuple(scopes))
    stopwatch = Stopwatch().warm_up(fastscan.warm_up)   # loading the compiled kernels is start-up, timed on its own
    summary.load_seconds = stopwatch.load_seconds
    delays = layout.config.delay_levels_ms()
    multi = census.multi_dispatch(layout) if "cq" in scopes else None   # LMQ units and queue offsets
    batch_topics = frozenset(batchqueue.topic_names(layout))   # queue offsets move on by INNER_NUM
    display = relative_paths(layout.root)

    def emit(finding: Finding) -> None:
        summary.count(finding)
        if on_finding is not None:
            on_finding(finding)

    queue = commitlog.open_queue(layout)
    try:
        for problem in queue.problems:
            emit(Finding("commitlog", problem.kind, display(problem.path), None, problem.offset, problem.message))
        files = queue.files
        last_data = commitlog.last_data_file(queue)
        spans = [(mf.file_from_offset, mf.file_size) for mf in files]
        paths = [display(mf.path) for mf in files]
        file_paths = [str(mf.path) for mf in files]
        file_size = queue.file_size
    finally:
        queue.close()
    structure, sizes = [], []     # sizes: how much each task reads, to start the biggest first
    if "cq" in scopes:
        for topic, queue_id, directory in layout.consume_queues():
            structure.append(("cq", cq_task, (topic, queue_id, str(directory))))
            sizes.append(0)
    if "index" in scopes:
        slots, index_num = layout.index_geometry()
        files = layout.index_files()
        named = [info for info in files if is_index_name(info.name)]
        for info in files:
            if not is_index_name(info.name):
                emit(Finding("index", "bad-file-name", display(info.path), None, None,
                             "not an index file name (yyyyMMddHHmmssSSS)"))
                continue
            structure.append(("index", index_task, (str(info.path), slots, index_num, info is named[-1])))
            sizes.append(info.size)
    with (_EnginePool(engine) if engine is not None else _Pool(jobs)) as pool:
        pending = pool.submit(layout, structure, sizes)
        first = pointers = None
        parts, sizes, started = [], [], []
        crc = check_crc and "commitlog" in scopes
        # tasks in parallel: files are cut into parts, each part started as soon as the hop over
        # the records has passed its end (the hop is quick, but not free: it reads every page);
        # one after the other: each file is one task, which keeps its memory bounded on its own
        for i, start, stop in _part_edges(layout, pool.parallel):
            if first is None:      # the queue and index files say which of their entries each part checks
                first = pool.collect(pending, scopes, emit, on_progress)
                pointers = [p for _, r in first for p in r.pointers]
            base, size = spans[i]
            low, high = base + start, base + (size if stop is None else stop)
            routed = [p for p in pointers if p.low < high and p.high >= low]
            parts.append((i, ("commitlog", commitlog_task,
                              (file_paths[i], file_size, i >= last_data, crc, start, stop, routed, delays,
                               multi, batch_topics))))
            sizes.append(high - low)
            if pool.streams:
                started += pool.submit(layout, [parts[-1][1]], [sizes[-1]])
        if first is None:
            first = pool.collect(pending, scopes, emit, on_progress)
            pointers = [p for _, r in first for p in r.pointers]
        if not pool.streams:
            started = pool.submit(layout, [task for _, task in parts], sizes)
        second = pool.collect(started, scopes, emit, on_progress)
    for pointer in pointers:          # what points past the commitlog, or into a missing file, no part saw
        if pointer.kind in scopes and _sticks_out(pointer, spans):
            for finding in _outside(layout, pointer, spans):
                emit(finding)
    results = first + second
    for scope, result in results:
        if scope in scopes or (scope == "commitlog" and ("cq" in scopes or "index" in scopes)):
            summary.add(result, scope in scopes)
    cl_results = [r for s, r in second]
    runs, order_findings = merge_runs(cl_results, [(paths[i], spans[i][0]) for i, _ in parts])
    if "commitlog" in scopes:
        for finding in order_findings:
            emit(finding)
    undispatched = {}
    if layout.is_dledger() and ("commitlog" in scopes or "cq" in scopes):   # the entries as a ledger
        summary.uncommitted, undispatched = _ledger(layout, cl_results, emit if "commitlog" in scopes else None,
                                                    display)
        with commitlog.open_queue(layout) as queue:    # where the old commitlog ends, DLedger's entries begin
            summary.division = commitlog.describe_division(queue, dledger.switch_pending(layout, queue))
            for path in dledger.moved_files(layout) if "commitlog" in scopes else []:
                emit(Finding("commitlog", "moved-by-hand", display(path), 0, name_to_offset(path.name),
                             dledger.MOVED_BY_HAND))
    if "cq" in scopes:
        batch = batchqueues.check(layout, runs, emit, display)     # batch topics: covered by their batch queues
        _coverage(first, {k: r for k, r in runs.items() if (r.topic, r.queue_id) not in batch}, emit, undispatched)
    if "timer" in scopes:          # one task after the others: the timer files are small
        timer = timer_task(layout)
        _report("timer", timer, scopes, emit, on_progress)
        summary.add(timer)
    summary.seconds = stopwatch.seconds
    return summary


def _ledger(layout, cl_results, emit, display) -> tuple[int, dict]:
    """A DLedger store's entries against each other and their index units (forensics/dledgerscan),
    checked by the commitlog parts in their walk (cl_results, in offset order) and chained here;
    the entry walk's own problems were reported by the commitlog parts.  Returns how many entries
    are past the committed index (uncommitted: no damage), and per queue the first queue offset
    such an entry holds (the queue may end before it, unless a crash makes a broker dispatch them)."""
    from mqtool.forensics import dledgerscan

    def on_problem(path, file_pos, offset, kind, message, expected, found):
        if emit is not None:
            emit(Finding("commitlog", kind, display(path), file_pos, offset, message, expected, found))

    tally = dledgerscan.chain([r.ledger for r in cl_results], on_problem)
    if not tally.uncommitted_queues:     # nothing uncommitted: where dispatch ends changes nothing
        return tally.uncommitted, {}
    with commitlog.open_queue(layout) as queue:     # a crashed store's broker dispatches them all
        dispatched_all = dledger.dispatch_end(layout, queue) is None
    return tally.uncommitted, {} if dispatched_all else tally.uncommitted_queues


def _sticks_out(pointer: Pointers, spans) -> bool:
    """Do some of a file's units or entries point at or past the commitlog's end, or between
    two of its files?  (Below its first file is normal: the broker deletes queue and index
    files only once all of theirs point there.)"""
    if not spans:
        return pointer.high >= 0
    if pointer.high >= spans[-1][0] + spans[-1][1]:
        return True
    return any(a + size < b and pointer.low < b and pointer.high >= a + size
               for (a, size), (b, _) in zip(spans, spans[1:]))


def _outside(layout, pointer: Pointers, spans) -> list[Finding]:
    """Findings for the units or entries of one file that point where the commitlog has no file."""
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    ends = np.array([a + size for a, size in spans], dtype=np.int64)
    shown = shown_path(pointer.path, layout.root)
    if pointer.kind == "cq":
        mf = MappedFile(pointer.path, layout.consume_queue_file_size(), strict=False)
        try:
            offsets, sizes, _, _, valid = read_units(mf)
        finally:
            mf.close()
        rows = np.flatnonzero(valid)
        targets = offsets[rows]
        where = lambda i: i * UNIT_SIZE  # noqa: E731
        kind, what = "unit-outside-commitlog", "unit {n} points at commitlog offset {o}, where the commitlog has no file"
        number = lambda i: pointer.logical0 + i  # noqa: E731
    else:
        ix = IndexFile(Path(pointer.path), pointer.slots, pointer.index_num)
        try:
            first_entry, _, phy, _, _ = read_entries(ix, pointer.count)
        finally:
            ix.close()
        rows = np.arange(1, pointer.count)
        targets = phy[rows]
        where = lambda i: first_entry + i * index_format.ENTRY_SIZE  # noqa: E731
        kind, what = "entry-outside-commitlog", "entry {n} points at commitlog offset {o}, where the commitlog has no file"
        number = lambda i: i  # noqa: E731
    inside = np.zeros(len(targets), dtype=bool)    # no commitlog file at all: every pointer is outside
    if len(starts):
        at = np.searchsorted(starts, targets, side="right") - 1
        inside = (at >= 0) & (targets < ends[np.maximum(at, 0)])
    below = targets < starts[0] if len(starts) else np.zeros(len(targets), dtype=bool)
    findings = []
    for j in np.flatnonzero(~inside & ~below).tolist():
        i, offset = int(rows[j]), int(targets[j])
        findings.append(Finding(pointer.kind, kind, shown, where(i), offset,
                                what.format(n=number(i), o=offset),
                                expected=f"{int(starts[0]) if len(starts) else 0}..{int(ends[-1]) if len(ends) else 0}",
                                found=offset))
    return findings


def _coverage(results, runs, emit, undispatched=None) -> None:
    """Every queue holds every record the commitlog has for it (in a DLedger store, every committed
    one: undispatched gives per queue the first queue offset of an uncommitted record)."""
    queue_max, queue_min = {}, {}
    for scope, r in results:
        if scope == "cq":
            queue_max.update(r.queue_max)
            queue_min.update(r.queue_min)
    for run in sorted(runs.values(), key=lambda run: (run.topic, run.queue_id)):
        queue_id = run.queue_id
        where = f"consumequeue/{run.topic}/{queue_id}"
        have = queue_max.get((run.topic, queue_id))
        if have is None and (undispatched or {}).get((run.topic, queue_id), run.first + 1) <= run.first:
            continue      # a DLedger queue whose every record is uncommitted: not dispatched yet
        if have is None:
            emit(Finding("cq", "cq-missing", where, None, run.first_offset,
                         f"the commitlog holds queue offsets {run.first}..{run.last} of {run.topic}/{queue_id} "
                         "but there is no consume queue for it"))
            continue
        if have <= run.last and have < (undispatched or {}).get((run.topic, queue_id), have + 1):
            emit(Finding("cq", "cq-behind", where, None, run.last_offset,
                         f"the consume queue ends at {have} but the commitlog holds queue offsets up to "
                         f"{run.last}", expected=run.last + 1, found=have))
        start = queue_min.get((run.topic, queue_id))
        if start is not None and start > run.first:
            emit(Finding("cq", "cq-missing-start", where, None, run.first_offset,
                         f"the consume queue starts at {start} but the commitlog holds queue offsets from "
                         f"{run.first}", expected=run.first, found=start))


class _Pool:
    """Runs tasks one after the other, or with jobs > 1 in that many threads."""

    streams = True     # tasks may be submitted a few at a time, while others run

    def __init__(self, jobs: int):
        self.jobs = jobs
        self.pool = None
        self.parallel = jobs > 1

    def __enter__(self):
        if self.parallel:
            self.pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="verify")
        return self

    def __exit__(self, *exc):
        if self.pool is not None:   # after a failure (or Ctrl-C) the tasks not started yet are dropped
            self.pool.shutdown(cancel_futures=exc[0] is not None)

    def submit(self, layout, tasks, sizes) -> list:
        """Start the tasks, the biggest first (in the pool; in this process they run in collect)."""
        if self.pool is None:
            return [(scope, functools.partial(fn, layout, *args)) for scope, fn, args in tasks]
        started = {}
        for i in _biggest_first(sizes):
            scope, fn, args = tasks[i]
            started[i] = self.pool.submit(fn, layout, *args).result
        return [(tasks[i][0], started[i]) for i in range(len(tasks))]

    def collect(self, pending, scopes, emit, on_progress) -> list:
        """The submitted tasks' results, in order, reported as they come."""
        results = []
        for scope, result in pending:
            results.append((scope, result()))
            _report(scope, results[-1][1], scopes, emit, on_progress)
        return results


def _biggest_first(sizes) -> list[int]:
    """The order to start tasks in so that workers finish together: the biggest first."""
    return sorted(range(len(sizes)), key=lambda i: -sizes[i])


def _run_task(layout, task) -> TaskResult:
    """One task of a plan, where an engine runs it: (scope, function, arguments)."""
    _, fn, args = task
    return fn(layout, *args)


class _EnginePool:
    """Runs a stage's tasks as an engine's partitions (Spark tasks, or local processes)."""

    parallel = True
    streams = False    # a stage's tasks go to the engine together

    def __init__(self, engine):
        self.engine = engine

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def submit(self, layout, tasks, sizes) -> tuple:
        return layout, tasks, sizes

    def collect(self, pending, scopes, emit, on_progress) -> list:
        layout, tasks, sizes = pending
        order = _biggest_first(sizes)
        results = [None] * len(tasks)
        for i, result in zip(order, self.engine.map(functools.partial(_run_task, layout),
                                                    [tasks[i] for i in order])):
            results[i] = result
        out = []
        for (scope, _, _), result in zip(tasks, results):
            out.append((scope, result))
            _report(scope, result, scopes, emit, on_progress)
        return out


def _part_edges(layout, cut: bool):
    """(file number, start, stop) of each commitlog part in order, each as soon as it is known:
    with cut, every file cut where fastscan.cut_points finds record boundaries (stop None: the
    file's end), else whole files."""
    queue = commitlog.open_queue(layout)
    try:
        for i, mf in enumerate(queue.files):
            start = 0
            if cut:
                for point in fastscan.cut_points(mf, entries=commitlog.is_dledger_file(mf)):
                    yield i, start, point
                    start = point
            yield i, start, None
    finally:
        queue.close()


def _report(scope, result, scopes, emit, on_progress) -> None:
    for finding in result.findings:
        if finding.scope in scopes:
            emit(finding)
    if on_progress is not None:
        on_progress(result.bytes)
