"""The store's own reclaim thread, every cleanResourceInterval ms.
"""

from __future__ import annotations

import threading

from mqtool.engine.flush import ServiceThread
from mqtool.engine.reclaim.policy import FIRST_RUN_DELAY_MS, Policy
from mqtool.engine.reclaim.reclaimer import Reclaimer


class ReclaimService(ServiceThread):
    """The store's own reclaim, every cleanResourceInterval ms (a broker's cleanFilesPeriodically):
    the broker's rules, files deleted at once, and the disk-full mark refreshed."""

    name = "ReclaimService"

    def __init__(self, reclaimer: Reclaimer, interval_ms: int):
        super().__init__()
        self.reclaimer = reclaimer
        self.interval_ms = interval_ms
        self.runs = 0
        self.last_error: BaseException | None = None
        self.ran = threading.Event()

    def run(self) -> None:
        self.wait_for_running(FIRST_RUN_DELAY_MS)   # scheduleAtFixedRate(..., 1000 * 60, interval)
        while not self.stopped:
            try:
                self.reclaimer.run(Policy())
            except Exception as exc:  # noqa: BLE001 - the broker logs and tries again next time
                self.last_error = exc
            self.runs += 1
            self.ran.set()
            self.wait_for_running(self.interval_ms)
