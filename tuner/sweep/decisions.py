"""The confirmation's decision as a pure function on plain data: which candidate, if any, is confirmed.

A sweep has two phases. **Screening** is the search: every trial is paired against the baseline on a small
budget, and Optuna uses those estimates to explore. Picking the best of k noisy estimates finds chance winners
(30-35% of sweeps at k=20 when nothing helps) and inflates their gain, so screening never names the winner: it
only nominates up to ``m`` candidates (:mod:`tuner.sweep.screening`). **Confirmation** re-tests them against the
baseline with fresh pairs, each on its own plan (:mod:`tuner.sweep.plans`); a one-sided O'Brien-Fleming
group-sequential test per candidate with Holm across candidates keeps the chance of deploying a configuration
that is not better at most ``alpha`` for the whole sweep, and the reported effect is the confirmation estimate,
free of the selection that picked it.

One test per verdict: the sequential test reads, at each look, the same exact sign-flip test of the ratio of sums
whose p-value and inverted CI are printed beside it (:func:`sign_flip_z`). A look with too few pairs for that test
to reach its boundary cannot stop the confirmation, and a confirmed candidate's 95% interval always lies on the
gain side of 1 and is bounded.

A winner's interval is the repeated confidence interval that inverts that decision (:func:`repeated_interval`):
at each of its looks so far, the O'Brien-Fleming boundary at its Holm share of ``alpha`` on each side, intersected.
The fixed-sample 95% interval of its last look, printed beside it, is narrower than the decision warrants wherever
several candidates share alpha or a look before the last one stopped.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scipy import stats as _st

from tuner.records import DecisionRecord, DecisionRowRecord
from tuner.stats import PRODUCT, UNBOUNDED_LOG, RatioEstimate, holm, obf_boundaries, sequential_p_value
from tuner.sweep.plans import CandidatePlan, ConfirmationPlan
from tuner.sweep.screening import ScreeningResult, gain_bounds
from tuner.sweep.slo_checks import Check

__all__ = ["Decision", "Row", "bounded_gain", "confirm", "repeated_interval", "sign_flip_z"]


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

    def to_dict(self) -> DecisionRowRecord:
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
    repeated: tuple[float, float] | None = None  # the winner's gain-side interval inverting the decision

    @property
    def effect(self) -> RatioEstimate | None:
        """The reported effect: the winner's confirmation estimate."""
        return next((r.confirmation for r in self.rows if r.trial == self.winner), None)

    def to_dict(self) -> DecisionRecord:
        return {
            "winner": self.winner,
            "reason": self.reason,
            "stop": self.stop,
            "look": self.look,
            "rows": [r.to_dict() for r in self.rows],
            "repeated_ci": [b if math.isfinite(b) else None for b in self.repeated] if self.repeated else None,
        }


def sign_flip_z(estimate: RatioEstimate) -> float:
    """The standardized statistic the sequential test reads: the one-sided (gain side) p-value of the estimate's
    own sign-flip test, as a normal quantile.

    The sign-flip distribution of log R is symmetric (swapping every pair negates it), so the one-sided p is half
    the two-sided one on the side the estimate lies, one minus that on the other. Exact where every swap pattern is
    enumerated, Monte-Carlo otherwise (its smallest p, 1 / (draws + 1), caps the statistic: an early
    O'Brien-Fleming boundary out of its reach cannot stop a confirmation, which only costs power). At n pairs the
    statistic cannot exceed the quantile of 2^-n, so a look with too few pairs cannot cross a boundary above it.
    The t statistic read before claimed p 0.003 from 5 single-step pairs whose exact test cannot go below 1/32.
    A GC-pacing look's product of the mutator's ratio of sums and the collector factor
    (:func:`tuner.stats.product.product_estimate`) is read the same way: its p-value is the normal test its
    interval inverts, symmetric about the estimate.
    """
    if estimate.statistic not in ("ratio_of_sums", PRODUCT):
        raise ValueError("confirmation needs the ratio of sums and its sign-flip test, not " + estimate.statistic)
    if math.isnan(estimate.p_value):  # identical arms: no evidence either way
        return 0.0
    gain = gain_bounds(estimate)[1]
    half = min(estimate.p_value, 1.0) / 2
    one_sided = half if gain > 1 else 1 - half if gain < 1 else 0.5
    return float(_st.norm.isf(one_sided))


def bounded_gain(estimate: RatioEstimate) -> bool:
    """Whether the interval lies on the gain side of 1 and is bounded on both sides (no side the test could not
    bound, :data:`tuner.stats.UNBOUNDED_LOG`): what a confirmed effect is reported with."""
    low, point, high = gain_bounds(estimate)
    reach = math.exp(UNBOUNDED_LOG - 1)
    return low > 1.0 and high < point * reach and low > point / reach


def repeated_interval(estimates: Sequence[RatioEstimate], plan: CandidatePlan, level: float) -> tuple[float, float]:
    """The gain-side interval that inverts a candidate's sequential decision at one-sided ``level`` (its Holm share
    of alpha) after ``estimates`` (its looks so far): at each look the gain whose test statistic would still reach
    the look's O'Brien-Fleming boundary, on each side, intersected over the looks. Each look's standard error is
    the one its own test implies (log gain / :func:`sign_flip_z`), so the lower end exceeds 1 exactly when some
    look's statistic crossed its boundary, as the decision reads it; unbounded where a look has no evidence of a
    gain (a statistic at or below 0 says nothing of its size)."""
    boundaries = obf_boundaries(level, plan.fractions)
    low, high = 0.0, math.inf
    for estimate, boundary in zip(estimates, boundaries, strict=False):
        z, gain = sign_flip_z(estimate), math.log(gain_bounds(estimate)[1])
        if z <= 0 or gain <= 0:
            continue
        se = gain / z
        low, high = max(low, math.exp(gain - boundary * se)), min(high, math.exp(gain + boundary * se))
    return low, high


