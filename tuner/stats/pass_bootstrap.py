"""Resampling whole passes for the capacity ratio (:mod:`tuner.stats.capacity`): the bootstrap's weights of each
pass, and the bagged estimate with its jackknife-after-bootstrap interval.

Rounds of one pass were measured together across loads (the same host state, the same requests when the workload
is seeded by the pass), so a resample weights whole passes. Other weights can be given (:data:`Draws`): the
simulation (``benchmarks/simulations/capacity_sim.py``) compares the bootstrap's with those it was chosen over.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.stats import t as student

from tuner.stats.crossing import Array

Draws = Callable[[Array], Array]
"""Bootstrap weights: from a (level, pass, check, [requests, passed in A, passed in B]) table, a (resamples, passes)
array of each pass's weight in each resample."""


def pass_bootstrap(resamples: int, seed: int) -> Draws:
    """The estimate's weights: each pass's count in a draw of as many passes, with replacement (a pass left out of a
    draw takes with it, in that resample, any load only it measured)."""

    def draws(table: Array) -> Array:
        passes = table.shape[1]
        return np.random.default_rng(seed).multinomial(passes, np.full(passes, 1 / passes), resamples).astype(float)

    return draws


class Bagged(NamedTuple):
    """A log quantity bagged over the resamples: its mean, the jackknife-after-bootstrap SE of that mean, and its
    interval (-inf/+inf: open on that side)."""

    center: float
    se: float
    low: float
    high: float


def bagged_interval(values: npt.ArrayLike, weights: Array, df: int, confidence: float) -> Bagged:
    """The mean of a log quantity's resampled values (the bagged estimate: Breiman 1996, Efron 2014), the
    jackknife-after-bootstrap SE of that mean (Efron 1992: the mean over the resamples that leave each pass out, in
    turn, as its delete-one value) and center +- t(``df``) SE.

    ``values`` are per resample (-inf/+inf: censored that way; nan: unknown, counted against both sides), ``weights``
    the resamples' (resamples, passes) draws. A side is open when more than the tail's share of resamples is censored
    on it; the mean and the SE are over the finite values. The SE is nan (the interval open) with fewer than two
    passes left out of at least :data:`LEFT_OUT` resamples each.
    """
    tail = (1 - confidence) / 2
    x = np.asarray(values, dtype=np.float64)
    finite = np.isfinite(x)
    if not finite.any():
        return Bagged(math.nan, math.nan, -math.inf, math.inf)
    center = float(x[finite].mean())
    left_out = (np.asarray(weights) == 0) & finite[:, None]
    counts = left_out.sum(axis=0)
    usable = counts >= LEFT_OUT
    if usable.sum() < 2 or df < 1:
        return Bagged(center, math.nan, -math.inf, math.inf)
    means = (np.where(left_out, x[:, None], 0.0).sum(axis=0)[usable]) / counts[usable]
    m = len(means)
    se = math.sqrt((m - 1) / m * float(np.sum((means - means.mean()) ** 2)))
    half = float(student.ppf(1 - tail, df)) * se
    high_open = np.mean((x == np.inf) | np.isnan(x)) > tail
    low_open = np.mean((x == -np.inf) | np.isnan(x)) > tail
    return Bagged(center, se, -math.inf if low_open else center - half, math.inf if high_open else center + half)


LEFT_OUT = 20
"""The fewest resamples leaving a pass out for its delete-one value to count (a pass is left out of about 37% of
them: some 740 of 2,000)."""
