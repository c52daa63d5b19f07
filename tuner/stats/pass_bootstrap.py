"""Resampling whole passes for the capacity ratio's interval (:mod:`tuner.stats.capacity`): the bootstrap's
weights of each pass, and the percentile interval stretched by the small-sample factor a t interval makes.

Rounds of one pass were measured together across loads (the same host state, the same requests when the workload
is seeded by the pass), so a resample weights whole passes. Other weights can be given (:data:`Draws`): the
simulation (``benchmarks/simulations/capacity_sim.py``) compares the bootstrap's with those it was chosen over.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import numpy as np
import numpy.typing as npt
from scipy.stats import norm as normal
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


@cache
def stretch(passes: int, confidence: float) -> float:
    """How far a bootstrap percentile interval over ``passes`` clusters is widened: sqrt(p / (p - 1)) t / z."""
    tail = (1 + confidence) / 2
    return math.sqrt(passes / (passes - 1)) * float(student.ppf(tail, passes - 1) / normal.ppf(tail))


def stretched_interval(point: float, resampled: npt.ArrayLike, passes: int, confidence: float) -> tuple[float, float]:
    """The stretched percentile interval of a log quantity from its resampled values (-inf/+inf: censored that
    way; nan: unknown, counted against both sides)."""
    tail = (1 - confidence) / 2
    values = np.asarray(resampled, dtype=np.float64)
    k = len(values)
    low = np.sort(np.where(np.isnan(values), -np.inf, values))[math.floor(tail * k)]
    high = np.sort(np.where(np.isnan(values), np.inf, values))[math.ceil((1 - tail) * k) - 1]
    c = stretch(passes, confidence)
    return point - c * max(point - low, 0.0), point + c * max(high - point, 0.0)
