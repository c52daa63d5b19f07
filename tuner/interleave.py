"""Step-interleaved A/B comparison inside one running engine (the front-end side and the statistics).

The engine alternates arm A and arm B every ``block_steps`` steps (see :mod:`tuner.interleave_engine`)
while the front-end keeps it loaded with offline batches. Each pair of neighbouring blocks gives one ratio
of mean step time (B/A, settle time included). Only steps of like composition are compared: pure decode
steps (one token per running request) at the most common batch size; prefill steps and the drain at the end
of a batch would otherwise dominate the variance. Pairing stops once the geometric-mean ratio's CI is
narrower than the target resolution or the time budget is spent ("inconclusive" then).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tuner.measure import Workbench
from tuner.stats import RatioEstimate, is_settled, paired_ratio


@dataclass
class InterleaveResult:
    estimate: RatioEstimate | None  # step time B/A: < 1 means B is faster
    pairs: list[tuple[float, float]] = field(default_factory=list)  # (A, B) mean step seconds per pair
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


def block_mean(block: dict[str, Any], batch_size: int, min_steps: int) -> float | None:
    """Mean step time of the block's comparable steps, with the block's settle time spread over them."""
    times = [
        dt
        for dt, r, t in zip(block["dt"], block["running"], block["tokens"], strict=True)
        if r == batch_size and t == r
    ]
    if len(times) < min_steps:
        return None
    return (sum(times) + block["settle_s"]) / len(times)


def pair_means(blocks: list[dict[str, Any]], batch_size: int, min_steps: int) -> list[tuple[float, float]]:
    """(A, B) mean step time of every pair whose two blocks both have enough comparable steps."""
    by_pair: dict[int, dict[str, float | None]] = {}
    for block in blocks:
        by_pair.setdefault(block["pair"], {})[block["arm"]] = block_mean(block, batch_size, min_steps)
    pairs = []
    for arms in by_pair.values():
        a, b = arms.get("A"), arms.get("B")
        if a is not None and b is not None:
            pairs.append((a, b))
    return pairs


def interleaved_comparison(
    bench: Workbench,
    arm_a: dict[str, dict[str, Any]],
    arm_b: dict[str, dict[str, Any]],
    *,
    block_steps: int = 16,
    resolution: float = 0.02,
    budget_s: float = 120.0,
    min_pairs: int = 10,
    seed: int = 0,
) -> InterleaveResult:
    """Compare two step-switchable strategy sets inside the running engine of ``bench``."""
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


def _drain(reports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for r in reports if r.get("interleave") for b in r["interleave"].get("blocks", [])]


def _estimate(blocks: list[dict[str, Any]], block_steps: int, resolution: float) -> InterleaveResult:
    size = comparable_batch_size(blocks)
    pairs = pair_means(blocks, size, max(2, block_steps // 2)) if size else []
    estimate = None
    if len(pairs) >= 2:
        estimate = paired_ratio(
            [b for _, b in pairs],
            [a for a, _ in pairs],
            higher_is_better=False,
            statistic="geomean",
            resolution=resolution,
        )
    return InterleaveResult(estimate=estimate, pairs=pairs, steps=sum(len(b["dt"]) for b in blocks), batch_size=size)


def step_ratio(result: InterleaveResult, metric: str) -> dict[str, Any]:
    """A step-time ratio expressed for ``metric``: throughput scales as 1/step time, latency as step time."""
    from tuner.metrics import HIGHER_IS_BETTER

    if result.estimate is None:
        return {"ratio": None, "ci_low": None, "ci_high": None, "verdict": "inconclusive", "source": "steps"}
    est = result.estimate
    data = est.to_dict()
    if metric in HIGHER_IS_BETTER:  # the verdict already reads "better" for faster steps
        data.update(ratio=1 / est.ratio, ci_low=1 / est.ci_high, ci_high=1 / est.ci_low, higher_is_better=True)
    return {**data, "source": "steps"}
