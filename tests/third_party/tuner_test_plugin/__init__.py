"""A third-party strategy package used by the tests: found only through the ``tuner.strategies`` entry point."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from strategies import Param, ProcessContext, Role, Strategy

DELAY_ATTRIBUTE = "_tuner_test_delay_s"
"""Set on a ``SchedulerOutput`` by :class:`RunnerDelay`: how long the worker busy-waits before executing it."""


def busy_wait(seconds: float) -> None:
    """Spin for ``seconds`` (busy, so it costs CPU time like Python overhead does, not an idle sleep)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def delay_scheduler_steps(delay_s: Callable[[], float], on_delay: Callable[[], None] = lambda: None) -> None:
    """Busy-wait ``delay_s()`` seconds in every ``Scheduler.schedule`` call of this process."""
    from vllm.v1.core.sched.scheduler import Scheduler

    original = Scheduler.schedule

    def schedule(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
        seconds = delay_s()
        if seconds:
            on_delay()
            busy_wait(seconds)
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


class RunnerDelay(StepDelay):
    """A host delay of known size in the model runner: EngineCore marks every scheduled step with the delay in
    force, and the worker busy-waits that long before executing the step (in the worker process under the ``mp``
    executor, in EngineCore under ``uni``).

    The known-size tests use it rather than :class:`StepDelay`: a pause in EngineCore's scheduler costs more than
    its length on this 2-core host, a pause in the worker costs its length (measured with the step-interleaved
    comparison, A at 1 ms, B 2 or 4 ms longer; side cost = B - A - extra per step: scheduler -0.11 to +0.34 ms at
    2 ms and +0.44 to +0.89 ms at 4 ms; worker -0.05 and +0.07 ms at 2 ms, +0.21 ms at 4 ms; the pauses
    themselves last their nominal length within 21 us). Switchable between steps: only EngineCore holds state
    (its ``delay_s``, set and cleared as :class:`StepDelay`'s).
    """

    name = "runner_delay"
    description = "Test strategy: the worker busy-waits a fixed time before executing every scheduled step."

    def install(self) -> None:
        """Patch both ends in every process: only EngineCore marks steps, only a worker executes them."""
        if self._installed:
            return
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.worker.worker_base import WorkerWrapperBase

        schedule, execute_model = Scheduler.schedule, WorkerWrapperBase.execute_model

        def marked_schedule(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
            output = schedule(scheduler, *args, **kwargs)
            if self.delay_s:
                setattr(output, DELAY_ATTRIBUTE, self.delay_s)
                self.count("marked_steps")
            return output

        def delayed_execute_model(worker: Any, scheduler_output: Any) -> Any:
            busy_wait(getattr(scheduler_output, DELAY_ATTRIBUTE, 0.0))
            return execute_model(worker, scheduler_output)

        Scheduler.schedule = marked_schedule  # type: ignore[method-assign]
        WorkerWrapperBase.execute_model = delayed_execute_model  # type: ignore[method-assign]
        self._installed = True
