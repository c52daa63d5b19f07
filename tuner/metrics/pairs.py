"""One paired estimate for every comparison: a pair of measurements as (amount, seconds) per arm, and the ratio of
sums over pairs (throughput is tokens over time, so the estimand is summed amounts over summed seconds).

Plain data: the sweep's confirmation, ``tuner calibrate`` and ``tuner versions`` read pairs through it without the
engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuner.metrics.table import HIGHER_IS_BETTER
from tuner.stats import RatioEstimate, paired_ratio_of_sums

Pair = tuple[float, float, float, float] | tuple[float, float, float, float, float, float]
"""One fresh pair: trial amount, trial seconds, reference amount, reference seconds (tokens or steps); a step pair
measured by the body (:mod:`tuner.stats.body`) carries after them the trial's and the reference's whole seconds,
pauses included, for its guard."""


def run_pair(metric: str, trial: dict[str, float], reference: dict[str, float]) -> Pair:
    """A run-level pair for ``metric``: a throughput as (amount = rate x wall time, wall time); any other metric
    as (1, value), whose ratio of sums is the ratio of the arms' mean values."""
    if metric in HIGHER_IS_BETTER:
        wall_t, wall_r = trial["wall_s"], reference["wall_s"]
        return trial[metric] * wall_t, wall_t, reference[metric] * wall_r, wall_r
    return 1.0, trial[metric], 1.0, reference[metric]


def pairs_estimate(pairs: Sequence[Pair], metric: str, *, seed: int = 0) -> RatioEstimate:
    """The ratio-of-sums estimate of ``metric`` over ``pairs`` (a latency reads as time per amount)."""
    columns = [[p[i] for p in pairs] for i in range(4)]
    return paired_ratio_of_sums(*columns, higher_is_better=metric in HIGHER_IS_BETTER, seed=seed)


def guard_estimate(pairs: Sequence[Pair], *, confidence: float = 0.95, seed: int = 0) -> RatioEstimate | None:
    """The whole step time's ratio of sums (trial over reference, pauses included) of body pairs, at
    ``confidence``: what the body's guard reads (None where the pairs carry no whole seconds: not the body's)."""
    if not pairs or any(len(p) != 6 for p in pairs):
        return None
    columns = [[p[i] for p in pairs] for i in (0, 4, 2, 5)]
    return paired_ratio_of_sums(*columns, higher_is_better=False, confidence=confidence, seed=seed)
