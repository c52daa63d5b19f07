"""Several candidates and several looks: Holm's step-down and O'Brien-Fleming group-sequential boundaries."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import optimize as _opt
from scipy import signal as _signal
from scipy import special as _sp
from scipy import stats as _st

from tuner.stats.estimate import _FloatArray


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in input order: reject hypothesis i at family-wise level alpha when
    ``adjusted[i] <= alpha``. Valid under any dependence between the tests; nan (no test) counts as 1."""
    p = np.nan_to_num(np.asarray(p_values, dtype=np.float64), nan=1.0)
    if p.size == 0:
        return []
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((p.size - np.arange(p.size)) * p[order])
    adjusted = np.empty(p.size)
    adjusted[order] = np.minimum(stepped, 1.0)
    return [float(v) for v in adjusted]


def _fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    t = tuple(float(f) for f in fractions)
    if not t or not all(a < b for a, b in zip((0.0, *t), t, strict=False)) or t[-1] > 1.0:
        raise ValueError(f"fractions must increase within (0, 1], got {list(fractions)}")
    return t


def _normal_pdf(x: npt.ArrayLike, mean: float, sd: float) -> _FloatArray:
    z = (np.asarray(x, dtype=np.float64) - mean) / sd
    return np.asarray(np.exp(-0.5 * z**2) / (sd * math.sqrt(2 * math.pi)), dtype=np.float64)


def boundary_crossing(b: float, fractions: Sequence[float], drift: float = 0.0) -> float:
    """P(B(t) >= b at one of the looks t in ``fractions``), for B(t) = drift * t + W(t), W a Brownian motion.

    B(t) = Z(t) * sqrt(t) is the "B-value" of a standardized statistic Z seen at information fraction t (pairs so
    far / planned pairs). With no effect the drift is 0; with a log effect delta, planned pairs N and per-pair SD
    sigma it is delta * sqrt(N) / sigma. Computed by the Armitage-McPherson-Rowe recursion: the density of the
    paths still below b is carried from look to look by convolution with the Gaussian increment, on a 0.02 grid.
    It is deterministic and accurate to ~1e-5 (tests/test_stats.py checks published constants and Monte-Carlo),
    where scipy's multivariate normal CDF is randomized QMC.
    """
    if math.isnan(b) or math.isinf(b):
        return 0.0 if b > 0 else 1.0
    return _crossing(float(b), _fractions(fractions), float(drift))


@functools.lru_cache(maxsize=4096)  # a sequential p-value is asked again at every look until its maximum moves
def _crossing(b: float, fractions: tuple[float, ...], drift: float) -> float:
    steps = np.diff(fractions, prepend=0.0)
    h = min(0.02, math.sqrt(float(steps.min())) / 10.0)
    size = math.ceil((b - min(b, drift, 0.0) + 8.0) / h)  # the grid reaches 8 SD below every look's mean
    above = h * np.arange(size, -1, -1)  # b - x on the grid x = b - size * h ... b
    weights = np.full(size + 1, h)
    weights[[0, -1]] = h / 2
    sd, mean = math.sqrt(steps[0]), drift * steps[0]
    crossed = float(_sp.ndtr((mean - b) / sd))
    density = _normal_pdf(b - above, mean, sd)
    for step in steps[1:]:
        sd, mean = math.sqrt(step), drift * step
        mass = weights * density
        crossed += float(mass @ _sp.ndtr((mean - above) / sd))
        kernel = _normal_pdf(h * np.arange(-size, size + 1), mean, sd)
        density = _signal.fftconvolve(mass, kernel)[size : 2 * size + 1]
    return min(crossed, 1.0)


def obf_constant(alpha: float, fractions: Sequence[float]) -> float:
    """The O'Brien-Fleming constant C for one-sided level ``alpha``: stop and reject at look k once
    Z_k >= C / sqrt(t_k) (equivalently B_k >= C). Computed for the given looks, so they need not be equal."""
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must be in (0, 0.5), got {alpha}")
    return _obf_constant(alpha, _fractions(fractions))


@functools.lru_cache(maxsize=256)
def _obf_constant(alpha: float, fractions: tuple[float, ...]) -> float:
    # Between the last look alone (error <= alpha) and Bonferroni over the looks (error >= alpha).
    low, high = float(_st.norm.isf(alpha)), float(_st.norm.isf(alpha / len(fractions)))
    if boundary_crossing(low, fractions) <= alpha:
        return low
    return float(_opt.brentq(lambda b: boundary_crossing(b, fractions) - alpha, low, high, xtol=1e-9))


def obf_boundaries(alpha: float, fractions: Sequence[float]) -> list[float]:
    """O'Brien-Fleming boundaries on the Z scale, one per look: C / sqrt(t_k)."""
    constant = obf_constant(alpha, fractions)
    return [constant / math.sqrt(t) for t in _fractions(fractions)]


def sequential_p_value(z_values: Sequence[float], fractions: Sequence[float]) -> float:
    """One-sided p-value of a group-sequential comparison after ``len(z_values)`` of the planned looks.

    The smallest level at which the O'Brien-Fleming design over ``fractions`` would have stopped by now:
    P(max_k B_k >= max seen B), B_k = Z_k sqrt(t_k). P(p <= alpha) <= alpha under no effect whenever one stops,
    so Holm across candidates on these p-values controls the family-wise error (it is the sequentially
    rejective group-sequential procedure of Maurer & Bretz 2013, with OBF tests).
    """
    t = _fractions(fractions)
    if not 0 < len(z_values) <= len(t):
        raise ValueError(f"need 1..{len(t)} z values, got {len(z_values)}")
    return boundary_crossing(max(z * math.sqrt(f) for z, f in zip(z_values, t, strict=False)), t)
