"""Capacity under an SLO: the largest load at which each arm meets its targets, and their ratio.

An SLO here is a tier of checks, each a share of requests that must pass it (:class:`Share`): the joint
``measure.slo`` is one check (met every target) with ``capacity.attainment`` as its share; a percentile tier has
one check per metric (``ttft p95 <= 200 ms``: 95% within 200 ms). Each arm's capacity on a check is where its
isotonic attainment curve crosses the share (:mod:`tuner.stats.crossing`), and on a tier the lowest of its checks'
(:func:`tuner.stats.crossing.binding`). An arm that meets the tier at every probed load has a capacity of at least
the highest load, one that misses it at the lowest a capacity below the lowest: both are said so (:data:`Bound`),
not reported as exact numbers, and the ratio's interval is open (0 or inf) on the side such a bound leaves unknown.

The estimand is capacity B / capacity A. It is estimated by bagging (Breiman 1996; Efron 2014): the mean, over a
cluster bootstrap of passes, of the resampled log ratio. Rounds measured together across loads
(:attr:`LevelResult.passes`: the same host state, and the same requests when the workload is seeded by the pass) are
resampled together, with the same draw for both arms, so the pairing and the drift between passes stay as they
were. A crossing is a nonsmooth function of the data (a load that meets the target or not moves it a whole
interpolation); the mean over resamples smooths it: on the simulated server (``benchmarks/simulations/capacity_sim.py``,
1,000 searches a case, a 10%-faster arm) its SD was 16-36% below that of the pooled data's crossing, and its
interval covered the true ratio in 93.3-96.4% of searches. Its interval is the mean +- t(p - 1)
times its jackknife-after-bootstrap SE (Efron 1992: the mean over the resamples that leave each pass out is that
pass's delete-one value), p the passes that measured a load either side of a crossing (a bracketing round at a
distant load tells nothing about it); a side is open when more than the tail's share of resamples is censored on
it. Where an arm is censored (a bound), the ratio is the pooled data's and its interval what the arms' own allow.
The percentile interval about the pooled crossing, stretched by sqrt(p / (p - 1)) t(p - 1) / z, which the tool
used before, covered a 10%-faster arm's ratio in 99.6% of bursty searches (its width the crossing's jumps, not the
estimate's error) and is kept in the simulation's comparison (``stretched_percentile``). The interval also spans
at least what the paired requests at the loads either side of both crossings allow if they were independent
(Tango's interval at the normal quantile, B's curve of each check moved by it): where the arms agree on every
request there, every resample agrees too, and the interval would otherwise collapse to a point.

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
from typing import NamedTuple

import numpy as np
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
from tuner.stats.crossing import BOUNDS, Array, Crossing, Crossings, binding, crossings_of, signed_log
from tuner.stats.pass_bootstrap import Bagged, Draws, bagged_interval, pass_bootstrap

METHOD = "isotonic-crossing-bagged-pass-bootstrap-jackknife-t"


@dataclass(frozen=True)
class LevelResult:
    """One load level's rounds, both arms, the paired counts of each check of the SLO (the same rounds in each),
    and the pass each round belongs to: rounds of one pass were measured together across loads (the same host
    state, and the same requests when the workload is seeded by the pass), and are resampled together. By default a
    level's round i is in pass i."""

    load: float
    checks: tuple[PairedCounts, ...]
    passes: tuple[int, ...]

    def __post_init__(self) -> None:
        if not (math.isfinite(self.load) and self.load > 0):
            raise ValueError(f"a load must be positive and finite, got {self.load}")
        if not self.checks or len({c.rounds for c in self.checks}) != 1:
            raise ValueError("a level needs at least one check, each with the same rounds")
        if len(self.passes) != self.rounds:
            raise ValueError(f"{self.rounds} rounds need as many passes, got {len(self.passes)}")

    @property
    def rounds(self) -> int:
        return self.checks[0].rounds

    @classmethod
    def measured(
        cls,
        load: float,
        met_a: MetFlags,
        met_b: MetFlags,
        passes: Sequence[int] | None = None,
    ) -> LevelResult:
        """A level of one check from each round's flags per request (passed it or not), in arrival order, the same
        requests in both arms."""
        return cls.of_checks(load, [met_a], [met_b], passes)

    @classmethod
    def of_checks(
        cls,
        load: float,
        met_a: Sequence[MetFlags],
        met_b: Sequence[MetFlags],
        passes: Sequence[int] | None = None,
    ) -> LevelResult:
        """A level from each check's flags per round and request (``met_a[check]``: as :meth:`measured` takes)."""
        checks = tuple(PairedCounts.from_rounds(a, b) for a, b in zip(met_a, met_b, strict=True))
        rounds = checks[0].rounds if checks else 0
        return cls(float(load), checks, tuple(range(rounds)) if passes is None else tuple(passes))

    def merged(self, other: LevelResult) -> LevelResult:
        """This level with ``other``'s rounds (at the same load, of the same checks) after its own."""
        if other.load != self.load or len(other.checks) != len(self.checks):
            raise ValueError(f"cannot merge the rounds of load {other.load} into load {self.load}")
        checks = tuple(mine.merged(theirs) for mine, theirs in zip(self.checks, other.checks, strict=True))
        return LevelResult(self.load, checks, self.passes + other.passes)

    def difference(self, check: int = 0, *, confidence: float = 0.95) -> AttainmentDifference:
        """The paired attainment difference of ``check`` at this load (:mod:`tuner.stats.attainment`)."""
        return attainment_difference(self.checks[check], confidence=confidence)


