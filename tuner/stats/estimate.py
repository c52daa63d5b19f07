"""The estimate every comparison returns (:class:`RatioEstimate`), its verdict, input checks and summaries of
estimates."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

import numpy as np
import numpy.typing as npt

Verdict = Literal["better", "worse", "no_difference", "not_significant"]
""""better"/"worse": the test called a change; "no_difference": the CI lies within the equivalence margin (an
equivalence claim, made only where a margin is given); "not_significant": neither (studies written before this
wording say "inconclusive")."""
Statistic = Literal["median", "geomean"]

_FloatArray = npt.NDArray[np.float64]


def finite_or_none(value: float) -> float | None:
    """``value`` for a JSON record: None where it is inf or nan (JSON has neither)."""
    return value if math.isfinite(value) else None


class RatioRecord(TypedDict):
    """A :class:`RatioEstimate` as records keep it (:meth:`RatioEstimate.to_dict`): nan and inf are None."""

    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n: int
    log_sd: float | None
    statistic: str
    higher_is_better: bool
    verdict: Verdict


def not_estimated(metric_higher_is_better: bool) -> RatioRecord:
    """The record of a ratio that could not be estimated (no comparable pair): no numbers, not significant."""
    return {
        "ratio": None,
        "ci_low": None,
        "ci_high": None,
        "p_value": None,
        "n": 0,
        "log_sd": None,
        "statistic": "",
        "higher_is_better": metric_higher_is_better,
        "verdict": "not_significant",
    }


@dataclass(frozen=True)
class RatioEstimate:
    """Treatment/baseline ratio with a bootstrap CI and a verdict.

    ``ratio`` is the point estimate (1.0 = no change); ``[ci_low, ci_high]`` is
    the confidence interval (a bootstrap, or for ``statistic="ratio_of_sums"``
    the inverted sign-flip test); ``p_value`` comes from a rank test
    (Wilcoxon signed-rank on per-pair log ratios when paired, Mann-Whitney U
    when unpaired) or, for ``statistic="ratio_of_sums"``, a sign-flip test of
    the ratio itself, and is nan when undefined (e.g. all differences zero).
    ``n`` is the number of pairs (the smaller sample size when unpaired) and
    ``log_sd`` the SD of per-pair log ratios (of the per-pair influence on the
    log ratio for a ratio of sums), i.e. the host noise (nan when unpaired).
    A difference is called only when the CI excludes 1 and the p-value is
    below 1 - confidence.
    """

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    log_sd: float
    statistic: str
    higher_is_better: bool
    verdict: Verdict

    def to_dict(self) -> RatioRecord:
        """JSON-friendly record; nan/inf floats become None (JSON has no nan)."""
        return {
            "ratio": finite_or_none(self.ratio),
            "ci_low": finite_or_none(self.ci_low),
            "ci_high": finite_or_none(self.ci_high),
            "p_value": finite_or_none(self.p_value),
            "n": self.n,
            "log_sd": finite_or_none(self.log_sd),
            "statistic": self.statistic,
            "higher_is_better": self.higher_is_better,
            "verdict": self.verdict,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> RatioEstimate | None:
        """A stored :meth:`to_dict` back as an estimate (None when absent or not estimated); None floats are nan."""
        names = cls.__dataclass_fields__
        if not data or data.get("ratio") is None or not set(names) <= set(data):
            return None
        values: dict[str, Any] = {k: math.nan if data[k] is None else data[k] for k in names}
        return cls(**values)


# --------------------------------------------------------------------------
# validation helpers


def _as_positive_1d(values: npt.ArrayLike, name: str, min_n: int = 2) -> _FloatArray:
    """Return ``values`` as a 1-D float array, rejecting anything a ratio can't use."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if arr.size < min_n:
        raise ValueError(f"{name} needs at least {min_n} values, got {arr.size}")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} contains non-finite values (nan or inf)")
    if not np.all(arr > 0):
        raise ValueError(f"{name} must be strictly positive to form ratios")
    return arr


def _check_common(confidence: float, n_resamples: int) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")


