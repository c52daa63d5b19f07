"""Paired, repeated measurement of one trial against its reference arm on the same running engine.

Each pair runs both arms back to back in a random order (AB or BA, seeded), switching strategies in place.
After ``pairs.min`` pairs the paired ratio of the first objective is estimated after every pair, and
pairing stops once the answer is settled (a significant difference, or a CI narrower than the resolution).
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.measure import Workbench
from tuner.metrics import HIGHER_IS_BETTER, flat_metrics
from tuner.search_space import Objective, Pairs
from tuner.stats import RatioEstimate, is_settled, paired_ratio


@dataclass
class Arms:
    """Per-repetition flat metrics of both arms, in pair order."""

    reference: list[dict[str, float]] = field(default_factory=list)
    trial: list[dict[str, float]] = field(default_factory=list)
    switch_s: list[float] = field(default_factory=list)
    telemetry: list[dict[str, Any]] = field(default_factory=list)  # processes of the last trial-arm repetition
    token_ids_match: bool = True
    step_result: Any = None  # an InterleaveResult when the verdict came from in-engine step interleaving

    def values(self, metric: str, arm: str) -> list[float]:
        return [m[metric] for m in getattr(self, arm)]

    def ratio(self, metric: str, resolution: float | None = None) -> RatioEstimate:
        return paired_ratio(
            self.values(metric, "trial"),
            self.values(metric, "reference"),
            higher_is_better=metric in HIGHER_IS_BETTER,
            resolution=resolution,
        )

    def medians(self, arm: str) -> dict[str, float]:
        rows = getattr(self, arm)
        return {k: statistics.median(r[k] for r in rows) for k in rows[0]} if rows else {}


def _switch(bench: Workbench, strategies: dict[str, dict[str, Any]], arms: Arms) -> None:
    started = time.perf_counter()
    bench.switch(strategies)
    arms.switch_s.append(time.perf_counter() - started)


def measure_pairs(
    bench: Workbench,
    trial_strategies: dict[str, dict[str, Any]],
    pairs: Pairs,
    objective: Objective,
    resolution: float,
    *,
    seed: int,
    on_pair: Callable[[int, RatioEstimate | None], bool] | None = None,
) -> Arms:
    """Run pairs until settled or ``pairs.max``; ``on_pair`` may return True to stop (pruning)."""
    rng = random.Random(seed)
    arms = Arms()
    reference_tokens: list[list[int]] | None = None
    for index in range(pairs.max):
        order = [("reference", {}), ("trial", trial_strategies)]
        rng.shuffle(order)
        for arm, strategies in order:
            _switch(bench, strategies, arms)
            rep = bench.repetition(label=f"pair {index + 1} {arm}")
            getattr(arms, arm).append(flat_metrics(rep["metrics"]))
            if arm == "trial":
                arms.telemetry = rep["processes"]
            if bench.experiment.workload.sampling.temperature == 0 and arm == "reference":
                reference_tokens = reference_tokens or rep["token_ids"]
            elif bench.experiment.workload.sampling.temperature == 0 and reference_tokens is not None:
                arms.token_ids_match &= rep["token_ids"] == reference_tokens
        estimate = arms.ratio(objective.metric, resolution) if index + 1 >= pairs.min else None
        if on_pair is not None and on_pair(index + 1, estimate):
            break
        if estimate is not None and is_settled(estimate, resolution):
            break
    return arms


def step_interleavable(strategies: dict[str, dict[str, Any]], reports: list[dict[str, Any]]) -> bool:
    """Whether in-engine interleaving sees the whole effect: every strategy switches per step and every
    process it touches is the EngineCore process itself (a uni executor), where the steps are switched."""
    from strategies import strategy_classes

    if not strategies:
        return False
    core_pids = {r["pid"] for r in reports if "engine_core" in r["roles"]}
    for name in strategies:
        cls = strategy_classes()[name]
        if not cls.step_switchable:
            return False
        touched = {r["pid"] for r in reports if set(r["roles"]) & {role.value for role in cls.roles}}
        if not touched <= core_pids:
            return False
    return True
