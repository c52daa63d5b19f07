"""Step-interleaved A/B comparison inside one running engine (the front-end side and the statistics).

The engine alternates arm A and arm B every ``block_steps`` steps (see :mod:`tuner.plugin.step_interleaver`)
while the front-end keeps it loaded with offline batches. Each pair of neighbouring blocks gives one ratio
of mean step time (B/A, settle time included). Only steps of like composition are compared: pure decode
steps (one token per running request) at the most common batch size; prefill steps and the drain at the end
of a batch would otherwise dominate the variance. The estimand is the ratio of sums, summed step seconds over
steps per arm (mean step time), so a rare long pause weighs by its time. Pairing stops once its CI is narrower
than the target resolution, at ``target_pairs``, or when the time budget is spent ("inconclusive" then).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tuner.measure import Workbench
from tuner.metrics import HIGHER_IS_BETTER, STEP_LEVEL_METRICS
from tuner.plugin.protocol import ProcessReport
from tuner.stats import RatioEstimate, is_settled, paired_ratio_of_sums

BlockSum = tuple[int, float]  # comparable steps, their seconds (settle included)


@dataclass
class InterleaveResult:
    estimate: RatioEstimate | None  # step time B/A: < 1 means B is faster
    pairs: list[tuple[float, float]] = field(default_factory=list)  # (A, B) mean step seconds per pair
    sums: list[tuple[BlockSum, BlockSum]] = field(default_factory=list)  # (A, B) steps and seconds per pair
    steps: int = 0
    elapsed_s: float = 0.0
    batch_size: int | None = None

    @property
    def verdict(self) -> str:
        return self.estimate.verdict if self.estimate is not None else "inconclusive"

    def to_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate.to_dict() if self.estimate else None,
            "pairs": len(self.pairs),
            "steps": self.steps,
            "elapsed_s": self.elapsed_s,
            "batch_size": self.batch_size,
            "verdict": self.verdict,
        }


def comparable_batch_size(blocks: list[dict[str, Any]]) -> int | None:
    """The most common running-request count among pure decode steps (tokens == running)."""
    sizes = Counter(r for b in blocks for r, t in zip(b["running"], b["tokens"], strict=True) if r and t == r)
    return sizes.most_common(1)[0][0] if sizes else None


def block_sum(block: dict[str, Any], batch_size: int, min_steps: int) -> BlockSum | None:
    """The block's comparable steps and their summed time, its settle time included (None when too few)."""
    times = [
        dt
        for dt, r, t in zip(block["dt"], block["running"], block["tokens"], strict=True)
        if r == batch_size and t == r
    ]
    if len(times) < min_steps:
        return None
    return len(times), sum(times) + block["settle_s"]


def block_mean(block: dict[str, Any], batch_size: int, min_steps: int) -> float | None:
    """Mean step time of the block's comparable steps, with the block's settle time spread over them."""
    summed = block_sum(block, batch_size, min_steps)
    return summed[1] / summed[0] if summed else None


def pair_sums(blocks: list[dict[str, Any]], batch_size: int, min_steps: int) -> list[tuple[BlockSum, BlockSum]]:
    """(A, B) steps and seconds of every pair whose two blocks both have enough comparable steps."""
    by_pair: dict[int, dict[str, BlockSum | None]] = {}
    for block in blocks:
        by_pair.setdefault(block["pair"], {})[block["arm"]] = block_sum(block, batch_size, min_steps)
    pairs = []
    for arms in by_pair.values():
        a, b = arms.get("A"), arms.get("B")
        if a is not None and b is not None:
            pairs.append((a, b))
    return pairs


def pair_means(blocks: list[dict[str, Any]], batch_size: int, min_steps: int) -> list[tuple[float, float]]:
    """(A, B) mean step time of every pair whose two blocks both have enough comparable steps."""
    return _means(pair_sums(blocks, batch_size, min_steps))


def _means(sums: list[tuple[BlockSum, BlockSum]]) -> list[tuple[float, float]]:
    return [(a[1] / a[0], b[1] / b[0]) for a, b in sums]


