"""Median and geometric-mean ratios with bootstrap CIs and rank tests (paired and unpaired)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from scipy import stats as _st

from tuner.stats.estimate import (
    RatioEstimate,
    Statistic,
    _as_positive_1d,
    _check_common,
    _check_margin,
    _FloatArray,
    call_verdict,
)


def _bootstrap_ci(
    data: tuple[_FloatArray, ...],
    statistic: Callable[..., npt.NDArray[np.float64]],
    *,
    paired: bool,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> tuple[float, float]:
    """Bootstrap CI of ``statistic``: BCa, falling back to percentile.

    BCa corrects bias/skew but its jackknife degenerates on tied or tiny
    samples (nan bounds or an exception); the percentile interval always
    exists. Each attempt uses a fresh generator from ``seed``, so the result
    is deterministic.
    """
    for method in ("BCa", "percentile"):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = _st.bootstrap(
                    data,
                    statistic,
                    n_resamples=n_resamples,
                    vectorized=True,
                    paired=paired,
                    confidence_level=confidence,
                    method=method,
                    rng=np.random.default_rng(seed),
                )
        except (ValueError, FloatingPointError, ZeroDivisionError):
            continue
        low = float(res.confidence_interval.low)
        high = float(res.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    raise RuntimeError("bootstrap failed to produce a finite confidence interval")


def _median_stat(x: _FloatArray, axis: int = -1) -> _FloatArray:
    return np.asarray(np.median(x, axis=axis), dtype=np.float64)


def _mean_stat(x: _FloatArray, axis: int = -1) -> _FloatArray:
    return np.asarray(np.mean(x, axis=axis), dtype=np.float64)


def _log_median_ratio(x: _FloatArray, y: _FloatArray, axis: int = -1) -> _FloatArray:
    return np.asarray(np.log(np.median(x, axis=axis)) - np.log(np.median(y, axis=axis)), dtype=np.float64)


def _safe_p(test: Callable[[], object]) -> float:
    """Run a scipy test and return its p-value, or nan when it is undefined."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = test()
    except (ValueError, ZeroDivisionError, FloatingPointError):
        return math.nan
    p = float(getattr(res, "pvalue", math.nan))
    return p if math.isfinite(p) else math.nan


def paired_ratio(
    treatment: npt.ArrayLike,
    baseline: npt.ArrayLike,
    *,
    higher_is_better: bool,
    statistic: Statistic = "median",
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    margin: float | None = None,
) -> RatioEstimate:
    """Estimate treatment/baseline from pairs measured back to back.

    Pairing cancels slow host drift: each pair yields r_i = t_i/b_i and all
    inference is on log r_i, so ratios and their inverses are symmetric.
    ``statistic="median"`` gives exp(median(log r_i)) -- the median r_i for odd
    n, the geometric mean of the two middle ratios for even n (keeps the point
    estimate consistent with its CI and exactly inverted when arms are
    swapped); ``"geomean"`` gives exp(mean(log r_i)). The CI is a seeded
    bootstrap of the same statistic on log r_i, exponentiated. The verdict is
    "better"/"worse" when the CI clears 1 and the Wilcoxon p-value is below
    1 - confidence, "no_difference" when a ``margin`` is given and the CI lies
    within it (an equivalence test), else "not_significant". (With the CI
    alone, A/A false-positive rates were 25% at n=3 and 8-18% at n=5-8.)
    """
    t = _as_positive_1d(treatment, "treatment")
    b = _as_positive_1d(baseline, "baseline")
    if t.size != b.size:
        raise ValueError(f"paired samples must have equal length, got treatment={t.size} baseline={b.size}")
    if statistic not in ("median", "geomean"):
        raise ValueError(f"statistic must be 'median' or 'geomean', got {statistic!r}")
    _check_common(confidence, n_resamples)
    _check_margin(margin)

    log_r = np.log(t) - np.log(b)
    stat_fn = _median_stat if statistic == "median" else _mean_stat
    point_log = float(stat_fn(log_r))

    if np.ptp(log_r) == 0.0:
        # Constant log ratios: every resample gives the same value.
        lo_log = hi_log = point_log
    else:
        lo_log, hi_log = _bootstrap_ci(
            (log_r,),
            stat_fn,
            paired=False,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
        )
    ratio = math.exp(point_log)
    ci_low, ci_high = math.exp(lo_log), math.exp(hi_log)
    # All-zero differences leave the signed-rank test undefined (scipy says p=1).
    p_value = _safe_p(lambda: _st.wilcoxon(log_r, zero_method="wilcox")) if np.any(log_r != 0.0) else math.nan

    return RatioEstimate(
        ratio=ratio,
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=int(t.size),
        log_sd=float(np.std(log_r, ddof=1)),
        statistic=statistic,
        higher_is_better=higher_is_better,
        verdict=call_verdict(
            ci_low, ci_high, p_value, alpha=1 - confidence, higher_is_better=higher_is_better, margin=margin
        ),
    )


def unpaired_ratio(
    treatment: npt.ArrayLike,
    baseline: npt.ArrayLike,
    *,
    higher_is_better: bool,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> RatioEstimate:
    """Estimate median(treatment)/median(baseline) for two independent samples.

    For comparing separate runs (e.g. ``tuner compare A B``) where no pairing
    exists. The CI is a seeded two-sample bootstrap (resampling each arm
    independently) of the log ratio of medians; the p-value is a two-sided
    Mann-Whitney U test. Same verdict rule as :func:`paired_ratio` (without
    an equivalence margin); ``log_sd`` is nan because there are no pairs.
    """
    t = _as_positive_1d(treatment, "treatment")
    b = _as_positive_1d(baseline, "baseline")
    _check_common(confidence, n_resamples)

    point_log = float(_log_median_ratio(t, b))
    if np.ptp(t) == 0.0 and np.ptp(b) == 0.0:
        lo_log = hi_log = point_log
    else:
        lo_log, hi_log = _bootstrap_ci(
            (t, b),
            _log_median_ratio,
            paired=False,
            confidence=confidence,
            n_resamples=n_resamples,
            seed=seed,
        )
    ci_low, ci_high = math.exp(lo_log), math.exp(hi_log)
    # Every value tied across both arms leaves the rank test undefined.
    pooled = np.concatenate([t, b])
    p_value = _safe_p(lambda: _st.mannwhitneyu(t, b, alternative="two-sided")) if np.ptp(pooled) > 0.0 else math.nan

    return RatioEstimate(
        ratio=math.exp(point_log),
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=int(min(t.size, b.size)),
        log_sd=math.nan,
        statistic="median",
        higher_is_better=higher_is_better,
        verdict=call_verdict(
            ci_low, ci_high, p_value, alpha=1 - confidence, higher_is_better=higher_is_better, margin=None
        ),
    )