def _check_margin(margin: float | None) -> None:
    if margin is not None and not (math.isfinite(margin) and margin > 0):
        raise ValueError(f"the equivalence margin must be a positive finite number, got {margin}")


def _ci_width(ci_low: float, ci_high: float) -> float:
    """Relative CI width ``ci_high/ci_low - 1`` (0 for a point interval)."""
    return ci_high / ci_low - 1.0


def within_margin(ci_low: float, ci_high: float, margin: float) -> bool:
    """Whether the interval lies inside the equivalence region [1 / (1 + margin), 1 + margin].

    With a 95% interval this is two one-sided tests (TOST) at 2.5% each: "no change larger than ``margin``" is
    then shown, not merely not refuted (the usual TOST reads a 90% interval; this one is stricter)."""
    return 1.0 / (1.0 + margin) <= ci_low and ci_high <= 1.0 + margin


def call_verdict(
    ci_low: float, ci_high: float, p_value: float, *, alpha: float, higher_is_better: bool, margin: float | None
) -> Verdict:
    """Call a verdict: a difference needs the CI clear of 1 *and* the test below ``alpha``; "no_difference" needs
    the CI inside the equivalence margin (:func:`within_margin`; never without a margin); else "not_significant".

    The bootstrap CI alone is too narrow with few pairs (it cannot reach past the data: with n pairs that
    all moved the same way by chance, probability 2**(1-n), it always excludes 1). The exact rank test
    cannot reach p < 0.05 below 6 pairs, so tiny samples are never called a difference.
    """
    significant = not math.isnan(p_value) and p_value < alpha
    if significant and ci_low > 1.0:
        return "better" if higher_is_better else "worse"
    if significant and ci_high < 1.0:
        return "worse" if higher_is_better else "better"
    if margin is not None and within_margin(ci_low, ci_high, margin):
        return "no_difference"
    return "not_significant"


def reached_precision(est: RatioEstimate, min_effect: float) -> bool:
    """Sequential stopping rule of a screening comparison: stop once its CI is no wider than ``min_effect``
    (``ci_high / ci_low - 1``, i.e. about +-min_effect/2), so narrow that no change and a change of the smallest
    size worth deploying cannot both lie inside it.

    Only precision counts: stopping as soon as a look shows a difference (optional stopping) would call identical
    arms different about three times as often as the nominal 5% (with a look after every pair from 6 to 30
    pairs). The target is relative to ``min_effect``, never an absolute width: an absolute 5% stopped a CPU step
    screening after 0.9 s, whose SD then sized a confirmation."""
    _check_margin(min_effect)
    return _ci_width(est.ci_low, est.ci_high) <= min_effect


def false_positive_rate(estimates: Sequence[RatioEstimate]) -> float:
    """Share of estimates with a "better"/"worse" verdict.

    Run on A/A comparisons (same config in both arms) every such verdict is a
    false positive, so this should sit near 1 - confidence.
    """
    if len(estimates) == 0:
        raise ValueError("false_positive_rate needs at least one estimate")
    hits = sum(1 for e in estimates if e.verdict in ("better", "worse"))
    return hits / len(estimates)


def percentiles(values: npt.ArrayLike, qs: Sequence[float] = (50, 90, 99)) -> dict[str, float | None]:
    """Summarise a sample as {"mean", "p<q>"...} (numpy linear percentiles).

    Non-finite values (e.g. missing measurements recorded as nan) are dropped
    so the result is always JSON-safe; with nothing left every value is None.
    Keys use ``f"p{q:g}"``, e.g. 50 -> "p50", 99.9 -> "p99.9".
    """
    arr = np.asarray(values, dtype=np.float64).ravel()
    arr = arr[np.isfinite(arr)]
    keys = [f"p{q:g}" for q in qs]
    if arr.size == 0:
        return {"mean": None, **{k: None for k in keys}}
    pct = np.percentile(arr, list(qs), method="linear")
    out: dict[str, float | None] = {"mean": float(np.mean(arr))}
    for key, value in zip(keys, np.atleast_1d(pct), strict=True):
        out[key] = float(value)
    return out
