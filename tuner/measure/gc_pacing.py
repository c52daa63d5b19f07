"""A GC-pacing comparison as deployed, in about a minute: the mutator step by step, the collector arm by arm.

A strategy that changes when the collector runs (:attr:`strategies.Strategy.paces_gc`) cannot be compared in short
blocks: the arm with the lower threshold would run every collection, the other arm's garbage included. Long blocks
(each arm collecting at its own pace) cost far more than they buy (on this CPU a step's per-pair SD was 0.066 at one
step, 0.098 at 16, 0.095 at 79 settled steps), and a settle at each block's end promotes the objects the arm's own,
longer cycle would have let die young, the very thing a higher threshold changes.

So the step-time ratio is measured as a product of two independent factors:

- **the mutator**: step-level pairs at the comparison's grain, each step's time without the GC pauses on its
  critical path (EngineCore's and its workers', :mod:`tuner.measure.worker_gc`), so that where the collector runs
  moves only time that is taken out; the exact sign-flip test of that ratio of sums;
- **the collector**: ``(1 + s_B) / (1 + s_A)``, each arm's GC seconds per mutator second at its own pace, from
  alternating blocks of each arm alone (:mod:`tuner.measure.collector`, :mod:`tuner.stats.collector`).

Their product's interval combines the two (:func:`tuner.stats.product.product_estimate`). The decomposition assumes
that the pacing moves no mutator time: true of where pauses fall, not necessarily of what a larger young generation
does to the caches, which only each arm running alone for long would show. On the CPU engine, with the lifetime
yardstick (:mod:`strategies.known_gc_load`) it agreed with long run-level pairs (``results/reference/
gc-pacing-cpu.json``, ``python -m benchmarks.engine.gc_pacing``).

When neither arm spends a tenth of ``min_effect`` of its step collecting (the CPU engine's own garbage: ~0.01%), the
collector is only piloted: its factor lies within ``1 +- max share`` whatever the pacing, and the
interval is widened by that bound instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tuner.measure.collector import collector_blocks, renumbered
from tuner.measure.interleave import InterleaveResult, interleaved_comparison
from tuner.measure.step_sums import compared_steps, log_ratio_variance
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import StrategySet
from tuner.records import GcPacingRecord
from tuner.stats import (
    CollectorBlock,
    CollectorEstimate,
    RatioEstimate,
    block_pairs,
    collector_estimate,
    product_estimate,
    unmeasured,
)

COLLECTOR_BLOCK_STEPS = 32
"""Steps of each arm alone per block of the collector's pilot (and its least block length)."""
GEN1_CYCLES_PER_BLOCK = 2.5
"""A collector block holds this many of the slower arm's gen1 cycles where the budget allows: a block's first
gen1 collection still collects the other arm's promotions (on the yardstick, the trial's gen1 cost 25 ms measured
in blocks shorter than its cycle and 38 ms in blocks twice as long), so a block must hold some of its own."""
LEAST_BLOCK_PAIRS = 6
"""Block pairs the collector's budget is planned to hold (its spread's t interval has n - 1 degrees of freedom)."""
PILOT_SHARE = 0.2
"""The share of the budget both arms' pilot blocks take: enough to see whether GC matters and how long a block
must be."""
SHARE_AT_HALF = 0.045
"""The GC share at which the collector and the mutator split the budget evenly (:func:`collector_share`)."""
MOST_SHARE = 0.8
"""The most of the budget the collector takes: the mutator always keeps some pairs."""
LEAST_PSEUDO_PAIRS = 20
"""Pairs of adjacent pilot steps the mutator's noise is read from at the least (:func:`mutator_variance`)."""
SKIP_BELOW = 0.1
"""The collector is only piloted when both arms' GC share is below this share of ``min_effect``."""


@dataclass(frozen=True)
class BudgetSplit:
    """The collector's planned share of a pacing comparison's budget (the pilot's included), and from what."""

    share: float
    why: str


@dataclass
class PacingComparison:
    """A GC-pacing comparison: the step-time ratio as deployed and its two factors."""

    estimate: RatioEstimate | None  # the trial's mean step over the reference's (lower: the trial is faster)
    mutator: InterleaveResult  # step pairs of mutator seconds (its estimate is the mutator factor)
    collector: CollectorEstimate | None  # None when skipped
    observed_shares: dict[str, float]  # each arm's GC seconds per mutator second in its collector blocks
    bound: float  # the collector's share bound when it was skipped (0 when measured)
    skipped: str  # why the collector was only piloted ("" when it was)
    collector_s: float  # engine seconds spent on collector blocks
    split: BudgetSplit  # the collector's planned share of the budget, and from what

    def note(self) -> str:
        """What the comparison says of its collector, in one line."""
        if self.skipped:
            return self.skipped
        assert self.collector is not None
        f = self.collector.factor
        how = "modeled at each arm's pace" if self.collector.modeled else f"observed ({self.collector.why})"
        return (
            f"collector factor {f.ratio:.4f} [{f.ci_low:.4f}, {f.ci_high:.4f}] ({how}; GC "
            f"{self.collector.shares['A']:.2%} and {self.collector.shares['B']:.2%} of the mutator's time)"
        )

    def to_dict(self) -> GcPacingRecord:
        return {
            "estimate": self.estimate.to_dict() if self.estimate else None,
            "mutator": self.mutator.estimate.to_dict() if self.mutator.estimate else None,
            "mutator_pairs": len(self.mutator.sums),
            "mutator_s": self.mutator.elapsed_s,
            "collector": self.collector.to_dict() if self.collector else None,
            "observed_shares": self.observed_shares,
            "bound": self.bound,
            "skipped": self.skipped,
            "collector_s": self.collector_s,
            "planned_share": self.split.share,
            "split": self.split.why,
        }


