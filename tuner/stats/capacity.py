"""Capacity under an SLO: the largest load at which each arm's attainment meets a target, and their ratio.

Each arm's pooled attainment (requests that met every target, over all rounds at a load) is made non-increasing
in load by isotonic regression weighted by requests, so that noise cannot make a higher load look better; the
capacity is where that curve crosses the target, interpolated between the last level that meets it and the first
that does not, linearly in logit attainment against log load (an attainment of 0 or 1 taken as half a request
from it). On the simulated server's expected curves, at levels 26% apart, the logit cut the interpolation's error
in the ratio (SD over grid positions) from 1.6% (linear in attainment) to 0.3% on bursty arrivals and from 5.6% to
1.1% on Poisson ones. An arm that meets the target at every probed load has a capacity of at least the highest load,
one that misses it at the lowest a capacity below the lowest: both are said so (:data:`Bound`), not reported as
exact numbers, and the ratio's interval is open (0 or inf) on the side such a bound leaves unknown.

The estimand is capacity B / capacity A. Its interval is a cluster bootstrap over passes: rounds measured together
across loads (:attr:`LevelResult.passes`: the same host state, and the same requests when the workload is seeded by
the pass) are resampled together, with the same draw for both arms, so the pairing and the drift between passes stay
as they were. The percentile interval of the log ratio is stretched about the estimate by sqrt(p / (p - 1)) t(p - 1)
/ z, the small-sample correction a t interval makes, at the p passes that measured a load either side of a crossing
(a bracketing round at a distant load tells nothing about it); a side is open when more than the tail's share of
resamples is censored on it. On the simulated server (``benchmarks/simulations/capacity_sim.py``, 1000 searches per
case) it covered 1 under A/A in 98.2-100% of searches and the true ratio, B's steps 10% shorter, in 95.0-99.5%; the
delete-one-pass jackknife with the t quantile covered that in 84.4% (48 runs) and 90.5% (Poisson arrivals), as the
crossing moves nonlinearly with the noise, and the bootstrap without the stretch in 91.1-92.8% on Poisson arrivals
(an earlier run, the stretch counting every pass, covered 1 in 95.0% of A/A Poisson searches). The interval also
spans at least what the paired requests at the loads either side of both crossings allow if they were independent
(Tango's interval at the normal quantile, B's curve moved by it): where the arms agree on every request there, every
resample agrees too, and the interval would otherwise collapse to a point.

:func:`resolvable` says before a run what its rounds can resolve: the interval's half-width is t(rounds - 1) times
the per-round SD of the log ratio over sqrt(rounds), with that SD from a pilot (:attr:`CapacityEstimate.log_sd` of
an earlier estimate, or the pilot passes of :class:`tuner.capacity.planner.KneePlanner`). It assumes the SD does not
depend on the grid's spacing: a crossing is interpolated between two levels, whose attainment noise moves it by
that noise over the curve's slope whatever their distance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from functools import cache
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from scipy.stats import norm as normal
from scipy.stats import t as student

from tuner.stats.attainment import AttainmentDifference, MetFlags, PairedCounts, attainment_difference, tango_interval
from tuner.stats.capacity_records import (
    Bound,
    CapacityEstimateRecord,
    RatioBound,
    arm_capacity_record,
    open_or_none,
)

METHOD = "isotonic-crossing-pass-bootstrap-t-stretch"
_Array = npt.NDArray[np.float64]
_BOUNDS: tuple[Bound, Bound, Bound] = ("exact", "at_least", "below")  # by code 0, 1, -1


@dataclass(frozen=True)
class LevelResult:
    """One load level's rounds, both arms, and the pass each round belongs to: rounds of one pass were measured
    together across loads (the same host state, and the same requests when the workload is seeded by the pass), and
    are left out together by the jackknife. By default a level's round i is in pass i."""

    load: float
    counts: PairedCounts
    passes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.load) and self.load > 0):
            raise ValueError(f"a load must be positive and finite, got {self.load}")
        if len(self.passes) != self.counts.rounds:
            raise ValueError(f"{self.counts.rounds} rounds need as many passes, got {len(self.passes)}")

    @classmethod
    def measured(
        cls,
        load: float,
        met_a: MetFlags,
        met_b: MetFlags,
        passes: Sequence[int] | None = None,
    ) -> LevelResult:
        """A level from each round's met flags per request, in arrival order, the same requests in both arms."""
        counts = PairedCounts.from_rounds(met_a, met_b)
        return cls(float(load), counts, tuple(range(counts.rounds)) if passes is None else tuple(passes))

    def merged(self, other: LevelResult) -> LevelResult:
        """This level with ``other``'s rounds (at the same load) after its own."""
        if other.load != self.load:
            raise ValueError(f"cannot merge the rounds of load {other.load} into load {self.load}")
        return LevelResult(self.load, self.counts.merged(other.counts), self.passes + other.passes)

    def difference(self, *, confidence: float = 0.95) -> AttainmentDifference:
        """The paired attainment difference at this load (:mod:`tuner.stats.attainment`)."""
        return attainment_difference(self.counts, confidence=confidence)


