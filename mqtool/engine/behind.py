"""Work behind: threads that write (or render) while this one reads on."""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor


class Behind:
    """Work handed to other threads, a piece at a time, while this thread goes on with the next
    block (compiled kernels and pyarrow's writers release the GIL).  With one worker (the
    default) the pieces run one after another, in order: run() waits for the piece before
    (raising its error), so one is in flight at most.  With more, as many pieces are made at
    once and each one's `then` (the part that must keep the order, such as writing what was
    made) runs after the `then` of the piece before.  wait() waits for them all, and gives what
    the last returned (None when nothing was in flight)."""

    def __init__(self, name: str = "", workers: int = 1):
        self.pool = ThreadPoolExecutor(workers, name)
        self.workers = workers
        self.jobs: deque = deque()

    def run(self, work, *args, then=None) -> None:
        """work(*args) in a worker, then then(what it returned) when given, in the order of run."""
        while len(self.jobs) >= self.workers:
            self.jobs.popleft().result()
        before = self.jobs[-1] if self.jobs else None
        self.jobs.append(self.pool.submit(_piece, before, work, args, then))

    def wait(self):
        last = None
        while self.jobs:
            last = self.jobs.popleft().result()
        return last

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.pool.shutdown(cancel_futures=True)


def _piece(before, work, args, then):
    made = work(*args)
    if before is not None:
        before.result()        # the piece before has done its part in order (its error is raised here)
    return then(made) if then is not None else made
