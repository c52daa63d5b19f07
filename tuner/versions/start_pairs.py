"""The decisions of ``tuner versions``, as pure functions on plain data (no engine, no subprocess).

Two vLLM installs (two Python interpreters) run the same experiment, one engine start at a time, in mirrored
order (AB BA AB ..., :func:`tuner.stats.mirrored_order`): start pair i runs both arms back to back, so host drift
and the residue one engine leaves for the next hit both arms alike. The unit of pairing is the start pair: each
start's repetitions are summed (tokens and wall seconds), and the ratio B/A is estimated exactly as the sweep's
run level does it (:func:`tuner.metrics.pairs.run_pair`, :func:`tuner.metrics.pairs.pairs_estimate`: a ratio of
sums for throughput, its bootstrap CI and sign-flip test) over the start pairs. Pairing single repetitions across
starts instead would be wrong: the repetitions of one start share that start's conditions (the host's load in
those seconds, the engine instance), which moved throughput by 23% between two starts of the same install here,
so an A/A comparison of 6 repetition pairs from one start pair called a difference (p = 0.03).

The sign-flip test cannot reach p < 0.05 with fewer than 6 start pairs (its smallest p is 2^(1-n)), so fewer
starts never call a change; the printed power says how many start pairs a given change needs. The O'Brien-Fleming
looks and Holm of the sweep's confirmation do not apply: there is no selection among candidates and no early
stopping, only a fixed-size two-sided comparison of two named installs (alpha 5%).

With more than two installs (a sequence of versions) :func:`bisect` locates the step that changed the metric:
compare the endpoints, then halve.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tuner.metrics import HIGHER_IS_BETTER, Pair, flat_metrics, pairs_estimate, run_pair
from tuner.stats import MIN_SIGN_FLIP_PAIRS, RatioEstimate, mde, mirrored_order, pairs_needed

Arm = Literal["A", "B"]
MIN_STARTS = MIN_SIGN_FLIP_PAIRS  # start pairs for the two-sided sign-flip test to reach p < 0.05 at all


@dataclass(frozen=True)
class Start:
    """One engine start in the plan: its start pair and arm."""

    pair: int
    arm: Arm


def start_order(n_pairs: int, *, seed: int) -> list[Start]:
    """The engine starts of ``n_pairs`` start pairs in mirrored order (AB BA AB ..., the first arm seeded)."""
    return [
        Start(i, arm)
        for i, b_first in enumerate(mirrored_order(n_pairs, seed=seed))
        for arm in (("B", "A") if b_first else ("A", "B"))
    ]


@dataclass(frozen=True)
class StartResult:
    """What one engine start measured: its repetitions' flat metrics and where its time went."""

    start: Start
    repetitions: list[dict[str, float]]
    process_s: float  # the whole subprocess: interpreter, imports, engine start, warm-up, measuring, shutdown
    engine_start_s: float

    @property
    def restart_s(self) -> float:
        """What a start costs beyond the measured repetitions."""
        return self.process_s - sum(r["wall_s"] for r in self.repetitions)


def start_result(start: Start, run: dict[str, Any], process_s: float) -> StartResult:
    """A :class:`StartResult` from a ``tuner run`` record (``run.json``)."""
    reps = [flat_metrics(r["metrics"]) for r in run["repetitions"]]
    return StartResult(start, reps, process_s, float(run["engine"]["start_s"]))


def pairs(results: Sequence[StartResult], metric: str) -> list[Pair]:
    """One pair per start pair (arm B as the trial, arm A as the reference): each start's repetitions summed, as
    (amount, seconds) for a throughput and (count, summed values) otherwise. Start pairs missing an arm are left
    out."""
    by_pair: dict[int, dict[str, StartResult]] = {}
    for result in results:
        by_pair.setdefault(result.start.pair, {})[result.start.arm] = result
    out: list[Pair] = []
    for arms in (by_pair[i] for i in sorted(by_pair)):
        if {"A", "B"} <= arms.keys():
            b, a = (_summed(arms[arm], metric) for arm in ("B", "A"))
            out.append((b[0], b[1], a[0], a[1]))
    return out


