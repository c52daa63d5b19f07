"""``tuner versions``: the decisions, as pure functions on plain data (no engine, no subprocess).

Two vLLM installs (two Python interpreters) run the same experiment, one engine start at a time, in mirrored
order (AB BA AB ..., :func:`tuner.stats.mirrored_order`): start pair i runs both arms back to back, so host drift
and the residue one engine leaves for the next hit both arms alike. Each start measures the experiment's
``measure.repetitions``; repetition j of arm B is paired with repetition j of arm A of the same start pair, and the
ratio B/A is estimated exactly as the sweep's run level does it (:func:`tuner.confirmation.run_pair`,
:func:`tuner.confirmation.pairs_estimate`: a ratio of sums for throughput, its bootstrap CI and sign-flip test).
Pairing repetitions treats the start-to-start variation of one install as small against the repetitions' noise;
the per-start-pair ratios are reported beside the estimate so a large start effect shows.

The O'Brien-Fleming looks and Holm of the sweep's confirmation do not apply: there is no selection among
candidates and no early stopping, only a fixed-size two-sided comparison of two named installs (alpha 5%).

With more than two installs (a sequence of versions) :func:`bisect` locates the step that changed the metric:
compare the endpoints, then halve.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tuner.confirmation import Pair, pairs_estimate, run_pair
from tuner.metrics import flat_metrics
from tuner.stats import RatioEstimate, mde, mirrored_order

Arm = Literal["A", "B"]


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
    """Repetition pairs (arm B as the trial, arm A as the reference): repetition j of B's start with repetition j
    of A's start in the same start pair. Start pairs with a missing arm are left out."""
    by_pair: dict[int, dict[str, StartResult]] = {}
    for result in results:
        by_pair.setdefault(result.start.pair, {})[result.start.arm] = result
    out: list[Pair] = []
    for arms in (by_pair[i] for i in sorted(by_pair)):
        if {"A", "B"} <= arms.keys():
            out += [run_pair(metric, b, a) for b, a in zip(arms["B"].repetitions, arms["A"].repetitions, strict=False)]
    return out


@dataclass(frozen=True)
class Comparison:
    """Arm B against arm A: the estimate, the per-start-pair ratios, the power reached and the restart cost."""

    metric: str
    estimate: RatioEstimate
    start_pair_ratios: list[float]
    mde: float  # the relative change this comparison detects with 80% power (two-sided 5%)
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
            "mde": self.mde,
            "restart_s": self.restart_s,
            "engine_start_s": self.engine_start_s,
        }


def compare(results: Sequence[StartResult], metric: str, *, seed: int = 0) -> Comparison:
    """The paired estimate of B/A over every complete start pair (needs two repetition pairs at least)."""
    all_pairs = pairs(results, metric)
    estimate = pairs_estimate(all_pairs, metric, seed=seed)
    per_start = [
        pairs_estimate(pairs([r for r in results if r.start.pair == i], metric), metric) for i in _pairs_of(results)
    ]
    detectable = mde(estimate.log_sd, estimate.n, alpha=0.025) if estimate.log_sd > 0 else float("nan")
    return Comparison(
        metric=metric,
        estimate=estimate,
        start_pair_ratios=[e.ratio for e in per_start],
        mde=detectable,
        restart_s={arm: statistics.median(r.restart_s for r in results if r.start.arm == arm) for arm in "AB"},
        engine_start_s={
            arm: statistics.median(r.engine_start_s for r in results if r.start.arm == arm) for arm in "AB"
        },
    )


def _pairs_of(results: Sequence[StartResult]) -> list[int]:
    """Start pairs with both arms and at least two repetitions each (a ratio needs two pairs)."""
    arms: dict[int, list[StartResult]] = {}
    for result in results:
        arms.setdefault(result.start.pair, []).append(result)
    return sorted(
        i for i, rs in arms.items() if len({r.start.arm for r in rs}) == 2 and min(len(r.repetitions) for r in rs) >= 2
    )


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
