"""GC threshold scaling: gen0 = base + k × ``max_num_seqs`` in every engine process.

Proposal #2 of vLLM issue #26369, never merged: a decode step allocates a few container objects per running
request, so with the default gen0 threshold of 700 a large batch triggers a young collection every step or
two. Raising gen0 with the batch size trades collections for memory; this strategy makes that searchable.
"""

from __future__ import annotations

from typing import Any

from strategies.framework.base import Param, ProcessContext, Upstream
from strategies.framework.requirements import TESTED_VLLM, Defined
from strategies.framework.thresholds import ThresholdStrategy


class GcThreshold(ThresholdStrategy):
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
    paces_gc = True
    requires = (Defined("config/scheduler.py", "SchedulerConfig.max_num_seqs"),)
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "vLLM never sets GC thresholds; #26369's proposal was not merged")
    paths = (
        "All paths (V1/V2 model runner, sync/async scheduling, any executor): it only sets CPython's GC thresholds "
        "in each process."
    )

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        max_num_seqs = self._max_num_seqs(ctx.vllm_config)
        self._set_thresholds(params["base"] + params["gen0_per_seq"] * max_num_seqs, params["gen1"], params["gen2"])
        self.count("set_threshold")

    def verify(self, ctx: ProcessContext) -> str | None:
        problem = self._thresholds_problem()
        if problem is None:
            self.count("in_force")
        return problem

    def revert(self, ctx: ProcessContext) -> None:
        self._restore_thresholds()