def _summed(result: StartResult, metric: str) -> tuple[float, float]:
    """A start's repetitions as one (amount, seconds) for ``metric`` (:func:`run_pair`'s halves, summed)."""
    halves = [run_pair(metric, rep, rep)[:2] for rep in result.repetitions]
    return sum(h[0] for h in halves), sum(h[1] for h in halves)


@dataclass(frozen=True)
class Comparison:
    """Arm B against arm A: the estimate over start pairs, each start pair's ratio, the power reached and the
    restart cost."""

    metric: str
    estimate: RatioEstimate
    start_pair_ratios: list[float]
    mde: float  # the relative change this comparison detects with 80% power (two-sided 5%)
    pairs_for_5pct: int | None  # start pairs needed to detect a 5% change with 80% power (None: no noise measured)
    restart_s: dict[str, float]  # median per arm
    engine_start_s: dict[str, float]

    @property
    def changed(self) -> bool:
        return self.estimate.verdict in ("better", "worse")

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "estimate": self.estimate.to_dict(),
            "changed": self.changed,
            "start_pair_ratios": self.start_pair_ratios,
            "mde": self.mde if math.isfinite(self.mde) else None,
            "pairs_for_5pct": self.pairs_for_5pct,
            "restart_s": self.restart_s,
            "engine_start_s": self.engine_start_s,
        }


def compare(results: Sequence[StartResult], metric: str, *, seed: int = 0) -> Comparison:
    """The paired estimate of B/A over every complete start pair (two at least)."""
    start_pairs = pairs(results, metric)
    estimate = pairs_estimate(start_pairs, metric, seed=seed)
    noisy = math.isfinite(estimate.log_sd) and estimate.log_sd > 0
    ratios = [(p[0] / p[1]) / (p[2] / p[3]) for p in start_pairs]
    return Comparison(
        metric=metric,
        estimate=estimate,
        start_pair_ratios=ratios if metric in HIGHER_IS_BETTER else [1 / r for r in ratios],
        mde=mde(estimate.log_sd, estimate.n, alpha=0.025) if noisy else math.nan,
        pairs_for_5pct=pairs_needed(estimate.log_sd, 0.05, alpha=0.025) if noisy else None,
        restart_s=_median_per_arm(results, lambda r: r.restart_s),
        engine_start_s=_median_per_arm(results, lambda r: r.engine_start_s),
    )


def _median_per_arm(results: Sequence[StartResult], value: Callable[[StartResult], float]) -> dict[str, float]:
    return {arm: statistics.median(value(r) for r in results if r.start.arm == arm) for arm in ("A", "B")}


@dataclass
class Bisection:
    """The comparisons a bisection made, in order, and the step it located (None when none)."""

    steps: list[tuple[int, int, bool]] = field(default_factory=list)  # (from install, to install, changed)
    culprit: tuple[int, int] | None = None
    note: str = ""


def bisect(n_installs: int, changed: Callable[[int, int], bool]) -> Bisection:
    """Locate the step of a sequence of installs that changed the metric: compare the endpoints, then halve.

    ``changed(i, j)`` compares install j against install i. A half whose endpoints differ is searched next; when
    the first half shows no change the second is compared too, not assumed, so a change spread over several
    steps (each too small to call) ends with a note instead of a wrong step.
    """
    if n_installs < 2:
        raise ValueError(f"bisect needs two installs at least, got {n_installs}")
    result = Bisection()

    def check(i: int, j: int) -> bool:
        verdict = changed(i, j)
        result.steps.append((i, j, verdict))
        return verdict

    low, high = 0, n_installs - 1
    if not check(low, high):
        result.note = "no change between the first and the last install"
        return result
    while high - low > 1:
        middle = (low + high) // 2
        if check(low, middle):
            high = middle
        elif check(middle, high):
            low = middle
        else:
            result.note = f"installs {low}..{high} differ, but neither half does: the change is spread over steps"
            return result
    result.culprit = (low, high)
    result.note = f"the change is between install {low} and install {high}"
    return result
