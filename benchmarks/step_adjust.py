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
block is then followed by the other arm more often, so carry-over is misattributed more (benchmarks/h100_projection.py,
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

from tuner.stats import RatioEstimate, call_verdict

__all__ = ["AdjustedStepRatio", "adjusted_step_fit", "adjusted_step_ratio", "random_units"]

_Floats = npt.NDArray[np.float64]
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


@dataclass(frozen=True)
class _Linear:
    """Per unit, the contrast and the covariates as linear functions of theta: d = theta du + dv, C = theta Cu + Cv."""

    du: _Floats
    dv: _Floats
    cu: _Floats
    cv: _Floats
    signs: _Floats


def random_units(
    n_units: int, pattern: str, rng: np.random.Generator
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """A randomized design of ``n_units`` consecutive units, each running ``pattern`` (blocks of arms "A"/"B": "AB"
    for pairs, "ABAB" or "ABABABAB" for alternating runs, "ABBA" for mirrored quadruples) or its mirror image (A and
    B swapped), a fair coin per unit: per block whether it runs the trial arm B, and its unit."""
    if n_units < 1 or not pattern or set(pattern) != {"A", "B"}:
        raise ValueError(f"need n_units >= 1 and a pattern of both arms A and B, got {n_units}, {pattern!r}")
    mirrored = rng.random(n_units) < 0.5
    is_b = np.array([arm == "B" for arm in pattern])
    is_trial = (is_b[None, :] != mirrored[:, None]).ravel()
    unit = np.repeat(np.arange(n_units, dtype=np.int64), len(pattern))
    return is_trial, unit


@dataclass(frozen=True)
class _Blocks:
    """Validated per-block inputs, and the units as runs of blocks [start, end] in time order."""

    t: _Floats
    a: _Floats
    b: npt.NDArray[np.bool_]
    segment: npt.NDArray[np.int64]
    used: npt.NDArray[np.bool_]
    starts: npt.NDArray[np.intp]
    ends: npt.NDArray[np.intp]


def _validated(
    seconds: npt.ArrayLike,
    steps: npt.ArrayLike,
    is_trial: npt.ArrayLike,
    unit: npt.ArrayLike,
    segment: npt.ArrayLike | None,
) -> _Blocks:
    t = np.asarray(seconds, dtype=np.float64)
    a = np.asarray(steps, dtype=np.float64)
    b = np.asarray(is_trial)
    u = np.asarray(unit)
    g = np.zeros(t.shape, dtype=np.int64) if segment is None else np.asarray(segment)
    if t.ndim != 1 or {a.shape, b.shape, u.shape, g.shape} != {t.shape}:
        raise ValueError("seconds, steps, is_trial, unit (and segment) must be 1-D arrays of one length per block")
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(np.isfinite(a)) and np.all(a > 0)):
        raise ValueError("block seconds and steps must be finite and positive")
    if b.dtype != np.bool_ or not np.issubdtype(u.dtype, np.integer) or not np.issubdtype(g.dtype, np.integer):
        raise ValueError("is_trial must be boolean, unit and segment integer")
    used = u >= 0
    change = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])  # runs of equal unit ids
    run_ends = np.r_[change[1:], u.size] - 1
    keep = used[change]
    starts, ends = change[keep], run_ends[keep]
    if starts.size != np.unique(u[used]).size:
        raise ValueError("each unit's blocks must be consecutive in time")
    if starts.size < 2:
        raise ValueError(f"a comparison needs at least 2 units, got {starts.size}")
    segment_changes = np.cumsum(np.r_[0, g[1:] != g[:-1]])
    if np.any(segment_changes[starts] != segment_changes[ends]):
        raise ValueError("each unit's blocks must lie in one segment")
    trials = np.add.reduceat(b.astype(np.int64), change)[keep]
    if np.any(trials == 0) or np.any(trials == ends - starts + 1):
        raise ValueError("every unit needs blocks of both arms")
    return _Blocks(t=t, a=a, b=b.astype(np.bool_), segment=g.astype(np.int64), used=used, starts=starts, ends=ends)


