"""Mean step time B/A from interleaved step blocks, drift-adjusted, with an exact sign-flip test and its inverted CI.

The estimand is the one of :func:`tuner.stats.paired_ratio_of_sums` on step blocks: the ratio of sums of step seconds
per step, R = (sum t_B / sum a_B) / (sum t_A / sum a_A) (``a`` = steps), so a long pause weighs by its time. Only the
noise is reduced, by a regression adjustment that the randomization cannot bias.

Setting. Blocks run in time order; each *unit* of consecutive blocks (a pair AB/BA, or a run of alternating blocks
ABAB.../BABA...) got its arm pattern or the mirror image with probability 1/2, independently across units. For a
hypothesised ratio R = 1/theta the B blocks are *de-treated*, t0_j = theta * t_j, and expressed as excess over the
units' mean step time m(theta), e_j = t0_j - a_j * m(theta). With r_j = +-1 the unit's pattern in a fixed orientation
(its first block at -1) and s_u = +1 when the unit's B blocks sit at r = +1, the time-ordered contrast is
d_u = sum_j r_j e_j and sum_u s_u d_u = theta T_B - T_A - m (N_B - N_A), which is zero exactly at the ratio of sums.

Adjustment. Covariates per unit that the unit's own arm cannot move: the drift across it, c_u,l = e(l-th block after
the unit) - e(l-th block before it), l = 1..lags (blocks of other units, whose arms are independent coin flips), and
optionally an intercept (a systematic first-vs-second-position difference). beta minimises sum_u (d_u - C_u beta)^2,
which is the variance of the statistic under sign flips, and depends only on time-ordered, de-treated data. The
statistic is T(theta) = sum_u s_u w_u with w = d - C beta; the point estimate is the root of T, the p-value of
"R = 1/theta" compares |T| with |sum_u g_u w_u| over sign patterns g, and the CI collects every R it does not reject.

Units. Pairs (AB/BA) are the step interleaver's unit. Runs of alternating blocks (ABAB, ABABABAB) are a design
option the test handles the same way (it flips whole units): on the H100 A/A steps they cut the noise of one-step
blocks further than the adjustment does (alternation cancels smooth drift and part of a pause's shoulders), but a
block is then followed by the other arm more often, so carry-over is misattributed more (benchmarks/h100/projection.py,
ADJUSTED_NOTES). Mirrored quadruples (ABBA) are noisier at small K.

Why exact. Under the sharp null "every B block took R times its A time" the de-treated series does not depend on the
signs, so neither do d, C, beta or w; the observed signs are uniform on {+-1}^n, and sum s_u w_u is one draw of the
reference distribution (every pattern when 2**n <= n_permutations, else Monte-Carlo with the (1 + hits)/(1 + draws)
rule). Why the estimand is kept for any effect, not only a multiplicative one: E[s_u c_u] = 0 because c_u comes from
other units' blocks, so the adjustment term has mean zero under the randomization whatever the arms do; the
estimating equation stays unbiased for the ratio of sums (up to O(1/n) from estimating beta). Covariates from the
unit's own blocks (its sum, its spread) are excluded on purpose: they carry the unit's own effect, and an effect
concentrated on long steps (an arm that halves pauses) would be partly regressed away. Caveat: a carry-over from a
unit's last block into the next block (garbage one arm leaves behind) enters c_u with the unit's sign; the
adjustment then adds beta times half of it to the carry-over bias the plain ratio already has. The CI is found by
bisection outward from the estimate, which assumes the p-value falls away from it (beta moves with the tested ratio,
so this is not guaranteed to the last digit; the bounds are where the test turns).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import optimize as _opt
from scipy import special as _sp

from benchmarks.h100.step_units import Floats, Linear, coefficients, linear_terms, random_units, validated
from tuner.stats import RatioEstimate, call_verdict

__all__ = ["AdjustedStepRatio", "adjusted_step_fit", "adjusted_step_ratio", "random_units"]

UNBOUNDED_LOG = 40.0  # an interval side the test never rejects is reported this far out, as in tuner.stats
_BISECTIONS = 45


@dataclass(frozen=True)
class AdjustedStepRatio:
    """The estimate with what produced it.

    ``estimate`` is the :class:`~tuner.stats.RatioEstimate` (mean step time B/A, ``higher_is_better=False``).
    ``beta`` are the covariate slopes at the estimate (lags 1.. then the intercept), ``plain_ratio`` the unadjusted
    ratio of sums of the same units, ``sd_ratio`` the adjusted over the unadjusted sign-flip SD of the statistic (at
    the estimate; below 1 when the adjustment helps) and ``normal_half_width`` the normal approximation of the CI's
    half-width in log units (z * sign-flip SD / slope of the statistic), to compare with the exact inverted CI.
    """

    estimate: RatioEstimate
    beta: tuple[float, ...]
    plain_ratio: float
    sd_ratio: float
    normal_half_width: float
    units: int


class _Statistic:
    """T(theta) and its sign-flip reference distribution, each evaluation O(draws * covariates)."""

    def __init__(self, lin: Linear, n_permutations: int, rng: np.random.Generator | None) -> None:
        self.lin = lin
        s, cu, cv, du, dv = lin.signs, lin.cu, lin.cv, lin.du, lin.dv
        self.p = cu.shape[1]
        # Normal equations of beta(theta) as polynomials in theta.
        self.cc = coefficients(cu.T @ cu, cu.T @ cv + cv.T @ cu, cv.T @ cv)
        self.cd = coefficients(cu.T @ du, cu.T @ dv + cv.T @ du, cv.T @ dv)
        self.dd = (float(du @ du), 2.0 * float(du @ dv), float(dv @ dv))
        self.obs = (s @ du, s @ dv, s @ cu, s @ cv)
        self.ref: tuple[Floats, Floats, Floats, Floats] | None = None
        self.draws, self.exact = 0, False
        if rng is not None:  # the reference set sum_u g_u s_u w_u: flips of the observed signs
            columns = np.asarray(s[:, None] * np.column_stack([du, dv, cu, cv]), dtype=np.float64)
            sums, self.exact = _flipped_sums(columns, n_permutations, rng)
            self.ref = (sums[:, 0], sums[:, 1], sums[:, 2 : 2 + self.p], sums[:, 2 + self.p :])
            self.draws = sums.shape[0]

    @staticmethod
    def _quadratic(terms: tuple[Floats, Floats, Floats], theta: float) -> Floats:
        return np.asarray(theta * theta * terms[0] + theta * terms[1] + terms[2], dtype=np.float64)

    def beta(self, theta: float) -> Floats:
        """The slopes minimising sum_u w_u(theta)^2 (least squares without intercept column unless asked)."""
        if self.p == 0:
            return np.zeros(0)
        cc, cd = self._quadratic(self.cc, theta), self._quadratic(self.cd, theta)
        if self.p == 1:
            return cd / cc[0] if cc[0, 0] > 0 else np.zeros(1)
        return np.asarray(np.linalg.lstsq(cc, cd, rcond=None)[0], dtype=np.float64)

    def terms(self, theta: float) -> tuple[Floats, float, float]:
        """beta(theta), the observed T(theta) and sum_u w_u(theta)^2 (the statistic's variance under sign flips)."""
        beta = self.beta(theta)
        sdu, sdv, scu, scv = self.obs
        observed = float(theta * sdu + sdv - (theta * scu + scv) @ beta)
        dd = theta * theta * self.dd[0] + theta * self.dd[1] + self.dd[2]
        cc, cd = self._quadratic(self.cc, theta), self._quadratic(self.cd, theta)
        return beta, observed, max(dd - 2.0 * float(beta @ cd) + float(beta @ cc @ beta), 0.0)

    def observed(self, theta: float) -> float:
        return self.terms(theta)[1]

    def variance(self, theta: float) -> float:
        return self.terms(theta)[2]

    def p_value(self, theta: float) -> float:
        """Two-sided sign-flip p-value of R = 1/theta."""
        assert self.ref is not None
        beta, observed, variance = self.terms(theta)
        gdu, gdv, gcu, gcv = self.ref
        reference = theta * gdu + gdv - (theta * gcu + gcv) @ beta
        hits = float(np.count_nonzero(np.abs(reference) >= abs(observed) - 1e-9 * math.sqrt(variance)))
        return hits / self.draws if self.exact else (1.0 + hits) / (1.0 + self.draws)


def _flipped_sums(columns: Floats, n_permutations: int, rng: np.random.Generator) -> tuple[Floats, bool]:
    """sum_u g_u x_u for every column x of ``columns`` (units, q) and sign pattern g: all 2**n patterns when that is
    at most ``n_permutations`` (exact), else that many random ones; (draws, q), in chunks of about 2**21 signs."""
    n = columns.shape[0]
    exact = 2**n <= n_permutations
    draws = 2**n if exact else n_permutations
    out = np.empty((draws, columns.shape[1]))
    total = columns.sum(axis=0)
    rows = max(1, 2**21 // n)
    for start in range(0, draws, rows):
        stop = min(draws, start + rows)
        if exact:
            bits = (np.arange(start, stop)[:, None] >> np.arange(n)) & 1
        else:
            packed = rng.integers(0, 256, (stop - start, (n + 7) // 8), dtype=np.uint8)
            bits = np.unpackbits(packed, axis=1, count=n)
        out[start:stop] = total - 2.0 * (bits.astype(np.float64) @ columns)  # g = 1 - 2 * bit
    return out, exact


def _root(stat: _Statistic, guess: float) -> float:
    """theta where T(theta) = 0, bracketed outward from ``guess`` (the unadjusted root)."""
    lo, hi = guess, guess
    f_lo = f_hi = stat.observed(guess)
    if f_lo == 0.0:
        return guess
    for _ in range(60):
        lo, hi = lo / 1.5, hi * 1.5
        f_lo, f_hi = stat.observed(lo), stat.observed(hi)
        if f_lo * f_hi <= 0.0:
            return float(_opt.brentq(stat.observed, lo, hi, xtol=1e-14 * guess, rtol=1e-13, maxiter=200))
    raise ValueError("the adjusted statistic has no root: the covariates absorb the whole contrast")


def _inverted_ci(
    stat: _Statistic, point: float, variance: float, normal: float, alpha: float
) -> tuple[float, float, float]:
    """(p-value of no difference, low, high) in log R: every ratio the sign-flip test does not reject at ``alpha``,
    found by bisection outward from ``point`` (bracketed at two normal half-widths where that rejects)."""
    if variance <= 1e-300 * max(1.0, stat.dd[2]):  # identical arms: no test, a point interval
        return math.nan, point, point
    p_zero = stat.p_value(1.0)
    bounds = []
    for sign in (-1.0, 1.0):  # in log R; theta = exp(-log R)
        inner, outer, halvings = point, point + sign * UNBOUNDED_LOG, _BISECTIONS
        probe = point + sign * 2.0 * normal if 0.0 < normal < UNBOUNDED_LOG / 2 else outer
        if stat.p_value(math.exp(-probe)) < alpha:  # the usual case: bracket [estimate, 2 normal half-widths]
            outer, halvings = probe, _BISECTIONS - 15
        elif stat.p_value(math.exp(-outer)) >= alpha:
            bounds.append(outer)
            continue
        for _ in range(halvings):
            middle = (inner + outer) / 2.0
            if stat.p_value(math.exp(-middle)) >= alpha:
                inner = middle
            else:
                outer = middle
        bounds.append(inner)
    low, high = bounds
    if p_zero >= alpha:  # 0 is inside exactly when the test at 0 accepts
        low, high = min(low, 0.0), max(high, 0.0)
    return p_zero, low, high


def adjusted_step_fit(
    seconds: npt.ArrayLike,
    steps: npt.ArrayLike,
    is_trial: npt.ArrayLike,
    unit: npt.ArrayLike,
    *,
    lags: int = 1,
    intercept: bool = False,
    segment: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    n_permutations: int = 10_000,
    seed: int = 0,
    margin: float | None = None,
) -> AdjustedStepRatio:
    """:func:`adjusted_step_ratio`, with its slopes, the unadjusted ratio and the SD reduction."""
    if lags < 0:
        raise ValueError(f"lags must be >= 0, got {lags}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if n_permutations < 1:
        raise ValueError(f"n_permutations must be >= 1, got {n_permutations}")
    blocks = validated(seconds, steps, is_trial, unit, segment)
    lin = linear_terms(blocks, lags, intercept)
    n = lin.du.size
    if lin.cu.shape[1] >= n:
        raise ValueError(f"{lin.cu.shape[1]} covariates need more than {n} units")
    stat = _Statistic(lin, n_permutations, np.random.default_rng(seed))
    plain = _Statistic(Linear(lin.du, lin.dv, lin.cu[:, :0], lin.cv[:, :0], lin.signs), n_permutations, None)
    t, a, b, used = blocks.t, blocks.a, blocks.b, blocks.used
    plain_theta = float(t[used & ~b].sum() / a[used & ~b].sum()) / float(t[used & b].sum() / a[used & b].sum())
    theta = _root(stat, plain_theta)
    point = -math.log(theta)  # log R, R = mean step time B / A
    h = 1e-6
    slope = (stat.observed(theta * math.exp(h)) - stat.observed(theta * math.exp(-h))) / (2 * h)  # dT / dlog theta
    variance = stat.variance(theta)
    alpha = 1.0 - confidence
    z = float(_sp.ndtri(1.0 - alpha / 2.0))
    normal = z * math.sqrt(variance) / abs(slope) if slope else math.inf
    log_sd = math.sqrt(variance / (n - 1)) * n / abs(slope) if slope else math.nan

    p_zero, low, high = _inverted_ci(stat, point, variance, normal, alpha)
    ci_low, ci_high = math.exp(low), math.exp(high)
    estimate = RatioEstimate(
        ratio=math.exp(point),
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=float(p_zero),
        n=n,
        log_sd=float(log_sd),
        statistic="adjusted_ratio_of_sums",
        higher_is_better=False,
        verdict=call_verdict(ci_low, ci_high, p_zero, alpha=alpha, higher_is_better=False, margin=margin),
    )
    plain_sd = math.sqrt(plain.variance(theta))
    return AdjustedStepRatio(
        estimate=estimate,
        beta=tuple(float(x) for x in stat.beta(theta)),
        plain_ratio=1.0 / plain_theta,
        sd_ratio=math.sqrt(variance) / plain_sd if plain_sd > 0 else math.nan,
        normal_half_width=normal,
        units=n,
    )


def adjusted_step_ratio(
    seconds: npt.ArrayLike,
    steps: npt.ArrayLike,
    is_trial: npt.ArrayLike,
    unit: npt.ArrayLike,
    *,
    lags: int = 1,
    intercept: bool = False,
    segment: npt.ArrayLike | None = None,
    confidence: float = 0.95,
    n_permutations: int = 10_000,
    seed: int = 0,
    margin: float | None = None,
) -> RatioEstimate:
    """Mean step time of arm B over arm A (ratio of sums of step seconds per step), neighbour-drift adjusted.

    Inputs are per block, in time order: ``seconds`` (summed step wall time), ``steps``, ``is_trial`` (the block ran
    B) and ``unit``: the randomization unit (a pair, or a run of alternating blocks, :func:`random_units`),
    whose blocks are consecutive and whose arm pattern or its mirror image was drawn with probability 1/2; ``-1``
    marks a context block (outside every unit: it enters only as a neighbour). Blocks of different ``segment``
    (recordings with a gap between them) are not neighbours; a missing neighbour contributes 0 to its covariate.

    ``lags`` drift covariates (block l after the unit minus block l before it, l = 1..lags; 0: the plain ratio of
    sums) and an optional ``intercept`` are regressed out of each unit's time-ordered contrast (module docstring).
    The p-value is the sign-flip test of R = 1 (exact enumeration for up to log2(n_permutations) units, else seeded
    Monte-Carlo), the CI inverts the same test (bisection from the estimate on the same sign patterns; an unbounded
    side is reported at exp(+-40) times the estimate) and ``log_sd`` is the per-unit SD on the log scale, so
    log_sd / sqrt(n) is the standard error of log R. The verdict follows :mod:`tuner.stats`: "better" when B's mean
    step time is lower, the p-value below 1 - confidence and the CI clear of 1. With ``lags=0`` and equal steps per
    block the point estimate, p-value and ``log_sd`` are those of :func:`tuner.stats.paired_ratio_of_sums` on the
    units' summed steps and seconds (``higher_is_better=False``; the p-value is identical where both enumerate every
    pattern). Its CI inverts that same test with B's seconds de-treated (steps are fixed, time scales), where
    tuner.stats scales the amounts: away from R = 1 the two nulls differ, and so do the bounds slightly at a few
    units (1-2% at 12 pairs), not at thousands.

    Cost: the sign patterns' sums are drawn once (``n_permutations`` x units), every tested ratio then costs
    O(n_permutations x covariates): ~10 ms for 128 units and 2000 flips, 40-90 ms for 500-2000 units and 10,000
    flips.
    """
    return adjusted_step_fit(
        seconds,
        steps,
        is_trial,
        unit,
        lags=lags,
        intercept=intercept,
        segment=segment,
        confidence=confidence,
        n_permutations=n_permutations,
        seed=seed,
        margin=margin,
    ).estimate
