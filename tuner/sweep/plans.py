"""How each screened candidate is confirmed: its own noise, pair rate, grain, looks and time budget.

A candidate is confirmed by the method and grain its screening used (step blocks of its grain, run-level pairs or
restart pairs), so its screening's per-pair SD and pair rate are the noise and the pace of its fresh pairs. Each
candidate spends its own ``budget_s``: its pairs are what that budget holds at :data:`CONFIRMATION_PACE` of its own
pair rate. One plan for all (the pooled SD, the slowest candidate's rate) gave a 2-step-block candidate 8 pairs,
0.6 s of its 30 s, beside two slow GC-pacing candidates. Holm across the candidates stays: the plans only decide how
many pairs each one gets and when its looks fall.

A candidate whose budget holds too few pairs for the sign-flip test to reach its level (one-sided 2^-n at n pairs)
is not measured at all: it could not be confirmed, and leaving it out of Holm's count (decided before any fresh
pair) keeps the others' level at alpha / (the candidates that can). The sweep goes further (:func:`nominate`): a
candidate whose plan gives it less than :data:`LEAST_POWER` to confirm ``min_effect`` leaves its place to the next
ranked one, decided from the screening alone.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from scipy import stats as _st

from tuner.records import PlanRecord
from tuner.stats import (
    GUARD_MARGIN,
    Guard,
    SdPrediction,
    detection_power,
    finite_or_none,
    least_pairs,
    mde,
    obf_boundaries,
    pairs_needed,
    predict_sd,
)

CONFIRMATION_PACE = 0.8
"""The share of the screening's pair rate a confirmation is planned at: a confirmation measures pairs more slowly
than its screening did (each look starts a fresh comparison; 18.8 against 21.1 step pairs/s in one sweep here), and
planned at the screening's rate its last look would not be reached within the budget."""
LEAST_POWER = 0.5
"""A candidate is measured only if its plan gives it at least this chance to confirm a gain of ``min_effect``
(:func:`nominate`): below it, its budget would more likely end unconfirmed than not."""


@dataclass(frozen=True)
class Design:
    """How candidates are confirmed: up to ``m`` of them, one-sided ``alpha`` with Holm across them, the power
    planned for ``min_effect`` (host-side strategies gain 1-3%), O'Brien-Fleming over ``looks``."""

    m: int = 3
    min_effect: float = 0.01
    alpha: float = 0.025
    power: float = 0.8
    looks: int = 4

    def __post_init__(self) -> None:
        if self.m < 1 or self.looks < 1 or not 0 < self.alpha < 0.5 or not 0 < self.power < 1:
            raise ValueError(f"invalid design {self}")
        if not (math.isfinite(self.min_effect) and self.min_effect > 0):
            raise ValueError(f"min_effect must be a positive relative gain, got {self.min_effect}")


@dataclass(frozen=True)
class Candidate:
    """A screened trial to confirm: what it runs, how its pairs are made and how fast they come."""

    trial: int
    strategies: dict[str, dict[str, Any]]
    method: str  # "steps" (in-engine interleaving), "runs" (paired repetitions) or "restarts" (restart pairs)
    pairs_per_s: float
    grain: str = ""  # how its pairs are made, in words (steps: the block length and why)
    block_steps: int | None = None  # steps: the screening's block length, kept for its fresh pairs
    left_out: tuple[str, ...] = ()  # what its estimate does not see (steps: the front-end part of its effect)
    engine: dict[str, Any] = field(default_factory=dict)  # restarts: its engine-arg overrides
    env: dict[str, Any] = field(default_factory=dict)  # restarts: its vLLM environment variable overrides
    collector_share: float = 0.0  # GC pacing: the share of its engine time the collector takes (0: not paced)
    guard_sd: float | None = None  # the body's: its screening's per-pair SD of the whole time, which its guard reads

    @property
    def paced(self) -> bool:
        """Whether it paces the collector: its steps are the mutator's, times a collector factor per look."""
        return self.collector_share > 0


@functools.cache
def confirmable_pairs(alpha: float, looks: int) -> int:
    """The fewest pairs with which the exact one-sided sign-flip test can reach the last look's O'Brien-Fleming
    level at ``alpha`` (:func:`tuner.stats.least_pairs`)."""
    final_level = float(_st.norm.sf(obf_boundaries(alpha, [(k + 1) / looks for k in range(looks)])[-1]))
    return least_pairs(final_level, sided=1)


