"""The grain of a step-level comparison: how many engine steps per block, and how a GC-pacing comparison is made.

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
the arm with the lower threshold would run every collection, the other arm's garbage included. Its comparison is
taken apart (:mod:`tuner.measure.gc_pacing`): the mutator in blocks of this same grain with each step's GC taken
out, the collector from each arm alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from strategies import strategy_classes
from tuner.plugin.protocol import StrategySet
from tuner.records import Calibration

DEFAULT_BLOCK_STEPS = 1


@dataclass(frozen=True)
class Grain:
    block_steps: int
    why: str
    paced: bool = False  # a strategy paces the collector: mutator steps and collector blocks (tuner.measure.gc_pacing)


def paces_gc(strategies: StrategySet) -> list[str]:
    classes = strategy_classes()
    return sorted(name for name in strategies if name in classes and classes[name].paces_gc)


def grain_for(strategies: StrategySet, calibration: Calibration | None, block_steps: int | None = None) -> Grain:
    """The grain to compare ``strategies`` with the reference: ``block_steps`` when the experiment fixes it, else
    the calibration's recommendation (or :data:`DEFAULT_BLOCK_STEPS`); where a strategy paces the collector, the
    mutator's blocks at that grain and the collector measured arm by arm."""
    if block_steps is not None:
        base, source = block_steps, "search.block_steps"
    elif calibration is not None:
        base, source = calibration["recommended_block_steps"], "the calibration"
    else:
        base, source = DEFAULT_BLOCK_STEPS, "the default (no calibration)"
    pacing = paces_gc(strategies)
    if not pacing:
        return Grain(base, f"{base}-step blocks from {source}")
    return Grain(
        base,
        f"{', '.join(pacing)} paces the collector: the mutator in {base}-step blocks from {source}, each step without "
        "its GC, times the collector measured with each arm alone",
        paced=True,
    )
