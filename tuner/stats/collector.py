"""The collector's part of a GC-pacing comparison: each arm's GC seconds per mutator second at its own pace, and the
factor ``(1 + s_B) / (1 + s_A)`` they make of the step-time ratio.

The arms run alone in alternating long blocks (:mod:`tuner.measure.collector`). Counting each block's collections
would read a pacing effect into where the block's ends cut the arm's cycles: a block of the trial begins with the
reference's half-full gen0 and collects later than its own pace would, one of the reference begins with the trial's
fuller gen0 and collects at once, and an arm's rare gen2 collection falls in one block and not the next. So the
count comes from what drives it: a collection is triggered every ``T0 + 1`` net allocations (``T0``: the arm's
gen0 threshold; allocations counted exactly, :meth:`tuner.plugin.gc_probe.GcProbe.allocated`), and CPython 3.11-3.13
schedules the generations in a fixed cycle: ``T1 + 1`` gen0 collections then a gen1, and after ``T2 + 1`` gen1 the
next trigger is a gen2 (:func:`schedule`). Each trigger then costs the arm's mean in-step seconds of a collection of
its generation (:class:`Collection`: seconds on the critical path of the block's working steps; hidden or between
steps, nothing), measured on every collection but the first of its generation in each block, which still holds the
other arm's leftovers.

Where that cycle does not hold (a gen2 the 25% rule of pending objects held back, a strategy that collects by
itself, another interpreter) the observed counts disagree with it beyond where a block's ends can cut
(:func:`schedule_holds`), and the factor falls back to each block's observed GC seconds: the same pairs, wider.

The factor's interval combines two independent parts (:func:`tuner.stats.product.product_estimate`): the exact
sign-flip test over block pairs (the blocks' own spread: allocation rate, mutator and host drift) and the normal
interval of the mean costs (their sample variance, as each enters both arms' sums).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypedDict

import numpy as np
from scipy import stats as _st

from tuner.stats.estimate import RatioEstimate, RatioRecord, call_verdict
from tuner.stats.product import product_estimate

GENERATIONS = 3
COST_SPREAD = "collection_costs"
"""The ``statistic`` of the mean costs' part of a collector factor."""
SPREAD = "block_pairs_t"
"""The ``statistic`` of the block pairs' part of a collector factor."""


def schedule(gen1_threshold: int, gen2_threshold: int) -> tuple[float, float, float]:
    """The share of collection triggers that collect generation 0, 1 and 2 under CPython's generational schedule
    (3.11-3.13): ``T1 + 1`` gen0 then one gen1, and after ``T2 + 1`` gen1 one gen2 (while enough objects wait)."""
    cycle = (gen2_threshold + 1) * (gen1_threshold + 2) + 1
    return (
        (gen2_threshold + 1) * (gen1_threshold + 1) / cycle,
        (gen2_threshold + 1) / cycle,
        1 / cycle,
    )


@dataclass(frozen=True)
class Collection:
    """One collection in a block: its generation, its seconds on the critical path of the block's working steps,
    and whether it was the block's first of its generation in its process."""

    generation: int
    in_steps_s: float
    first: bool


@dataclass(frozen=True)
class ProcessBlock:
    """One engine process during a block: the collections its net allocations trigger at the arm's pace, the
    arm's schedule of generations there, and the collections it made."""

    triggers: float
    shares: tuple[float, float, float]
    collections: tuple[Collection, ...]


@dataclass(frozen=True)
class CollectorBlock:
    """One arm alone for a block: its working steps and their seconds, and each engine process's collections."""

    arm: str  # "A" (the reference) or "B" (the trial)
    pair: int
    steps: int
    step_s: float
    processes: dict[int, ProcessBlock] = field(default_factory=dict)

    @cached_property
    def gc_s(self) -> float:  # read for every pair, arm and share: summed once
        return sum(c.in_steps_s for p in self.processes.values() for c in p.collections)

    @property
    def mutator_s(self) -> float:
        return self.step_s - self.gc_s


@dataclass(frozen=True)
class Costs:
    """One arm's in-step seconds per collection, per (process, generation): their mean, how many, and the relative
    variance of one (None where fewer than two were seen)."""

    mean: dict[tuple[int, int], float]
    count: dict[tuple[int, int], int]
    relative_variance: dict[tuple[int, int], float | None]

    def variance_of_mean(self, key: tuple[int, int], other: Costs) -> float:
        """The variance of the mean at ``key``; from one collection, with the other arm's relative spread for it (a
        collection of the same generation walks much the same heap in either arm), else as large as the mean."""
        mean, n = self.mean[key], self.count[key]
        relative = self.relative_variance[key]
        if relative is None:
            relative = other.relative_variance.get(key)
        return mean**2 * relative / n if relative is not None else mean**2