def interleaved_comparison(
    bench: Workbench,
    arm_a: dict[str, dict[str, Any]],
    arm_b: dict[str, dict[str, Any]],
    *,
    block_steps: int = 16,
    resolution: float = 0.02,
    budget_s: float = 120.0,
    min_pairs: int = 10,
    target_pairs: int | None = None,
    seed: int = 0,
) -> InterleaveResult:
    """Compare two step-switchable strategy sets inside the running engine of ``bench``; with ``target_pairs``
    stop as soon as that many pairs are measured (a confirmation look)."""
    session = bench.session
    bench.switch({})
    session.control({"op": "interleave_start", "a": arm_a, "b": arm_b, "block_steps": block_steps, "seed": seed})
    blocks: list[dict[str, Any]] = []
    result = InterleaveResult(estimate=None)
    started = time.perf_counter()
    try:
        while time.perf_counter() - started < budget_s:
            session.run(bench.requests, [0.0] * len(bench.requests), bench.experiment.workload.sampling)
            blocks += _drain(session.control({"op": "interleave_drain"}))
            result = _estimate(blocks, block_steps, resolution)
            if target_pairs is not None and len(result.pairs) >= target_pairs:
                break
            if (
                len(result.pairs) >= min_pairs
                and result.estimate is not None
                and is_settled(result.estimate, resolution)
            ):
                break
    finally:
        blocks += _drain(session.control({"op": "interleave_stop"}))
    result = _estimate(blocks, block_steps, resolution)
    result.elapsed_s = time.perf_counter() - started
    return result


def step_pairs(
    bench: Workbench,
    reference: dict[str, dict[str, Any]],
    trial: dict[str, dict[str, Any]],
    *,
    wanted: int,
    budget_s: float,
    block_steps: int,
    seed: int,
) -> list[tuple[float, float, float, float]]:
    """``wanted`` fresh step-level pairs (fewer when ``budget_s`` runs out) of ``trial`` against ``reference``, each
    as (trial steps, their seconds, reference steps, their seconds): a confirmation look's ratio-of-sums data."""
    result = interleaved_comparison(
        bench,
        reference,
        trial,
        block_steps=block_steps,
        resolution=1.0,
        budget_s=budget_s,
        min_pairs=wanted,
        target_pairs=wanted,
        seed=seed,
    )
    return [(b[0], b[1], a[0], a[1]) for a, b in result.sums]


def _drain(reports: list[ProcessReport]) -> list[dict[str, Any]]:
    return [b for r in reports for b in (r.get("interleave") or {}).get("blocks", [])]


def _estimate(blocks: list[dict[str, Any]], block_steps: int, resolution: float) -> InterleaveResult:
    size = comparable_batch_size(blocks)
    sums = pair_sums(blocks, size, max(2, block_steps // 2)) if size else []
    estimate = None
    if len(sums) >= 2:
        estimate = paired_ratio_of_sums(
            [p[1][0] for p in sums],
            [p[1][1] for p in sums],
            [p[0][0] for p in sums],
            [p[0][1] for p in sums],
            higher_is_better=False,
            resolution=resolution,
        )
    return InterleaveResult(
        estimate=estimate, pairs=_means(sums), sums=sums, steps=sum(len(b["dt"]) for b in blocks), batch_size=size
    )


def step_ratio(result: InterleaveResult, metric: str) -> dict[str, Any]:
    """A step-time ratio expressed for ``metric``: throughput scales as 1/step time, mean per-token latency as step
    time. Only those (:data:`STEP_LEVEL_METRICS`) are measured by steps; other metrics are refused."""
    if metric not in STEP_LEVEL_METRICS:
        raise ValueError(f"{metric} is not measured at step level")
    if result.estimate is None:
        return {"ratio": None, "ci_low": None, "ci_high": None, "verdict": "inconclusive", "source": "steps"}
    est = result.estimate
    data = est.to_dict()
    if metric in HIGHER_IS_BETTER:  # the verdict already reads "better" for faster steps
        data.update(ratio=1 / est.ratio, ci_low=1 / est.ci_high, ci_high=1 / est.ci_low, higher_is_better=True)
    return {**data, "source": "steps"}
