"""Stalls: steps far slower than their neighbours, and how often two arms have them (a paired difference).

A mean step time hides what users report: a rare step of 0.1-2 s among steps of milliseconds (a full collection,
a page fault storm, a scheduler hiccup). A step is a *stall* when it is slower than ``factor`` times the running
median of the steps before it in the same arm (``window`` of them) and slower than an absolute ``floor_s``; the
first steps of an arm, before the median has ``min_history`` steps, are not judged. Relative to the arm's own
median, a strategy that makes every step slower does not change its stall rate; the floor keeps microsecond
jitter on a fast host from counting.

The estimand is the difference of pooled stall rates, stalls over judged steps, B minus A. Stalls are rare (often
none in a comparison), so its interval is Newcombe's hybrid score interval (1998, method 10: the MOVER combination
of each arm's Wilson interval), which stays honest at zero or few events: no stalls in 480 steps per arm still
allows rates up to ~0.8% either way. An interval that inverts a shift of the swap test below is not: with no
stalls it shrinks to a point, and at rates of 0-0.5% it covered the true difference 76-88% of the time. Stalls
come in bursts, so steps are not independent: both arms' counts are divided by Kish's design effect (the variance
of the difference across pairs over the one binomial sampling of independent steps would give, at least 1) before
the interval is taken, so stalls bunched in a few pairs count as fewer independent observations. The p-value is
that interval's (the smallest 1 - confidence at which it excludes 0) and a difference is flagged when the interval
excludes 0, so the verdict, the p and the CI cannot disagree. The sign-flip test of no difference (``swap_p``:
each pair's order was random, so under "no difference" every pattern of swapping the arms within pairs is as
likely) is kept beside it as a cross-check; it decides nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TypedDict

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view
from scipy.optimize import brentq
from scipy.stats import norm

from tuner.stats.proportion import wilson
from tuner.stats.ratio_of_sums import flip_sums

METHOD = "newcombe-wilson-deff"
"""The interval of :class:`RateDifference`: Newcombe's hybrid score on counts deflated by the design effect."""
_Z_MAX = 40.0  # 2 sf(40) is 0 in floating point: a p-value below it is reported as 0

Counts = tuple[float, float]
"""One arm's (stalls, judged steps), possibly effective (non-integer) counts."""


@dataclass(frozen=True)
class StallRule:
    """What counts as a stall (see the module docstring); the experiment's ``measure.stalls``."""

    factor: float = 3.0
    floor_s: float = 0.020
    window: int = 64
    min_history: int = 8


def stall_flags(seconds: npt.ArrayLike, rule: StallRule) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
    """For one arm's steps in the order they ran: (judged, stall) per step."""
    dt = np.asarray(seconds, dtype=np.float64)
    medians = np.full(dt.size, np.nan)
    for i in range(rule.min_history, min(rule.window, dt.size)):
        medians[i] = np.median(dt[:i])
    if dt.size > rule.window:
        medians[rule.window :] = np.median(sliding_window_view(dt, rule.window)[:-1], axis=1)
    judged = ~np.isnan(medians)
    stall = judged & (dt > rule.factor * np.where(judged, medians, 0.0)) & (dt > rule.floor_s)
    return judged, stall


class RateDifferenceRecord(TypedDict):
    """A :class:`RateDifference` as records keep it."""

    rate_a: float
    rate_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    pairs: int
    confidence: float
    design_effect: float
    swap_p: float
    method: str
    flagged: bool


@dataclass(frozen=True)
class RateDifference:
    """B's stall rate minus A's with its interval (see the module docstring), that interval's p-value and the
    sign-flip test's."""

    rate_a: float
    rate_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float  # the smallest 1 - confidence at which the interval excludes 0
    pairs: int
    confidence: float
    design_effect: float  # >= 1: how much the pairs' spread widened the interval over independent steps
    swap_p: float  # exact sign-flip test of no difference: a cross-check, not read by ``flagged``
    method: str = METHOD

    @property
    def flagged(self) -> bool:
        """Whether the interval at the stated confidence excludes 0 (so ``p_value < 1 - confidence``)."""
        return self.ci_low > 0 or self.ci_high < 0

    def to_dict(self) -> RateDifferenceRecord:
        return {
            "rate_a": self.rate_a,
            "rate_b": self.rate_b,
            "difference": self.difference,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "pairs": self.pairs,
            "confidence": self.confidence,
            "design_effect": self.design_effect,
            "swap_p": self.swap_p,
            "method": self.method,
            "flagged": self.flagged,
        }


def newcombe_interval(a: Counts, b: Counts, z: float) -> Counts:
    """Newcombe's hybrid score interval (1998, method 10) of rate b minus rate a at the normal quantile ``z``: each
    side is the point moved by the root sum of squares of the two Wilson intervals' distances on that side."""
    rate_a, rate_b = a[0] / a[1], b[0] / b[1]
    low_a, high_a = wilson(rate_a, a[1], z)
    low_b, high_b = wilson(rate_b, b[1], z)
    point = rate_b - rate_a
    return point - math.hypot(rate_b - low_b, high_a - rate_a), point + math.hypot(high_b - rate_b, rate_a - low_a)


