"""``gc.freeze()`` again after N steps of real traffic, in EngineCore and in each worker.

vLLM freezes the heap once, after start-up (EngineCore, API server, GPU worker): what the first real requests
create and keep (caches filled on first use, compiled kernels, allocator pools) stays in the oldest generation and
is walked by every full collection for the rest of the engine's life. ``after_steps: N`` freezes again, the way
vLLM freezes (``freeze_gc_heap``: collect every generation, then freeze), once this process has executed N steps
since it was applied: EngineCore counts the batches whose output it processes, a worker those it executes
(under the ``uni`` executor, one process, EngineCore counts). The price is paid once (one full collection) and
whatever is in flight at that moment (the live requests' objects) is frozen with the rest, never collected.

A freeze cannot be undone in place (see ``run_level_reason``), so the strategy is applied when an engine starts
and never switched on a running one: ``tuner run`` measures it, and a sweep by restart pairs, its trial arm's
engines started with it in force. ``revert`` only cleans up a process that retires it.

The refreeze goes through vLLM's own ``freeze_gc_heap``, so ``gc_freeze: {enabled: false}`` (never freeze)
suppresses it too, and the strategy then says it is not in force rather than measure nothing.
"""

from __future__ import annotations

import gc
from functools import partial
from typing import Any

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches, calling_after
from strategies.framework.requirements import TESTED_VLLM, Defined, Params


class GcRefreeze(Strategy):
    name = "gc_refreeze"
    description = "gc.freeze() again after N steps of real traffic in EngineCore and each worker."
    params = (
        Param(
            "after_steps",
            "int",
            256,
            low=1,
            high=1_000_000,
            log=True,
            help="steps this process executes after the arm is applied before it freezes its heap again",
        ),
    )
    roles = frozenset({Role.ENGINE_CORE, Role.WORKER})
    switchable = False
    run_level_reason = (
        "a freeze cannot be undone in place: undoing it (unfreeze, collect, freeze again where vLLM had frozen) "
        "freezes whatever is alive at that moment, most of what the refreeze froze, so a baseline measured after "
        "it on the same engine would carry the effect; each arm needs an engine of its own"
    )
    requires = (
        Defined("utils/gc_utils.py", "freeze_gc_heap"),
        Defined("v1/core/sched/scheduler.py", "Scheduler.update_from_output"),
        Params("v1/worker/gpu_worker.py", "Worker.execute_model", names=("self", "scheduler_output")),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "vLLM freezes once, after start-up; never the objects real traffic creates after warm-up")
    paths = (
        "All paths: the scheduler's output update and the worker's execute_model are on every path; the freeze "
        "is vLLM's own freeze_gc_heap."
    )

    def __init__(self) -> None:
        super().__init__()
        self.after_steps: int | None = None  # None: not applied here
        self.role: Role | None = None  # the role whose steps this process counts
        self.steps = 0
        self.refrozen = False
        self.suppressed = False
        self._was_frozen = False
        self._patches = Patches()

    def install(self) -> None:
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.worker.gpu_worker import Worker

        self._patches.install(
            (Scheduler, "update_from_output", calling_after(partial(self.step, Role.ENGINE_CORE))),
            (Worker, "execute_model", calling_after(partial(self.step, Role.WORKER))),
        )

    def step(self, role: Role) -> None:
        """One step of ``role`` ended in this process: freeze again once the arm's N-th has."""
        if self.after_steps is None or role is not self.role or self.refrozen or self.suppressed:
            return
        self.steps += 1
        self.count("steps_before_refreeze")
        if self.steps >= self.after_steps:
            self._refreeze()

    def _refreeze(self) -> None:
        from vllm.utils import gc_utils  # looked up now: gc_freeze may have wrapped it

        before = gc.get_freeze_count()
        gc_utils.freeze_gc_heap()
        after = gc.get_freeze_count()
        if after > before:
            self.refrozen = True
            self.count("refreezes")
            self.count("objects_refrozen", after - before)
        else:
            self.suppressed = True

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.after_steps = params["after_steps"]
        self.role, self.steps, self.refrozen, self.suppressed = ctx.role, 0, False, False
        self._was_frozen = gc.get_freeze_count() > 0

    def verify(self, ctx: ProcessContext) -> str | None:
        if self.suppressed:
            return "its freeze was suppressed (gc_freeze: {enabled: false} never freezes)"
        if self.refrozen:
            if gc.get_freeze_count() == 0:
                return "the heap was unfrozen after the refreeze"
            self.count("in_force")
        return None

    def revert(self, ctx: ProcessContext) -> None:
        if self.refrozen:
            gc.unfreeze()
            gc.collect()
            if self._was_frozen:
                gc.freeze()
        self.after_steps, self.role, self.steps, self.refrozen, self.suppressed = None, None, 0, False, False