def confirm(
    plan: ConfirmationPlan,
    screening: Sequence[ScreeningResult],
    looks: Mapping[int, Sequence[RatioEstimate]],
    checks: Mapping[int, Sequence[Check]] | None = None,
) -> Decision:
    """Decide after the latest look, from each measured candidate's confirmation estimates at its planned looks so
    far and its checks on the same confirmation data. A candidate's k-th estimate must come from exactly the first
    ``looks[k]`` pairs of its own plan (pairs a batch brings beyond a look count at the next one).

    A candidate is confirmed when its Holm-adjusted sequential p-value (its own looks' fractions) is at most
    ``alpha`` and its latest interval lies, bounded, on the gain side of 1 (:func:`bounded_gain`; implied by the
    first wherever the latest look is the one that crossed, and required so that a confirmed effect is never
    printed with an interval that says otherwise). The winner is the confirmed candidate passing all its checks
    with the best confirmation estimate. Confirmation stops at the first look with a winner (stopping only ever
    removes rejections, so the error stays at most alpha) or once every candidate has had all its looks.
    """
    checks = checks or {}
    measured = plan.measured
    for p in measured:
        given = [e.n for e in looks.get(p.trial, ())]
        if given != list(p.looks[: len(given)]):
            raise ValueError(f"trial {p.trial}: estimates must use its planned pairs per look {p.looks}, got {given}")
    by_trial = {r.trial: r.estimate for r in screening}
    p_seq = [
        sequential_p_value([sign_flip_z(e) for e in looks[p.trial]], p.fractions) if looks.get(p.trial) else 1.0
        for p in measured
    ]
    p_holm = holm(p_seq)
    latest = {p.trial: looks[p.trial][-1] for p in measured if looks.get(p.trial)}
    confirmed = [
        q <= plan.design.alpha and p.trial in latest and bounded_gain(latest[p.trial])
        for p, q in zip(measured, p_holm, strict=True)
    ]
    passing = [ok and all(k.passed for k in checks.get(p.trial, ())) for p, ok in zip(measured, confirmed, strict=True)]
    winners = [p.trial for p, ok in zip(measured, passing, strict=True) if ok]
    winner = max(winners, key=lambda c: gain_bounds(latest[c])[1]) if winners else None
    done = max((len(looks.get(p.trial, ())) for p in measured), default=0)
    finished = all(len(looks.get(p.trial, ())) == len(p.looks) for p in measured)
    repeated = None
    if winner is not None:
        ahead = sum(q < p_seq[[p.trial for p in measured].index(winner)] for q in p_seq)  # Holm's step-down rank
        share = plan.design.alpha / (len(measured) - ahead)
        repeated = repeated_interval(looks[winner], plan.plan_for(winner), share)
    rows = [
        Row(
            p.trial,
            by_trial.get(p.trial),
            latest.get(p.trial),
            ps,
            ph,
            ok,
            tuple(checks.get(p.trial, ())),
            _status(p.trial, winner, ok, shown, checks),
        )
        for p, ps, ph, ok, shown in zip(measured, p_seq, p_holm, confirmed, passing, strict=True)
    ]
    reason = _reason(plan, winner, latest, done, repeated)
    return Decision(winner, reason, winner is not None or finished, done, tuple(rows), repeated)


def _status(trial: int, winner: int | None, confirmed: bool, shown: bool, checks: Mapping[int, Sequence[Check]]) -> str:
    if trial == winner:
        return "winner"
    if shown:
        return "confirmed, not the best"
    if confirmed:
        return "confirmed, fails " + ", ".join(k.metric for k in checks.get(trial, ()) if not k.passed)
    return "not confirmed"


def _reason(
    plan: ConfirmationPlan,
    winner: int | None,
    latest: Mapping[int, RatioEstimate],
    done: int,
    repeated: tuple[float, float] | None,
) -> str:
    if winner is not None and repeated is not None:
        point = gain_bounds(latest[winner])[1]
        looks = len(plan.plan_for(winner).looks)
        low, high = (f"{b - 1:+.2%}" if math.isfinite(b) else "unbounded" for b in repeated)
        return (
            f"trial {winner} confirmed: {point - 1:+.2%} [{low}, {high}] on fresh pairs ({latest[winner].n} pairs, "
            f"look {done} of {looks}; the interval inverts the decision: each look's O'Brien-Fleming boundary at "
            "its Holm share of alpha)"
        )
    if not plan.plans:
        return (
            "no confirmed winner: no screened trial was nominated (feasible, its interval allowing min_effect, its "
            "budget with even odds to confirm what it hopes)"
        )
    if not plan.candidates:
        return f"no confirmed winner: none of {len(plan.plans)} candidate(s) can be confirmed within its budget"
    mdes = ", ".join(f"#{p.trial} {p.mde:.2%}" for p in plan.measured)
    return f"no confirmed winner among {len(plan.candidates)} candidate(s) (planned MDE {mdes})"
