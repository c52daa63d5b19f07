"""The confirmation phase of ``tuner sweep``: screened candidates re-tested against the baseline with fresh pairs.

Screening (the Optuna search) only nominates candidates: the best of many noisy estimates is a chance winner
more often than not, and its gain is inflated. Here up to ``search.confirm.max_candidates`` feasible trials
(ranked by their screening lower bound, :func:`tuner.sweep.screening.select_candidates`, among those whose interval
still allows a gain of ``min_effect`` and whose plan gives at least even odds to confirm it,
:func:`tuner.sweep.plans.nominate`) are measured again in a phase of their own,
each on its own plan (:mod:`tuner.sweep.plans`: the method, grain, per-pair SD and pair rate
of its screening, its own ``budget_s``), with O'Brien-Fleming looks and Holm across candidates
(:func:`tuner.sweep.decisions.confirm`). The estimand is a ratio of sums: tokens over wall time per repetition at
run level, steps over step seconds at step level. The result is stored on the study (user attr ``confirmation``) so
``--resume`` and ``tuner report`` see it.

The engine work is injected (:data:`FreshPairs`), so this module is plain decisions and bookkeeping.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna
from scipy import stats as _st

from tuner.config import Pairs, Search
from tuner.feedback import SILENT, Feedback
from tuner.metrics import STEP_LEVEL_METRICS, Pair, guard_estimate, pairs_estimate, quantity
from tuner.records import CandidatePlanRecord, ConfirmationPowerRecord, ConfirmationRecord, TrialState
from tuner.stats import GUARD_MARGIN, MIN_SIGN_FLIP_PAIRS, RatioEstimate, finite_or_none, obf_boundaries
from tuner.sweep.decisions import Decision, confirm
from tuner.sweep.plans import Candidate, CandidatePlan, ConfirmationPlan, Design, nominate
from tuner.sweep.power_statements import confirmation_lines
from tuner.sweep.screening import ScreeningResult, gain_bounds, ruled_out, select_candidates
from tuner.sweep.slo_checks import Check, non_inferiority

GUARDED = "whole step time, pauses included"
"""What the body's guard checks (:func:`guard_check`)."""
FreshPairs = Callable[[Candidate, int, int, float], list[Pair]]
"""``(candidate, pairs measured so far, pairs wanted, seconds left)`` -> that many fresh pairs (fewer when the
time ran out)."""
LookEstimate = Callable[[Candidate, Sequence[Pair], int], RatioEstimate]
"""``(candidate, its first pairs up to a look, the look)`` -> the look's estimate: the ratio of sums of the pairs,
or for a GC-pacing candidate that of its mutator's pairs times the collector factor measured in the looks so far
(:meth:`tuner.sweep.measuring.Measurer.look_estimate`)."""


def screening_results(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[ScreeningResult], list[str]]:
    """Every completed screened trial's estimate of ``metric``, and notes on the trials left out: an engine-arg
    trial of a study written before restart pairs (no ``env`` on record) was paired against a reference on its own
    engine, so its ratio leaves out the engine-arg effect and it cannot be confirmed against vLLM as installed; a
    trial whose body's guard was breached (its whole step time, pauses included, shown worse by more than the
    margin) can never be a winner."""
    results, notes = [], []
    for row in rows:
        if row["state"] != TrialState.COMPLETE or row["is_baseline"] or row["aa"]:
            continue
        if row["engine"] and row.get("env") is None:
            notes.append(
                f"trial {row['number']} (engine {row['engine']}) is not confirmed: it was paired on its own engine, "
                "so its ratio leaves out the engine-arg effect"
            )
            continue
        guard = (row.get("step_interleave") or {}).get("guard") or {}
        if guard.get("breached"):
            whole = guard["whole"]
            notes.append(
                f"trial {row['number']} is not confirmed: with its pauses its steps took {_describe(whole)} of the "
                f"baseline's time, shown longer than the {guard['margin']:.1%} margin the body's guard allows"
            )
            continue
        estimate = RatioEstimate.from_dict((row["ratios"] or {}).get(metric))
        feasible = bool(row["feasible"]) and row.get("feasible_ci") is not False  # SLOs on their CI bound
        results.append(ScreeningResult(row["number"], feasible, estimate))
    return results, notes