@dataclass(frozen=True)
class Capacity:
    """One arm's capacity: the crossing (or the probed load that bounds it) and its interval (0 or inf: open)."""

    load: float
    bound: Bound
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class CapacityEstimate:
    """Capacity B / capacity A with its interval (module docstring); 0 or inf marks an open side."""

    target: float
    capacity_a: Capacity
    capacity_b: Capacity
    ratio: float
    ratio_bound: RatioBound  # "at_most"/"at_least": the ratio is at most/least ``ratio``; "unknown": no bound
    ci_low: float
    ci_high: float
    confidence: float
    rounds: int  # the most rounds any level has
    passes: int  # the clusters the bootstrap resamples
    passes_beside: int  # those that measured a load either side of a crossing: the stretch's t has one fewer df
    levels: int
    log_sd: float  # per-round SD of the log ratio (bootstrap SE * sqrt(rounds)); nan when the interval is open
    method: str = METHOD

    @property
    def precision(self) -> float:
        """Half the interval's width in log ratio, as a fraction (0.05: within about +-5%); inf when open."""
        if self.ci_low <= 0 or math.isinf(self.ci_high):
            return math.inf
        return math.expm1(math.log(self.ci_high / self.ci_low) / 2)

    @property
    def flagged(self) -> bool:
        """Whether the interval excludes 1."""
        return self.ci_low > 1 or self.ci_high < 1

    def to_dict(self) -> CapacityEstimateRecord:
        """JSON-friendly: an open side (0 or inf) and nan become None."""
        return {
            "target": self.target,
            "capacity_a": arm_capacity_record(*astuple(self.capacity_a)),
            "capacity_b": arm_capacity_record(*astuple(self.capacity_b)),
            "ratio": open_or_none(self.ratio),
            "ratio_bound": self.ratio_bound,
            "ci_low": open_or_none(self.ci_low),
            "ci_high": open_or_none(self.ci_high),
            "confidence": self.confidence,
            "rounds": self.rounds,
            "passes": self.passes,
            "passes_beside": self.passes_beside,
            "levels": self.levels,
            "log_sd": open_or_none(self.log_sd),
            "method": self.method,
            "precision": open_or_none(self.precision),
            "flagged": self.flagged,
        }


class Crossing(NamedTuple):
    """Where an arm's fitted attainment crosses the target, and the probed loads either side of it."""

    load: float  # the crossing, or the probed load that bounds it
    bound: Bound
    last_met: float  # the highest load whose fit meets the target (0 when none does)
    first_missed: float  # the lowest load whose fit misses it (inf when none does)


class _Crossings(NamedTuple):
    """:class:`Crossing` for many curves at once: log load, bound code (0 exact, 1 at least, -1 below), and the
    indices of the levels either side (-1 / the level count when there is none)."""

    log_load: _Array
    code: npt.NDArray[np.int64]
    last_met: npt.NDArray[np.int64]
    first_missed: npt.NDArray[np.int64]


