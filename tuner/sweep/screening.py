"""Screening's part of the sweep's decisions (pure functions on plain data): which screened trials become
candidates for confirmation.

Picking the best of k noisy estimates finds chance winners and inflates their gain, so screening never names the
winner: it only nominates up to ``m`` candidates, ranked by the lower bound of their gain, whose interval still
allows a gain worth deploying, for :mod:`tuner.sweep.decisions` to confirm on fresh pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.stats import RatioEstimate


@dataclass(frozen=True)
class ScreeningResult:
    """One screened trial: feasible under the constraints, and its first-objective estimate vs the baseline
    (None when it was not measured, e.g. a failed trial)."""

    trial: int
    feasible: bool
    estimate: RatioEstimate | None


def gain_bounds(estimate: RatioEstimate) -> tuple[float, float, float]:
    """(lower CI bound, point, upper CI bound) as a gain ratio, > 1 better, whatever the metric's direction."""
    if estimate.higher_is_better:
        return estimate.ci_low, estimate.ratio, estimate.ci_high
    return 1 / estimate.ci_high, 1 / estimate.ratio, 1 / estimate.ci_low


def select_candidates(
    screening: Sequence[ScreeningResult], m: int | None = 3, min_effect: float = 0.0
) -> list[ScreeningResult]:
    """Up to ``m`` feasible trials with the highest screening *lower* confidence bound of the gain, among those
    whose interval still allows a gain of ``min_effect`` (``m`` None: all of them, ranked).

    Ranking by the lower bound rather than the point estimate favours trials measured precisely over lucky
    noisy ones (the winner's curse grows with the noise). A trial whose interval already rules out a gain of
    ``min_effect`` (its upper gain bound below ``1 + min_effect``: shown equivalent or worse) is not a candidate:
    its confirmation could only spend its budget on what screening has answered.
    """
    ranked = [(gain_bounds(r.estimate), r) for r in screening if r.feasible and r.estimate is not None]
    eligible = [(bounds, r) for bounds, r in ranked if bounds[2] >= 1 + min_effect]
    eligible.sort(key=lambda item: item[0][:2], reverse=True)
    return [r for _, r in eligible[:m]]


def ruled_out(screening: Sequence[ScreeningResult], min_effect: float) -> list[ScreeningResult]:
    """The feasible measured trials whose screening interval rules out a gain of ``min_effect``."""
    chosen = {r.trial for r in select_candidates(screening, None, min_effect)}
    return [r for r in screening if r.feasible and r.estimate is not None and r.trial not in chosen]
