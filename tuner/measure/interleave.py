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
neighbours, in random order, so they see the same traffic on average). The estimand is the ratio of sums, summed
step seconds over steps per arm (mean step time), so a rare long pause weighs by its time. A screening spends its
time budget, stopping earlier only once its CI is no wider than ``min_effect``
(:func:`tuner.stats.reached_precision`); a confirmation look stops at ``target_pairs``. The front-end is not in a
step's time: it runs the reference set throughout.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tuner.measure.stalls import CompareStep, StallComparison, compare_stalls
from tuner.measure.workbench import Workbench, check_ran
from tuner.measure.worker_gc import (
    ArmPacing,
    GcPause,
    arm_pacing,
    engine_pauses,
    is_engine_process,
    is_worker_only,
    with_worker_gc,
    worker_pauses,
)
from tuner.metrics.table import HIGHER_IS_BETTER, STEP_LEVEL_METRICS
from tuner.plugin.protocol import (
    INTERLEAVE_DRAIN,
    INTERLEAVE_STOP,
    RESET,
    BlockRecord,
    ProcessReport,
    StrategySet,
    interleave_start,
)
from tuner.stats import RatioEstimate, paired_ratio_of_sums, reached_precision
from tuner.traffic.workload import replay_line

BlockSum = tuple[int, float]  # comparable steps, their seconds


@dataclass
class InterleaveResult:
    estimate: RatioEstimate | None  # step time B/A: < 1 means B is faster
    pairs: list[tuple[float, float]] = field(default_factory=list)  # (A, B) mean step seconds per pair
    sums: list[tuple[BlockSum, BlockSum]] = field(default_factory=list)  # (A, B) steps and seconds per pair
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
        return _ratio(self.sums, margin=None, confidence=confidence) if len(self.sums) >= 2 else None

    @property
    def mean_step_s(self) -> dict[str, float | None]:
        """Each arm's mean comparable step time (A: the reference, B: the trial)."""
        means: dict[str, float | None] = {}
        for arm, index in (("A", 0), ("B", 1)):
            steps = sum(pair[index][0] for pair in self.sums)
            means[arm] = sum(pair[index][1] for pair in self.sums) / steps if steps else None
        return means

    @property
    def verdict(self) -> str:
        return self.estimate.verdict if self.estimate is not None else "not_significant"

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate.to_dict() if self.estimate else None,
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


def _compared(block: BlockRecord) -> list[tuple[float, int, int, float]]:
    """(seconds, running, tokens, GC seconds) of the block's steps after its washout."""
    start = block["washout"]
    columns = (block["dt"], block["running"], block["tokens"], block["gc_s"])
    return list(zip(*(column[start:] for column in columns), strict=True))


ANY_WORK = 0
"""The comparable "batch size" of a comparison driven by arrivals: every step that scheduled tokens counts."""


def comparable_batch_size(blocks: list[BlockRecord]) -> int | None:
    """The most common running-request count among pure decode steps (tokens == running)."""
    sizes = Counter(r for b in blocks for _, r, t, _ in _compared(b) if r and t == r)
    return sizes.most_common(1)[0][0] if sizes else None


def compared_indices(block: BlockRecord, batch_size: int) -> list[int]:
    """Positions in the block of the steps that the comparison counts: after the washout, pure decode at
    ``batch_size``, or every step that scheduled tokens at :data:`ANY_WORK`."""
    start = block["washout"]
    counted = zip(block["running"][start:], block["tokens"][start:], strict=True)
    if batch_size == ANY_WORK:
        return [start + i for i, (_, t) in enumerate(counted) if t > 0]
    return [start + i for i, (r, t) in enumerate(counted) if r == batch_size and t == r]


def compared_steps(block: BlockRecord, batch_size: int) -> list[tuple[float, float]]:
    """(seconds, GC seconds) of the block's steps that the comparison counts (:func:`compared_indices`)."""
    return [(block["dt"][i], block["gc_s"][i]) for i in compared_indices(block, batch_size)]


