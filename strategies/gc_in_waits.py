"""Garbage collection moved off the critical path: collect while the process waits for another process or the device.

EngineCore waits every step: for its worker's output (``mp`` executor) or for batch N's device results after it
scheduled batch N+1 (``uni`` executor, async scheduling); an ``mp`` worker waits for its next command. A collection
that runs there costs no latency (as long as it ends before what is awaited arrives). This strategy raises gen0's
threshold to a hard ceiling, so automatic collection is effectively off, and at each wait entry runs
``gc.collect(generation)`` once gen0's allocation count (``gc.get_count()[0]``, allocations minus deallocations
of tracked objects since the last collection) has reached ``min_count``. The generation follows CPython's own
escalation, raised to ``min_generation``: gen1 after ``threshold[1]`` young collections; gen2 after
``threshold[2]`` gen1 ones *and* once the objects promoted into gen2 since the last full collection exceed a quarter
of those it kept (CPython's rule against quadratic full collections; without it an unfrozen heap is traversed
every few steps). A due collection always runs, however old its generation. The ceiling is the safety valve: past
it CPython collects at once, wherever the process is, so memory stays bounded even if no wait comes.
"""

from __future__ import annotations

import gc
from typing import Any

from strategies.framework import wait_points
from strategies.framework.base import Param, ProcessContext, Role, Upstream
from strategies.framework.requirements import TESTED_VLLM, Defined
from strategies.framework.thresholds import ThresholdStrategy


class GcInWaits(ThresholdStrategy):
    name = "gc_in_waits"
    description = "Collect garbage inside the waits for the worker or the device; automatic GC only past a ceiling."
    params = (
        Param("min_count", "int", 700, low=1, high=10_000_000, help="collect in a wait once gen0 counts this many"),
        Param(
            "min_generation", "int", 0, low=0, high=2, help="youngest generation a wait collects (0: CPython's choice)"
        ),
        Param(
            "ceiling_per_seq",
            "int",
            64,
            low=1,
            high=100_000,
            help="safety valve: automatic collection past ceiling_per_seq x max_num_seqs allocations",
        ),
    )
    switchable = True
    step_switchable = True
    paces_gc = True
    requires = (*wait_points.REQUIRES, Defined("config/scheduler.py", "SchedulerConfig.max_num_seqs"))
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "vLLM never collects in idle time")
    paths = (
        "mp executor (the CPU default; any scheduling): EngineCore collects while it waits for the workers' output, "
        "each worker while it waits for its next command. uni executor with async scheduling (the GPU default): "
        "EngineCore, which holds the worker, collects while it waits for the previous batch's device results. "
        "Refused with the uni executor and sync scheduling (the device sync is inside the model runner, not at a "
        "wait point) and with Ray or external-launcher executors (their waits are not patched). The front-end "
        "collects while it waits for engine output when it is an offline LLMEngine (SyncMPClient.get_output); an "
        "asyncio front-end (AsyncLLM, the API server) has no blocking wait, and the strategy is refused there."
    )

    def __init__(self) -> None:
        super().__init__()
        self.min_count = 700
        self.min_generation = 0
        self._long_lived: int | None = None  # objects in gen2 after the last full collection (counted in a wait)
        self._promoted = 0  # objects promoted into gen2 since then

    def refuses(self, vllm_config: Any) -> str | None:
        backend = vllm_config.parallel_config.distributed_executor_backend
        if backend == "mp":
            return None
        if backend == "uni":
            if vllm_config.scheduler_config.async_scheduling:
                return None
            return (
                "with the uni executor and sync scheduling EngineCore waits for the device inside the model runner, "
                "at no patched wait point: there is no wait to hide a collection in"
            )
        return f"the {backend!r} executor's waits are not patched (only mp, and uni with async scheduling)"

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if ctx.role is Role.FRONTEND:
            from vllm.v1.engine.core_client import SyncMPClient

            if not isinstance(getattr(ctx.owner, "engine_core", None), SyncMPClient):
                raise RuntimeError(
                    f"the {type(ctx.owner).__name__} front-end never blocks on engine output at a patched wait point "
                    "(asyncio or in-process engine): no wait to collect in"
                )
        ceiling = params["ceiling_per_seq"] * self._max_num_seqs(ctx.vllm_config)
        self.min_count = min(params["min_count"], ceiling)
        self.min_generation = params["min_generation"]
        self._set_thresholds(ceiling)
        self._long_lived, self._promoted = None, 0
        if self._at_wait not in wait_points.on_wait:
            wait_points.on_wait.append(self._at_wait)

    def _at_wait(self) -> None:
        """At a wait entry: collect when enough was allocated, in the generation CPython would pick."""
        self.count("waits")
        young, gen0_runs, gen1_runs = gc.get_count()
        if young < self.min_count:
            return
        _, gen1, gen2 = self._applied or gc.get_threshold()
        if gen1_runs > gen2 and self._long_lived is None:
            self._long_lived = len(gc.get_objects(2))  # O(heap), so only here: in a wait, when it matters
        full = gen1_runs > gen2 and self._promoted > (self._long_lived or 0) // 4
        generation = max(2 if full else 1 if gen0_runs > gen1 else 0, self.min_generation)
        if generation == 1:  # the survivors of gens 0 and 1 move to gen2
            young_and_middle = len(gc.get_objects(0)) + len(gc.get_objects(1))
            self._promoted += max(0, young_and_middle - gc.collect(1))
        else:
            gc.collect(generation)
        if generation == 2:
            self._long_lived, self._promoted = None, 0
        self.count(f"collected_gen{generation}")

    def verify(self, ctx: ProcessContext) -> str | None:
        return self._thresholds_problem()

    def revert(self, ctx: ProcessContext) -> None:
        if self._at_wait in wait_points.on_wait:
            wait_points.on_wait.remove(self._at_wait)
        self._restore_thresholds()