class Share(NamedTuple):
    """One check of a tier: at least ``least`` of the requests must pass check ``check`` (its index in
    :attr:`LevelResult.checks`)."""

    check: int
    least: float


Target = float | Sequence[Share]
"""What an arm must meet: a share of check 0 (the joint ``measure.slo``), or a tier of :class:`Share`."""


def tier(target: Target) -> tuple[Share, ...]:
    """``target`` as a tier of shares (a float: that share of check 0); refused when a share is not in (0, 1)."""
    shares = (Share(0, target),) if isinstance(target, float | int) else tuple(target)
    if not shares or not all(0 < share.least < 1 for share in shares):
        raise ValueError(f"every share of a target must be in (0, 1), got {target}")
    return shares


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

    target: float  # the share of the target's first check (of a one-check target: its share)
    capacity_a: Capacity
    capacity_b: Capacity
    ratio: float
    ratio_bound: RatioBound  # "at_most"/"at_least": the ratio is at most/least ``ratio``; "unknown": no bound
    ci_low: float
    ci_high: float
    confidence: float
    rounds: int  # the most rounds any level has
    passes: int  # the clusters the bootstrap resamples
    passes_beside: int  # those that measured a load either side of a crossing: its t has one fewer df
    levels: int
    log_sd: float  # per-round SD of the log ratio (jackknife-after-bootstrap SE * sqrt(rounds)); nan when open
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


def _table(levels: Sequence[LevelResult]) -> tuple[Array, list[tuple[PairedCounts, ...]], Array]:
    """Loads (increasing, one per distinct load), each one's counts per check, and a (level, pass, check, [requests,
    passed in A, passed in B]) array of each pass's rounds at each level (zeros where a level was not measured in a
    pass)."""
    merged: dict[float, LevelResult] = {}
    for level in levels:
        merged[level.load] = merged[level.load].merged(level) if level.load in merged else level
    loads = sorted(merged)
    if len({len(level.checks) for level in merged.values()}) != 1:
        raise ValueError("every level needs the same checks")
    passes = {tag: i for i, tag in enumerate(sorted({tag for level in merged.values() for tag in level.passes}))}
    table = np.zeros((len(loads), len(passes), len(merged[loads[0]].checks), 3))
    for i, load in enumerate(loads):
        level = merged[load]
        columns = [np.column_stack([c.requests, c.met_a, c.met_b]) for c in level.checks]
        np.add.at(table[i], [passes[tag] for tag in level.passes], np.stack(columns, axis=1))
    return np.array(loads), [merged[load].checks for load in loads], table


def _arms(loads: Array, sums: Array, shares: Sequence[Share]) -> tuple[Crossings, Crossings]:
    """Both arms' crossings of the tier ``shares`` (each its binding check's) from (rows, level, check, [requests,
    passed in A, passed in B]) sums."""
    requests = sums[..., 0, 0]
    found: tuple[list[Crossings], list[Crossings]] = ([], [])
    for check, least in shares:
        with np.errstate(divide="ignore", invalid="ignore"):
            for arm in (1, 2):
                curve = np.where(requests > 0, sums[..., check, arm] / requests, 0.0)
                found[arm - 1].append(crossings_of(loads, curve, requests, least))
    return binding(found[0]), binding(found[1])