@dataclass(frozen=True)
class CandidatePlan:
    """One candidate's confirmation: its noise (the screening's per-pair SD and the pairs it came from), its pace,
    the pairs its budget holds and the cumulative pairs at each of its looks; ``m`` candidates share Holm."""

    candidate: Candidate
    log_sd: float
    sd_pairs: int
    pairs: int
    looks: tuple[int, ...]
    m: int
    design: Design
    budget_s: float

    @property
    def trial(self) -> int:
        return self.candidate.trial

    @property
    def fractions(self) -> tuple[float, ...]:
        return tuple(n / self.pairs for n in self.looks)

    @property
    def measurable(self) -> bool:
        """Whether its pairs can reach the test's level at all (:func:`confirmable_pairs`)."""
        return self.pairs >= confirmable_pairs(self.design.alpha / self.m, len(self.looks))

    def mde_at(self, log_sd: float, pairs: int | None = None, power: float | None = None) -> float:
        """The gain its test confirms with the design's power (or ``power``), at a per-pair SD (inf where it
        cannot)."""
        n = self.pairs if pairs is None else pairs
        if not (math.isfinite(log_sd) and log_sd > 0) or n < 1:
            return math.inf
        d = self.design
        wanted = d.power if power is None else power
        return mde(log_sd, n, alpha=d.alpha, m=self.m, power=wanted, looks=len(self.looks), guard=self._guard(log_sd))

    def _guard(self, log_sd: float) -> Guard | None:
        """Its guard where the body's SD is ``log_sd`` (the whole time's SD in the screening's ratio to the body's;
        None: no guard, or none known)."""
        guard = self.candidate.guard_sd
        if guard is None or not (math.isfinite(guard) and guard > 0 and self.log_sd > 0):
            return None
        return Guard(guard * log_sd / self.log_sd, GUARD_MARGIN)

    @property
    def least_confirmable(self) -> float:
        """The gain it confirms with :data:`LEAST_POWER` (inf where it cannot): what its screening must have
        estimated for it to be nominated (:func:`nominate`)."""
        return self.mde_at(self.log_sd, power=LEAST_POWER) if self.measurable else math.inf

    @property
    def mde(self) -> float:
        return self.mde_at(self.log_sd)

    @property
    def predicted_sd(self) -> SdPrediction:
        """The per-pair SD its fresh pairs are expected to show (:func:`tuner.stats.sd_prediction.predict_sd`: the
        screening's SD, heavy tails and the host's drift)."""
        return predict_sd(self.log_sd, self.sd_pairs, next_pairs=self.pairs)

    @property
    def mde_upper(self) -> float:
        """The MDE if the per-pair SD is at the upper end of its predicted range."""
        return self.mde_at(self.predicted_sd.high)

    @property
    def needed(self) -> int | None:
        """Pairs ``min_effect`` needs at its SD and the design's power (None without a usable SD)."""
        if not (math.isfinite(self.log_sd) and self.log_sd > 0):
            return None
        d = self.design
        return pairs_needed(
            self.log_sd, d.min_effect, alpha=d.alpha, m=self.m, power=d.power, looks=len(self.looks),
            guard=self._guard(self.log_sd),
        )  # fmt: skip

    def power_at(self, effect: float) -> float:
        """The chance that a true gain ``effect`` is confirmed by this plan (its own level alpha / m): where it is
        measured by the body, times the chance its guard holds (:func:`tuner.stats.detection_power` with its guard)."""
        if not (math.isfinite(self.log_sd) and self.log_sd > 0):
            return 0.0
        d = self.design
        return detection_power(
            self.log_sd, self.pairs, effect, alpha=d.alpha, m=self.m, looks=len(self.looks),
            guard=self._guard(self.log_sd),
        )  # fmt: skip

    def to_dict(self) -> PlanRecord:
        c = self.candidate
        return {
            "trial": c.trial,
            "method": c.method,
            "grain": c.grain,
            "block_steps": c.block_steps,
            "pairs_per_s": c.pairs_per_s,
            "log_sd": finite_or_none(self.log_sd),
            "sd_pairs": self.sd_pairs,
            "sd_low": finite_or_none(self.predicted_sd.low),
            "sd_upper": finite_or_none(self.predicted_sd.high),
            "guard_sd": finite_or_none(c.guard_sd) if c.guard_sd is not None else None,
            "pairs": self.pairs,
            "looks": list(self.looks),
            "budget_s": self.budget_s,
            "holm_m": self.m,
            "measurable": self.measurable,
            "mde": finite_or_none(self.mde),
            "mde_upper": finite_or_none(self.mde_upper),
            "pairs_needed": self.needed,
        }