def _shares(blocks: Sequence[CollectorBlock]) -> dict[str, float]:
    return {
        arm: sum(b.gc_s for b in mine) / sum(b.mutator_s for b in mine)
        for arm in ("A", "B")
        if (mine := [b for b in blocks if b.arm == arm and b.mutator_s > 0])
    }


@dataclass(frozen=True)
class CollectorPart:
    """What collector blocks make of the collector: its factor (``factor``: unbounded where too few block pairs
    measured it), or a bound where GC is too small to matter (``bound``, ``skipped`` says so)."""

    estimate: CollectorEstimate | None
    factor: RatioEstimate | None
    bound: float
    skipped: str
    shares: dict[str, float]


def collector_block_steps(pilot: Sequence[CollectorBlock], budget_s: float) -> int:
    """Steps per collector block: :data:`GEN1_CYCLES_PER_BLOCK` of the slower arm's gen1 cycle in its busiest
    process (from the pilot's triggers and schedule), at least :data:`COLLECTOR_BLOCK_STEPS`, and no longer than
    ``budget_s`` allows for :data:`LEAST_BLOCK_PAIRS` pairs at the pilot's step time."""
    steps = sum(b.steps for b in pilot)
    step_s = sum(b.step_s for b in pilot) / steps if steps else 0.0
    longest = 0.0
    for arm in ("A", "B"):
        mine = [b for b in pilot if b.arm == arm]
        per_process: dict[int, float] = {}
        for b in mine:
            for pid, p in b.processes.items():
                per_process[pid] = per_process.get(pid, 0.0) + p.triggers * p.shares[1]
        arm_steps = sum(b.steps for b in mine)
        if per_process and max(per_process.values()) > 0:
            longest = max(longest, arm_steps / max(per_process.values()))
    wanted = max(COLLECTOR_BLOCK_STEPS, math.ceil(GEN1_CYCLES_PER_BLOCK * longest))
    affordable = int(budget_s / (2 * LEAST_BLOCK_PAIRS * step_s)) if step_s > 0 else wanted
    return max(COLLECTOR_BLOCK_STEPS, min(wanted, affordable))


def collector_share(gc_share: float) -> float:
    """The share of the budget the collector takes, the pilot's included, for the larger arm's GC share, where
    neither part's noise is known (:func:`split_share` where both are): the collector's SD scales with the GC share
    and the mutator's does not, so the best split is about ``s / (s + k)``; on the CPU yardstick (GC 12% and 9% of
    the mutator's time) the collector factor reached +-0.45% in 42 s and the mutator +-0.25% in 18 s, which puts
    ``k`` near 0.045 (a 73% share); at an H100's ~1% it is the pilot's alone. Between :data:`PILOT_SHARE` and
    :data:`MOST_SHARE`."""
    return min(max(gc_share / (gc_share + SHARE_AT_HALF), PILOT_SHARE), MOST_SHARE)


def split_share(collector_var_s: float, mutator_var_s: float) -> float:
    """The collector's share of the budget where the product's variance is least, from each part's log variance
    times the engine seconds it took (about constant for each): minimising ``v_c / c + v_m / (1 - c)`` gives
    ``c = sqrt(v_c) / (sqrt(v_c) + sqrt(v_m))``. Between :data:`PILOT_SHARE` and :data:`MOST_SHARE`."""
    c, m = math.sqrt(collector_var_s), math.sqrt(mutator_var_s)
    return min(max(c / (c + m), PILOT_SHARE), MOST_SHARE) if c + m > 0 else PILOT_SHARE


def mutator_variance(pilot: InterleaveResult, block_steps: int) -> float | None:
    """The mutator factor's log variance times its engine seconds, read from the collector pilot's blocks: inside
    each arm's block, adjacent runs of ``block_steps`` compared steps (GC taken out) paired as the mutator's
    comparison pairs its arms' blocks, an A/A of the ratio of sums (its delta-method variance). None with fewer than
    :data:`LEAST_PSEUDO_PAIRS` such pairs."""
    if pilot.batch_size is None or pilot.steps == 0:
        return None
    pairs = []
    for record in pilot.blocks:
        times = [dt - gc_s for dt, gc_s in compared_steps(record, pilot.batch_size)]
        for i in range(0, len(times) - 2 * block_steps + 1, 2 * block_steps):
            first, second = sum(times[i : i + block_steps]), sum(times[i + block_steps : i + 2 * block_steps])
            pairs.append(((block_steps, first), (block_steps, second)))
    if len(pairs) < LEAST_PSEUDO_PAIRS:
        return None
    seconds = len(pairs) * 2 * block_steps * pilot.elapsed_s / pilot.steps  # what as many real pairs take
    return log_ratio_variance(pairs) * seconds


