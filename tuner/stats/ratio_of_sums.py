"""The ratio of sums for throughput-like quantities: the sign-flip test of that statistic and the CI that inverts
it (BCa bootstrap when too few flips are asked for)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy import special as _sp

from tuner.stats.estimate import RatioEstimate, _as_positive_1d, _check_common, _check_margin, _FloatArray, call_verdict

# Last axis of the per-pair arrays: trial amount, trial time, reference amount, reference time.
_PAIR_ARRAYS = ("trial_amount", "trial_time", "reference_amount", "reference_time")
_LOG_RATE_SIGNS = np.array([1.0, -1.0, -1.0, 1.0])


def _log_rate_ratio(sums: _FloatArray) -> _FloatArray:
    """log((sum a_t / sum t_t) / (sum a_r / sum t_r)) for sums in the last axis (a_t, t_t, a_r, t_r)."""
    return np.asarray(np.log(sums) @ _LOG_RATE_SIGNS, dtype=np.float64)


def _chunks(total: int, per_row: int) -> list[int]:
    """Row counts that keep a (rows, per_row) work array near 2**18 elements."""
    size = max(1, 2**18 // per_row)
    return [min(size, total - start) for start in range(0, total, size)]


def _bootstrap_log_ratios(x: _FloatArray, n_resamples: int, rng: np.random.Generator) -> _FloatArray:
    """The statistic on ``n_resamples`` resamples of whole pairs, per comparison: (k, n, 4) -> (k, n_resamples)."""
    k, n, _ = x.shape
    columns = np.ascontiguousarray(np.moveaxis(x, 2, 0)).reshape(4, k * n)
    offsets = (n * np.arange(k))[:, None, None]
    out = []
    for rows in _chunks(n_resamples, k * n):
        picked = np.take(columns, rng.integers(0, n, (k, rows, n)) + offsets, axis=1)  # (4, k, rows, n)
        out.append(_log_rate_ratio(np.moveaxis(picked.sum(axis=-1), 0, -1)))
    return np.concatenate(out, axis=1)


def _row_quantiles(boot: _FloatArray, levels: _FloatArray) -> _FloatArray:
    """Linear-interpolated quantiles of each row of ``boot`` at that row's ``levels`` (numpy's default method)."""
    ordered = np.sort(boot, axis=1)
    position = levels * (boot.shape[1] - 1)
    below = np.floor(position).astype(np.intp)
    above = np.minimum(below + 1, boot.shape[1] - 1)
    low_values = np.take_along_axis(ordered, below, axis=1)
    high_values = np.take_along_axis(ordered, above, axis=1)
    return np.asarray(low_values + (position - below) * (high_values - low_values), dtype=np.float64)


def _bca_intervals(point: _FloatArray, boot: _FloatArray, jack: _FloatArray, confidence: float) -> _FloatArray:
    """BCa intervals (k, 2) from bootstrap (k, B) and jackknife (k, n) values; the percentile interval where BCa
    is undefined: every resample on one side of the estimate (infinite bias correction), or all jackknife values
    equal (0/0 acceleration)."""
    tail = (1.0 - confidence) / 2.0
    levels = np.array([tail, 1.0 - tail])
    with np.errstate(all="ignore"):
        below = np.mean(boot < point[:, None], axis=1) + 0.5 * np.mean(boot == point[:, None], axis=1)
        z0 = _sp.ndtri(below)[:, None]
        dev = jack.mean(axis=1, keepdims=True) - jack
        accel = (np.sum(dev**3, axis=1) / (6.0 * np.sum(dev**2, axis=1) ** 1.5))[:, None]
        z = _sp.ndtri(levels)
        adjusted = _sp.ndtr(z0 + (z0 + z) / (1.0 - accel * (z0 + z)))
    usable = np.all(np.isfinite(adjusted), axis=1, keepdims=True)
    return _row_quantiles(boot, np.where(usable, adjusted, levels))


def _sign_flip_p(x: _FloatArray, observed: _FloatArray, n_permutations: int, rng: np.random.Generator) -> _FloatArray:
    """Two-sided p-values of the statistic under swapping the two arms within pairs, per comparison.

    Every one of the 2**n swap patterns when that is at most ``n_permutations`` (exact), else ``n_permutations``
    random patterns per comparison with the (1 + hits) / (1 + draws) rule, which keeps the test valid.
    """
    k, n, _ = x.shape
    sums = x.sum(axis=1)[:, None, :]
    moved = np.asarray(x[:, :, 2:] - x[:, :, :2], dtype=np.float64)  # swapping pair i moves it from reference to trial
    exact = 2**n <= n_permutations
    draws = 2**n if exact else n_permutations
    hits = np.zeros(k)
    done = 0
    for rows in _chunks(draws, k * n):
        if exact:
            flips = ((np.arange(done, done + rows)[:, None] >> np.arange(n)) & 1).astype(np.float64)
            shift = flips @ moved  # (k, rows, 2): the same patterns for every comparison
        else:
            shift = pattern_sums(random_flips(rng, (k, rows, n)), moved)
        swapped = np.concatenate([sums[..., :2] + shift, sums[..., 2:] - shift], axis=-1)
        hits += np.sum(np.abs(_log_rate_ratio(swapped)) >= np.abs(observed)[:, None] - 1e-12, axis=1)
        done += rows
    return np.asarray(hits / draws if exact else (1 + hits) / (1 + draws), dtype=np.float64)


# An interval side the sign-flip test never rejects (too few pairs, or too few flips, to reach 1 - confidence) is
# unbounded; it is reported at this log distance from the estimate (a ratio of e**40 ~ 2e17), so that ratios,
# widths and reciprocals of the bounds stay finite.
def least_pairs(level: float, *, sided: int = 2) -> int:
    """The fewest pairs with which the exact sign-flip test can reach p < ``level`` at all: its smallest p-value is
    2^(1-n) two-sided and 2^-n one-sided (a CI at confidence 1 - level is unbounded with fewer)."""
    return math.ceil(-math.log2(level) - 1e-9) + (1 if sided == 2 else 0)


MIN_SIGN_FLIP_PAIRS = least_pairs(0.05)
"""Pairs the two-sided sign-flip test needs to reach p < 0.05 at all (6: its smallest p is then 0.031)."""
UNBOUNDED_LOG = 40.0
# The interval inverts the sign-flip test whenever the flips can carry it: every swap pattern, or at least this many
# random ones. Callers asking for fewer Monte-Carlo flips (simulations that read only the point estimate, log_sd or
# the screening rank) get the BCa bootstrap instead.
_INVERSION_MIN_DRAWS = 1000
_BISECTIONS = 36
"""Halvings of the 40-wide search range per interval side: a bound to ~1e-9 in log, far below any reported digit."""


def random_flips(rng: np.random.Generator, shape: tuple[int, ...]) -> _FloatArray:
    """Independent fair 0/1 swap indicators of ``shape`` (last axis: pairs), eight from each random byte: about
    ten times faster than drawing one integer per pair, which made a 10,000-flip test of 2,400 pairs take 2.6 s."""
    *outer, n = shape
    packed = rng.integers(0, 256, (*outer, -(-n // 8)), dtype=np.uint8)
    return np.unpackbits(packed, axis=-1, count=n).astype(np.float64)


def pattern_sums(flips: _FloatArray, x: _FloatArray) -> _FloatArray:
    """``flips @ x`` for (k, rows, n) patterns and (k, n, j) values. Many patterns per comparison go as one
    matrix-vector product per comparison and column: OpenBLAS's matrix product with a handful of columns ran 35x
    slower than these (1.35 s against 0.04 s for 10,000 patterns of 2,400 pairs); a few patterns of many
    comparisons stay one stacked product, whose per-call cost a loop would multiply."""
    if flips.shape[1] < 64:
        return np.asarray(flips @ x, dtype=np.float64)
    out = np.empty((*flips.shape[:2], x.shape[2]))
    for i in range(x.shape[0]):
        for j in range(x.shape[2]):
            out[i, :, j] = flips[i] @ x[i, :, j]
    return out


def flip_sums(x: _FloatArray, exact: bool, draws: int, rng: np.random.Generator) -> _FloatArray:
    """Per comparison and swap pattern g, the sums over the swapped pairs sum_i g_i x_i: (k, n, j) -> (k, draws, j).

    Every pattern when ``exact`` (the same ones for every comparison), else ``draws`` random patterns per comparison.
    """
    k, n, columns = x.shape
    out = np.empty((k, draws, columns))
    done = 0
    for rows in _chunks(draws, k * n):
        if exact:
            flips = ((np.arange(done, done + rows)[:, None] >> np.arange(n)) & 1).astype(np.float64)
            out[:, done : done + rows] = np.einsum("pn,knj->kpj", flips, x)
        else:
            out[:, done : done + rows] = pattern_sums(random_flips(rng, (k, rows, n)), x)
        done += rows
    return out


class _Swapped(NamedTuple):
    """The parts of each swapped ratio that no hypothesis changes, per comparison and swap pattern: under
    "log R = delta" the swapped ratio is (s * trial_moved + trial_kept) / (reference_kept + s * reference_moved) *
    time_ratio with s = exp(-delta) (only the trial's amounts are scaled). Computed once per batch, so each of a
    bound's bisection steps costs a few products instead of rebuilding four sums and a logarithm."""

    trial_moved: _FloatArray
    trial_kept: _FloatArray
    reference_kept: _FloatArray
    reference_moved: _FloatArray
    time_ratio: _FloatArray


def _swapped(sums: _FloatArray, flipped: _FloatArray) -> _Swapped:
    """The arms swapped within the pairs of each pattern in ``flipped`` (:func:`flip_sums`), split as :class:`_Swapped`.

    A sum left with no pairs (every pair swapped) is a difference of two equal sums, so rounding can make it a
    hair below zero: it is clamped at 0, which keeps every swapped ratio positive at any delta.
    """
    trial_time = sums[:, None, 1] - flipped[..., 1] + flipped[..., 3]
    reference_time = sums[:, None, 3] - flipped[..., 3] + flipped[..., 1]
    return _Swapped(
        trial_moved=np.maximum(sums[:, None, 0] - flipped[..., 0], 0.0),
        trial_kept=np.ascontiguousarray(flipped[..., 2]),
        reference_kept=np.maximum(sums[:, None, 2] - flipped[..., 2], 0.0),
        reference_moved=np.ascontiguousarray(flipped[..., 0]),
        time_ratio=reference_time / trial_time,
    )


def _shifted_p(swapped: _Swapped, point: _FloatArray, delta: _FloatArray, exact: bool) -> _FloatArray:
    """Two-sided sign-flip p-values of "log R = delta", per comparison (``delta`` of shape (k,) or (sides, k)): the
    trial amounts are scaled by exp(-delta) (which makes the arms exchangeable under that hypothesis), then each
    swapped |log R| is counted against the observed |point - delta|; |log r| >= c is tested as r >= e^c or
    r * e^c <= 1, which needs no logarithm.
    """
    scale = np.exp(-delta)[..., None]
    ratio = scale * swapped.trial_moved
    ratio += swapped.trial_kept
    denominator = scale * swapped.reference_moved
    denominator += swapped.reference_kept
    ratio /= denominator
    ratio *= swapped.time_ratio
    bound = np.exp(np.abs(point - delta) - 1e-12)[..., None]
    hits = (ratio >= bound).sum(axis=-1)
    ratio *= bound
    hits += (ratio <= 1.0).sum(axis=-1)
    draws = swapped.time_ratio.shape[1]
    return np.asarray(hits / draws if exact else (1 + hits) / (1 + draws), dtype=np.float64)


def _sign_flip_intervals(
    x: _FloatArray, point: _FloatArray, confidence: float, n_permutations: int, rng: np.random.Generator
) -> tuple[_FloatArray, _FloatArray]:
    """The sign-flip p-value of log R = 0 and the interval that inverts the same test, per comparison.

    The interval is every delta at which the test of "log R = delta" has p >= 1 - confidence (the verdict's
    "not significant"), so it excludes 0 exactly when p(0) < 1 - confidence. It is an interval around the estimate:
    as delta moves away from the estimate the observed |point - delta| grows at slope 1 and each swapped statistic
    at a slope within [-1, 1], so each pattern stops counting at most once on each side and p(delta) falls
    monotonically; each bound is found by bisection (:data:`_BISECTIONS` halvings) on the same patterns, both sides
    in the same array operations.
    """
    k, n, _ = x.shape
    alpha = 1.0 - confidence
    exact = 2**n <= n_permutations
    draws = 2**n if exact else n_permutations
    p_values, bounds = np.empty(k), np.empty((k, 2))
    sides = np.array([-1.0, 1.0])[:, None]
    step = max(1, 2**20 // (draws * 4))  # comparisons per batch: keeps the (rows, draws, 4) sums near 32 MB
    for start in range(0, k, step):
        rows = slice(start, min(start + step, k))
        sub, at = x[rows], point[rows]
        swapped = _swapped(sub.sum(axis=1), flip_sums(sub, exact, draws, rng))
        p_zero = _shifted_p(swapped, at, np.zeros(len(at)), exact)
        p_values[rows] = p_zero
        farthest = at + sides * UNBOUNDED_LOG  # (lower, upper) x comparisons
        inner, outer = np.broadcast_to(at, farthest.shape), farthest
        unbounded = _shifted_p(swapped, at, farthest, exact) >= alpha
        for _ in range(_BISECTIONS):
            middle = np.asarray((inner + outer) / 2, dtype=np.float64)
            accepted = _shifted_p(swapped, at, middle, exact) >= alpha
            inner, outer = np.where(accepted, middle, inner), np.where(accepted, outer, middle)
        inner = np.where(unbounded, farthest, inner)
        # 0 is inside exactly when the test at 0 accepts (the bisection places a bound to ~1e-9 only).
        zero_inside = p_zero >= alpha
        bounds[rows, 0] = np.where(zero_inside, np.minimum(inner[0], 0.0), inner[0])
        bounds[rows, 1] = np.where(zero_inside, np.maximum(inner[1], 0.0), inner[1])
    return p_values, bounds


def _as_positive_pairs(values: Sequence[npt.ArrayLike]) -> _FloatArray:
    """Four equally shaped (comparisons, pairs) arrays as one (comparisons, pairs, 4) array."""
    arrays = [np.asarray(v, dtype=np.float64) for v in values]
    if len({a.shape for a in arrays}) != 1:
        raise ValueError(f"paired samples must have equal shapes, got {[a.shape for a in arrays]}")
    if arrays[0].ndim != 2:
        raise ValueError(f"expected one row of pairs per comparison, got shape {arrays[0].shape}")
    if arrays[0].shape[1] < 2:
        raise ValueError(f"a comparison needs at least 2 pairs, got {arrays[0].shape[1]}")
    for arr, name in zip(arrays, _PAIR_ARRAYS, strict=True):
        _as_positive_1d(arr.ravel(), name)
    return np.stack(arrays, axis=-1)


def ratio_of_sums_estimates(
    trial_amount: npt.ArrayLike,
    trial_time: npt.ArrayLike,
    reference_amount: npt.ArrayLike,
    reference_time: npt.ArrayLike,
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    n_permutations: int = 10_000,
    seed: int = 0,
    margin: float | None = None,
) -> list[RatioEstimate]:
    """:func:`paired_ratio_of_sums` for many comparisons at once: one row of pairs per comparison (2-D arrays of
    equal shape), vectorised (simulations, batches of A/A comparisons). Rows draw independent resamples and flips
    (exact enumeration uses the same patterns for every row)."""
    x = _as_positive_pairs((trial_amount, trial_time, reference_amount, reference_time))
    _check_common(confidence, n_resamples)
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    _check_margin(margin)

    n = x.shape[1]
    sums = x.sum(axis=1)
    point = _log_rate_ratio(sums)
    boot_rng, flip_rng = (np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2))
    tested = ~np.all(x[..., :2] == x[..., 2:], axis=(1, 2))  # identical arms leave the test undefined
    p_values = np.full(len(x), math.nan)
    bounds = np.repeat(point[:, None], 2, axis=1)  # identical arms: a point interval
    if 2**n <= n_permutations or n_permutations >= _INVERSION_MIN_DRAWS:
        if tested.any():
            p_values[tested], bounds[tested] = _sign_flip_intervals(
                x[tested], point[tested], confidence, n_permutations, flip_rng
            )
    else:
        boot = _bootstrap_log_ratios(x, n_resamples, boot_rng)
        bounds = _bca_intervals(point, boot, _log_rate_ratio(sums[:, None, :] - x), confidence)
        constant = np.ptp(boot, axis=1) == 0.0  # every resample alike: a point interval
        bounds[constant] = point[constant, None]
        if tested.any():
            p_values[tested] = _sign_flip_p(x[tested], point[tested], n_permutations, flip_rng)
    log_sd = np.std(n * (x / sums[:, None, :]) @ _LOG_RATE_SIGNS, axis=1, ddof=1)

    sign = 1.0 if higher_is_better else -1.0
    estimates = []
    for log_r, (low, high), p, sd in zip(point, bounds, p_values, log_sd, strict=True):
        ci_low, ci_high = sorted((math.exp(sign * low), math.exp(sign * high)))
        estimates.append(
            RatioEstimate(
                ratio=math.exp(sign * log_r),
                ci_low=ci_low,
                ci_high=ci_high,
                p_value=float(p),
                n=n,
                log_sd=float(sd),
                statistic="ratio_of_sums",
                higher_is_better=higher_is_better,
                verdict=call_verdict(
                    ci_low, ci_high, p, alpha=1 - confidence, higher_is_better=higher_is_better, margin=margin
                ),
            )
        )
    return estimates


def paired_ratio_of_sums(
    trial_amount: npt.ArrayLike,
    trial_time: npt.ArrayLike,
    reference_amount: npt.ArrayLike,
    reference_time: npt.ArrayLike,
    *,
    higher_is_better: bool = True,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    n_permutations: int = 10_000,
    seed: int = 0,
    margin: float | None = None,
) -> RatioEstimate:
    """Ratio of sums for throughput-like quantities, from pairs of (amount, time) per arm.

    The estimand is the ratio of the arms' overall rates, R = (sum a_t / sum t_t) / (sum a_r / sum t_r):
    tokens over seconds for throughput, steps over summed step seconds for step-level blocks. Unlike a median
    or mean of per-pair ratios it weighs a rare long pause by its time, so an arm that halves such pauses is
    credited with exactly what it saves. ``higher_is_better=False`` reports the time-per-amount variant 1/R
    (mean step time, mean per-token latency) of the same data. Both arms of a pair should carry similar amounts
    (the same workload, the same block length), so that the host's speed during a pair weighs them alike.

    One statistic and one test throughout. ``p_value`` is a two-sided sign-flip randomization test of log R:
    with no difference the two arms of a pair are exchangeable, so every swap pattern is equally likely (exact
    enumeration for n <= log2(n_permutations), seeded Monte-Carlo otherwise; nan when the arms are identical).
    The CI inverts that test: it is every shift delta for which the same test of "log R = delta" (the trial's
    amounts scaled by exp(-delta), which makes the arms exchangeable under that hypothesis) has p >= 1 - confidence,
    found by bisection on the same swap patterns. So it excludes 1 exactly when p < 1 - confidence, and it holds
    its coverage wherever the test holds its level: at 6 pairs it misses the truth in 3.1% of comparisons (2 of
    the 64 swap patterns), where the BCa bootstrap it replaced missed 15-16% (10-13% at 10 pairs; 8-12% even at
    64-256 pairs of the simulated step host). Below 6 pairs the test cannot reach p < 0.05 (p >= 2 / 2**n), so
    the 95% interval is unbounded, reported as exp(+-40) times the estimate. It costs about the p-value's flips again
    (~0.5 s at 2400 pairs and 10,000 flips). Only a caller asking for fewer than 1000 Monte-Carlo flips where
    enumeration is impossible (simulations that read the point estimate, ``log_sd`` or the screening rank) gets
    the old seeded BCa bootstrap over whole pairs (``n_resamples``; an O(n) closed-form jackknife; percentile
    where BCa is undefined), whose CI neither agrees with the test by construction nor holds its coverage.
    The verdict is "better"/"worse" when that p is below 1 - confidence and the CI clears 1, "no_difference" when
    the CI lies within the equivalence ``margin`` (:func:`tuner.stats.estimate.within_margin`), else
    "not_significant". ``log_sd`` is the
    SD of the per-pair influence values, so log_sd / sqrt(n) is the standard error of log R, as for a mean of
    log ratios, and the power functions below apply.
    """
    rows = []
    for values, name in zip((trial_amount, trial_time, reference_amount, reference_time), _PAIR_ARRAYS, strict=True):
        if np.ndim(values) != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {np.shape(values)}")
        rows.append(np.asarray(values, dtype=np.float64)[None, :])
    return ratio_of_sums_estimates(
        *rows,
        higher_is_better=higher_is_better,
        confidence=confidence,
        n_resamples=n_resamples,
        n_permutations=n_permutations,
        seed=seed,
        margin=margin,
    )[0]
