"""A third-party strategy package used by the tests: found only through the ``tuner.strategies`` entry point."""

from __future__ import annotations

import os
import statistics
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from strategies import Param, ProcessContext, Role, Strategy
from strategies.gc_threshold import GcThreshold
from strategies.known_delay import busy_wait


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
    """A host delay of known size in the model runner: the worker busy-waits before executing every step (in the
    worker process under the ``mp`` executor, in EngineCore under ``uni``).

    The known-size tests use it rather than :class:`StepDelay`: a pause in EngineCore's scheduler costs more than
    its length on this 2-core host, a pause in the worker costs its length (measured with the step-interleaved
    comparison, A at 1 ms, B 2 or 4 ms longer; side cost = B - A - extra per step: scheduler -0.11 to +0.34 ms at
    2 ms and +0.44 to +0.89 ms at 4 ms; worker -0.05 and +0.07 ms at 2 ms, +0.21 ms at 4 ms; the pauses
    themselves last their nominal length within 21 us). It knows nothing about steps: the plugin puts each
    batch's arm in force in the worker before the batch reaches ``Worker.execute_model``, where it waits.
    """

    name = "runner_delay"
    description = "Test strategy: the worker busy-waits a fixed time before executing every scheduled step."
    roles = frozenset({Role.WORKER})

    def install(self) -> None:
        if self._installed:
            return
        from vllm.v1.worker.gpu_worker import Worker  # CPUWorker inherits its execute_model

        execute_model = Worker.execute_model

        def delayed_execute_model(worker: Any, scheduler_output: Any) -> Any:
            if self.delay_s:
                self.count("delayed_steps")
                busy_wait(self.delay_s)
            return execute_model(worker, scheduler_output)

        Worker.execute_model = delayed_execute_model  # type: ignore[method-assign]
        self._installed = True


BASE_DELAY_VAR = "TUNER_TEST_BASE_DELAY_MS"
"""``engine_core_ms,worker_ms``: what every step of an engine started with it waits unless a speedup cuts it."""
CUT_LOG_VAR = "TUNER_TEST_CUT_LOG"
"""A file each process appends ``name median_step_s`` to when a ``cut_share`` speedup fixes its cut."""
PERIOD_SAMPLES = 64
"""A ``cut_share`` speedup fixes its cut from the median of the last this many step periods before it is applied."""
IDLE_S = 1.0
"""A period this long is the engine idling between runs, not a step."""


class _Speedup(Strategy):
    """A known *gain*: with :data:`BASE_DELAY_VAR` set at engine start every step busy-waits that long on one side
    of the pipeline, and the strategy cuts ``cut_ms`` of it, or ``cut_share`` of this engine's own step (the median
    of the last :data:`PERIOD_SAMPLES` step periods before it is first applied: the baseline's steps), which is 1% of
    a step whatever this host's speed that day. A sweep's baseline pays the whole wait, so the strategy's throughput
    gain is cut / step time: what the known-gain tests expect ``tuner sweep`` to confirm."""

    params = (
        Param("cut_ms", "float", 0.2, low=0.0, high=1000.0),
        Param("cut_share", "float", 0.0, low=0.0, high=0.5, help="of this engine's median step; 0: cut_ms"),
    )
    switchable = True
    step_switchable = True
    side = 0  # the position of this side's wait in BASE_DELAY_VAR

    def __init__(self) -> None:
        super().__init__()
        self.cut_s = 0.0
        self.share = 0.0
        self.periods: deque[float] = deque(maxlen=PERIOD_SAMPLES)
        self.last_call: float | None = None
        self.median_step_s: float | None = None
        self._installed = False

    def wait(self) -> None:
        self._time_the_step()
        cut = self.share * self.median_step_s if self.share and self.median_step_s else self.cut_s
        if self.cut_s or self.share:
            self.count("cut_steps")  # its path ran while applied (with or without a base wait to cut)
        base = os.environ.get(BASE_DELAY_VAR)
        if base:
            busy_wait(max(float(base.split(",")[self.side]) / 1e3 - cut, 0.0))

    def _time_the_step(self) -> None:
        """Keep the period since the last call (one step; a longer one is the engine idling) until the cut is fixed."""
        now = time.perf_counter()
        if self.median_step_s is None and self.last_call is not None and now - self.last_call < IDLE_S:
            self.periods.append(now - self.last_call)
        self.last_call = now

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.cut_s, self.share = params["cut_ms"] / 1e3, params["cut_share"]
        if self.share and self.median_step_s is None and self.periods:
            self.median_step_s = statistics.median(self.periods)
            log = os.environ.get(CUT_LOG_VAR)
            if log:
                with open(log, "a") as out:
                    out.write(f"{self.name} {self.median_step_s!r}\n")

    def revert(self, ctx: ProcessContext) -> None:
        self.cut_s = self.share = 0.0


class EngineCoreSpeedup(_Speedup):
    name = "engine_core_speedup"
    description = "Test strategy: cut a known part of a base wait before EngineCore processes each batch's output."
    roles = frozenset({Role.ENGINE_CORE})

    def install(self) -> None:
        """Where :class:`strategies.known_delay.KnownDelay` waits in EngineCore: a wait there costs its length."""
        if self._installed:
            return
        from vllm.v1.core.sched.scheduler import Scheduler

        update = Scheduler.update_from_output

        def waited_update(scheduler: Any, *args: Any, **kwargs: Any) -> Any:
            self.wait()
            return update(scheduler, *args, **kwargs)

        Scheduler.update_from_output = waited_update  # type: ignore[method-assign]
        self._installed = True


class WorkerSpeedup(_Speedup):
    name = "worker_speedup"
    description = "Test strategy: cut a known part of a base wait before every batch a worker executes."
    roles = frozenset({Role.WORKER})
    side = 1

    def install(self) -> None:
        if self._installed:
            return
        from vllm.v1.worker.gpu_worker import Worker

        execute_model = Worker.execute_model

        def waited_execute_model(worker: Any, scheduler_output: Any) -> Any:
            self.wait()
            return execute_model(worker, scheduler_output)

        Worker.execute_model = waited_execute_model  # type: ignore[method-assign]
        self._installed = True


class EngineGcThreshold(GcThreshold):
    """``gc_threshold`` in the engine's processes only (EngineCore and its workers): its pacing effect without the
    front-end's, the part a step-level comparison measures, so that the GC-pacing benchmark's run-level truth
    compares like with like (``benchmarks/engine/gc_pacing.py``)."""

    name = "engine_gc_threshold"
    description = "Test strategy: gc_threshold in EngineCore and the workers only, not in the front-end."
    roles = frozenset({Role.ENGINE_CORE, Role.WORKER})