def _floor(
    loads: Array, counts: list[tuple[PairedCounts, ...]], near: set[float], shares: Sequence[Share], confidence: float
) -> Crossings:
    """B's crossing of the tier with each check's curve moved down (row 0) and up (row 1) by the paired attainment
    difference's interval that independent requests would give (Tango's at the normal quantile) on the levels
    ``near`` both crossings: the least uncertainty the interval may claim, whatever the passes agree on."""
    quantile = float(normal.ppf((1 + confidence) / 2))
    found = []
    for check, least in shares:
        each = [c[check] for c in counts]
        pooled = [c for load, c in zip(loads, each, strict=True) if load in near] or each
        only_a, only_b = sum(sum(c.only_a) for c in pooled), sum(sum(c.only_b) for c in pooled)
        total = sum(sum(c.requests) for c in pooled)
        low, high = tango_interval(only_a, only_b, total, quantile)
        requests = np.array([[sum(c.requests) for c in each]], dtype=np.float64)
        attained = np.array([[sum(c.met_b) for c in each]]) / requests
        point = (only_b - only_a) / total
        moved = np.clip(np.concatenate([attained + low - point, attained + high - point]), 0, 1)
        found.append(crossings_of(loads, moved, np.repeat(requests, 2, axis=0), least))
    return binding(found)


def tier_crossings(levels: Sequence[LevelResult], target: Target) -> tuple[Crossing, Crossing]:
    """Each arm's crossing of ``target`` (A's, then B's) on its isotonic fits over every level measured so far."""
    loads, _, table = _table(levels)
    found = _arms(loads, table.sum(axis=1)[None], tier(target))
    return tuple(  # type: ignore[return-value]
        Crossing(
            load=math.exp(arm.log_load[0]),
            bound=BOUNDS[int(arm.code[0])],
            last_met=float(loads[arm.last_met[0]]) if arm.last_met[0] >= 0 else 0.0,
            first_missed=float(loads[arm.first_missed[0]]) if arm.first_missed[0] < len(loads) else math.inf,
        )
        for arm in found
    )


def _ratio_bound(bound_a: Bound, bound_b: Bound) -> RatioBound:
    """Which side of value_b / value_a the true ratio can lie on, given each arm's bound."""
    low = bound_a == "at_least" or bound_b == "below"  # the ratio may be smaller than stated
    high = bound_a == "below" or bound_b == "at_least"  # ... or larger
    return "unknown" if low and high else "at_most" if low else "at_least" if high else "exact"


def _resampled(loads: Array, table: Array, shares: Sequence[Share], draws: Array) -> list[Array]:
    """Each arm's signed log capacity (:func:`tuner.stats.crossing.signed_log`) in each resample of passes weighted by
    a row of ``draws``, the same weights for both arms and every check."""
    passes = table.shape[1]
    resampled = np.asarray(draws @ table.transpose(1, 0, 2, 3).reshape(passes, -1), dtype=np.float64)
    return [signed_log(arm) for arm in _arms(loads, resampled.reshape(len(draws), *table[:, 0].shape), shares)]


def _beside(full: Sequence[Crossings], levels: int) -> list[int]:
    """The indices of the levels either side of each arm's crossing (the loads that place it)."""
    return sorted({int(i) for arm in full for i in (arm.last_met[0], arm.first_missed[0]) if 0 <= i < levels})


def passes_beside(full: Sequence[Crossings], table: Array) -> int:
    """The passes that measured a load either side of a crossing (all, when none has a side): the t's df + 1."""
    beside = _beside(full, table.shape[0])
    return int(np.count_nonzero(table[beside, :, 0, 0].sum(axis=0) > 0)) if beside else table.shape[1]


def _capacity(arm: Bagged, bound: Bound) -> Capacity:
    """One arm's :class:`Capacity` from its bagged log capacity and interval, open on the side its bound leaves."""
    return Capacity(
        load=math.exp(arm.center),
        bound=bound,
        ci_low=0.0 if bound == "below" else math.exp(arm.low),
        ci_high=math.inf if bound == "at_least" else math.exp(arm.high),
    )