def _isotonic(y: _Array, w: _Array) -> _Array:
    """The weighted non-increasing isotonic fit of each row: fit_i = min over k <= i of max over l >= i of the
    weighted mean of y_k..y_l (levels of weight 0 are left out of the means)."""
    levels = y.shape[1]
    cw = np.concatenate([np.zeros((len(y), 1)), np.cumsum(w, axis=1)], axis=1)
    cwy = np.concatenate([np.zeros((len(y), 1)), np.cumsum(w * y, axis=1)], axis=1)
    total, weighted = cw[:, None, 1:] - cw[:, :-1, None], cwy[:, None, 1:] - cwy[:, :-1, None]  # (rows, k, l)
    with np.errstate(divide="ignore", invalid="ignore"):
        means = np.where(total > 0, weighted / total, np.nan)
    highest = np.fmax.accumulate(means[:, :, ::-1], axis=2)[:, :, ::-1]
    return np.asarray(np.fmin.accumulate(highest, axis=1)[:, np.arange(levels), np.arange(levels)], dtype=np.float64)


def _crossings(x: _Array, y: _Array, w: _Array, target: float) -> _Crossings:
    """Each row's crossing (rows of attainment ``y`` and weight ``w`` over increasing loads ``x``; a level of
    weight 0 is not measured in that row)."""
    levels = y.shape[1]
    index = np.arange(levels)
    measured = w > 0
    fit = _isotonic(y, w)
    meets = measured & (fit >= target)
    last = np.where(meets, index, -1).max(axis=1)
    first = np.where(measured & ~meets & (index > last[:, None]), index, levels).min(axis=1)
    exact = (last >= 0) & (first < levels)
    lo, hi = np.where(exact, last, 0), np.where(exact, first, 0)
    half = 0.5 / np.where(measured, w, 1.0)
    logit = np.log(np.clip(fit, half, 1 - half) / (1 - np.clip(fit, half, 1 - half)))
    above, below = np.take_along_axis(logit, lo[:, None], 1)[:, 0], np.take_along_axis(logit, hi[:, None], 1)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(above > below, np.clip((above - math.log(target / (1 - target))) / (above - below), 0, 1), 0)
    lx = np.log(x)
    log_load = np.where(exact, lx[lo] + share * (lx[hi] - lx[lo]), np.where(last >= 0, lx[np.maximum(last, 0)], 0.0))
    first_measured = np.argmax(measured, axis=1)
    log_load = np.where(last < 0, lx[first_measured], log_load)
    code = np.where(exact, 0, np.where(last >= 0, 1, -1))
    return _Crossings(log_load, code, last, first)


def crossing(loads: npt.ArrayLike, attainment: npt.ArrayLike, weights: npt.ArrayLike, target: float) -> Crossing:
    """Where the ``weights``-weighted (requests) isotonic non-increasing fit of ``attainment`` over increasing
    ``loads`` crosses ``target`` (module docstring); or the highest load ("at_least") or the lowest ("below")."""
    x = np.asarray(loads, dtype=np.float64)
    if x.size == 0 or np.any(np.diff(x) <= 0):
        raise ValueError("loads must be increasing and not empty")
    row = np.asarray(attainment, dtype=np.float64)[None], np.asarray(weights, dtype=np.float64)[None]
    if np.any(row[1] <= 0):
        raise ValueError("every load needs a positive weight")
    found = _crossings(x, *row, target)
    last, first = int(found.last_met[0]), int(found.first_missed[0])
    return Crossing(
        load=math.exp(found.log_load[0]),
        bound=_BOUNDS[int(found.code[0])],
        last_met=float(x[last]) if last >= 0 else 0.0,
        first_missed=float(x[first]) if first < x.size else math.inf,
    )


def _table(levels: Sequence[LevelResult]) -> tuple[_Array, list[PairedCounts], _Array]:
    """Loads (increasing, one per distinct load), their counts, and a (level, pass, [requests, met A, met B]) array
    of each pass's rounds at each level (zeros where a level was not measured in a pass)."""
    merged: dict[float, LevelResult] = {}
    for level in levels:
        merged[level.load] = merged[level.load].merged(level) if level.load in merged else level
    loads = sorted(merged)
    passes = {tag: i for i, tag in enumerate(sorted({tag for level in merged.values() for tag in level.passes}))}
    table = np.zeros((len(loads), len(passes), 3))
    for i, load in enumerate(loads):
        level = merged[load]
        c = level.counts
        np.add.at(table[i], [passes[tag] for tag in level.passes], np.column_stack([c.requests, c.met_a, c.met_b]))
    return np.array(loads), [merged[load].counts for load in loads], table