def budget_split(
    pilot: InterleaveResult, blocks: Sequence[CollectorBlock], block_steps: int, min_effect: float
) -> BudgetSplit:
    """Where the pilot measured both parts' noise, the split that makes the product's interval narrowest
    (:func:`split_share`; a host whose steps are noisier gives the mutator more); else the GC-share rule
    (:func:`collector_share`)."""
    shares = _shares(blocks)
    rule = BudgetSplit(collector_share(max(shares.values(), default=0.0)), "the GC-share rule")
    factor = collector_part(blocks, min_effect).factor if block_pairs(blocks) >= 2 else None
    mutator = mutator_variance(pilot, block_steps)
    if factor is None or mutator is None or not (0 < factor.ci_low <= factor.ci_high < math.inf):
        return rule
    collector = (math.log(factor.ci_high / factor.ci_low) / (2 * 1.96)) ** 2 * pilot.elapsed_s
    per_minute = {part: 1.96 * math.sqrt(v / 60) for part, v in (("collector", collector), ("mutator", mutator))}
    return BudgetSplit(
        split_share(collector, mutator),
        f"the pilot's noise (+-{per_minute['collector']:.2%} collector, +-{per_minute['mutator']:.2%} mutator "
        "in an engine-minute)",
    )


def small_enough(shares: dict[str, float], min_effect: float) -> bool:
    """Whether both arms' GC shares lie below :data:`SKIP_BELOW` of ``min_effect``."""
    return len(shares) == 2 and max(shares.values()) < SKIP_BELOW * min_effect


def collector_part(blocks: Sequence[CollectorBlock], min_effect: float) -> CollectorPart:
    """The collector's factor from ``blocks``, or its bound where both arms' GC is too small to matter."""
    shares = _shares(blocks)
    if small_enough(shares, min_effect):
        largest = max(shares.values())
        skipped = (
            f"collector only piloted: GC was {shares['A']:.3%} (reference) and {shares['B']:.3%} (trial) of "
            f"the mutator's time alone, below a tenth of min_effect {min_effect:.1%}; however it is paced its "
            f"effect lies within +-{largest:.3%}, by which the interval is widened"
        )
        return CollectorPart(None, None, largest, skipped, shares)
    if block_pairs(blocks) < 2:
        return CollectorPart(None, unmeasured(), 0.0, "", shares)
    estimate = collector_estimate(blocks)
    return CollectorPart(estimate, estimate.factor, 0.0, "", estimate.shares)


def pacing_comparison(
    bench: Workbench,
    reference: StrategySet,
    trial: StrategySet,
    *,
    block_steps: int,
    budget_s: float,
    min_effect: float,
    seed: int,
    arrivals: bool = False,
) -> PacingComparison:
    """``trial`` against ``reference`` where either paces the collector, in ``budget_s`` of engine time (module
    docstring); the mutator's pairs at ``block_steps``, loaded as a step comparison is (``arrivals``)."""
    blocks, pilot = collector_blocks(
        bench, reference, trial, block_steps=COLLECTOR_BLOCK_STEPS, budget_s=PILOT_SHARE * budget_s, seed=seed
    )
    spent = pilot.elapsed_s
    shares = _shares(blocks)
    split = BudgetSplit(PILOT_SHARE, "the pilot's alone: GC too small to matter")
    if not small_enough(shares, min_effect):
        split = budget_split(pilot, blocks, block_steps, min_effect)
        left_s = max(split.share * budget_s - spent, 0.0)
        long_steps = collector_block_steps(blocks, left_s)
        more, rest = collector_blocks(bench, reference, trial, block_steps=long_steps, budget_s=left_s, seed=seed + 1)
        spent += rest.elapsed_s
        # The pilot's short blocks carry more of the other arm's leftovers: pooled only when as long.
        blocks = renumbered(more, blocks) + (blocks if long_steps == COLLECTOR_BLOCK_STEPS else [])
    part = collector_part(blocks, min_effect)
    mutator = interleaved_comparison(
        bench,
        reference,
        trial,
        block_steps=block_steps,
        budget_s=max(budget_s - spent, 0.0),
        seed=seed + 2,
        arrivals=arrivals,
        exclude_gc=True,
    )
    estimate = None
    if mutator.estimate is not None:
        factors = [mutator.estimate] + ([part.factor] if part.factor else [])
        estimate = product_estimate(factors, bound=part.bound, margin=min_effect)
    return PacingComparison(estimate, mutator, part.estimate, part.shares, part.bound, part.skipped, spent, split)