def least_comparable(block_steps: int) -> int:
    """Comparable steps a block needs to count: half of its steps (one at one-step blocks)."""
    return max(1, (block_steps + 1) // 2)


def block_sum(block: BlockRecord, batch_size: int, min_steps: int, exclude_gc: bool = False) -> BlockSum | None:
    """The block's comparable steps and their summed time (None when too few); with ``exclude_gc`` the mutator's
    time: each step's without its GC."""
    steps = compared_steps(block, batch_size)
    if len(steps) < min_steps:
        return None
    return len(steps), sum(dt - gc_s if exclude_gc else dt for dt, gc_s in steps)


def block_mean(block: BlockRecord, batch_size: int, min_steps: int) -> float | None:
    """Mean step time of the block's comparable steps."""
    summed = block_sum(block, batch_size, min_steps)
    return summed[1] / summed[0] if summed else None


def pair_sums(
    blocks: list[BlockRecord], batch_size: int, min_steps: int, exclude_gc: bool = False
) -> list[tuple[BlockSum, BlockSum]]:
    """(A, B) steps and seconds of every pair whose two blocks both have enough comparable steps (``exclude_gc``:
    the mutator's seconds, :func:`block_sum`)."""
    by_pair: dict[int, dict[str, BlockSum | None]] = {}
    for block in blocks:
        by_pair.setdefault(block["pair"], {})[block["arm"]] = block_sum(block, batch_size, min_steps, exclude_gc)
    pairs = []
    for arms in by_pair.values():
        a, b = arms.get("A"), arms.get("B")
        if a is not None and b is not None:
            pairs.append((a, b))
    return pairs


def pair_means(blocks: list[BlockRecord], batch_size: int, min_steps: int) -> list[tuple[float, float]]:
    """(A, B) mean step time of every pair whose two blocks both have enough comparable steps."""
    return _means(pair_sums(blocks, batch_size, min_steps))


def _means(sums: list[tuple[BlockSum, BlockSum]]) -> list[tuple[float, float]]:
    return [(a[1] / a[0], b[1] / b[0]) for a, b in sums]


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
) -> InterleaveResult:
    """Compare two step-switchable strategy sets inside the running engine of ``bench`` for ``budget_s`` seconds,
    stopping earlier once ``min_pairs`` pairs give a CI no wider than ``min_effect`` (None: spend the budget; it is
    also the equivalence margin of the verdict), or with ``target_pairs`` as soon as that many pairs are measured
    (a confirmation look). With ``arrivals`` the engine is loaded by the workload's requests at their send times
    (its concurrency cap too), else by offline batches. With ``exclude_gc`` a step counts its time without the GC
    pauses on its critical path (EngineCore's and its workers'): the mutator of a GC-pacing comparison
    (:mod:`tuner.measure.gc_pacing`). Raises
    :class:`~tuner.measure.workbench.StrategyNotActive` when a strategy of either arm did not run in a process where it
    belongs (its counters did not move): no number from it."""
    session = bench.session
    bench.switch({})
    session.control(RESET)  # counters from here on prove the arms ran in every process
    start = interleave_start(arm_a, arm_b, block_steps=block_steps, seed=seed)
    session.control(start)
    blocks: list[BlockRecord] = []
    workload = bench.experiment.workload
    offsets, concurrency = (bench.offsets, workload.concurrency) if arrivals else ([0.0] * len(bench.requests), None)
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < budget_s:
            bench.fresh_prefix_cache()
            session.run(bench.requests, offsets, workload.sampling, concurrency)
            blocks += _drain(session.control(INTERLEAVE_DRAIN))
            sums = _sums(blocks, block_steps, arrivals, exclude_gc)
            if target_pairs is not None and len(sums) >= target_pairs:
                break
            # The exact test costs front-end seconds that the engine waits for: only when it may stop the loop.
            if min_effect is not None and len(sums) >= min_pairs and _may_stop(sums, min_effect):
                estimate = _estimate(blocks, block_steps, min_effect, arrivals, exclude_gc).estimate
                if estimate is not None and reached_precision(estimate, min_effect):
                    break
    finally:
        stopped = session.control(INTERLEAVE_STOP)
        blocks += _drain(stopped)
    check_ran(stopped, {*arm_a, *arm_b})
    result = _estimate(blocks, block_steps, min_effect, arrivals, exclude_gc)
    result.blocks = blocks
    result.gc_pauses = engine_pauses(stopped)
    result.paced = arm_pacing(stopped)
    result.worker_pauses_dropped = sum(r["gc"]["pauses"]["dropped"] for r in stopped if is_worker_only(r))
    result.driven_by = f"the workload's arrivals ({replay_line(workload)})" if arrivals else "offline batches"
    result.elapsed_s = time.perf_counter() - started
    engine = [r for r in stopped if is_engine_process(r)]
    result.gen0_collections = max((r["gc"]["collections"][0] for r in engine), default=0)
    result.gc_share = max((r["gc"]["gc_share"] for r in engine), default=0.0)
    result.washout = max((b["washout"] for b in blocks), default=0)
    if result.batch_size is not None:
        rule = bench.experiment.measure.stalls.rule()
        result.compared = [
            (b["arm"], b["pair"], *step) for b in blocks for step in compared_steps(b, result.batch_size)
        ]
        result.stalls = compare_stalls(result.compared, rule, seed=seed)
    return result


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
) -> list[tuple[float, float, float, float]]:
    """``wanted`` fresh step-level pairs (fewer when ``budget_s`` runs out) of ``trial`` against ``reference``, each
    as (trial steps, their seconds, reference steps, their seconds): a confirmation look's ratio-of-sums data,
    the engine loaded as in the screening (``arrivals``: by the workload's send times; ``exclude_gc``: the
    mutator's seconds)."""
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
    )
    return [(b[0], b[1], a[0], a[1]) for a, b in result.sums]


