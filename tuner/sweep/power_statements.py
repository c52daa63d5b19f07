"""What a sweep's budgets can detect, said before it spends them, from the noise of the method each trial will use.

- **Before screening**, per way of measuring the space's trials will use (:class:`Noise`): step blocks at a
  calibrated grain (the calibration's A/A per-pair SD and pair rate at that block length; for a GC-pacing trial
  the mutator's and its collector's), run-level pairs (the baseline trial's own pairs), or a grain nothing has
  measured yet (a block length the calibration did not try): said so, and stated before confirmation from its
  screening.
- **Before confirmation**, each candidate's own plan (:mod:`tuner.sweep.plans`).

A per-pair SD is itself an estimate (the calibration's from a few hundred step pairs, the baseline's from 6 run
pairs), and the host's noise moves between a calibration and the sweep: each SD is printed with the range the
pairs it plans are expected to show (:func:`tuner.stats.predict_sd`: heavy tails and drift), and every MDE is also
given at the top of that range.

The chance that a trial of a given gain is *nominated* (ranks among the candidates by its screening lower bound,
its interval allowing ``min_effect`` and its plan even odds, :func:`tuner.sweep.plans.nominate`) is computed for
trials of mixed grains: each trial's estimate is normal with its own standard error, integrated by Gauss-Hermite
over the gaining trial's, with the null trials above it and those nominated below it counted exactly (their joint
distribution built one trial at a time), so that its confirmation power is taken at Holm's count beside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as _st

from tuner.records import PowerGroupRecord
from tuner.stats import SdPrediction, drift_factors, finite_or_none, mde, predict_sd
from tuner.sweep.plans import CONFIRMATION_PACE, CandidatePlan, ConfirmationPlan, Design

_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite_e.hermegauss(80)
Z_95 = float(_st.norm.isf(0.025))


@dataclass(frozen=True)
class Ranking:
    """How a trial's screening lower bound scatters (log): its standard error and its CI half-width, and the
    estimate its nomination needs beyond ``min_effect`` (:func:`tuner.sweep.plans.nominate`: -inf where its plan
    confirms ``min_effect`` with the least power, inf where it confirms nothing)."""

    se: float
    half_width: float
    least_estimate: float = -math.inf

    @classmethod
    def of(cls, log_sd: float, pairs: int, plan: CandidatePlan | None = None) -> Ranking:
        """The bound ``pairs`` pairs of per-pair SD ``log_sd`` give (95% half-width), as planned before screening,
        and what its confirmation ``plan`` (at Holm's largest count) asks of it."""
        se = log_sd / math.sqrt(max(pairs, 1))
        least = -math.inf
        if plan is not None and (gain := plan.least_confirmable) > plan.design.min_effect:
            least = math.log1p(gain) if math.isfinite(gain) else math.inf
        return cls(se, Z_95 * se, least)


def nomination_chances(
    effect: float, target: Ranking, others: Sequence[Ranking], m: int, min_effect: float | None = None
) -> np.ndarray:
    """P(a trial with relative gain ``effect`` is nominated beside ``k - 1`` others), for ``k`` = 1..``m`` (index
    ``k - 1``), when the ``others`` have no gain: it must rank among the top ``m`` by screening lower bound, counting
    only trials whose interval still allows ``min_effect`` (None: all) and whose estimate meets their plan's need
    (:attr:`Ranking.least_estimate`); every such trial, above it or below, joins Holm's count up to ``m``."""
    floor = -math.inf if min_effect is None else math.log1p(min_effect)
    estimate = math.log1p(effect) + target.se * _HERMITE_NODES
    bound = estimate - target.half_width  # the gaining trial's lower bound
    eligible = (estimate + target.half_width >= floor) & (estimate >= target.least_estimate)
    # Per node: each null trial above it (eligible, higher bound), eligible below it, or out; counts capped at m.
    dist = np.zeros((bound.size, m + 1, m))  # (node, trials above it [m: m or more], eligible ones [capped at m - 1])
    dist[:, 0, 0] = 1.0
    for o in others:
        se = max(o.se, 1e-12)
        need = max(floor - o.half_width, o.least_estimate)  # the estimate it needs to be nominated
        p_in = float(_st.norm.sf(need / se))
        p_above = np.minimum(_st.norm.sf(np.maximum(bound + o.half_width, need) / se), p_in)
        moved = np.zeros_like(dist)
        moved += dist * (1 - p_in)
        up_a = np.concatenate([dist[:, :1, :] * 0, dist[:, :-1, :]], axis=1)
        up_a[:, m, :] += dist[:, m, :]
        moved += _shift_eligible(up_a, m) * p_above[:, None, None]
        moved += _shift_eligible(dist, m) * (p_in - p_above)[:, None, None]
        dist = moved
    chances = eligible[:, None] * dist[:, :m, :].sum(axis=1)  # (node, eligible others): nominated
    return np.asarray(_HERMITE_WEIGHTS @ chances / math.sqrt(2 * math.pi), dtype=np.float64)


def _shift_eligible(dist: np.ndarray, m: int) -> np.ndarray:
    """``dist`` with one more eligible trial (capped at ``m - 1``)."""
    out = np.concatenate([dist[:, :, :1] * 0, dist[:, :, :-1]], axis=2)
    out[:, :, m - 1] += dist[:, :, m - 1]
    return out


def selection_chance(
    effect: float, target: Ranking, others: Sequence[Ranking], m: int, min_effect: float | None = None
) -> float:
    """P(a trial with relative gain ``effect`` is nominated among the ``others`` (:func:`nomination_chances`)."""
    return float(nomination_chances(effect, target, others, m, min_effect).sum())


def sweep_power(effect: float, plan: CandidatePlan, target: Ranking, others: Sequence[Ranking]) -> float:
    """The chance that one trial of gain ``effect`` among ``others`` (no gain) is nominated and then confirmed on
    ``plan`` at Holm's count of the candidates nominated beside it."""
    d = plan.design
    chances = nomination_chances(effect, target, others, d.m, d.min_effect)
    return float(sum(c * replace(plan, m=k + 1).power_at(effect) for k, c in enumerate(chances)))


# ------------------------------------------------------------------------------------- before screening


@dataclass(frozen=True)
class Noise:
    """One way of measuring: its per-pair SD and pair rate (None where nothing measured them yet) and their source."""

    method: str  # "steps", "runs" or "restarts"
    grain: str  # in words: "2-step blocks", "run-level pairs", ...
    log_sd: float | None
    sd_pairs: int
    pairs_per_s: float | None
    source: str
    guard_sd: float | None = None  # measured by the body: the whole time's per-pair SD, its guard's noise

    @property
    def known(self) -> bool:
        return self.log_sd is not None and self.pairs_per_s is not None and math.isfinite(self.log_sd)


@dataclass(frozen=True)
class GroupPower:
    """What one way of measuring buys, for the ``trials`` screened that way: a screening's MDE, the planned
    confirmation of one of them and the chance a ``min_effect`` trial among all is selected and confirmed."""

    noise: Noise
    trials: int
    screening_pairs: int
    plan: CandidatePlan | None  # None where the noise is not known before screening
    sweep_power: float | None
    design: Design

    @property
    def predicted_sd(self) -> SdPrediction | None:
        """The per-pair SD its screenings are expected to show (None where the noise is not known)."""
        n = self.noise
        if not n.known or n.log_sd is None:
            return None
        return predict_sd(n.log_sd, n.sd_pairs, next_pairs=max(self.screening_pairs, 2))

    def screening_mde(self, upper: bool = False) -> float:
        """One screening comparison's MDE (one-sided 2.5%, the design's power), at the SD or the top of its
        predicted range."""
        predicted, d = self.predicted_sd, self.design
        if predicted is None or self.screening_pairs < 1:
            return math.inf
        sd = predicted.high if upper else predicted.log_sd
        return mde(sd, self.screening_pairs, alpha=d.alpha, power=d.power) if math.isfinite(sd) else math.inf

    def lines(self, screening_budget: str) -> list[str]:
        n, predicted = self.noise, self.predicted_sd
        head = f"{n.method}, {n.grain} ({self.trials} trial{'s' if self.trials != 1 else ''})"
        if predicted is None or self.plan is None or n.pairs_per_s is None:
            return [f"{head}: {n.source}"]
        lines = [
            f"{head}: per-pair SD {predicted.words()}"
            + (f" (the body's; its guard's whole time {n.guard_sd:.3g})" if n.guard_sd else "")
            + f" and {n.pairs_per_s:.3g} pairs/s, from {n.source}",
            f"  screening: {screening_budget} per trial detect "
            f"{_pct(self.screening_mde())} ({_pct(self.screening_mde(upper=True))} at the top of the SD's range); "
            "a screening call is unadjusted and only nominates candidates",
            *("  " + line for line in plan_lines(self.plan)[1:]),
        ]
        if self.sweep_power is not None:
            d = self.design
            lines.append(
                f"  a {d.min_effect:.1%} trial measured this way is selected and confirmed with probability "
                f"{self.sweep_power:.0%}"
            )
        return lines

    def to_dict(self) -> PowerGroupRecord:
        n = self.noise
        return {
            "method": n.method,
            "grain": n.grain,
            "guard_sd": n.guard_sd,
            "trials": self.trials,
            "source": n.source,
            "log_sd": n.log_sd,
            "sd_pairs": n.sd_pairs,
            "sd_low": finite_or_none(self.predicted_sd.low) if self.predicted_sd else None,
            "sd_upper": finite_or_none(self.predicted_sd.high) if self.predicted_sd else None,
            "pairs_per_s": n.pairs_per_s,
            "screening_pairs": self.screening_pairs,
            "screening_mde": finite_or_none(self.screening_mde()),
            "confirmation": self.plan.to_dict() if self.plan else None,
            "sweep_power": self.sweep_power,
        }


def group_powers(groups: Sequence[tuple[Noise, int, int, CandidatePlan | None]], design: Design) -> list[GroupPower]:
    """Each group (its noise, trials, screening pairs per trial, its confirmation plan) with the chance that a
    ``min_effect`` trial of it is selected among every known trial and confirmed: averaged over where the host's
    noise may stand during the sweep against where it was measured (:func:`tuner.stats.sd_prediction
    .drift_factors`; every group's noise moves together), since a power at the measured SD alone promises more
    than it delivers when the SD moves."""

    def ranking(noise: Noise, pairs: int, plan: CandidatePlan | None) -> Ranking:
        assert noise.log_sd is not None
        return Ranking.of(noise.log_sd, pairs, replace(plan, m=design.m) if plan else None)  # nominate's count

    def power_at(index: int, factor: float) -> float:
        """The chance for a trial of group ``index`` with every group's noise ``factor`` times its measured SD."""
        scaled = [
            (noise, trials, pairs, _scaled(plan, factor) if plan else None) for noise, trials, pairs, plan in groups
        ]
        rankings = [
            (i, ranking(replace(noise, log_sd=noise.log_sd * factor), pairs, plan))
            for i, (noise, trials, pairs, plan) in enumerate(scaled)
            if noise.known and noise.log_sd is not None
            for _ in range(trials)
        ]
        noise, _, pairs, plan = scaled[index]
        assert plan is not None and noise.log_sd is not None
        others = [r for r in rankings if r[0] != index] + [r for r in rankings if r[0] == index][1:]
        target = ranking(replace(noise, log_sd=noise.log_sd * factor), pairs, plan)
        return sweep_power(design.min_effect, plan, target, [r for _, r in others])

    out = []
    for index, (noise, trials, pairs, plan) in enumerate(groups):
        power = None
        if plan is not None and noise.log_sd is not None:
            power = sum(w * power_at(index, f) for f, w in drift_factors(noise.sd_pairs))
        out.append(GroupPower(noise, trials, pairs, plan, power, design))
    return out


def _scaled(plan: CandidatePlan, factor: float) -> CandidatePlan:
    """``plan`` with its noise, the body's and its guard's, ``factor`` times what was measured."""
    guard = plan.candidate.guard_sd
    candidate = replace(plan.candidate, guard_sd=guard * factor if guard is not None else None)
    return replace(plan, log_sd=plan.log_sd * factor, candidate=candidate)


# ------------------------------------------------------------------------------------- before confirmation


def plan_lines(plan: CandidatePlan) -> list[str]:
    """One candidate's plan in words: its noise, then what its budget holds and detects."""
    c, d = plan.candidate, plan.design
    guarded = f"; the body's, its guard's whole time {c.guard_sd:.3g}" if c.guard_sd else ""
    head = (
        f"trial {c.trial} ({c.method}, {c.grain}): per-pair SD {plan.predicted_sd.words()} from {plan.sd_pairs} "
        f"pairs{guarded}, {c.pairs_per_s:.3g} pairs/s"
    )
    holds = f"confirmation: {plan.budget_s:g} s hold {plan.pairs} pairs in {len(plan.looks)} look(s)"
    if not plan.measurable:
        return [
            head,
            f"{holds}: too few for the sign-flip test to reach one-sided {d.alpha / plan.m:.2g}: not measured",
        ]
    needed = plan.needed
    need = (
        f"; {d.min_effect:.1%} needs {needed} pairs (~{_seconds(needed / c.pairs_per_s / CONFIRMATION_PACE)})"
        if needed
        else ""
    )
    if needed and needed > plan.pairs:
        need += ": out of this budget's reach"
    return [
        head,
        f"{holds} detect {_pct(plan.mde)} ({_pct(plan.mde_upper)} at the top of the SD's range) with "
        f"{d.power:.0%} power (one-sided {d.alpha:g}, Holm over {plan.m}"
        + ("; the guard holding too" if c.guard_sd else "")
        + f"){need}",
    ]


def confirmation_lines(plan: ConfirmationPlan) -> list[str]:
    """Every nominated candidate's plan, and how many are measured."""
    lines = [line for p in plan.plans for line in plan_lines(p)]
    if len(plan.measured) < len(plan.plans):
        lines.append(f"candidates measured: {len(plan.measured)} of {len(plan.plans)} (Holm over those measured)")
    return lines


def _pct(value: float) -> str:
    return f"{value:.1%}" if math.isfinite(value) else "nothing"


def _seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"
