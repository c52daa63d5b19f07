"""The grain of a step-level comparison: how many engine steps per block, and whether each block ends in a settle.

Shorter blocks put the two arms' steps closer in time, so the host's slow drift cancels better: on this CPU engine
and on the H100 steps (``results/reference/sensitivity-cpu.json``, ``results/reference/h100-projection.json``)
one-step blocks needed the least engine time per +-1%. ``tuner calibrate`` measures it per host and workload;
without a calibration the default is one step.

What limits short blocks is carry-over: state one arm leaves for the other's steps. Strategies act on the batch in
progress (the plugin switches every engine process before it works on a batch), and with a batch queue the first
step of a block is a washout. Garbage is what outlives a step. For a strategy that changes how much garbage a step
makes, a collection falls in each arm's steps about in proportion to the garbage they make (the step that pushes
the gen0 count over the threshold triggers it), so one-step blocks stay unbiased. A strategy that changes *when*
the collector runs (:attr:`strategies.Strategy.paces_gc`) is different: under one-step blocks the arm with the
lower threshold would run every collection, the other arm's garbage included. Its comparisons use blocks of
:data:`GC_CYCLES_PER_BLOCK` collection cycles (within :data:`GC_BLOCK_STEPS`), each ending in a gen0 collection
(settle) charged to the block, so each block pays for its own garbage at a cost of one extra collection per block,
small against a block of many cycles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from strategies import strategy_classes
from tuner.calibration import Calibration
from tuner.plugin.protocol import StrategySet

DEFAULT_BLOCK_STEPS = 1
GC_CYCLES_PER_BLOCK = 8
"""Blocks of a GC-pacing comparison span this many gen0 cycles of the reference (settle: ~1/8 of a cycle's cost)."""
GC_BLOCK_STEPS = (16, 64)
"""The range of a GC-pacing comparison's blocks; the lower end without a measured GC rate. At most 64 steps, so
that a step budget of tens of seconds still holds ten pairs or more (512-step blocks left the quickstart's 20 s
comparison without two pairs); a longer gen0 cycle then gets fewer cycles per block, and the grain says so."""


@dataclass(frozen=True)
class Grain:
    block_steps: int
    settle: bool
    why: str


def paces_gc(strategies: StrategySet) -> list[str]:
    classes = strategy_classes()
    return sorted(name for name in strategies if name in classes and classes[name].paces_gc)


def grain_for(strategies: StrategySet, calibration: Calibration | None, block_steps: int | None = None) -> Grain:
    """The grain to compare ``strategies`` with the reference: ``block_steps`` when the experiment fixes it, else
    the calibration's recommendation (or :data:`DEFAULT_BLOCK_STEPS`); longer with a settle for GC pacing."""
    if block_steps is not None:
        base, source = block_steps, "search.block_steps"
    elif calibration is not None:
        base, source = calibration["recommended_block_steps"], "the calibration"
    else:
        base, source = DEFAULT_BLOCK_STEPS, "the default (no calibration)"
    pacing = paces_gc(strategies)
    if not pacing:
        return Grain(base, False, f"{base}-step blocks from {source}")
    cycle = calibration["gc"]["steps_per_gen0"] if calibration is not None else None
    low, high = GC_BLOCK_STEPS
    wanted = GC_CYCLES_PER_BLOCK * cycle if cycle else low
    steps = max(base, min(high, 1 << max(0, math.ceil(math.log2(max(wanted, 1))))))
    measured = f"{steps / cycle:.1f} gen0 cycles of {cycle:.0f} steps" if cycle else "no measured gen0 cycle"
    return Grain(
        steps,
        True,
        f"{steps}-step blocks, each settled: {', '.join(pacing)} paces the collector ({measured})",
    )