def _drain(reports: list[ProcessReport]) -> list[BlockRecord]:
    """The complete blocks EngineCore hands over, each step's GC raised by its workers' pauses inside it (the
    reports hold every pause since the comparison's reset)."""
    blocks = [b for r in reports for b in (r.get("interleave") or {"blocks": []})["blocks"]]
    return with_worker_gc(blocks, worker_pauses(reports))


def _sums(
    blocks: list[BlockRecord], block_steps: int, arrivals: bool, exclude_gc: bool = False
) -> list[tuple[BlockSum, BlockSum]]:
    size = ANY_WORK if arrivals else comparable_batch_size(blocks)
    return pair_sums(blocks, size, least_comparable(block_steps), exclude_gc) if size is not None else []


def _may_stop(sums: list[tuple[BlockSum, BlockSum]], width: float) -> bool:
    """A cheap look (normal approximation of the ratio of sums, with slack) before the exact test: whether the
    CI may already be no wider than ``width``."""
    if len(sums) < 6:
        return False
    return bool(2 * 1.96 * math.sqrt(log_ratio_variance(sums)) < 1.25 * width)


def log_ratio_influence(sums: list[tuple[BlockSum, BlockSum]]) -> np.ndarray:
    """Each pair's influence on the log of B's mean step time over A's (ratio of sums), from per-pair (steps,
    seconds)."""
    a = np.array([(x[0], x[1], y[0], y[1]) for x, y in sums], dtype=np.float64)
    totals = a.sum(axis=0)
    return np.asarray(a[:, 3] / totals[3] - a[:, 2] / totals[2] - a[:, 1] / totals[1] + a[:, 0] / totals[0])


def log_ratio_variance(sums: list[tuple[BlockSum, BlockSum]]) -> float:
    """The delta-method variance of that log ratio: the sum of the pairs' squared influence values."""
    return float(np.sum(log_ratio_influence(sums) ** 2))


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


def _estimate(
    blocks: list[BlockRecord], block_steps: int, margin: float | None, arrivals: bool = False, exclude_gc: bool = False
) -> InterleaveResult:
    size = ANY_WORK if arrivals and blocks else comparable_batch_size(blocks)
    sums = _sums(blocks, block_steps, arrivals, exclude_gc)
    estimate = _ratio(sums, margin=margin) if len(sums) >= 2 else None
    return InterleaveResult(
        estimate=estimate,
        pairs=_means(sums),
        sums=sums,
        steps=sum(len(b["dt"]) for b in blocks),
        batch_size=size,
        block_steps=block_steps,
    )


def step_estimate(result: InterleaveResult, metric: str) -> RatioEstimate | None:
    """A step-time ratio expressed for ``metric``: throughput scales as 1/step time, mean per-token latency as step
    time (None when the steps gave no estimate). Only those (:data:`STEP_LEVEL_METRICS`) are measured by steps;
    other metrics are refused."""
    if metric not in STEP_LEVEL_METRICS:
        raise ValueError(f"{metric} is not measured at step level")
    est = result.estimate
    if est is None or metric not in HIGHER_IS_BETTER:
        return est
    # the verdict already reads "better" for faster steps
    return replace(est, ratio=1 / est.ratio, ci_low=1 / est.ci_high, ci_high=1 / est.ci_low, higher_is_better=True)
