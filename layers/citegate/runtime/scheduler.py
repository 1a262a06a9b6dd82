"""What EventBridge Scheduler does for sources in AWS: invoke the `source_scheduler` function every
`interval` seconds, in its own local execution environment (citegate.runtime.functions)."""

from __future__ import annotations

import threading

from citegate.platform.observability import logger
from citegate.runtime.functions import invoke

SCHEDULER_FUNCTION = "source_scheduler"
INTERVAL_SECONDS = 30.0


class SourceScheduler:
    def __init__(self, interval: float = INTERVAL_SECONDS) -> None:
        self.interval = interval
        self.passes = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> object:
        self.passes += 1
        return invoke(SCHEDULER_FUNCTION, {"source": "citegate.local-scheduler"})

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.run_once()
            except Exception:
                logger.exception("the scheduled source syncs failed")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="source-scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
