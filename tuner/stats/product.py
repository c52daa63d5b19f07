"""The estimate of a ratio measured as the product of independent factors, and its interval.

A GC-pacing comparison measures a step-time ratio in two parts that no single pairing can hold (the mutator step
by step, the collector arm by arm, :mod:`tuner.measure.gc_pacing`): each part is a ratio of sums with its own
sign-flip test and inverted interval, and the ratio is their product. Its interval is the MOVER interval of the
sum of their logs (Zou and Donner, 2008): on each side the half-width is the root sum of squares of the factors'
half-widths on that side, so each factor's own interval, skew and heavy tails included, carries into the product,
and with one factor the product is that factor exactly. The p-value is the normal test this interval inverts: the
half-width on the side of 1 read as ``z`` standard errors, so the interval excludes 1 exactly when p < 1 -
confidence. A bias bound (a part measured only by a bound, such as a collector too small to measure) widens both
sides by its log, added to the half-widths, not in quadrature: a bound is not a noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from scipy import stats as _st

from tuner.stats.estimate import RatioEstimate, _check_margin, call_verdict
from tuner.stats.ratio_of_sums import UNBOUNDED_LOG

PRODUCT = "product_of_ratios"
"""The ``statistic`` of a product estimate."""


def product_estimate(
    factors: Sequence[RatioEstimate],
    *,
    bound: float = 0.0,
    confidence: float = 0.95,
    margin: float | None = None,
) -> RatioEstimate:
    """The product of independent ``factors`` (ratios of one orientation, each at ``confidence``), its interval
    widened by the relative ``bound`` on each side, a p-value and a verdict (module docstring). ``n`` is the first
    factor's pairs and ``log_sd`` the per-pair SD that gives the product's standard error at those pairs, so the
    power functions read the product as that many pairs of a noisier comparison."""
    if not factors:
        raise ValueError("a product needs at least one factor")
    if len({f.higher_is_better for f in factors}) != 1:
        raise ValueError("the factors must share one orientation (higher_is_better)")
    if not (math.isfinite(bound) and bound >= 0):
        raise ValueError(f"the bias bound must be a finite share >= 0, got {bound}")
    _check_margin(margin)
    if len(factors) == 1 and bound == 0:
        return factors[0]
    point = sum(math.log(f.ratio) for f in factors)
    below = math.hypot(*(math.log(f.ratio / f.ci_low) for f in factors)) + math.log1p(bound)
    above = math.hypot(*(math.log(f.ci_high / f.ratio) for f in factors)) + math.log1p(bound)
    below, above = min(below, UNBOUNDED_LOG), min(above, UNBOUNDED_LOG)
    z = float(_st.norm.isf((1 - confidence) / 2))
    toward_one = below if point > 0 else above
    se = toward_one / z
    p_value = 1.0 if se >= UNBOUNDED_LOG / z else float(2 * _st.norm.sf(abs(point) / se)) if se > 0 else 0.0
    ci_low, ci_high = math.exp(point - below), math.exp(point + above)
    first = factors[0]
    higher = first.higher_is_better
    return RatioEstimate(
        ratio=math.exp(point),
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=first.n,
        log_sd=(below + above) / (2 * z) * math.sqrt(first.n),
        statistic=PRODUCT,
        higher_is_better=higher,
        verdict=call_verdict(ci_low, ci_high, p_value, alpha=1 - confidence, higher_is_better=higher, margin=margin),
    )


def in_orientation(estimate: RatioEstimate, higher_is_better: bool) -> RatioEstimate:
    """``estimate`` as the ratio of the other quantity where its orientation differs (a step-time ratio as a
    throughput ratio: 1 / ratio, its interval inverted)."""
    if estimate.higher_is_better == higher_is_better:
        return estimate
    return replace(
        estimate,
        ratio=1 / estimate.ratio,
        ci_low=1 / estimate.ci_high,
        ci_high=1 / estimate.ci_low,
        higher_is_better=higher_is_better,
    )


def unmeasured(higher_is_better: bool = False) -> RatioEstimate:
    """A factor nothing measured: no shift, an unbounded interval (a product with it cannot be confirmed)."""
    bound = math.exp(UNBOUNDED_LOG)
    return RatioEstimate(1.0, 1 / bound, bound, 1.0, 0, math.inf, PRODUCT, higher_is_better, "not_significant")
