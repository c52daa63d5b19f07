"""A sweep trial's time limit: the engine of a trial that runs past it is killed, and the trial fails saying so."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Watchdog:
    """Calls ``kill`` once ``limit_s`` have passed since :meth:`arm` (never without a limit).

    The clock starts when :meth:`arm` is called, once the trial's engine is up: starting an engine is not the
    configuration's time (and a new engine is only needed when engine args change).
    """

    def __init__(self, kill: Callable[[], None], limit_s: float | None) -> None:
        self.limit_s = limit_s or 0.0
        self.fired = False
        self._kill = kill
        self._timer = threading.Timer(self.limit_s, self._fire) if limit_s else None
        if self._timer is not None:
            self._timer.daemon = True

    def arm(self) -> None:
        if self._timer is not None:
            self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        self._kill()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
