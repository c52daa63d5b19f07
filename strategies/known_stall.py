"""A stall of known size and rate in EngineCore: the yardstick of the stall estimand (:mod:`tuner.measure.stalls`).

Not an optimisation: EngineCore sleeps ``stall_ms`` before it processes the output of every ``every``-th pure
decode batch (one token for each scheduled request: the steps a step-level comparison compares) of the arm that
applies it (``Scheduler.update_from_output``, inside the engine step's time). A comparison against the native arm
must find B's stall rate higher by about 1 / ``every`` (a stall injected on a step that would have stalled anyway
is one stall, not two), with a longest stall of at least ``stall_ms``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches
from strategies.framework.requirements import TESTED_VLLM, Params, Snippet


class KnownStall(Strategy):
    name = "known_stall"
    description = "Stall yardstick: EngineCore sleeps stall_ms on every N-th decode batch of this arm."
    params = (
        Param("stall_ms", "float", 0.0, low=0.0, high=10_000.0, help="how long each injected stall sleeps"),
        Param("every", "int", 50, low=1, high=1_000_000, help="one stall per this many decode batches of the arm"),
    )
    roles = frozenset({Role.ENGINE_CORE})
    switchable = True
    step_switchable = True
    requires = (
        Params("v1/core/sched/scheduler.py", "Scheduler.update_from_output", names=("self", "scheduler_output")),
        Snippet("v1/core/sched/output.py", "SchedulerOutput", text="num_scheduled_tokens: dict[str, int]"),
        Snippet("v1/core/sched/output.py", "SchedulerOutput", text="total_num_scheduled_tokens: int"),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "a validation yardstick, not an optimisation")
    paths = "All paths: the scheduler's output update is on every path."

    def __init__(self) -> None:
        super().__init__()
        self.stall_s: float | None = None  # None: not applied
        self.every = 1
        self.decode_batches = 0
        self._patches = Patches()

    def install(self) -> None:
        from vllm.v1.core.sched.scheduler import Scheduler

        self._patches.install((Scheduler, "update_from_output", self._stalling))

    def _stalling(self, update: Callable[..., Any]) -> Callable[..., Any]:
        """``Scheduler.update_from_output`` that sleeps before every ``every``-th decode batch while applied."""

        def stalling_update(scheduler: Any, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
            if self.stall_s is not None:
                self.count("batches")
                if scheduler_output.total_num_scheduled_tokens == len(scheduler_output.num_scheduled_tokens):
                    self.decode_batches += 1
                    if self.decode_batches % self.every == 0:
                        self.count("stalls")
                        time.sleep(self.stall_s)
            return update(scheduler, scheduler_output, *args, **kwargs)

        return stalling_update

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.stall_s, self.every = params["stall_ms"] / 1e3, params["every"]

    def revert(self, ctx: ProcessContext) -> None:
        self.stall_s = None