def arm_costs(blocks: Sequence[CollectorBlock]) -> Costs:
    """In-step seconds per collection of each process and generation over ``blocks`` (one arm's), the first of
    each block left out where at least two others remain."""
    mean, count, relative = {}, {}, {}
    for pid in {pid for b in blocks for pid in b.processes}:
        for g in range(GENERATIONS):
            every = [c for b in blocks if pid in b.processes for c in b.processes[pid].collections if c.generation == g]
            settled = [c.in_steps_s for c in every if not c.first]
            costs = settled if len(settled) >= 2 else [c.in_steps_s for c in every]
            if costs:
                key = (pid, g)
                mean[key], count[key] = statistics.fmean(costs), len(costs)  # floats: not statistics.mean's fractions
                spread = float(np.var(costs, ddof=1)) / mean[key] ** 2 if len(costs) >= 2 and mean[key] > 0 else None
                relative[key] = spread
    return Costs(mean, count, relative)


def schedule_holds(blocks: Sequence[CollectorBlock]) -> str | None:
    """None where each process's observed collections per generation agree with the schedule's count of its
    triggers, within three standard deviations of where blocks' ends cut a regular cycle (a quarter collection
    squared per block) and the trigger count's rounding; else why not."""
    for pid in {pid for b in blocks for pid in b.processes}:
        mine = [b.processes[pid] for b in blocks if pid in b.processes]
        for g in range(GENERATIONS):
            expected = sum(p.triggers * p.shares[g] for p in mine)
            seen = sum(1 for p in mine for c in p.collections if c.generation == g)
            if abs(seen - expected) > 3 * math.sqrt(0.25 * len(mine) + 0.01 * expected) + 1:
                return (
                    f"process {pid} made {seen} gen{g} collections where its allocations and thresholds schedule "
                    f"{expected:.1f}"
                )
    return None


def _modeled_gc(block: CollectorBlock, costs: Costs, fallback: Costs) -> float:
    """The block's GC seconds at the arm's pace: each process's triggers times the expected in-step cost of one."""
    total = 0.0
    for pid, process in block.processes.items():
        for g, share in enumerate(process.shares):
            cost = costs.mean.get((pid, g), fallback.mean.get((pid, g), 0.0))
            total += process.triggers * share * cost
    return total


def _cost_variance(blocks: Sequence[CollectorBlock], costs: Costs, other: Costs) -> float:
    """The variance the arm's mean costs put on its log(1 + share): each mean enters the arm's GC sum times the
    triggers of its generation, over the arm's step seconds (the derivative of log((M + G) / M) in G). A cost the
    arm never measured is the other arm's (``_modeled_gc``), with the other's variance."""
    step_s = sum(b.step_s for b in blocks)
    variance = 0.0
    for pid in {pid for b in blocks for pid in b.processes}:
        for g in range(GENERATIONS):
            weight = sum(b.processes[pid].triggers * b.processes[pid].shares[g] for b in blocks if pid in b.processes)
            key = (pid, g)
            if key in costs.mean:
                spread = costs.variance_of_mean(key, other)
            elif key in other.mean:
                spread = other.variance_of_mean(key, costs)
            else:
                continue
            variance += (weight / step_s) ** 2 * spread
    return variance


class CollectorRecord(TypedDict):
    """A :class:`CollectorEstimate` as records keep it."""

    factor: RatioRecord
    spread: RatioRecord
    cost_se: float
    shares: dict[str, float]
    observed_shares: dict[str, float]
    modeled: bool
    why: str
    pairs: int
    collections: dict[str, list[int]]


@dataclass(frozen=True)
class CollectorEstimate:
    """The collector factor and how it was made: modeled at each arm's pace, or from observed GC (``why``)."""

    factor: RatioEstimate
    spread: RatioEstimate  # its pairs' part: the sign-flip test over block pairs
    cost_se: float  # its mean costs' part: the standard error they put on the log factor (0 when observed)
    shares: dict[str, float]  # each arm's GC seconds per mutator second, as the factor used them
    observed_shares: dict[str, float]  # the same from the blocks' observed GC
    modeled: bool
    why: str  # empty when modeled
    pairs: int
    collections: dict[str, list[int]]  # per arm, per generation, observed in its blocks

    def to_dict(self) -> CollectorRecord:
        return {
            "factor": self.factor.to_dict(),
            "spread": self.spread.to_dict(),
            "cost_se": self.cost_se,
            "shares": self.shares,
            "observed_shares": self.observed_shares,
            "modeled": self.modeled,
            "why": self.why,
            "pairs": self.pairs,
            "collections": self.collections,
        }


