"""A third-party strategy package used by the tests: found only through the ``tuner.strategies`` entry point."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from strategies import Param, ProcessContext, Role, Strategy


def delay_scheduler_steps(delay_s: Callable[[], float], on_delay: Callable[[], None] = lambda: None) -> None:
    """Busy-wait ``delay_s()`` seconds in every ``Scheduler.schedule`` call of this process (a host delay of
    known size: busy, so it costs CPU time like Python overhead does, not an idle sleep)."""
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.schedule

    def schedule(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
        seconds = delay_s()
        if seconds:
            on_delay()
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass
        return original(scheduler, *args, **kwargs)

    Scheduler.schedule = schedule  # type: ignore[method-assign]


class StepDelay(Strategy):
    """Adds a known busy-wait to every scheduler step in EngineCore (a host delay of known size)."""

    name = "step_delay"
    description = "Test strategy: busy-wait a fixed time in every EngineCore scheduling step."
    params = (Param("delay_ms", "float", 1.0, low=0.0, high=1000.0),)
    roles = frozenset({Role.ENGINE_CORE})
    switchable = True
    step_switchable = True

    def __init__(self) -> None:
        super().__init__()
        self.delay_s = 0.0
        self._installed = False

    def install(self) -> None:
        if self._installed:
            return
        delay_scheduler_steps(lambda: self.delay_s, lambda: self.count("delayed_steps"))
        self._installed = True

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.delay_s = params["delay_ms"] / 1e3

    def revert(self, ctx: ProcessContext) -> None:
        self.delay_s = 0.0
