"""The local engine: partitions on this machine, in this process or a pool of processes (plain
Python: no Java, no pyspark).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor


def default_jobs() -> int:
    """One worker per CPU this process may use (its affinity mask, where the OS has one): -j 0's
    count (cli/options.jobs_option) and the engine's without one."""
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
