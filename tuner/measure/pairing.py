"""Paired, repeated measurement of one trial against its reference arm: on the same running engine, or by restart
pairs where the arms need engines of their own.

Each pair runs both arms back to back in mirrored order (AB BA AB ..., the first drawn at random, seeded),
switching strategies in place, so carry-over from one arm to the next hits both arms alike. Restart pairs
(:func:`paired_runs` with ``restarts``) start a fresh engine for every arm of every pair instead, each measuring
one repetition: the engine start is then part of what a pair varies, as it is part of what differs between the
arms. After ``pairs.min`` pairs the paired ratio of the first objective is estimated after every pair, and
pairing stops once the CI is no wider than ``min_effect`` (:func:`tuner.stats.reached_precision`; precision only:
stopping on significance would inflate errors), else at ``pairs.max``. Throughput metrics are estimated as a
ratio of sums (tokens over wall time per repetition), the rest as the median of per-pair ratios.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tuner.config import Objective, Pairs, StartConfig
from tuner.measure.workbench import Workbench
from tuner.metrics import HIGHER_IS_BETTER, Attribution, flat_metrics
from tuner.plugin.protocol import ProcessReport
from tuner.stats import RatioEstimate, mirrored_order, paired_ratio, paired_ratio_of_sums, reached_precision


@dataclass
class Arms:
    """Per-repetition flat metrics of both arms, in pair order."""

    reference: list[dict[str, float]] = field(default_factory=list)
    trial: list[dict[str, float]] = field(default_factory=list)
    switch_s: list[float] = field(default_factory=list)
    telemetry: list[ProcessReport] = field(default_factory=list)  # processes of the last trial-arm repetition
    tails: dict[str, list[Attribution | None]] = field(default_factory=lambda: {"reference": [], "trial": []})
    """Each arm's tail-latency attributions (:func:`tuner.metrics.tail_attribution.attribute`), in pair order."""
    token_ids_match: bool = True
    start_s: dict[str, list[float]] = field(default_factory=lambda: {"reference": [], "trial": []})
    """Restart pairs only: each arm's engine starts, in pair order."""
    stop_s: dict[str, list[float]] = field(default_factory=lambda: {"reference": [], "trial": []})
    """Restart pairs only: each arm's engine stops (until none of its processes is left), in pair order."""

    def values(self, metric: str, arm: str) -> list[float]:
        return [m[metric] for m in getattr(self, arm)]

    def amount_and_time(self, rate: str, arm: str) -> tuple[list[float], list[float]]:
        """Per repetition of ``arm``: the amount a rate metric counts (rate x wall time) and the wall time."""
        return [m[rate] * m["wall_s"] for m in getattr(self, arm)], self.values("wall_s", arm)

    def ratio(self, metric: str, margin: float | None = None) -> RatioEstimate:
        """The paired trial/reference ratio of ``metric``: for a throughput, the ratio of summed amounts over
        summed wall time (its amount per repetition being rate x wall time); "no_difference" only within the
        equivalence ``margin``."""
        if metric in HIGHER_IS_BETTER:
            return paired_ratio_of_sums(
                *(value for arm in ("trial", "reference") for value in self.amount_and_time(metric, arm)),
                margin=margin,
            )
        return paired_ratio(
            self.values(metric, "trial"),
            self.values(metric, "reference"),
            higher_is_better=metric in HIGHER_IS_BETTER,
            margin=margin,
        )

    def stop_time(self) -> RatioEstimate | None:
        """Restart pairs: the paired ratio of mean engine stop time, trial over reference (a ratio of sums, one
        stop per arm and pair; below 1 the trial's engines stop faster), None before two pairs."""
        trial, reference = self.stop_s["trial"], self.stop_s["reference"]
        n = min(len(trial), len(reference))  # a pair cut short by an error has one arm's stop only
        if n < 2:
            return None
        once = [1.0] * n
        return paired_ratio_of_sums(once, trial[:n], once, reference[:n], higher_is_better=False)

    def medians(self, arm: str) -> dict[str, float]:
        rows = getattr(self, arm)
        return {k: statistics.median(r[k] for r in rows) for k in rows[0]} if rows else {}


def _switch(bench: Workbench, strategies: dict[str, dict[str, Any]], arms: Arms) -> None:
    started = time.perf_counter()
    bench.switch(strategies)
    arms.switch_s.append(time.perf_counter() - started)


@dataclass(frozen=True)
class Restarts:
    """Restart pairs: ``start`` brings up an engine as a :class:`StartConfig` says, ``stop`` closes it and says
    how long that took; the trial arm's engines start as ``trial`` says, the reference arm's as ``reference``."""

    start: Callable[[StartConfig], Workbench]
    stop: Callable[[], float]
    trial: StartConfig
    reference: StartConfig = field(default_factory=StartConfig)


