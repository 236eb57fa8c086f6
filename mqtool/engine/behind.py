"""One piece of work behind: a second thread that writes (or renders) while this one reads on."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


class Behind:
    """Work handed to a second thread, a piece at a time and in order, while this thread goes on
    with the next block (compiled kernels and pyarrow's writers release the GIL).  run() waits
    for the piece before (raising its error), so one is in flight at most; wait() for the last,
    and gives what it returned (None when nothing was in flight)."""

    def __init__(self, name: str = ""):
        self.pool = ThreadPoolExecutor(1, name)
        self.job = None

    def run(self, work, *args) -> None:
        self.wait()
        self.job = self.pool.submit(work, *args)

    def wait(self):
        if self.job is not None:
            job, self.job = self.job, None
            return job.result()
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.pool.shutdown(cancel_futures=True)