def _arm(full: Crossings, resampled: Array, bound: Bound, weights: Array, informed: int, confidence: float) -> Bagged:
    """One arm's bagged log capacity; a bound (or too few passes for an interval) is the full data's reading, its
    interval from 0 or to infinity at the probed load that bounds it."""
    if bound == "exact" and math.isfinite((bagged := bagged_interval(resampled, weights, informed - 1, confidence)).se):
        return bagged
    at = float(full.log_load[0])
    return Bagged(at, math.nan, at if bound == "at_least" else -math.inf, at if bound == "below" else math.inf)


def capacity_ratio(
    levels: Sequence[LevelResult],
    target: Target,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> CapacityEstimate:
    """Each arm's capacity at ``target`` (a share of check 0, or a tier of :class:`Share`) and capacity B /
    capacity A, from every measured level (levels at the same load are pooled), with ``resamples`` bootstrap draws
    of passes from ``seed``. Intervals need two passes; with one they are open."""
    return estimate_with(levels, target, pass_bootstrap(resamples, seed), confidence=confidence)


def estimate_with(
    levels: Sequence[LevelResult], target: Target, draws: Draws, *, confidence: float = 0.95
) -> CapacityEstimate:
    """:func:`capacity_ratio` with the passes weighted by ``draws`` in the resamples (the simulation compares other
    weights with the bootstrap's on the same searches)."""
    if not levels:
        raise ValueError("no load levels")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    shares = tier(target)
    loads, counts, table = _table(levels)
    if max(share.check for share in shares) >= table.shape[2]:
        raise ValueError(f"the target names a check the levels do not have ({table.shape[2]} checks)")
    full = _arms(loads, table.sum(axis=1)[None], shares)
    arms = [BOUNDS[int(arm.code[0])] for arm in full]
    weights = draws(table)
    boot = _resampled(loads, table, shares, weights)
    beside = _beside(full, len(loads))
    near = {float(loads[i]) for i in beside}
    moved = _floor(loads, counts, near, shares, confidence)
    informed = passes_beside(full, table)
    with np.errstate(invalid="ignore"):  # inf - inf: both arms censored the same way, the ratio unknown (nan)
        ratios = boot[1] - boot[0]
    bound = _ratio_bound(arms[0], arms[1])
    crossed = float(full[1].log_load[0] - full[0].log_load[0])
    each = [_arm(a, b, kind, weights, informed, confidence) for a, b, kind in zip(full, boot, arms, strict=True)]
    bagged = bagged_interval(ratios, weights, informed - 1, confidence) if bound == "exact" else None
    if bagged is None:  # a bound: the full data's reading, between what each arm's interval allows (nan: open)
        low, high = each[1].low - each[0].high, each[1].high - each[0].low  # inf - inf (nan): open
        low, high = -math.inf if math.isnan(low) else low, math.inf if math.isnan(high) else high
        bagged = Bagged(crossed, math.nan, low, high)
    elif not math.isfinite(bagged.se):  # too few passes for an interval
        bagged = Bagged(crossed, math.nan, -math.inf, math.inf)
    point, low, high = bagged.center, bagged.low, bagged.high
    if math.isfinite(bagged.se):
        low = min(low, float(moved.log_load[0] - full[0].log_load[0])) if moved.code[0] != -1 else -math.inf
        high = max(high, float(moved.log_load[1] - full[0].log_load[0])) if moved.code[1] != 1 else math.inf
    low = -math.inf if bound in ("at_most", "unknown") else low
    high = math.inf if bound in ("at_least", "unknown") else high
    rounds = max(c[0].rounds for c in counts)
    return CapacityEstimate(
        target=shares[0].least,
        capacity_a=_capacity(each[0], arms[0]),
        capacity_b=_capacity(each[1], arms[1]),
        ratio=math.exp(point),
        ratio_bound=bound,
        ci_low=math.exp(low),
        ci_high=math.exp(high),
        confidence=confidence,
        rounds=rounds,
        passes=table.shape[1],
        passes_beside=informed,
        levels=len(loads),
        log_sd=bagged.se * math.sqrt(rounds) if math.isfinite(high - low) else math.nan,
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
