"""A run's start-up timed apart from its work: the one way commands and library runs load
compiled kernels first (each family's warm_up calls them with the real calls' argument types,
so they are loaded now and forked workers inherit them) and report loadSeconds and seconds."""

from __future__ import annotations

import time


class Stopwatch:
    """warm_up(*loaders) calls each loader (a kernel family's warm_up, or any callable) and then
    starts the run's clock: load_seconds is their time, seconds the run's since (or since the
    Stopwatch was made, when nothing was warmed up)."""

    def __init__(self):
        self.loading = self.started = time.perf_counter()

    def warm_up(self, *loaders) -> "Stopwatch":
        self.loading = time.perf_counter()
        for load in loaders:
            load()
        self.started = time.perf_counter()
        return self

    @property
    def load_seconds(self) -> float:
        return self.started - self.loading

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started

    def to_json(self) -> dict:
        return {"seconds": round(self.seconds, 3), "loadSeconds": round(self.load_seconds, 3)}
