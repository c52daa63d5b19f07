"""GC threshold scaling: gen0 = base + k × ``max_num_seqs`` in every engine process.

Proposal #2 of vLLM issue #26369, never merged: a decode step allocates a few container objects per running
request, so with the default gen0 threshold of 700 a large batch triggers a young collection every step or
two. Raising gen0 with the batch size trades collections for memory; this strategy makes that searchable.
"""

from __future__ import annotations

import gc
from typing import Any

from strategies.base import Param, ProcessContext, Strategy
from strategies.requirements import TESTED_VLLM, Defined


class GcThreshold(Strategy):
    name = "gc_threshold"
    description = "Scale the GC gen0 threshold with max_num_seqs (gen0 = base + k * max_num_seqs)."
    params = (
        Param("gen0_per_seq", "int", 8, low=0, high=4096, help="k: gen0 grows by k per max_num_seqs"),
        Param("base", "int", 700, low=1, high=10_000_000, help="gen0 before scaling (CPython's default 700)"),
        Param("gen1", "int", None, low=1, high=10_000, help="gen1 threshold (unchanged when unset)"),
        Param("gen2", "int", None, low=1, high=10_000, help="gen2 threshold (unchanged when unset)"),
    )
    switchable = True
    step_switchable = True
    requires = (Defined("config/scheduler.py", "SchedulerConfig.max_num_seqs"),)
    vllm_versions = TESTED_VLLM
    paths = (
        "All paths (V1/V2 model runner, sync/async scheduling, any executor): it only sets CPython's GC thresholds "
        "in each process."
    )

    def __init__(self) -> None:
        super().__init__()
        self._saved: tuple[int, int, int] | None = None
        self._applied: tuple[int, int, int] | None = None

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if self._saved is None:
            self._saved = gc.get_threshold()
        max_num_seqs = _max_num_seqs(ctx.vllm_config)
        _, g1, g2 = self._saved
        gen0 = params["base"] + params["gen0_per_seq"] * max_num_seqs
        self._applied = (gen0, params["gen1"] or g1, params["gen2"] or g2)
        gc.set_threshold(*self._applied)
        self.count("set_threshold")

    def verify(self, ctx: ProcessContext) -> str | None:
        if gc.get_threshold() != self._applied:
            return f"GC thresholds are {gc.get_threshold()}, not the {self._applied} it set (changed by someone else)"
        self.count("in_force")
        return None

    def revert(self, ctx: ProcessContext) -> None:
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        self._applied = None


def _max_num_seqs(vllm_config: Any) -> int:
    if vllm_config is None:
        raise RuntimeError("gc_threshold needs the engine's max_num_seqs, but no vLLM config is known here")
    return int(vllm_config.scheduler_config.max_num_seqs)