def _linear(blocks: _Blocks, lags: int, intercept: bool) -> _Linear:
    """The unit contrasts and covariates, linear in theta (see the module docstring)."""
    t, a, b, g, used, starts, ends = (
        blocks.t,
        blocks.a,
        blocks.b,
        blocks.segment,
        blocks.used,
        blocks.starts,
        blocks.ends,
    )
    total = float(a[used].sum())
    trial_time, reference_time = float(t[used & b].sum()), float(t[used & ~b].sum())
    eu = np.where(b, t, 0.0) - a * trial_time / total  # e_j(theta) = theta * eu_j + ev_j
    ev = np.where(b, 0.0, t) - a * reference_time / total
    counts = ends - starts + 1
    index = np.repeat(np.arange(starts.size), counts)
    members = np.flatnonzero(used)  # the units' blocks, in time order (units are consecutive runs)
    orient = np.where(b, 1.0, -1.0)  # o_j: +1 on B
    signs = -orient[starts]  # s_u = +1 when the unit's first block ran A
    r = orient[members] * signs[index]  # r_j: the pattern with the unit's first block at -1
    du = np.asarray(np.bincount(index, r * eu[members], minlength=starts.size), dtype=np.float64)
    dv = np.asarray(np.bincount(index, r * ev[members], minlength=starts.size), dtype=np.float64)
    columns_u, columns_v = [], []
    for lag in range(1, lags + 1):
        after, before = ends + lag, starts - lag
        ok = (before >= 0) & (after < t.size)
        after, before = np.where(ok, after, 0), np.where(ok, before, 0)
        ok &= (g[after] == g[starts]) & (g[before] == g[starts])
        columns_u.append(np.where(ok, eu[after] - eu[before], 0.0))
        columns_v.append(np.where(ok, ev[after] - ev[before], 0.0))
    if intercept:
        columns_u.append(np.zeros(starts.size))
        columns_v.append(np.ones(starts.size))
    cu = np.stack(columns_u, axis=1) if columns_u else np.zeros((starts.size, 0))
    cv = np.stack(columns_v, axis=1) if columns_v else np.zeros((starts.size, 0))
    return _Linear(du=du, dv=dv, cu=cu, cv=cv, signs=signs)


def _coefficients(*terms: npt.ArrayLike) -> tuple[_Floats, _Floats, _Floats]:
    """A polynomial's three coefficients (theta^2, theta, 1) as float arrays."""
    squared, linear, constant = (np.asarray(term, dtype=np.float64) for term in terms)
    return squared, linear, constant


class _Statistic:
    """T(theta) and its sign-flip reference distribution, each evaluation O(draws * covariates)."""

    def __init__(self, lin: _Linear, n_permutations: int, rng: np.random.Generator | None) -> None:
        self.lin = lin
        s, cu, cv, du, dv = lin.signs, lin.cu, lin.cv, lin.du, lin.dv
        self.p = cu.shape[1]
        # Normal equations of beta(theta) as polynomials in theta.
        self.cc = _coefficients(cu.T @ cu, cu.T @ cv + cv.T @ cu, cv.T @ cv)
        self.cd = _coefficients(cu.T @ du, cu.T @ dv + cv.T @ du, cv.T @ dv)
        self.dd = (float(du @ du), 2.0 * float(du @ dv), float(dv @ dv))
        self.obs = (s @ du, s @ dv, s @ cu, s @ cv)
        self.ref: tuple[_Floats, _Floats, _Floats, _Floats] | None = None
        self.draws, self.exact = 0, False
        if rng is not None:  # the reference set sum_u g_u s_u w_u: flips of the observed signs
            columns = np.asarray(s[:, None] * np.column_stack([du, dv, cu, cv]), dtype=np.float64)
            sums, self.exact = _flipped_sums(columns, n_permutations, rng)
            self.ref = (sums[:, 0], sums[:, 1], sums[:, 2 : 2 + self.p], sums[:, 2 + self.p :])
            self.draws = sums.shape[0]

    @staticmethod
    def _quadratic(terms: tuple[_Floats, _Floats, _Floats], theta: float) -> _Floats:
        return np.asarray(theta * theta * terms[0] + theta * terms[1] + terms[2], dtype=np.float64)

    def beta(self, theta: float) -> _Floats:
        """The slopes minimising sum_u w_u(theta)^2 (least squares without intercept column unless asked)."""
        if self.p == 0:
            return np.zeros(0)
        cc, cd = self._quadratic(self.cc, theta), self._quadratic(self.cd, theta)
        if self.p == 1:
            return cd / cc[0] if cc[0, 0] > 0 else np.zeros(1)
        return np.asarray(np.linalg.lstsq(cc, cd, rcond=None)[0], dtype=np.float64)

    def terms(self, theta: float) -> tuple[_Floats, float, float]:
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


def _flipped_sums(columns: _Floats, n_permutations: int, rng: np.random.Generator) -> tuple[_Floats, bool]:
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
    blocks = _validated(seconds, steps, is_trial, unit, segment)
    lin = _linear(blocks, lags, intercept)
    n = lin.du.size
    if lin.cu.shape[1] >= n:
        raise ValueError(f"{lin.cu.shape[1]} covariates need more than {n} units")
    stat = _Statistic(lin, n_permutations, np.random.default_rng(seed))
    plain = _Statistic(_Linear(lin.du, lin.dv, lin.cu[:, :0], lin.cv[:, :0], lin.signs), n_permutations, None)
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

    if variance <= 1e-300 * max(1.0, stat.dd[2]):  # identical arms: no test, a point interval
        p_zero, low, high = math.nan, point, point
    else:
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