def candidate(row: Mapping[str, Any], metric: str) -> Candidate:
    """How ``row``'s trial is confirmed: as it was screened (step level at its screening's grain where ``metric`` is
    measured by steps, else run level, or restart pairs), at the pair rate of its screening."""
    steps = row.get("step_interleave") or {}
    walls = [r["metrics"]["wall_s"] for r in row["repetitions"]]
    if starts := row.get("restart_pairs"):
        start_s = statistics.median(starts["trial"]) + statistics.median(starts["reference"])
        rate = 1 / (2 * statistics.median(walls) + start_s)
        return Candidate(
            row["number"], row["strategies"], "restarts", rate, "restart pairs", engine=row["engine"],
            env=row.get("env") or {},
        )  # fmt: skip
    if steps.get("pairs") and steps.get("elapsed_s") and metric in STEP_LEVEL_METRICS:
        pacing = row.get("gc_pacing") or {}
        collector_s = float(pacing.get("collector_s") or 0.0)
        return Candidate(
            row["number"],
            row["strategies"],
            "steps",
            steps["pairs"] / (steps["elapsed_s"] + collector_s),
            steps.get("grain") or f"{steps['block_steps']}-step blocks",
            block_steps=steps["block_steps"],
            left_out=tuple(steps.get("left_out") or ()),
            collector_share=collector_s / (steps["elapsed_s"] + collector_s) if pacing else 0.0,
            guard_sd=((steps.get("guard") or {}).get("whole") or {}).get("log_sd"),  # the body's (since 2026-11-29)
        )
    return Candidate(row["number"], row["strategies"], "runs", 1 / (2 * statistics.median(walls)), "run-level pairs")


def design_for(search: Search) -> Design:
    """The confirmation design of ``search.confirm``."""
    settings = search.confirm
    return Design(m=settings.max_candidates, min_effect=settings.min_effect, looks=settings.looks)


def _describe(ratio: Mapping[str, Any]) -> str:
    if ratio.get("ratio") is None:
        return "not estimated"
    return f"{ratio['ratio']:.4f} [{ratio['ci_low']:.4f}, {ratio['ci_high']:.4f}]"


def plan_for(
    rows: Sequence[Mapping[str, Any]], search: Search
) -> tuple[ConfirmationPlan, list[ScreeningResult], list[str]]:
    """The screening's candidates, each planned on its own (:func:`tuner.sweep.plans.nominate`), and notes on the
    trials left out."""
    metric = search.objectives[0].metric
    screening, notes = screening_results(rows, metric)
    by_number = {r["number"]: r for r in rows}
    design = design_for(search)
    if answered := ruled_out(screening, design.min_effect):
        notes.append(
            f"not confirmed, their screening intervals rule out a {design.min_effect:.1%} gain: "
            + ", ".join(f"trial {r.trial} {_describe(r.estimate.to_dict())}" for r in answered if r.estimate)
        )
    chosen = select_candidates(screening, None, design.min_effect)
    ranked = [(candidate(by_number[r.trial], metric), r.estimate.log_sd, r.estimate.n) for r in chosen if r.estimate]
    screened = {r.trial: gain_bounds(r.estimate)[1] - 1 for r in chosen if r.estimate}
    plan, weak = nominate(ranked, budget_s=search.confirm.budget_s, design=design, screened_gain=screened)
    notes += weak
    for c in (p.candidate for p in plan.plans):
        if c.left_out:
            run_level = ((by_number[c.trial].get("step_interleave") or {}).get("run_level") or {}).get(metric) or {}
            notes.append(
                f"trial {c.trial} is confirmed on engine steps, which leave out {', '.join(c.left_out)}: that part is "
                f"only in its screening's end-to-end repetitions (ratio {_describe(run_level)})"
            )
    return plan, screening, notes


def run_confirmation(
    rows: Sequence[Mapping[str, Any]],
    search: Search,
    fresh_pairs: FreshPairs,
    feedback: Feedback = SILENT,
    look_estimate: LookEstimate | None = None,
) -> ConfirmationRecord:
    """Plan, measure look by look and decide; return the record to store on the study. ``look_estimate`` makes each
    look's estimate (default: the ratio of sums of its pairs)."""
    metric = search.objectives[0].metric
    plan, screening, notes = plan_for(rows, search)
    planned: list[CandidatePlanRecord] = [
        {**p.to_dict(), "quantity": quantity(metric, p.candidate.method)} for p in plan.plans
    ]
    for note in notes:
        feedback.note(note, "warning")
    power: ConfirmationPowerRecord | None = None
    if plan.plans:
        lines = confirmation_lines(plan)
        feedback.note("power before confirmation (each candidate's own plan)", "heading")
        feedback.note("  " + "\n  ".join(lines))
        power = {"lines": lines, "candidates": planned}
    metric_of = functools.partial(_pairs_only, metric)
    pairs, looks, decision = _measure_looks(plan, screening, search, fresh_pairs, look_estimate or metric_of, feedback)
    mde_spent = {str(p.trial): finite_or_none(_mde_spent(p, looks[p.trial])) for p in plan.measured}
    mde_note = None
    if plan.measured and decision.winner is None:
        spent = ", ".join(f"#{c} {v:.2%}" if v is not None else f"#{c} nothing" for c, v in mde_spent.items())
        mde_note = (
            f"with the pairs spent this confirmation could detect {spent} (min_effect {search.confirm.min_effect:.2%})"
        )
        feedback.note(mde_note)
    return {
        "screened": sorted(r.trial for r in screening),
        "notes": notes,
        "metric": metric,
        "plan": planned,
        "power": power,
        "decision": decision.to_dict(),
        "pairs_spent": {str(c): len(p) for c, p in pairs.items()},
        "pairs": {str(c): [list(pair) for pair in p] for c, p in pairs.items()},  # the data, for a reader to re-analyse
        "mde_spent": mde_spent,
        "mde_note": mde_note,
    }


