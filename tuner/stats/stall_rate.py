"""Stalls: steps far slower than their neighbours, and a paired test of how often two arms have them.

A mean step time hides what users report: a rare step of 0.1-2 s among steps of milliseconds (a full collection,
a page fault storm, a scheduler hiccup). A step is a *stall* when it is slower than ``factor`` times the running
median of the steps before it in the same arm (``window`` of them) and slower than an absolute ``floor_s``; the
first steps of an arm, before the median has ``min_history`` steps, are not judged. Relative to the arm's own
median, a strategy that makes every step slower does not change its stall rate; the floor keeps microsecond
jitter on a fast host from counting.

The estimand is the difference of pooled stall rates (stalls over judged steps, B minus A), tested by swapping the
two arms within pairs (each pair's order was random, so under "no difference" every swap pattern is as likely)
and with the CI that inverts that test (B's counts shifted by the difference under test).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import sliding_window_view

from tuner.stats.ratio_of_sums import flip_sums

_BISECTIONS = 40


@dataclass(frozen=True)
class StallRule:
    """What counts as a stall (see the module docstring); the experiment's ``measure.stalls``."""

    factor: float = 3.0
    floor_s: float = 0.020
    window: int = 64
    min_history: int = 8


def stall_flags(seconds: Sequence[float], rule: StallRule) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]:
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


@dataclass(frozen=True)
class RateDifference:
    """B's stall rate minus A's, with the paired swap test's p-value and inverted CI."""

    rate_a: float
    rate_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    pairs: int
    confidence: float

    @property
    def flagged(self) -> bool:
        """Whether the arms' stall rates differ at the stated confidence."""
        return self.p_value < 1 - self.confidence

    def to_dict(self) -> dict[str, float | int | bool]:
        return {**asdict(self), "flagged": self.flagged}


def paired_rate_difference(
    pairs: Sequence[tuple[tuple[int, int], tuple[int, int]]],
    *,
    confidence: float = 0.95,
    n_permutations: int = 4000,
    seed: int = 0,
) -> RateDifference | None:
    """The stall-rate difference of ((stalls A, judged steps A), (stalls B, judged steps B)) pairs, or None below
    two pairs with judged steps on both sides. Every swap pattern when there are at most ``n_permutations``, else
    that many random ones (the (1 + hits) / (1 + draws) rule keeps the test valid)."""
    x = np.array([(a[0], a[1], b[0], b[1]) for a, b in pairs if a[1] > 0 and b[1] > 0], dtype=np.float64)
    if len(x) < 2:
        return None
    n = len(x)
    exact = 2**n <= n_permutations
    draws = 2**n if exact else n_permutations
    # Swapping pair i moves (stalls, steps) A - B from A into B. Under a difference delta, B's stalls are shifted by
    # -delta x its steps, so per swap pattern g the moved stalls are g.(sA - sB) + delta g.nB and the moved steps
    # g.(nA - nB): three sums per pattern, taken once for every delta the CI bisection tries.
    columns = np.stack([x[:, 0] - x[:, 2], x[:, 1] - x[:, 3], x[:, 3]], axis=1)
    moved = flip_sums(columns[None], exact, draws, np.random.default_rng(seed))[0]
    sums = x.sum(axis=0)
    rate_a, rate_b = sums[0] / sums[1], sums[2] / sums[3]
    observed = rate_b - rate_a

    def p_value(delta: float) -> float:
        moved_stalls = moved[:, 0] + delta * moved[:, 2]
        stalls_b = sums[2] - delta * sums[3] + moved_stalls
        stalls_a = sums[0] - moved_stalls
        swapped = stalls_b / (sums[3] + moved[:, 1]) - stalls_a / (sums[1] - moved[:, 1])
        hits = int(np.sum(np.abs(swapped) >= abs(observed - delta) - 1e-12))
        return hits / draws if exact else (1 + hits) / (1 + draws)

    alpha = 1 - confidence

    def bound(outer: float) -> float:
        """The CI's side towards ``outer``: the last difference the test does not reject, by bisection."""
        inner = observed
        if p_value(outer) >= alpha:
            return outer
        for _ in range(_BISECTIONS):
            middle = (inner + outer) / 2
            inner, outer = (middle, outer) if p_value(middle) >= alpha else (inner, middle)
        return inner

    return RateDifference(
        rate_a=float(rate_a),
        rate_b=float(rate_b),
        difference=float(observed),
        ci_low=float(bound(-1.0)),
        ci_high=float(bound(1.0)),
        p_value=p_value(0.0),
        pairs=n,
        confidence=confidence,
    )