def paired_runs(
    bench: Workbench | None,
    trial_strategies: dict[str, dict[str, Any]],
    pairs: Pairs,
    objective: Objective,
    min_effect: float | None,
    *,
    seed: int,
    first_pair: int = 0,
    on_pair: Callable[[int, RatioEstimate | None], bool] | None = None,
    restarts: Restarts | None = None,
    reference: dict[str, dict[str, Any]] | None = None,
) -> Arms:
    """Run pairs until the CI is no wider than ``min_effect`` (None: never) or ``pairs.max``; ``on_pair`` may
    return True to stop (pruning). ``first_pair``
    continues the mirrored order of an earlier batch with the same seed.

    Both arms switch in place on ``bench``; with ``restarts`` instead, every arm of every pair runs on an engine
    started for it and measures one repetition there (after the engine's warm-up): for what cannot be switched in
    place (engine args, vLLM's environment variables, strategies that cannot be undone), and stops it after
    that repetition, timing the stop (:meth:`Arms.stop_time`). The reference arm runs ``reference`` (vLLM as
    installed by default; a benchmark may hold a known load in both arms)."""
    if (bench is None) == (restarts is None):
        raise ValueError("paired_runs measures on a running bench or by restarts: give exactly one")
    arms = Arms()
    reference_tokens: list[list[int]] = []
    for index, trial_first in enumerate(mirrored_order(first_pair + pairs.max, seed=seed)[first_pair:]):
        order = [("reference", reference or {}), ("trial", trial_strategies)]
        if trial_first:
            order.reverse()
        for arm, strategies in order:
            label = f"pair {index + 1} {arm}"
            if restarts is not None:
                bench = restarts.start(restarts.trial if arm == "trial" else restarts.reference)
                arms.start_s[arm].append(bench.session.start_s)
                label += " (engine start)"
            assert bench is not None  # checked on entry
            _switch(bench, strategies, arms)
            _measure(bench, arm, label, arms, reference_tokens)
            if restarts is not None:  # each arm's engine stops before the next starts: its stop is timed alone
                arms.stop_s[arm].append(restarts.stop())
        if _pair_done(arms, index, pairs, objective, min_effect, on_pair):
            break
    return arms


def _measure(bench: Workbench, arm: str, label: str, arms: Arms, reference_tokens: list[list[int]]) -> None:
    """One repetition of ``arm`` into ``arms``; with greedy sampling, its tokens against the reference arm's
    first (``reference_tokens`` holds them once measured)."""
    rep = bench.repetition(label=label)
    getattr(arms, arm).append(flat_metrics(rep["metrics"]))
    arms.tails[arm].append(rep["tail"])
    if arm == "trial":
        arms.telemetry = rep["processes"]
    if bench.experiment.workload.sampling.temperature != 0:
        return
    if arm == "reference" and not reference_tokens:
        reference_tokens.extend(rep["token_ids"])
    elif arm == "trial" and reference_tokens:
        arms.token_ids_match &= rep["token_ids"] == reference_tokens


def _pair_done(
    arms: Arms,
    index: int,
    pairs: Pairs,
    objective: Objective,
    min_effect: float | None,
    on_pair: Callable[[int, RatioEstimate | None], bool] | None,
) -> bool:
    """After pair ``index``: whether to stop (``on_pair`` asked to, or the estimate reached its precision)."""
    estimate = arms.ratio(objective.metric, min_effect) if index + 1 >= pairs.min else None
    if on_pair is not None and on_pair(index + 1, estimate):
        return True
    return estimate is not None and min_effect is not None and reached_precision(estimate, min_effect)


def step_interleavable(strategies: dict[str, dict[str, Any]]) -> bool:
    """Whether a step-level comparison sees the set's effect in the engine processes: every strategy switches per
    step (the plugin switches EngineCore and every worker before each batch, whatever the executor)."""
    from strategies import strategy_classes

    return bool(strategies) and all(strategy_classes()[name].step_switchable for name in strategies)


def left_out_of_steps(strategies: dict[str, dict[str, Any]]) -> list[str]:
    """What a step-level comparison of ``strategies`` does not see: each one's effect in the front-end (engine steps
    time EngineCore and its workers; the front-end runs the reference set throughout a step-level comparison)."""
    from strategies import Role, strategy_classes

    return [
        f"{name} in the front-end" for name in sorted(strategies) if Role.FRONTEND in strategy_classes()[name].roles
    ]
