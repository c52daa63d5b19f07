"""Paired measurement on a live engine: repetitions, step-interleaved blocks, their grain, pairs and stalls.

``workbench`` (one measured repetition, and the proof that strategies are active), ``pairing`` (run-level and
restart pairs in mirrored order), ``interleave`` (arms alternated in blocks of steps inside one engine),
``step_sums`` (which steps count, and each pair's sums: whole, or the body and the excess), ``grain``
(how many steps per block), ``gc_pacing`` (a comparison of strategies that pace the collector, taken apart into
the mutator and ``collector``), ``worker_gc`` (collections placed in the steps they delayed), ``stalls`` (the stall
estimand) and ``pairs`` (one pair as amounts and seconds, and the ratio of sums over pairs).
"""

from tuner.measure.collector import collector_blocks, renumbered
from tuner.measure.gc_pacing import (
    COLLECTOR_BLOCK_STEPS,
    PILOT_SHARE,
    SKIP_BELOW,
    PacingComparison,
    collector_part,
    pacing_comparison,
    split_share,
)
from tuner.measure.grain import Grain, grain_for, paces_gc
from tuner.measure.interleave import InterleaveResult, interleaved_comparison, step_estimate, step_pairs
from tuner.measure.pairing import Arms, Restarts, left_out_of_steps, paired_runs, step_interleavable
from tuner.measure.workbench import MeasuredRepetition, StrategyNotActive, Workbench, inactive_strategies
from tuner.measure.workload import PreparedTraffic, experiment_workload, prepare

__all__ = [
    "COLLECTOR_BLOCK_STEPS",
    "PILOT_SHARE",
    "SKIP_BELOW",
    "Arms",
    "Grain",
    "InterleaveResult",
    "MeasuredRepetition",
    "PacingComparison",
    "PreparedTraffic",
    "Restarts",
    "StrategyNotActive",
    "Workbench",
    "collector_blocks",
    "collector_part",
    "experiment_workload",
    "grain_for",
    "inactive_strategies",
    "interleaved_comparison",
    "left_out_of_steps",
    "paces_gc",
    "pacing_comparison",
    "paired_runs",
    "prepare",
    "renumbered",
    "split_share",
    "step_estimate",
    "step_interleavable",
    "step_pairs",
]
