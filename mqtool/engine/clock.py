"""The store's sense of time, injectable so tests never sleep."""

from __future__ import annotations

import time


class SystemClock:
    def now_ms(self) -> int:
        return int(time.time() * 1000)


class ManualClock:
    """A clock a test sets and advances by hand."""

    def __init__(self, now_ms: int):
        self.now = now_ms

    def now_ms(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms
