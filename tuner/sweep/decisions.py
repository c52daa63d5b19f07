"""The sweep's decisions as pure functions on plain data: screening, candidates, confirmation, winner, power.

A sweep has two phases. **Screening** is the search: every trial is paired against the baseline on a small
budget, and Optuna uses those estimates to explore. Picking the best of k noisy estimates finds chance winners
(30-35% of sweeps at k=20 when nothing helps) and inflates their gain, so screening never names the winner: it
only nominates up to ``m`` candidates. **Confirmation** re-tests them against the baseline with fresh pairs, sized
beforehand from the screening noise for the smallest gain worth deploying (``min_effect``); a one-sided
O'Brien-Fleming group-sequential test per candidate with Holm across candidates keeps the chance of deploying a
configuration that is not better at most ``alpha`` for the whole sweep, and the reported effect is the
confirmation estimate, free of the selection that picked it.

Defaults: m=3, one-sided alpha=0.025 (the "better" half of the usual two-sided 5%), power 0.8, 4 looks and
``min_effect`` 1% (host-side strategies gain 1-3%). With the per-pair log-ratio SD measured here (0.12-0.15 for
runs on the GPU host, 0.15 for step blocks on the CPU host at ~89 pairs/min) a 1% confirmation needs ~1800-2400
pairs per candidate: the screening budgets (6-12 runs, or 2 min of steps) cannot claim anything that small, which
is why confirmation does the claiming and why :class:`PowerStatement` says so before the run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats as _st

from tuner.stats import RatioEstimate, detection_power, holm, mde, pairs_needed, sequential_p_value

__all__ = [
    "Check",
    "ConfirmationPlan",
    "Decision",
    "Design",
    "PowerStatement",
    "Row",
    "ScreeningResult",
    "confirm",
    "gain_bounds",
    "non_inferiority",
    "plan_confirmation",
    "pooled_log_sd",
    "power_statement",
    "ranking_sd",
    "select_candidates",
    "slo",
    "spend_budget",
    "sweep_power",
]


@dataclass(frozen=True)
class ScreeningResult:
    """One screened trial: feasible under the constraints, and its first-objective estimate vs the baseline
    (None when it was not measured, e.g. a failed trial)."""

    trial: int
    feasible: bool
    estimate: RatioEstimate | None


@dataclass(frozen=True)
class Design:
    """How candidates are confirmed (see the module docstring for the defaults)."""

    m: int = 3
    min_effect: float = 0.01
    alpha: float = 0.025
    power: float = 0.8
    looks: int = 4
    max_pairs: int | None = None  # cap on confirmation pairs per candidate (power then falls short)

    def __post_init__(self) -> None:
        if self.m < 1 or self.looks < 1 or not 0 < self.alpha < 0.5 or not 0 < self.power < 1:
            raise ValueError(f"invalid design {self}")
        if not (math.isfinite(self.min_effect) and self.min_effect > 0):
            raise ValueError(f"min_effect must be a positive relative gain, got {self.min_effect}")
        if self.max_pairs is not None and self.max_pairs < self.looks:
            raise ValueError(f"max_pairs must allow one pair per look, got {self.max_pairs}")


def gain_bounds(estimate: RatioEstimate) -> tuple[float, float, float]:
    """(lower CI bound, point, upper CI bound) as a gain ratio, > 1 better, whatever the metric's direction."""
    if estimate.higher_is_better:
        return estimate.ci_low, estimate.ratio, estimate.ci_high
    return 1 / estimate.ci_high, 1 / estimate.ratio, 1 / estimate.ci_low


def select_candidates(screening: Sequence[ScreeningResult], m: int = 3) -> list[ScreeningResult]:
    """Up to ``m`` feasible trials with the highest screening *lower* confidence bound of the gain.

    Ranking by the lower bound rather than the point estimate favours trials measured precisely over lucky
    noisy ones (the winner's curse grows with the noise); a trial whose CI lies wholly on the wrong side of 1
    is not a candidate.
    """
    ranked = [(gain_bounds(r.estimate), r) for r in screening if r.feasible and r.estimate is not None]
    eligible = [(bounds, r) for bounds, r in ranked if bounds[2] >= 1]
    eligible.sort(key=lambda item: item[0][:2], reverse=True)
    return [r for _, r in eligible[:m]]


def pooled_log_sd(screening: Sequence[ScreeningResult]) -> float:
    """Per-pair log-ratio SD pooled over every measured screening trial (weights n - 1): the host's noise,
    whichever configuration ran. nan when no trial has two pairs."""
    rows = [
        (r.estimate.n - 1, r.estimate.log_sd)
        for r in screening
        if r.estimate is not None and r.estimate.n >= 2 and math.isfinite(r.estimate.log_sd)
    ]
    dof = sum(d for d, _ in rows)
    return math.sqrt(sum(d * sd**2 for d, sd in rows) / dof) if dof else math.nan


def ranking_sd(screening: Sequence[ScreeningResult]) -> float:
    """The noise of the screening lower bounds that rank candidates, in log (nan without two measured trials).

    log(lower bound) = log(estimate) - half-width: the estimates' standard error (pooled SD / sqrt(n)) plus the
    spread of the half-widths across trials, as a trial whose CI came out wide ranks below its estimate. (Their
    correlation is left out: with rare pauses it widens the lower tail, which does not decide the top ranks; in
    simulation the selection chance is then within ~1.5 points.) Used by :func:`sweep_power` after screening.
    """
    measured = [r.estimate for r in screening if r.estimate is not None and r.estimate.n >= 2]
    if len(measured) < 2:
        return math.nan
    half_widths = [math.log(point / low) for low, point, _ in map(gain_bounds, measured)]
    se2 = pooled_log_sd(screening) ** 2 / float(np.mean([e.n for e in measured]))
    return math.sqrt(se2 + float(np.var(half_widths, ddof=1)))


@dataclass(frozen=True)
class ConfirmationPlan:
    """Candidates, pooled noise, pairs per candidate and the cumulative pairs at each look."""

    candidates: tuple[int, ...]
    log_sd: float
    pairs: int
    looks: tuple[int, ...]
    design: Design

    @property
    def fractions(self) -> tuple[float, ...]:
        return tuple(n / self.pairs for n in self.looks)

    @property
    def mde(self) -> float:
        """The gain this plan confirms with the design's power (inf without candidates)."""
        if not self.candidates:
            return math.inf
        d = self.design
        return mde(self.log_sd, self.pairs, alpha=d.alpha, m=len(self.candidates), power=d.power, looks=d.looks)


def plan_confirmation(screening: Sequence[ScreeningResult], design: Design = Design()) -> ConfirmationPlan:
    """Candidates and the confirmation size that detects ``min_effect`` with the design's power.

    Sized at Holm's first step (alpha / number of candidates) with the per-pair SD pooled over the candidates'
    own screening: the noise their fresh pairs will have. A configuration that was not nominated (e.g. a spin
    window of 0, whose pairs scattered with SD 1.05 beside 0.02-0.13 for the others) must not size the others'
    confirmation: pooled over every trial it made a plan promise 32.8% where the pairs spent reached 2.6%.
    """
    chosen = select_candidates(screening, design.m)
    candidates = tuple(r.trial for r in chosen)
    log_sd = pooled_log_sd(chosen)
    if not candidates:
        return ConfirmationPlan((), log_sd, 0, (), design)
    if not math.isfinite(log_sd) or log_sd <= 0:
        raise ValueError("the screening estimates carry no per-pair SD to size the confirmation from")
    pairs = pairs_needed(
        log_sd, design.min_effect, alpha=design.alpha, m=len(candidates), power=design.power, looks=design.looks
    )
    pairs = max(design.looks, 2, min(pairs, design.max_pairs or pairs))  # 2: the least a CI is drawn from
    looks = tuple(max(math.ceil(pairs * (k + 1) / design.looks), 2) for k in range(design.looks))
    return ConfirmationPlan(candidates, log_sd, pairs, looks, design)


def spend_budget(plan: ConfirmationPlan) -> ConfirmationPlan:
    """``plan`` grown to the design's ``max_pairs`` (the time budget) when ``min_effect`` needs fewer.

    The size ``min_effect`` needs rests on the screening's per-pair SD, and on a host whose noise drifts a short
    window can understate it (one CPU sweep's step-level screening measured 0.049 per pair, its confirmation 0.135
    on the same engine minutes later): sized down to it, a confirmation would be underpowered without knowing it.
    Spending the budget the user granted keeps the power where it was promised; the group-sequential looks still
    stop early on a decisive estimate."""
    cap = plan.design.max_pairs
    if not plan.candidates or cap is None or cap <= plan.pairs:
        return plan
    looks = tuple(math.ceil(cap * (k + 1) / plan.design.looks) for k in range(plan.design.looks))
    return ConfirmationPlan(plan.candidates, plan.log_sd, cap, looks, plan.design)


# ------------------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class Check:
    """A secondary objective or SLO judged on the confirmation CI, and which bound decided it.

    Conservative on purpose: it passes only when the whole CI is on the acceptable side of the limit, so
    "passed" means shown, not merely not refuted.
    """

    metric: str
    kind: Literal["non_inferiority", "slo"]
    side: Literal["upper", "lower"]
    bound: float
    limit: float
    passed: bool

    def describe(self) -> str:
        op = "<=" if self.side == "upper" else ">="
        what = "ratio to baseline" if self.kind == "non_inferiority" else "value"
        outcome = "ok" if self.passed else "FAILS"
        return f"{self.metric}: {self.side} CI bound of the {what} {self.bound:.4g} {op} {self.limit:.4g}: {outcome}"


def non_inferiority(metric: str, estimate: RatioEstimate, margin: float = 0.05) -> Check:
    """The candidate is no more than ``margin`` worse than the baseline on ``metric`` (e.g. p99 ITL within +5%):
    the CI's worse-side bound must stay within the margin."""
    if estimate.higher_is_better:
        return Check(metric, "non_inferiority", "lower", estimate.ci_low, 1 - margin, estimate.ci_low >= 1 - margin)
    return Check(metric, "non_inferiority", "upper", estimate.ci_high, 1 + margin, estimate.ci_high <= 1 + margin)


def slo(
    metric: str, estimate: RatioEstimate, anchor: float, *, max: float | None = None, min: float | None = None
) -> Check:
    """An absolute SLO (``max`` or ``min``) on ``anchor`` (the baseline's value) times the ratio's CI."""
    if max is not None and min is None:
        bound = anchor * estimate.ci_high
        return Check(metric, "slo", "upper", bound, max, bound <= max)
    if min is not None and max is None:
        bound = anchor * estimate.ci_low
        return Check(metric, "slo", "lower", bound, min, bound >= min)
    raise ValueError("give exactly one of max or min")


# ------------------------------------------------------------------------------------- confirmation


@dataclass(frozen=True)
class Row:
    """One candidate, screening and confirmation side by side; only the confirmation estimate is an effect."""

    trial: int
    screening: RatioEstimate | None
    confirmation: RatioEstimate | None
    p_sequential: float
    p_holm: float
    confirmed: bool
    checks: tuple[Check, ...]
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial": self.trial,
            "screening": self.screening.to_dict() if self.screening else None,
            "confirmation": self.confirmation.to_dict() if self.confirmation else None,
            "p_sequential": self.p_sequential,
            "p_holm": self.p_holm,
            "confirmed": self.confirmed,
            "checks": [c.describe() for c in self.checks],
            "status": self.status,
        }


@dataclass(frozen=True)
class Decision:
    """The outcome after a look: the winner (or None), whether confirmation may stop, and every candidate."""

    winner: int | None
    reason: str
    stop: bool
    look: int
    rows: tuple[Row, ...] = field(default_factory=tuple)

    @property
    def effect(self) -> RatioEstimate | None:
        """The reported effect: the winner's confirmation estimate."""
        return next((r.confirmation for r in self.rows if r.trial == self.winner), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "winner": self.winner,
            "reason": self.reason,
            "stop": self.stop,
            "look": self.look,
            "rows": [r.to_dict() for r in self.rows],
        }


def _z_gain(estimate: RatioEstimate) -> float:
    """The standardized estimate log(gain) / SE, SE = log_sd / sqrt(n): the statistic the sequential test reads.

    The early O'Brien-Fleming boundaries sit at one-sided levels of 1e-5..1e-4, out of reach of a Monte-Carlo
    randomization p-value; at confirmation sizes the sign-flip distribution of the statistic is normal with
    this variance, so this is that test in its normal form. The SD is itself estimated, so the ratio follows a t
    distribution with n - 1 degrees of freedom: it is mapped to the normal quantile of the same tail probability,
    which changes nothing at confirmation sizes and keeps a budget of a few pairs from claiming too much (at 8
    pairs the plain ratio would call a +11% chance result on 2-core CPU step pairs significant).
    """
    if estimate.statistic == "median":
        raise ValueError("confirmation needs a mean-type estimate (ratio_of_sums or geomean), not a median")
    log_gain = math.log(gain_bounds(estimate)[1])
    if estimate.log_sd == 0:
        return math.copysign(math.inf, log_gain) if log_gain else 0.0
    if estimate.n < 2:
        return 0.0
    t = log_gain * math.sqrt(estimate.n) / estimate.log_sd
    return math.copysign(float(_st.norm.isf(_st.t.sf(abs(t), estimate.n - 1))), t)


def confirm(
    plan: ConfirmationPlan,
    screening: Sequence[ScreeningResult],
    looks: Mapping[int, Sequence[RatioEstimate]],
    checks: Mapping[int, Sequence[Check]] | None = None,
) -> Decision:
    """Decide after the latest look, from each candidate's confirmation estimates at the planned looks so far
    and its checks on the same confirmation data. The k-th estimate must come from exactly the first
    ``plan.looks[k]`` pairs (pairs a batch brings beyond a look count at the next one).

    A candidate is confirmed when its Holm-adjusted sequential p-value is at most ``alpha``; the winner is the
    confirmed candidate passing all its checks with the best confirmation estimate. Confirmation stops at the
    first look with a winner (stopping only ever removes rejections, so the error stays at most alpha) or at
    the last planned look; otherwise "no confirmed winner".
    """
    checks = checks or {}
    done = max((len(looks.get(c, ())) for c in plan.candidates), default=0)
    if done > len(plan.looks):
        raise ValueError(f"{done} looks given, {len(plan.looks)} planned")
    for c in plan.candidates:
        if [e.n for e in looks.get(c, ())] != list(plan.looks[: len(looks.get(c, ()))]):
            raise ValueError(f"trial {c}: estimates must use the planned pairs per look {plan.looks}")
    by_trial = {r.trial: r.estimate for r in screening}
    p_seq = [
        sequential_p_value([_z_gain(e) for e in looks[c]], plan.fractions) if looks.get(c) else 1.0
        for c in plan.candidates
    ]
    p_holm = holm(p_seq)
    confirmed = [p <= plan.design.alpha for p in p_holm]
    latest = {c: looks[c][-1] for c in plan.candidates if looks.get(c)}
    passing = [
        ok and all(k.passed for k in checks.get(c, ())) for c, ok in zip(plan.candidates, confirmed, strict=True)
    ]
    winners = [c for c, ok in zip(plan.candidates, passing, strict=True) if ok]
    winner = max(winners, key=lambda c: gain_bounds(latest[c])[1]) if winners else None
    stop = winner is not None or done == len(plan.looks)

    rows = [
        Row(
            c,
            by_trial.get(c),
            latest.get(c),
            ps,
            ph,
            ok,
            tuple(checks.get(c, ())),
            _status(c, winner, ok, shown, checks),
        )
        for c, ps, ph, ok, shown in zip(plan.candidates, p_seq, p_holm, confirmed, passing, strict=True)
    ]
    return Decision(winner, _reason(plan, winner, latest, done), stop, done, tuple(rows))


def _status(trial: int, winner: int | None, confirmed: bool, shown: bool, checks: Mapping[int, Sequence[Check]]) -> str:
    if trial == winner:
        return "winner"
    if shown:
        return "confirmed, not the best"
    if confirmed:
        return "confirmed, fails " + ", ".join(k.metric for k in checks.get(trial, ()) if not k.passed)
    return "not confirmed"


def _reason(plan: ConfirmationPlan, winner: int | None, latest: Mapping[int, RatioEstimate], done: int) -> str:
    if winner is not None:
        low, point, high = gain_bounds(latest[winner])
        return (
            f"trial {winner} confirmed: {point - 1:+.2%} [{low - 1:+.2%}, {high - 1:+.2%}] on fresh pairs "
            f"({latest[winner].n} pairs, look {done} of {len(plan.looks)})"
        )
    if not plan.candidates:
        return "no confirmed winner: no feasible candidate from screening"
    return f"no confirmed winner among {len(plan.candidates)} candidate(s) (MDE {plan.mde:.2%})"


# ------------------------------------------------------------------------------------- power


_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite_e.hermegauss(80)


def _selection_chance(effect: float, *, ranking_sd: float, trials: int, m: int) -> float:
    """P(a trial with relative gain ``effect`` ranks among the top m of ``trials`` screened ones when the others
    have none), the ranking statistic normal with SD ``ranking_sd`` in log; integrated by Gauss-Hermite."""
    if trials <= m:
        return 1.0
    beaten_by = _st.norm.sf(math.log1p(effect) / ranking_sd + _HERMITE_NODES)  # chance one null trial ranks above
    return float(_HERMITE_WEIGHTS @ _st.binom.cdf(m - 1, trials - 1, beaten_by) / math.sqrt(2 * math.pi))


def sweep_power(
    effect: float,
    *,
    log_sd: float,
    trials: int,
    screening_pairs: int,
    confirmation_pairs: int,
    design: Design,
    ranking_sd: float | None = None,
) -> float:
    """The power calculation of a whole sweep: the chance that one trial with relative gain ``effect`` among
    ``trials`` (the others with none) is selected as a candidate and then confirmed.

    Selection ranks by the screening lower bound; before screening its noise is taken as the estimate's
    standard error log_sd / sqrt(screening_pairs), after it pass the measured :func:`ranking_sd`.
    """
    m = min(design.m, trials)
    noise = ranking_sd if ranking_sd is not None else log_sd / math.sqrt(screening_pairs)
    selected = _selection_chance(effect, ranking_sd=noise, trials=trials, m=m)
    confirmed = detection_power(log_sd, confirmation_pairs, effect, alpha=design.alpha, m=m, looks=design.looks)
    return selected * confirmed


@dataclass(frozen=True)
class PowerStatement:
    """What a budget can detect, for the CLI to print before and during a run."""

    log_sd: float
    trials: int
    design: Design
    screening_pairs: int
    screening_mde: float  # one screening comparison, one-sided 2.5%
    confirmation_pairs: int  # planned per candidate
    confirmation_mde: float
    pairs_needed: int  # per candidate for min_effect at the design's power
    sweep_power: float  # chance a trial with min_effect among `trials` is confirmed
    pairs_per_minute: float | None = None

    def _time(self, pairs: int) -> str:
        if not self.pairs_per_minute:
            return ""
        minutes = pairs / self.pairs_per_minute
        if minutes < 1:
            return f" (~{minutes * 60:.0f} s)"
        return f" (~{minutes:.0f} min)" if minutes < 120 else f" (~{minutes / 60:.1f} h)"

    def lines(self) -> list[str]:
        d = self.design
        return [
            f"per-pair SD {self.log_sd:.3f}; the smallest gain worth deploying (min_effect) is {d.min_effect:.1%}",
            f"screening: {self.screening_pairs} pairs per trial detect {self.screening_mde:.1%} "
            "(candidates only; screening never names the winner)",
            f"confirmation: {self.confirmation_pairs} pairs per candidate{self._time(self.confirmation_pairs)} "
            f"detect {self.confirmation_mde:.1%} with {d.power:.0%} power (one-sided {d.alpha:g}, Holm over {d.m}, "
            f"{d.looks} look(s))",
            f"{d.min_effect:.1%} needs {self.pairs_needed} pairs per candidate{self._time(self.pairs_needed)}; "
            f"a {d.min_effect:.1%} trial among {self.trials} is confirmed with probability {self.sweep_power:.0%}",
        ]


def power_statement(
    log_sd: float,
    *,
    trials: int,
    screening_pairs: int,
    design: Design = Design(),
    confirmation_pairs: int | None = None,
    pairs_per_minute: float | None = None,
) -> PowerStatement:
    """The power statement for a per-pair SD (from a pilot, the screening so far, or the host defaults above).

    ``confirmation_pairs`` defaults to what ``min_effect`` needs, capped by ``design.max_pairs``.
    """
    m = min(design.m, trials)
    needed = pairs_needed(log_sd, design.min_effect, alpha=design.alpha, m=m, power=design.power, looks=design.looks)
    planned = confirmation_pairs or min(needed, design.max_pairs or needed)
    return PowerStatement(
        log_sd=log_sd,
        trials=trials,
        design=design,
        screening_pairs=screening_pairs,
        screening_mde=mde(log_sd, screening_pairs, alpha=design.alpha, power=design.power),
        confirmation_pairs=planned,
        confirmation_mde=mde(log_sd, planned, alpha=design.alpha, m=m, power=design.power, looks=design.looks),
        pairs_needed=needed,
        sweep_power=sweep_power(
            design.min_effect,
            log_sd=log_sd,
            trials=trials,
            screening_pairs=screening_pairs,
            confirmation_pairs=planned,
            design=design,
        ),
        pairs_per_minute=pairs_per_minute,
    )