def collector_estimate(blocks: Sequence[CollectorBlock], *, confidence: float = 0.95) -> CollectorEstimate:
    """``(1 + s_B) / (1 + s_A)`` as a step-time ratio (lower is better) from block pairs (module docstring)."""
    by_arm = {arm: [b for b in blocks if b.arm == arm] for arm in ("A", "B")}
    costs = {arm: arm_costs(arm_blocks) for arm, arm_blocks in by_arm.items()}
    why = schedule_holds(blocks) or ""
    other = {"A": "B", "B": "A"}

    def gc_of(block: CollectorBlock) -> float:
        return _modeled_gc(block, costs[block.arm], costs[other[block.arm]]) if not why else block.gc_s

    pairs = _pairs(blocks)
    if len(pairs) < 2:
        raise ValueError(f"a collector factor needs at least 2 block pairs, got {len(pairs)}")
    trial = [(b.mutator_s, b.mutator_s + gc_of(b)) for _, b in pairs]
    reference = [(a.mutator_s, a.mutator_s + gc_of(a)) for a, _ in pairs]
    spread = _spread(trial, reference, confidence)
    factors = [spread]
    se = 0.0
    if not why:
        se = math.sqrt(sum(_cost_variance(by_arm[a], costs[a], costs[other[a]]) for a in ("A", "B")))
        factors.append(_cost_factor(se, len(pairs), confidence))
    shares = {
        arm: sum(gc_of(b) for b in arm_blocks) / sum(b.mutator_s for b in arm_blocks)
        for arm, arm_blocks in by_arm.items()
    }
    observed = {arm: sum(b.gc_s for b in bb) / sum(b.mutator_s for b in bb) for arm, bb in by_arm.items()}
    seen = {
        arm: [
            sum(1 for b in bb for p in b.processes.values() for c in p.collections if c.generation == g)
            for g in range(GENERATIONS)
        ]
        for arm, bb in by_arm.items()
    }
    factor = product_estimate(factors, confidence=confidence)
    return CollectorEstimate(factor, spread, se, shares, observed, not why, why, len(pairs), seen)


def _spread(
    trial: Sequence[tuple[float, float]], reference: Sequence[tuple[float, float]], confidence: float
) -> RatioEstimate:
    """The block pairs' part: the ratio of sums of (mutator seconds, step seconds with GC) per arm, as a step-time
    ratio, and the t interval of its log (the pairs' influence values, n - 1 degrees of freedom). Each pair is two
    long blocks, averages of many steps, so the exact sign-flip test's floor (no 95% bound below 6 pairs) would
    cost the budget pairs it cannot spare."""
    n = len(trial)
    sums = _sums(trial, reference)
    point = math.log(sums[0]) - math.log(sums[1]) - math.log(sums[2]) + math.log(sums[3])  # log rate ratio
    influence = [
        t[0] / sums[0] - t[1] / sums[1] - r[0] / sums[2] + r[1] / sums[3] for t, r in zip(trial, reference, strict=True)
    ]
    log_sd = statistics.stdev([n * x for x in influence])
    se = log_sd / math.sqrt(n)
    quantile = float(_st.t.isf((1 - confidence) / 2, n - 1))
    ci_low, ci_high = math.exp(-point - quantile * se), math.exp(-point + quantile * se)
    p_value = float(2 * _st.t.sf(abs(point) / se, n - 1)) if se > 0 else 1.0
    return RatioEstimate(
        ratio=math.exp(-point),
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=p_value,
        n=n,
        log_sd=log_sd,
        statistic=SPREAD,
        higher_is_better=False,
        verdict=call_verdict(ci_low, ci_high, p_value, alpha=1 - confidence, higher_is_better=False, margin=None),
    )


def _sums(
    trial: Sequence[tuple[float, float]], reference: Sequence[tuple[float, float]]
) -> tuple[float, float, float, float]:
    """Summed (trial mutator, trial total, reference mutator, reference total) seconds, with the signs of the log
    rate ratio's terms: log((sum m_t / sum T_t) / (sum m_r / sum T_r))."""
    return (
        sum(t[0] for t in trial),
        sum(t[1] for t in trial),
        sum(r[0] for r in reference),
        sum(r[1] for r in reference),
    )


def _pairs(blocks: Sequence[CollectorBlock]) -> list[tuple[CollectorBlock, CollectorBlock]]:
    by_pair: dict[int, dict[str, CollectorBlock]] = {}
    for block in blocks:
        by_pair.setdefault(block.pair, {})[block.arm] = block
    return [(arms["A"], arms["B"]) for arms in by_pair.values() if len(arms) == 2]


def block_pairs(blocks: Sequence[CollectorBlock]) -> int:
    """How many (A, B) pairs of blocks ``blocks`` hold: a collector factor needs two."""
    return len(_pairs(blocks))


def _cost_factor(se: float, n: int, confidence: float) -> RatioEstimate:
    """The mean costs' part: no shift of its own (the point is in the pairs'), an interval of ``se`` in log."""
    z = float(_st.norm.isf((1 - confidence) / 2))
    low, high = math.exp(-z * se), math.exp(z * se)
    return RatioEstimate(
        ratio=1.0,
        ci_low=low,
        ci_high=high,
        p_value=1.0,
        n=n,
        log_sd=se * math.sqrt(n),
        statistic=COST_SPREAD,
        higher_is_better=False,
        verdict=call_verdict(low, high, 1.0, alpha=1 - confidence, higher_is_better=False, margin=None),
    )
