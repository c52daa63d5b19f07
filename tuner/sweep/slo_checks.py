"""Secondary objectives and SLOs judged on a CI (pure functions): a check passes only when the whole interval is
on the acceptable side of its limit, so "passed" means shown, not merely not refuted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tuner.stats import RatioEstimate


@dataclass(frozen=True)
class Check:
    """A secondary objective or SLO judged on the confirmation CI, and which bound decided it.

    Conservative on purpose: it passes only when the whole CI is on the acceptable side of the limit, so
    "passed" means shown, not merely not refuted.
    """

    metric: str
    kind: Literal["non_inferiority", "slo"]
    side: Literal["upper", "lower"]
    bound: float
    limit: float
    passed: bool

    def describe(self) -> str:
        op = "<=" if self.side == "upper" else ">="
        what = "ratio to baseline" if self.kind == "non_inferiority" else "value"
        outcome = "ok" if self.passed else "FAILS"
        return f"{self.metric}: {self.side} CI bound of the {what} {self.bound:.4g} {op} {self.limit:.4g}: {outcome}"


def non_inferiority(metric: str, estimate: RatioEstimate, margin: float = 0.05) -> Check:
    """The candidate is no more than ``margin`` worse than the baseline on ``metric`` (e.g. p99 ITL within +5%):
    the CI's worse-side bound must stay within the margin."""
    if estimate.higher_is_better:
        return Check(metric, "non_inferiority", "lower", estimate.ci_low, 1 - margin, estimate.ci_low >= 1 - margin)
    return Check(metric, "non_inferiority", "upper", estimate.ci_high, 1 + margin, estimate.ci_high <= 1 + margin)


def slo(
    metric: str, estimate: RatioEstimate, anchor: float, *, max: float | None = None, min: float | None = None
) -> Check:
    """An absolute SLO (``max`` or ``min``) on ``anchor`` (the baseline's value) times the ratio's CI."""
    if max is not None and min is None:
        bound = anchor * estimate.ci_high
        return Check(metric, "slo", "upper", bound, max, bound <= max)
    if min is not None and max is None:
        bound = anchor * estimate.ci_low
        return Check(metric, "slo", "lower", bound, min, bound >= min)
    raise ValueError("give exactly one of max or min")
