"""Step-interleaved A/B comparison inside one running engine (the front-end side and the statistics).

The engine alternates arm A and arm B every ``block_steps`` steps, each batch carrying its arm to every engine
process (see :mod:`tuner.plugin.step_interleaver`), while the front-end keeps it loaded: with offline batches (all
requests at once), or, with ``arrivals``, with the workload's own requests sent at their times (a trace's recorded
times or a rate), so that the steps compared are the steps that traffic makes. Each pair of neighbouring blocks
gives one pair of (steps, seconds); a step's time is its own call's, so the engine idling
between steps is charged to neither arm. Offline, only steps of like composition are compared: pure decode steps
(one token per running request) at the most common batch size, after the block's washout steps; prefill steps and
the drain at the end of a batch would otherwise dominate the variance. Driven by arrivals, every step that did
work is compared (the traffic's mix of prefill and decode is what is measured; the two blocks of a pair are
neighbours, in random order, so they see the same traffic on average); which steps count is
:mod:`tuner.measure.step_sums`'s. The estimand is a ratio of sums, summed step seconds over steps per arm. By
default (``estimand="body"``) it is the **body's**: each step's time up to a cap at twice the running median, with
the whole time (pauses included) as the guard the verdict also needs (:mod:`tuner.stats.body`), because the rare
pauses carry most of the plain mean's noise. The plain mean (``"mean"``) weighs a rare long pause by its time; it is
what a comparison driven by arrivals (steps of every composition, whose long prefill steps are no pauses) and the
mutator of a GC-pacing comparison (no pauses left) measure. A screening spends its time budget (and runs past it
until it holds the two pairs an estimate needs), stopping earlier only once its CI is no wider than ``min_effect``
(:func:`tuner.stats.reached_precision`); a confirmation look stops at ``target_pairs``. The front-end is not in a
step's time: it runs the reference set throughout.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from typing import Literal

from tuner.measure.engine_facts import EngineFacts
from tuner.measure.stalls import CompareStep, StallComparison, compare_stalls
from tuner.measure.step_sums import (
    ANY_WORK,
    BlockSum,
    body_pair_sums,
    comparable_batch_size,
    compared_steps,
    least_comparable,
    log_ratio_variance,
    means_of,
    pair_sums,
)
from tuner.measure.workbench import Workbench, check_ran
from tuner.measure.worker_gc import ArmPacing, GcPause, with_worker_gc, worker_pauses
from tuner.measure.workload import replay_line
from tuner.metrics import HIGHER_IS_BETTER, STEP_LEVEL_METRICS, Pair
from tuner.plugin.protocol import (
    INTERLEAVE_DRAIN,
    INTERLEAVE_STOP,
    RESET,
    BlockRecord,
    ProcessReport,
    StrategySet,
    interleave_start,
)
from tuner.records import StepComparisonRecord
from tuner.stats import (
    GUARD_MARGIN,
    RatioEstimate,
    StallRule,
    Verdict,
    WholeGuard,
    paired_ratio_of_sums,
    reached_precision,
)

Estimand = Literal["body", "mean"]
PairSums = tuple[BlockSum, BlockSum]  # (A, B) steps and seconds of one pair

LEAST_PAIRS = 2
"""The fewest pairs an estimate is made from; a comparison runs past its budget until it holds them."""
OVERRUN_S = 60.0
"""How long past its budget a comparison waits for :data:`LEAST_PAIRS`: long blocks on a slow engine may not fit a
small share of a budget (a GC pilot's 32-step pair at a 20 ms step outlasts 0.8 s), and a comparison that ended
before its second arm's first block ran would blame that arm's strategies for never running."""


@dataclass(frozen=True)
class InterleaveResult:
    estimate: RatioEstimate | None  # the estimand's step time B/A: < 1 means B is faster
    pairs: list[tuple[float, float]] = field(default_factory=list)  # (A, B) the estimand's mean step per pair
    sums: list[tuple[BlockSum, BlockSum]] = field(default_factory=list)  # (A, B) steps and the estimand's seconds
    whole: list[tuple[BlockSum, BlockSum]] = field(default_factory=list)  # the same pairs' whole seconds
    estimand: Estimand = "mean"  # body: each step up to its cap, its whole time the guard; mean: the plain mean
    guard: WholeGuard | None = None  # the body's: the whole time read against a non-inferiority margin
    steps: int = 0
    elapsed_s: float = 0.0
    batch_size: int | None = None
    block_steps: int = 0
    washout: int = 0  # leading steps per block not compared (1 with a batch queue)
    gen0_collections: int = 0  # the most any engine process made during the comparison
    gc_share: float = 0.0  # the largest share of time any engine process spent collecting
    grain: str = ""  # why this block length (see tuner.measure.grain)
    driven_by: str = "offline batches"  # what loaded the engine: offline batches, or the workload's arrivals
    left_out: list[str] = field(default_factory=list)  # what the engine's steps do not see (front-end parts)
    compared: list[CompareStep] = field(default_factory=list)  # every compared step, in the order they ran
    blocks: list[BlockRecord] = field(default_factory=list)  # as EngineCore timed them, workers' GC joined
    gc_pauses: list[GcPause] = field(default_factory=list)  # every engine process's collections, in time order
    paced: dict[int, ArmPacing] = field(default_factory=dict)  # per engine process: each arm's thresholds, allocations
    worker_pauses_dropped: int = 0  # worker GC pauses the probes' rings no longer held: not in any step's GC time
    stalls: StallComparison | None = None  # the arms' stall rates and their paired difference

    def estimate_at(self, confidence: float) -> RatioEstimate | None:
        """The same step-time ratio of sums at another confidence (None below two pairs)."""
        return _ratio(self.sums, margin=None, confidence=confidence) if len(self.sums) >= LEAST_PAIRS else None

    @property
    def mean_step_s(self) -> dict[str, float | None]:
        """Each arm's mean comparable step time as the estimand counts it (A: the reference, B: the trial): a
        known delay per step moves the estimate by its share of this (the body's: each step up to its cap)."""
        means: dict[str, float | None] = {}
        for arm, index in (("A", 0), ("B", 1)):
            steps = sum(pair[index][0] for pair in self.sums)
            means[arm] = sum(pair[index][1] for pair in self.sums) / steps if steps else None
        return means

    @property
    def verdict(self) -> Verdict:
        """The estimate's verdict; the body's also needs its guard: "better" only where the whole time is shown
        not worse by the guard's margin, "no difference" only where the whole time is equivalent too (a change in
        the pauses alone is a difference), "worse" wherever the whole time is shown worse by more than the
        margin."""
        verdict = self.estimate.verdict if self.estimate is not None else "not_significant"
        if self.guard is None:
            return verdict
        if self.guard.breached:
            return "worse"
        if verdict == "better" and not self.guard.holds:
            return "not_significant"
        if verdict == "no_difference" and self.guard.whole.verdict != "no_difference":
            return "not_significant"
        return verdict

    def to_dict(self) -> StepComparisonRecord:
        return {
            "estimate": self.estimate.to_dict() if self.estimate else None,
            "estimand": self.estimand,
            "guard": self.guard.to_dict() if self.guard else None,
            "pairs": len(self.pairs),
            "steps": self.steps,
            "elapsed_s": self.elapsed_s,
            "batch_size": self.batch_size,
            "block_steps": self.block_steps,
            "washout": self.washout,
            "gen0_collections": self.gen0_collections,
            "gc_share": self.gc_share,
            "mean_step_s": self.mean_step_s,
            "grain": self.grain,
            "driven_by": self.driven_by,
            "left_out": self.left_out,
            "stalls": self.stalls.to_dict() if self.stalls else None,
            "verdict": self.verdict,
        }


def interleaved_comparison(
    bench: Workbench,
    arm_a: StrategySet,
    arm_b: StrategySet,
    *,
    block_steps: int,
    min_effect: float | None = None,
    budget_s: float = 120.0,
    min_pairs: int = 10,
    target_pairs: int | None = None,
    seed: int = 0,
    arrivals: bool = False,
    exclude_gc: bool = False,
    estimand: Estimand = "body",
) -> InterleaveResult:
    """Compare two step-switchable strategy sets inside the running engine of ``bench`` for ``budget_s`` seconds (past
    them until it holds :data:`LEAST_PAIRS` pairs), stopping earlier once ``min_pairs`` pairs give a CI no wider than
    ``min_effect`` (None: spend the budget; it is also the equivalence margin of the verdict), or with ``target_pairs``
    as soon as that many pairs are measured (a confirmation look). With ``arrivals`` the engine is loaded by the
    workload's requests at their send times (its concurrency cap too), else by offline batches. With ``exclude_gc`` a
    step counts its time without the GC pauses on its critical path (EngineCore's and its workers'): the mutator of a
    GC-pacing comparison (:mod:`tuner.measure.gc_pacing`). ``estimand`` (the body, guarded, or the plain mean) holds
    offline; arrivals and the mutator are measured by the plain mean. Raises
    :class:`~tuner.measure.workbench.StrategyNotActive` when a strategy of either arm did not run in a process where it
    belongs (its counters did not move): no number from it."""
    counting = Counting(block_steps, arrivals, exclude_gc, "mean" if arrivals or exclude_gc else estimand)
    session = bench.session
    bench.switch({})
    session.control(RESET)  # counters from here on prove the arms ran in every process
    start = interleave_start(arm_a, arm_b, block_steps=block_steps, seed=seed)
    session.control(start)
    blocks: list[BlockRecord] = []
    workload = bench.experiment.workload
    offsets, concurrency = (bench.offsets, workload.concurrency) if arrivals else ([0.0] * len(bench.requests), None)
    started = time.perf_counter()
    sums: list[PairSums] = []
    try:
        while _goes_on(time.perf_counter() - started, budget_s, len(sums)):
            bench.fresh_prefix_cache()
            session.run(bench.requests, offsets, workload.sampling, concurrency)
            blocks += _drain(session.control(INTERLEAVE_DRAIN))
            sums = counting.sums(blocks)  # the estimand's alone: the whole time is read once, at the end
            if target_pairs is not None and len(sums) >= target_pairs:
                break
            # The exact test costs front-end seconds that the engine waits for: only when it may stop the loop.
            if (
                min_effect is not None
                and len(sums) >= min_pairs
                and _may_stop(sums, min_effect)
                and reached_precision(_ratio(sums, margin=min_effect), min_effect)
            ):
                break
    finally:
        stopped = session.control(INTERLEAVE_STOP)
        blocks += _drain(stopped)
    check_ran(stopped, {*arm_a, *arm_b})
    driven_by = f"the workload's arrivals ({replay_line(workload)})" if arrivals else "offline batches"
    facts = EngineFacts.of(stopped, elapsed_s=time.perf_counter() - started, driven_by=driven_by)
    return counting.result(blocks, min_effect, facts, bench.experiment.measure.stalls.rule(), seed=seed)


def step_pairs(
    bench: Workbench,
    reference: StrategySet,
    trial: StrategySet,
    *,
    wanted: int,
    budget_s: float,
    block_steps: int,
    seed: int,
    arrivals: bool = False,
    exclude_gc: bool = False,
    estimand: Estimand = "body",
) -> list[Pair]:
    """``wanted`` fresh step-level pairs (fewer, but at least :data:`LEAST_PAIRS`, when ``budget_s`` runs out) of
    ``trial`` against ``reference``, each as (trial steps, their seconds, reference steps, their seconds): a
    confirmation look's ratio-of-sums data, the engine loaded and its steps counted as in the screening (``arrivals``:
    by the workload's send times; ``exclude_gc``: the mutator's seconds; ``estimand``). Where the body is measured, the
    seconds are the body's and each pair carries the arms' whole seconds after them, for the guard
    (:data:`tuner.metrics.pairs.Pair`)."""
    result = interleaved_comparison(
        bench,
        reference,
        trial,
        block_steps=block_steps,
        budget_s=budget_s,
        min_pairs=wanted,
        target_pairs=wanted,
        seed=seed,
        arrivals=arrivals,
        exclude_gc=exclude_gc,
        estimand=estimand,
    )
    if result.estimand == "mean":
        return [(b[0], b[1], a[0], a[1]) for a, b in result.sums]
    return [(b[0], b[1], a[0], a[1], wb[1], wa[1]) for (a, b), (wa, wb) in zip(result.sums, result.whole, strict=True)]


def _goes_on(elapsed_s: float, budget_s: float, pairs: int) -> bool:
    """Whether a comparison runs another batch: within its budget, or past it until it holds :data:`LEAST_PAIRS`
    (for at most :data:`OVERRUN_S`)."""
    return elapsed_s < budget_s or (pairs < LEAST_PAIRS and elapsed_s < budget_s + OVERRUN_S)


def _drain(reports: list[ProcessReport]) -> list[BlockRecord]:
    """The complete blocks EngineCore hands over, each step's GC raised by its workers' pauses inside it (the
    reports hold every pause since the comparison's reset)."""
    blocks = [b for r in reports for b in (r.get("interleave") or {"blocks": []})["blocks"]]
    return with_worker_gc(blocks, worker_pauses(reports))


@dataclass(frozen=True)
class Counting:
    """Which steps a comparison counts (:mod:`tuner.measure.step_sums`) and what of their time: the estimand's
    seconds (the mutator's where GC is excluded) while it runs, and the same pairs' whole seconds in its result."""

    block_steps: int
    arrivals: bool = False
    exclude_gc: bool = False
    estimand: Estimand = "mean"

    def batch_size(self, blocks: list[BlockRecord]) -> int | None:
        return ANY_WORK if self.arrivals and blocks else comparable_batch_size(blocks)

    def sums(self, blocks: list[BlockRecord], size: int | None = None) -> list[PairSums]:
        """Each pair's (A, B) steps and the estimand's seconds (``size``: the comparable batch size, when known)."""
        size = self.batch_size(blocks) if size is None else size
        if size is None:
            return []
        least = least_comparable(self.block_steps)
        if self.estimand == "body":
            return [((a[0], a[1]), (b[0], b[1])) for a, b in body_pair_sums(blocks, size, least)]
        return pair_sums(blocks, size, least, self.exclude_gc)

    def result(
        self,
        blocks: list[BlockRecord],
        margin: float | None,
        facts: EngineFacts | None = None,
        stall_rule: StallRule | None = None,
        *,
        seed: int = 0,
    ) -> InterleaveResult:
        """The comparison from ``blocks``: its estimate (and the body's guard), the same pairs' whole seconds, what
        the engine said of it (``facts``) and, with a ``stall_rule``, its stalls."""
        size = self.batch_size(blocks)
        sums = self.sums(blocks, size)
        if self.estimand == "mean" and not self.exclude_gc:
            whole = sums
        else:
            whole = pair_sums(blocks, size, least_comparable(self.block_steps)) if size is not None else []
        estimate = _ratio(sums, margin=margin) if len(sums) >= LEAST_PAIRS else None
        guard = None
        if self.estimand == "body" and len(whole) >= LEAST_PAIRS:
            guard = WholeGuard(_ratio(whole, margin=margin), GUARD_MARGIN)
        facts = facts or EngineFacts()
        compared = (
            [(b["arm"], b["pair"], *step) for b in blocks for step in compared_steps(b, size)]
            if size is not None and stall_rule is not None
            else []
        )
        return InterleaveResult(
            estimate=estimate,
            pairs=means_of(sums),
            sums=sums,
            whole=whole,
            estimand=self.estimand,
            guard=guard,
            steps=sum(len(b["dt"]) for b in blocks),
            elapsed_s=facts.elapsed_s,
            batch_size=size,
            block_steps=self.block_steps,
            washout=max((b["washout"] for b in blocks), default=0),
            gen0_collections=facts.gen0_collections,
            gc_share=facts.gc_share,
            driven_by=facts.driven_by,
            compared=compared,
            blocks=blocks,
            gc_pauses=facts.gc_pauses,
            paced=facts.paced,
            worker_pauses_dropped=facts.worker_pauses_dropped,
            stalls=compare_stalls(compared, stall_rule, seed=seed) if size is not None and stall_rule else None,
        )


def _may_stop(sums: list[tuple[BlockSum, BlockSum]], width: float) -> bool:
    """A cheap look (normal approximation of the ratio of sums, with slack) before the exact test: whether the
    CI may already be no wider than ``width``."""
    if len(sums) < 6:
        return False
    return bool(2 * 1.96 * math.sqrt(log_ratio_variance(sums)) < 1.25 * width)


def _ratio(sums: list[tuple[BlockSum, BlockSum]], *, margin: float | None, confidence: float = 0.95) -> RatioEstimate:
    """B's mean step time over A's (ratio of sums), with the paired sign-flip test and its inverted CI."""
    return paired_ratio_of_sums(
        [b[0] for _, b in sums],
        [b[1] for _, b in sums],
        [a[0] for a, _ in sums],
        [a[1] for a, _ in sums],
        higher_is_better=False,
        margin=margin,
        confidence=confidence,
    )


def step_estimate(result: InterleaveResult, metric: str) -> RatioEstimate | None:
    """A step-time ratio expressed for ``metric``: throughput scales as 1/step time, mean per-token latency as step
    time (None when the steps gave no estimate). Only those (:data:`STEP_LEVEL_METRICS`) are measured by steps;
    other metrics are refused."""
    if metric not in STEP_LEVEL_METRICS:
        raise ValueError(f"{metric} is not measured at step level")
    est = result.estimate
    if est is None:
        return None
    est = replace(est, verdict=result.verdict)  # the body's needs its guard too
    if metric not in HIGHER_IS_BETTER:
        return est
    # the verdict already reads "better" for faster steps
    return replace(est, ratio=1 / est.ratio, ci_low=1 / est.ci_high, ci_high=1 / est.ci_low, higher_is_better=True)