@dataclass(frozen=True)
class ConfirmationPlan:
    """Every nominated candidate's plan; only the measurable ones are measured and tested (Holm over them)."""

    plans: tuple[CandidatePlan, ...]
    design: Design

    @property
    def measured(self) -> tuple[CandidatePlan, ...]:
        return tuple(p for p in self.plans if p.measurable)

    @property
    def candidates(self) -> tuple[int, ...]:
        """The trials measured and tested, best screening lower bound first."""
        return tuple(p.trial for p in self.measured)

    def plan_for(self, trial: int) -> CandidatePlan:
        return next(p for p in self.plans if p.trial == trial)


def plan_candidate(
    candidate: Candidate, log_sd: float, sd_pairs: int, *, budget_s: float, m: int, design: Design
) -> CandidatePlan:
    """``candidate``'s plan: the pairs ``budget_s`` holds at :data:`CONFIRMATION_PACE` of its pair rate (at least
    2), read at up to ``design.looks`` equal looks of at least 2 pairs each."""
    pairs = max(2, math.floor(CONFIRMATION_PACE * budget_s * candidate.pairs_per_s))
    count = max(1, min(design.looks, pairs // 2))
    looks = tuple(math.ceil(pairs * (k + 1) / count) for k in range(count))
    return CandidatePlan(candidate, log_sd, sd_pairs, pairs, looks, m, design, budget_s)


def plan_confirmation(
    nominated: list[tuple[Candidate, float, int]], *, budget_s: float, design: Design
) -> ConfirmationPlan:
    """Plans for the nominated candidates, each (candidate, its screening's per-pair SD, the pairs it came from),
    best first. Measurability is judged at Holm's count of every nominated candidate; the plans of those measured
    are then made at the count of those alone, which is the family Holm controls."""
    first = [
        plan_candidate(c, sd, n, budget_s=budget_s, m=max(len(nominated), 1), design=design) for c, sd, n in nominated
    ]
    m = max(sum(p.measurable for p in first), 1)
    plans = tuple(
        plan_candidate(p.candidate, p.log_sd, p.sd_pairs, budget_s=budget_s, m=m, design=design) if p.measurable else p
        for p in first
    )
    return ConfirmationPlan(plans, design)


def nominate(
    ranked: list[tuple[Candidate, float, int]], *, budget_s: float, design: Design, screened_gain: dict[int, float]
) -> tuple[ConfirmationPlan, list[str]]:
    """Plans for up to ``design.m`` of the ``ranked`` candidates (best first; each with its screening's per-pair SD
    and pairs) whose plan, judged at Holm's largest count, confirms with at least :data:`LEAST_POWER` the gain it
    is hoped to have: ``min_effect``, or its screening's point estimate where that is larger (``screened_gain``, by
    trial; a best-of-many estimate runs high, so this only drops the hopeless). One below it leaves its place to
    the next, with a note. Fewer candidates only raise the power of those kept (Holm over fewer)."""
    kept: list[tuple[Candidate, float, int]] = []
    notes: list[str] = []
    for c, sd, n in ranked:
        if len(kept) == design.m:
            break
        plan = plan_candidate(c, sd, n, budget_s=budget_s, m=design.m, design=design)
        gain = max(design.min_effect, screened_gain.get(c.trial, 0.0))
        if gain >= plan.least_confirmable:
            kept.append((c, sd, n))
        else:
            notes.append(
                f"trial {c.trial} is not confirmed: {budget_s:g} s of its pairs (per-pair SD {sd:.3f}) give it "
                f"{plan.power_at(gain):.0%} power to confirm a {gain:.1%} gain, under {LEAST_POWER:.0%}"
            )
    return plan_confirmation(kept, budget_s=budget_s, design=design), notes
