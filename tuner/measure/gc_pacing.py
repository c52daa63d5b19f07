"""Each arm's own gen0 cycle, measured on the engine before a GC-pacing comparison (see :mod:`tuner.measure.grain`).

A strategy that changes when the collector runs is compared in blocks of several gen0 cycles of the slower arm.
That cycle is measured, not assumed from a threshold: each arm runs alone (both blocks of every pair the same arm,
no settle, so its collections come at its own pace) for its share of the pilot time, and the engine's gen0
collections during its steps give its steps per collection. What an arm collects per 1,000 steps here is also what
its blocks of the comparison should show (the record keeps both).
"""

from __future__ import annotations

from tuner.measure.grain import GcCycles
from tuner.measure.interleave import InterleaveResult, interleaved_comparison
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import StrategySet

PILOT_BLOCK_STEPS = 1
"""Blocks of the pilot: the arm is the same on both sides (switching to it is a no-op), so the block length only
decides how many steps a drain leaves uncounted: a half-finished pair. With 32-step blocks a 3 s pilot counted 64
of its ~120 steps, so a cycle read "> 64 steps" and a step 76 ms long."""


def alone(bench: Workbench, arm: StrategySet, budget_s: float, seed: int) -> InterleaveResult:
    """``arm`` alone on ``bench`` for ``budget_s`` (blocks of the same arm, no settle)."""
    return interleaved_comparison(
        bench, arm, arm, block_steps=PILOT_BLOCK_STEPS, settle=False, budget_s=budget_s, seed=seed
    )


def _cycle(result: InterleaveResult) -> tuple[float, bool]:
    """Steps per gen0 collection (the steps measured, as a lower bound, when none was seen)."""
    rates = [r for r in result.gen0_per_1000_steps.values() if r is not None]
    per_1000 = sum(rates) / len(rates) if rates else 0.0
    if per_1000 > 0:
        return 1000 / per_1000, True
    return float(max(result.steps, 1)), False


def measure_gc_cycles(
    bench: Workbench, reference: StrategySet, trial: StrategySet, budget_s: float, seed: int
) -> tuple[GcCycles, dict[str, float]]:
    """Each arm's gen0 cycle (``budget_s`` each), and each arm's gen0 collections per 1,000 steps alone."""
    runs = {"reference": alone(bench, reference, budget_s, seed), "trial": alone(bench, trial, budget_s, seed + 1)}
    (ref_steps, ref_seen), (trial_steps, trial_seen) = _cycle(runs["reference"]), _cycle(runs["trial"])
    steps = sum(r.steps for r in runs.values())
    step_s = sum(r.elapsed_s for r in runs.values()) / max(steps, 1)
    per_1000 = {
        arm: (1000 / cycle if seen else 0.0)
        for arm, (cycle, seen) in (("reference", (ref_steps, ref_seen)), ("trial", (trial_steps, trial_seen)))
    }
    return GcCycles(ref_steps, trial_steps, ref_seen, trial_seen, step_s), per_1000