@cache
def _z(confidence: float) -> float:
    """The two-sided normal quantile of ``confidence`` (one per confidence level a caller uses)."""
    return float(norm.ppf((1 + confidence) / 2))


def _interval_p(a: Counts, b: Counts) -> float:
    """The smallest 1 - confidence at which :func:`newcombe_interval` excludes 0: 2 sf(z) at the z where its side
    towards 0 reaches 0. That side starts at the point estimate (z = 0) and moves towards 0 as z grows (Wilson
    intervals are nested), so the root is unique: Brent's method on z does what a bisection on the confidence
    level would."""
    point = b[0] / b[1] - a[0] / a[1]
    if point == 0:
        return 1.0

    def towards_zero(z: float) -> float:
        low, high = newcombe_interval(a, b, z)
        return low if point > 0 else -high

    z = _Z_MAX if towards_zero(_Z_MAX) > 0 else brentq(towards_zero, 0.0, _Z_MAX, xtol=1e-12)
    return float(2 * norm.sf(z))


def _design_effect(x: npt.NDArray[np.float64]) -> float:
    """Kish's design effect of the pooled difference from (stalls A, steps A, stalls B, steps B) rows, one per pair:
    the between-pair variance of the difference (each pair's deviation from the pooled rates, as a cluster-robust
    variance takes it; with equal blocks, the variance of the per-pair rate differences) over the variance binomial
    sampling of independent steps gives it. At least 1: what pairing gains (bursts that hit both arms of a pair
    cancel) is not claimed. 1 when no arm varies (no stalls, or only stalls)."""
    stalls_a, steps_a, stalls_b, steps_b = x.T
    total_a, total_b = steps_a.sum(), steps_b.sum()
    rate_a, rate_b = stalls_a.sum() / total_a, stalls_b.sum() / total_b
    binomial = rate_a * (1 - rate_a) / total_a + rate_b * (1 - rate_b) / total_b
    if binomial == 0:
        return 1.0
    deviations = (stalls_b - rate_b * steps_b) / total_b - (stalls_a - rate_a * steps_a) / total_a
    between = len(x) / (len(x) - 1) * float(deviations @ deviations)
    return max(1.0, float(between / binomial))


def _swap_p(x: npt.NDArray[np.float64], n_permutations: int, seed: int) -> float:
    """Two-sided sign-flip p of "no difference" on the pooled difference: every swap pattern when there are at most
    ``n_permutations``, else that many random ones (the (1 + hits) / (1 + draws) rule keeps the test valid)."""
    n = len(x)
    exact = 2**n <= n_permutations
    draws = 2**n if exact else n_permutations
    # Swapping pair i moves its (stalls, steps) A - B from arm A into arm B.
    columns = np.stack([x[:, 0] - x[:, 2], x[:, 1] - x[:, 3]], axis=1)
    moved = flip_sums(columns[None], exact, draws, np.random.default_rng(seed))[0]
    sums = x.sum(axis=0)
    swapped = (sums[2] + moved[:, 0]) / (sums[3] + moved[:, 1]) - (sums[0] - moved[:, 0]) / (sums[1] - moved[:, 1])
    hits = int(np.sum(np.abs(swapped) >= abs(sums[2] / sums[3] - sums[0] / sums[1]) - 1e-12))
    return hits / draws if exact else (1 + hits) / (1 + draws)


def paired_rate_difference(
    pairs: Sequence[tuple[tuple[int, int], tuple[int, int]]],
    *,
    confidence: float = 0.95,
    n_permutations: int = 4000,
    seed: int = 0,
) -> RateDifference | None:
    """The stall-rate difference of ((stalls A, judged steps A), (stalls B, judged steps B)) pairs, or None below
    two pairs with judged steps on both sides (no between-pair variance). ``n_permutations`` and ``seed`` are the
    sign-flip test's."""
    x = np.array([(a[0], a[1], b[0], b[1]) for a, b in pairs if a[1] > 0 and b[1] > 0], dtype=np.float64)
    if len(x) < 2:
        return None
    stalls_a, steps_a, stalls_b, steps_b = (float(total) for total in x.sum(axis=0))
    deff = _design_effect(x)
    a, b = (stalls_a / deff, steps_a / deff), (stalls_b / deff, steps_b / deff)
    low, high = newcombe_interval(a, b, _z(confidence))
    return RateDifference(
        rate_a=stalls_a / steps_a,
        rate_b=stalls_b / steps_b,
        difference=stalls_b / steps_b - stalls_a / steps_a,
        ci_low=low,
        ci_high=high,
        p_value=_interval_p(a, b),
        pairs=len(x),
        confidence=confidence,
        design_effect=deff,
        swap_p=_swap_p(x, n_permutations, seed),
    )
