"""Stalls in a step-level comparison: per arm, how often a step stalled, the longest stall and whether EngineCore
was collecting during it; between the arms, the paired stall-rate difference (:mod:`tuner.stats.stall_rate`).

The steps are the ones the step-time ratio compares (:func:`tuner.measure.interleave.compared_steps`), each arm's in the
order they ran, so a stall is judged against the same arm's recent steps. The
GC time of a step is EngineCore's process's (which holds the worker under the ``uni`` executor); a worker in its
own process (``mp``) reports no per-step GC, so a stall there is not attributed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tuner.plugin.protocol import Arm
from tuner.records import StallsRecord
from tuner.stats import RateDifference, StallRule, paired_rate_difference, stall_flags


@dataclass(frozen=True)
class ArmStalls:
    """One arm's judged steps, its stalls and its longest one."""

    steps: int
    stalls: int
    longest_s: float | None  # the longest stall (None: none)
    longest_gc_s: float | None  # EngineCore's GC time during it (0: it was not collecting)

    @property
    def rate(self) -> float | None:
        return self.stalls / self.steps if self.steps else None


@dataclass(frozen=True)
class StallComparison:
    rule: StallRule
    a: ArmStalls
    b: ArmStalls
    difference: RateDifference | None  # B's stall rate minus A's (None below two pairs)

    def to_dict(self) -> StallsRecord:
        rule = self.rule
        return {
            "rule": {
                "factor": rule.factor,
                "floor_s": rule.floor_s,
                "window": rule.window,
                "min_history": rule.min_history,
            },
            "arms": {
                arm: {
                    "steps": stalls.steps,
                    "stalls": stalls.stalls,
                    "longest_s": stalls.longest_s,
                    "longest_gc_s": stalls.longest_gc_s,
                    "rate": stalls.rate,
                }
                for arm, stalls in (("A", self.a), ("B", self.b))
            },
            "difference": self.difference.to_dict() if self.difference else None,
        }


CompareStep = tuple[Arm, int, float, float]
"""One compared step: its arm, its pair, its seconds and EngineCore's GC seconds within it."""


def compare_stalls(
    compared: Sequence[CompareStep], rule: StallRule, *, confidence: float = 0.95, seed: int = 0
) -> StallComparison:
    """Judge every compared step (given in the order they ran) against its arm's and compare the arms' stall
    rates by pair; ``seed`` draws the sign-flip cross-check's swap patterns when there are too many to try all."""
    steps: dict[str, list[tuple[int, float, float]]] = {"A": [], "B": []}  # (pair, seconds, GC seconds) per arm
    for arm, pair, seconds, gc_s in compared:
        steps[arm].append((pair, seconds, gc_s))
    counts: dict[int, dict[str, tuple[int, int]]] = {}
    arms: dict[str, ArmStalls] = {}
    for side, series in steps.items():
        judged, stall = stall_flags([dt for _, dt, _ in series], rule)
        for (pair, _, _), was_judged, stalled in zip(series, judged, stall, strict=True):
            n_stalls, n_judged = counts.setdefault(pair, {}).get(side, (0, 0))
            counts[pair][side] = (n_stalls + int(stalled), n_judged + int(was_judged))
        stalls = [(dt, gc_s) for (_, dt, gc_s), stalled in zip(series, stall, strict=True) if stalled]
        worst = max(stalls, default=None)
        arms[side] = ArmStalls(
            steps=int(judged.sum()),
            stalls=len(stalls),
            longest_s=worst[0] if worst else None,
            longest_gc_s=worst[1] if worst else None,
        )
    pairs = [(by_arm["A"], by_arm["B"]) for by_arm in counts.values() if len(by_arm) == 2]
    difference = paired_rate_difference(pairs, confidence=confidence, seed=seed)
    return StallComparison(rule=rule, a=arms["A"], b=arms["B"], difference=difference)