def _pairs_only(metric: str, candidate: Candidate, pairs: Sequence[Pair], look: int) -> RatioEstimate:
    return pairs_estimate(pairs, metric, seed=look)


def _measure_looks(
    plan: ConfirmationPlan,
    screening: Sequence[ScreeningResult],
    search: Search,
    fresh_pairs: FreshPairs,
    look_estimate: LookEstimate,
    feedback: Feedback,
) -> tuple[dict[int, list[Pair]], dict[int, list[RatioEstimate]], Decision]:
    """Each measured candidate's fresh pairs look by look (its own looks, its own budget), deciding after each
    round of looks."""
    pairs: dict[int, list[Pair]] = {p.trial: [] for p in plan.measured}
    looks: dict[int, list[RatioEstimate]] = {p.trial: [] for p in plan.measured}
    guards: dict[int, list[Check]] = {}
    decision = confirm(plan, screening, looks)
    rounds = max((len(p.looks) for p in plan.measured), default=0)
    for k in range(rounds):
        for p in plan.measured:
            if k >= len(p.looks) or len(looks[p.trial]) < k:  # no such look, or its time ran out at an earlier one
                continue
            wanted, have = p.looks[k], pairs[p.trial]
            if len(have) < wanted:  # a batch may already have brought this look's pairs
                left_s = search.confirm.budget_s - len(have) / p.candidate.pairs_per_s
                have += fresh_pairs(p.candidate, len(have), wanted - len(have), max(left_s, 0.0))
            if len(have) >= wanted:
                looks[p.trial].append(look_estimate(p.candidate, have[:wanted], k))
                guards[p.trial] = guard_check(have[:wanted], p, k)
        decision = confirm(plan, screening, looks, guards)
        feedback.note(f"confirmation look {k + 1} of {rounds}: {decision.reason}")
        if decision.stop:
            break
    return pairs, looks, decision


def guard_check(pairs: Sequence[Pair], plan: CandidatePlan, look: int) -> list[Check]:
    """The body's guard at a look, as a check the winner must pass (none where the pairs are not the body's): the
    whole step time's ratio of sums, pauses included, shown not longer than ``1 +`` :data:`GUARD_MARGIN` times the
    reference's by its one-sided bound at the look's O'Brien-Fleming boundary at the candidate's level
    (``alpha / m``). With the body's own test at that level, the two make one intersection-union test: the body
    faster and the whole time not worse, each part at the candidate's level, no alpha split."""
    boundary = obf_boundaries(plan.design.alpha / plan.m, plan.fractions)[look]
    whole = guard_estimate(pairs, confidence=1 - 2 * float(_st.norm.sf(boundary)), seed=look)
    return [] if whole is None else [non_inferiority(GUARDED, whole, GUARD_MARGIN)]


def _mde_spent(plan: CandidatePlan, looks: list[RatioEstimate]) -> float:
    """The MDE at the pairs the candidate actually measured, with the noise its confirmation measured."""
    if not looks:
        return math.inf
    return plan.mde_at(looks[-1].log_sd, looks[-1].n)


def restart_pairs_line(restart_keys: Sequence[str], pairs: Pairs) -> str | None:
    """What the power statement says of the space's dimensions compared by restart pairs (None without any)."""
    if not restart_keys:
        return None
    few = (
        f"; {pairs.max} start pairs can never call a change (the sign-flip test needs {MIN_SIGN_FLIP_PAIRS})"
        if pairs.max < MIN_SIGN_FLIP_PAIRS
        else ""
    )
    return (
        f"{', '.join(restart_keys)}: compared by restart pairs ({pairs.min}-{pairs.max} start pairs per trial, an "
        "engine start per arm of each); the noise between engine starts is larger than between runs and is "
        f"measured by those trials themselves{few}"
    )


def pending(study: optuna.Study) -> str:
    """The note for a study whose screening is not (yet) confirmed."""
    return (
        "no confirmed winner: confirmation pending; run `tuner sweep EXPERIMENT.yaml --resume --storage URL "
        f"--study-name {study.study_name}` to confirm the candidates"
    )
