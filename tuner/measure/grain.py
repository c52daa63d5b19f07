"""The grain of a step-level comparison: how many engine steps per block, whether each block ends in a settle, and
when a comparison cannot be made of steps at all.

Shorter blocks put the two arms' steps closer in time, so the host's slow drift cancels better: on this CPU engine
and on the H100 steps (``results/reference/sensitivity-cpu.json``, ``results/reference/h100-projection.json``)
one-step blocks needed the least engine time per +-1%. ``tuner calibrate`` measures it per host and workload;
without a calibration the default is one step.

What limits short blocks is carry-over: state one arm leaves for the other's steps. Strategies act on the batch in
progress (the plugin switches every engine process before it works on a batch), and with a batch queue the first
step of a block is a washout. Garbage is what outlives a step. For a strategy that changes how much garbage a step
makes, a collection falls in each arm's steps about in proportion to the garbage they make (the step that pushes
the gen0 count over the threshold triggers it), so one-step blocks stay unbiased.

A strategy that changes *when* the collector runs (:attr:`strategies.Strategy.paces_gc`) is different: in short blocks
the arm with the lower threshold would run every collection, the other arm's garbage included, and a block shorter than
the other arm's gen0 cycle would end before that arm ever collected at its own pace. Its comparisons use blocks of
:data:`GC_CYCLES_PER_BLOCK` gen0 cycles *of the slower arm*, each cycle measured on the engine with that arm alone
(:class:`GcCycles`, :mod:`tuner.measure.gc_pacing`), each block ending in a gen0 collection (settle) charged to the
block: each arm then collects at its own threshold inside its blocks, as it would deployed, and pays for its own garbage
at a cost of one extra collection per block. Where such blocks are too long for the step budget to hold
:data:`MIN_GC_PAIRS` pairs, the comparison goes to run level (each run one arm throughout), and the grain says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from strategies import strategy_classes
from tuner.plugin.protocol import StrategySet
from tuner.records.calibration import Calibration

DEFAULT_BLOCK_STEPS = 1
GC_CYCLES_PER_BLOCK = 8
"""Blocks of a GC-pacing comparison span this many gen0 cycles of the slower arm (its settle: ~1/8 of a cycle)."""
MIN_GC_PAIRS = 10
"""A GC-pacing comparison goes to run level when its step budget holds fewer pairs of such blocks than this."""


@dataclass(frozen=True)
class GcCycles:
    """Each arm's gen0 cycle in engine steps, measured with that arm alone; a cycle not seen within the measured
    steps is at least that long (``*_seen`` False)."""

    reference_steps: float
    trial_steps: float
    reference_seen: bool
    trial_seen: bool
    step_s: float  # the mean engine step while measuring

    @property
    def longest(self) -> float:
        return max(self.reference_steps, self.trial_steps)

    def describe(self) -> str:
        def one(steps: float, seen: bool) -> str:
            return f"{steps:.0f}" if seen else f"> {steps:.0f}"

        return (
            f"gen0 cycles of {one(self.reference_steps, self.reference_seen)} (reference) and "
            f"{one(self.trial_steps, self.trial_seen)} steps (trial), measured alone"
        )


@dataclass(frozen=True)
class Grain:
    block_steps: int
    settle: bool
    why: str
    run_level: bool = False  # the comparison cannot be made of steps within its budget: runs instead


def paces_gc(strategies: StrategySet) -> list[str]:
    classes = strategy_classes()
    return sorted(name for name in strategies if name in classes and classes[name].paces_gc)


def grain_for(
    strategies: StrategySet,
    calibration: Calibration | None,
    block_steps: int | None = None,
    *,
    cycles: GcCycles | None = None,
    budget_s: float | None = None,
) -> Grain:
    """The grain to compare ``strategies`` with the reference: ``block_steps`` when the experiment fixes it, else
    the calibration's recommendation (or :data:`DEFAULT_BLOCK_STEPS`); for GC pacing, blocks of several measured
    gen0 cycles of the slower arm with a settle (``cycles``; without them, a grain yet to be measured), or run
    level where ``budget_s`` cannot hold :data:`MIN_GC_PAIRS` pairs of them."""
    if block_steps is not None:
        base, source = block_steps, "search.block_steps"
    elif calibration is not None:
        base, source = calibration["recommended_block_steps"], "the calibration"
    else:
        base, source = DEFAULT_BLOCK_STEPS, "the default (no calibration)"
    pacing = paces_gc(strategies)
    if not pacing:
        return Grain(base, False, f"{base}-step blocks from {source}")
    who = f"{', '.join(pacing)} paces the collector"
    if cycles is None:
        return Grain(0, True, f"settled blocks of {GC_CYCLES_PER_BLOCK} gen0 cycles of the slower arm ({who})")
    steps = max(base, math.ceil(GC_CYCLES_PER_BLOCK * cycles.longest))
    pair_s = 2 * steps * cycles.step_s
    if budget_s is not None and budget_s < MIN_GC_PAIRS * pair_s:
        return Grain(
            steps,
            True,
            f"run-level pairs: {who}, and {GC_CYCLES_PER_BLOCK} gen0 cycles of the slower arm make {steps}-step "
            f"blocks, {pair_s:.1f} s a pair: {budget_s:g} s of steps hold {budget_s / pair_s:.1f} pairs, fewer than "
            f"{MIN_GC_PAIRS} ({cycles.describe()})",
            run_level=True,
        )
    return Grain(steps, True, f"{steps}-step blocks, each settled: {who} ({cycles.describe()})")