def _arms(loads: _Array, sums: _Array, target: float) -> tuple[_Crossings, _Crossings]:
    """Both arms' crossings from (rows, level, [requests, met A, met B]) sums."""
    requests = sums[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        a, b = (np.where(requests > 0, sums[..., arm] / requests, 0.0) for arm in (1, 2))
    return _crossings(loads, a, requests, target), _crossings(loads, b, requests, target)


def _floor(loads: _Array, counts: list[PairedCounts], near: set[float], target: float, confidence: float) -> _Crossings:
    """B's crossing with its curve moved down and up by the paired attainment difference's interval that
    independent requests would give (Tango's at the normal quantile) on the levels ``near`` both crossings: the
    least uncertainty the interval may claim, whatever the passes agree on."""
    pooled = [c for load, c in zip(loads, counts, strict=True) if load in near] or counts
    only_a, only_b = sum(sum(c.only_a) for c in pooled), sum(sum(c.only_b) for c in pooled)
    total = sum(sum(c.requests) for c in pooled)
    low, high = tango_interval(only_a, only_b, total, float(normal.ppf((1 + confidence) / 2)))
    requests = np.array([[sum(c.requests) for c in counts]], dtype=np.float64)
    attained = np.array([[sum(c.met_b) for c in counts]]) / requests
    point = (only_b - only_a) / total
    moved = np.clip(np.concatenate([attained + low - point, attained + high - point]), 0, 1)
    return _crossings(loads, moved, np.repeat(requests, 2, axis=0), target)


@cache
def _stretch(passes: int, confidence: float) -> float:
    """How far a bootstrap percentile interval over ``passes`` clusters is widened: sqrt(p / (p - 1)) t / z."""
    tail = (1 + confidence) / 2
    return math.sqrt(passes / (passes - 1)) * float(student.ppf(tail, passes - 1) / normal.ppf(tail))


def _percentiles(point: float, resampled: npt.ArrayLike, passes: int, confidence: float) -> tuple[float, float]:
    """The stretched percentile interval of a log quantity from its resampled values (-inf/+inf: censored that
    way; nan: unknown, counted against both sides)."""
    tail = (1 - confidence) / 2
    values = np.asarray(resampled, dtype=np.float64)
    k = len(values)
    low = np.sort(np.where(np.isnan(values), -np.inf, values))[math.floor(tail * k)]
    high = np.sort(np.where(np.isnan(values), np.inf, values))[math.ceil((1 - tail) * k) - 1]
    c = _stretch(passes, confidence)
    return point - c * max(point - low, 0.0), point + c * max(high - point, 0.0)


def _signed_log(found: _Crossings) -> _Array:
    """Log capacities, +inf where the capacity is beyond the highest load and -inf below the lowest."""
    return np.where(found.code == 1, np.inf, np.where(found.code == -1, -np.inf, found.log_load))


def _ratio_bound(bound_a: Bound, bound_b: Bound) -> RatioBound:
    """Which side of value_b / value_a the true ratio can lie on, given each arm's bound."""
    low = bound_a == "at_least" or bound_b == "below"  # the ratio may be smaller than stated
    high = bound_a == "below" or bound_b == "at_least"  # ... or larger
    return "unknown" if low and high else "at_most" if low else "at_least" if high else "exact"


def _resampled(loads: _Array, table: _Array, target: float, resamples: int, seed: int) -> list[_Array]:
    """Each arm's signed log capacity (:func:`_signed_log`) in ``resamples`` bootstrap draws of whole passes, the
    same draws for both arms."""
    passes = table.shape[1]
    draws = np.random.default_rng(seed).multinomial(passes, np.full(passes, 1 / passes), resamples).astype(float)
    resampled = np.asarray(draws @ table.transpose(1, 0, 2).reshape(passes, -1), dtype=np.float64)
    return [_signed_log(arm) for arm in _arms(loads, resampled.reshape(resamples, *table[:, 0].shape), target)]


def _capacity(arm: _Crossings, bound: Bound, interval: tuple[float, float]) -> Capacity:
    """One arm's :class:`Capacity` from its crossing and its log interval, open on the side its bound leaves."""
    return Capacity(
        load=math.exp(arm.log_load[0]),
        bound=bound,
        ci_low=0.0 if bound == "below" else math.exp(interval[0]),
        ci_high=math.inf if bound == "at_least" else math.exp(interval[1]),
    )


def capacity_ratio(
    levels: Sequence[LevelResult],
    target: float,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> CapacityEstimate:
    """Each arm's capacity at the attainment ``target`` and capacity B / capacity A, from every measured level
    (levels at the same load are pooled), with ``resamples`` bootstrap draws of passes from ``seed``. Intervals
    need two passes; with one they are open."""
    if not levels:
        raise ValueError("no load levels")
    if not 0 < target < 1 or not 0 < confidence < 1:
        raise ValueError(f"target and confidence must be in (0, 1), got {target} and {confidence}")
    loads, counts, table = _table(levels)
    full = _arms(loads, table.sum(axis=1)[None], target)
    arms = [_BOUNDS[int(arm.code[0])] for arm in full]
    passes = table.shape[1]
    boot = _resampled(loads, table, target, resamples, seed)
    beside = sorted({int(i) for arm in full for i in (arm.last_met[0], arm.first_missed[0]) if 0 <= i < len(loads)})
    near = {float(loads[i]) for i in beside}
    moved = _floor(loads, counts, near, target, confidence)
    informed = int(np.count_nonzero(table[beside, :, 0].sum(axis=0) > 0)) if beside else passes  # the stretch's
    point = float(full[1].log_load[0] - full[0].log_load[0])
    with np.errstate(invalid="ignore"):  # inf - inf: both arms censored the same way, the ratio unknown (nan)
        ratios = boot[1] - boot[0]
    if informed < 2:
        low, high, capacities = -math.inf, math.inf, [(-math.inf, math.inf)] * 2
    else:
        low, high = _percentiles(point, ratios, informed, confidence)
        capacities = [
            _percentiles(float(a.log_load[0]), b, informed, confidence) for a, b in zip(full, boot, strict=True)
        ]
        low = min(low, float(moved.log_load[0] - full[0].log_load[0])) if moved.code[0] != -1 else -math.inf
        high = max(high, float(moved.log_load[1] - full[0].log_load[0])) if moved.code[1] != 1 else math.inf
    bound = _ratio_bound(arms[0], arms[1])
    low = -math.inf if bound in ("at_most", "unknown") else low
    high = math.inf if bound in ("at_least", "unknown") else high
    finite = ratios[np.isfinite(ratios)]
    rounds = max(c.rounds for c in counts)
    return CapacityEstimate(
        target=target,
        capacity_a=_capacity(full[0], arms[0], capacities[0]),
        capacity_b=_capacity(full[1], arms[1], capacities[1]),
        ratio=math.exp(point),
        ratio_bound=bound,
        ci_low=math.exp(low),
        ci_high=math.exp(high),
        confidence=confidence,
        rounds=rounds,
        passes=passes,
        passes_beside=informed,
        levels=len(loads),
        log_sd=float(np.std(finite) * math.sqrt(rounds)) if math.isfinite(high - low) and finite.size else math.nan,
    )


def resolvable(log_sd: float, rounds: int, *, confidence: float = 0.95) -> float:
    """The precision (:attr:`CapacityEstimate.precision`) the ratio's interval is expected to reach at ``rounds``
    rounds per level, given the per-round SD of the log ratio ``log_sd`` from a pilot (module docstring)."""
    if rounds < 2:
        return math.inf
    return math.expm1(float(student.ppf((1 + confidence) / 2, rounds - 1)) * log_sd / math.sqrt(rounds))


def rounds_needed(log_sd: float, precision: float, *, confidence: float = 0.95, most: int = 1000) -> int | None:
    """The fewest rounds per level at which :func:`resolvable` reaches ``precision`` (None: not within ``most``)."""
    return next((r for r in range(2, most + 1) if resolvable(log_sd, r, confidence=confidence) <= precision), None)
