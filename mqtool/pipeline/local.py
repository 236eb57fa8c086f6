"""The local engine: partitions on this machine, in this process or a pool of processes (plain
Python: no Java, no pyspark); and Behind, a second thread for the writes of a pass.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor


def default_jobs() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


class LocalEngine:
    """Partitions on this machine: in this process (jobs=1) or a pool of `jobs` processes.
    Plain Python: no Java, no pyspark.  An engines.Engine, as SparkEngine is."""

    name = "local"

    def __init__(self, jobs: int | None = None):
        self.jobs = jobs or default_jobs()

    @property
    def cores(self) -> int:
        return self.jobs

    def map(self, scan, parts) -> list:
        """scan(part) for every partition, results in partition order.  scan must be picklable
        (a module-level function or a functools.partial of one)."""
        return list(self.imap(scan, parts))

    def imap(self, scan, parts):
        """map() as a stream: results in partition order as they are ready."""
        parts = list(parts)
        jobs = min(self.jobs, len(parts))
        if jobs <= 1:
            yield from (scan(p) for p in parts)
            return
        with ProcessPoolExecutor(jobs) as pool:
            yield from pool.map(scan, parts)

    def close(self) -> None:
        pass



class Behind:
    """Work handed to a second thread, a piece at a time and in order, while this thread goes on
    with the next block (compiled kernels and pyarrow's writers release the GIL).  run() waits
    for the piece before (raising its error), so one is in flight at most; wait() for the last."""

    def __init__(self):
        self.pool = ThreadPoolExecutor(1)
        self.job = None

    def run(self, work, *args) -> None:
        self.wait()
        self.job = self.pool.submit(work, *args)

    def wait(self) -> None:
        if self.job is not None:
            job, self.job = self.job, None
            job.result()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.pool.shutdown(cancel_futures=True)
