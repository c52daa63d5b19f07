"""The confirmation phase of ``tuner sweep``: screened candidates re-tested against the baseline with fresh pairs.

Screening (the Optuna search) only nominates candidates: the best of many noisy estimates is a chance winner
more often than not, and its gain is inflated. Here up to ``search.confirm.max_candidates`` feasible trials
(ranked by their screening lower bound, :func:`tuner.sweep.decisions.plan_confirmation`) are measured again in a
phase of their own, sized from the screening noise for ``min_effect`` and capped by ``budget_s`` per candidate,
with O'Brien-Fleming looks and Holm across candidates (:func:`tuner.sweep.decisions.confirm`). The estimand is a ratio
of sums: tokens over wall time per repetition at run level, steps over step seconds at step level. The result
is stored on the study (user attr ``confirmation``) so ``--resume`` and ``tuner report`` see it.

The engine work is injected (:data:`FreshPairs`), so this module is plain decisions and bookkeeping.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna

from tuner.config.search import Pairs, Search
from tuner.feedback import SILENT, Feedback
from tuner.metric_table import STEP_LEVEL_METRICS
from tuner.paired_estimate import Pair, pairs_estimate, run_pair
from tuner.results.records import TrialState
from tuner.stats import MIN_SIGN_FLIP_PAIRS, RatioEstimate, mde
from tuner.sweep.decisions import (
    ConfirmationPlan,
    Design,
    PowerStatement,
    ScreeningResult,
    confirm,
    plan_confirmation,
    power_statement,
    select_candidates,
    spend_budget,
)

CONFIRMATION_ATTR = "confirmation"
CONFIRMATION_PACE = 0.8
"""The share of the screening's pair rate a confirmation is planned at (see :func:`design_for`)."""
SCREENING_POWER_ATTR = "power_before_screening"


@dataclass(frozen=True)
class Candidate:
    """A screened trial to confirm: what it runs, how it is measured and how fast pairs come."""

    trial: int
    strategies: dict[str, dict[str, Any]]
    method: str  # "steps" (in-engine interleaving), "runs" (paired repetitions) or "restarts" (restart pairs)
    pairs_per_s: float
    left_out: tuple[str, ...] = ()  # what its estimate does not see (steps: the front-end part of its effect)
    engine: dict[str, Any] = field(default_factory=dict)  # restarts: its engine-arg overrides
    env: dict[str, Any] = field(default_factory=dict)  # restarts: its vLLM environment variable overrides


FreshPairs = Callable[[Candidate, int, int, float], list[Pair]]
"""``(candidate, pairs measured so far, pairs wanted, seconds left)`` -> that many fresh pairs (fewer when the
time ran out)."""


def screening_results(rows: Sequence[Mapping[str, Any]], metric: str) -> tuple[list[ScreeningResult], list[str]]:
    """Every completed screened trial's estimate of ``metric``, and notes on the trials left out: an engine-arg
    trial of a study written before restart pairs (no ``env`` on record) was paired against a reference on its own
    engine, so its ratio leaves out the engine-arg effect and it cannot be confirmed against vLLM as installed."""
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
        estimate = RatioEstimate.from_dict((row["ratios"] or {}).get(metric))
        feasible = bool(row["feasible"]) and row.get("feasible_ci") is not False  # SLOs on their CI bound
        results.append(ScreeningResult(row["number"], feasible, estimate))
    return results, notes


def candidate(row: Mapping[str, Any], metric: str) -> Candidate:
    """How ``row``'s trial is confirmed: step level where it was screened by steps and ``metric`` is measured by
    steps, else run level; its pair rate from its screening."""
    steps = row.get("step_interleave") or {}
    walls = [r["metrics"]["wall_s"] for r in row["repetitions"]]
    if starts := row.get("restart_pairs"):
        start_s = statistics.median(starts["trial"]) + statistics.median(starts["reference"])
        rate = 1 / (2 * statistics.median(walls) + start_s)
        return Candidate(
            row["number"], row["strategies"], "restarts", rate, engine=row["engine"], env=row.get("env") or {}
        )
    if steps.get("pairs") and steps.get("elapsed_s") and metric in STEP_LEVEL_METRICS:
        rate = steps["pairs"] / steps["elapsed_s"]
        return Candidate(row["number"], row["strategies"], "steps", rate, tuple(steps.get("left_out") or ()))
    return Candidate(row["number"], row["strategies"], "runs", 1 / (2 * statistics.median(walls)))


def design_for(search: Search, candidates: Sequence[Candidate]) -> Design:
    """The confirmation design of ``search.confirm``, its pairs capped by what the slowest candidate measures
    within ``budget_s``."""
    settings = search.confirm
    # A confirmation measures pairs more slowly than its screening did (each look starts a fresh comparison; 18.8
    # against 21.1 step pairs/s in one sweep here): planned at the screening's rate, its last look would not be
    # reached within the budget and its pairs would go unread.
    cap = min((int(CONFIRMATION_PACE * settings.budget_s * c.pairs_per_s) for c in candidates), default=None)
    return Design(
        m=settings.max_candidates,
        min_effect=settings.min_effect,
        looks=settings.looks,
        max_pairs=max(cap, settings.looks) if cap is not None else None,
    )


def _describe(ratio: Mapping[str, Any]) -> str:
    if ratio.get("ratio") is None:
        return "not estimated"
    return f"{ratio['ratio']:.4f} [{ratio['ci_low']:.4f}, {ratio['ci_high']:.4f}]"


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def run_confirmation(
    rows: Sequence[Mapping[str, Any]], search: Search, fresh_pairs: FreshPairs, feedback: Feedback = SILENT
) -> dict[str, Any]:
    """Plan, measure look by look and decide; return the record to store on the study."""
    metric = search.objectives[0].metric
    screening, notes = screening_results(rows, metric)
    by_number = {r["number"]: r for r in rows}
    chosen = select_candidates(screening, search.confirm.max_candidates)
    candidates = {r.trial: candidate(by_number[r.trial], metric) for r in chosen}
    plan = spend_budget(plan_confirmation(screening, design_for(search, list(candidates.values()))))
    record: dict[str, Any] = {
        "screened": sorted(r.trial for r in screening),
        "notes": notes,
        "metric": metric,
        "candidates": [
            {"trial": c.trial, "method": c.method, "pairs_per_s": c.pairs_per_s, "left_out": list(c.left_out)}
            for c in candidates.values()
        ],
        "plan": {"pairs": plan.pairs, "looks": list(plan.looks), "log_sd": _finite(plan.log_sd)},
    }
    for c in candidates.values():
        if c.left_out:
            run_level = ((by_number[c.trial].get("step_interleave") or {}).get("run_level") or {}).get(metric) or {}
            notes.append(
                f"trial {c.trial} is confirmed on engine steps, which leave out {', '.join(c.left_out)}: that part is "
                f"only in its screening's run-level pairs (ratio {_describe(run_level)}, end to end)"
            )
    for note in notes:
        feedback.note(note, "warning")
    if candidates:
        record["power"] = _print_power(plan, screening, candidates, feedback)
    pairs: dict[int, list[Pair]] = {c: [] for c in plan.candidates}
    looks: dict[int, list[RatioEstimate]] = {c: [] for c in plan.candidates}
    decision = confirm(plan, screening, looks)
    for k, wanted in enumerate(plan.looks):
        for number, cand in candidates.items():
            if len(looks[number]) < k:  # its time ran out at an earlier look
                continue
            left_s = search.confirm.budget_s - len(pairs[number]) / cand.pairs_per_s
            pairs[number] += fresh_pairs(cand, len(pairs[number]), wanted - len(pairs[number]), max(left_s, 0.0))
            if len(pairs[number]) >= wanted:
                looks[number].append(pairs_estimate(pairs[number][:wanted], metric, seed=k))
        decision = confirm(plan, screening, looks)
        feedback.note(f"confirmation look {k + 1} of {len(plan.looks)} ({wanted} pairs): {decision.reason}")
        if decision.stop:
            break
    record["decision"] = decision.to_dict()
    record["pairs_spent"] = {str(c): len(p) for c, p in pairs.items()}
    record["pairs"] = {str(c): p for c, p in pairs.items()}  # the measured data, kept for a reader to re-analyse
    record["mde_spent"] = _finite(_mde_spent(plan, looks))
    if candidates and decision.winner is None:
        record["mde_note"] = (
            f"with the pairs spent this confirmation could detect {record['mde_spent'] or math.inf:.2%}"
            f" (min_effect {search.confirm.min_effect:.2%})"
        )
        feedback.note(record["mde_note"])
    return record


def _print_power(
    plan: ConfirmationPlan, screening: Sequence[ScreeningResult], candidates: dict[int, Candidate], feedback: Feedback
) -> dict[str, Any]:
    """The power statement before confirmation, printed, and as data for the summary."""
    design = plan.design
    screened = [r.estimate.n for r in screening if r.estimate is not None]
    statement = power_statement(
        plan.log_sd,
        trials=max(len(screening), 1),
        screening_pairs=int(statistics.median(screened)),
        design=design,
        confirmation_pairs=plan.pairs,
        pairs_per_minute=60 * min(c.pairs_per_s for c in candidates.values()),
    )
    lines = statement.lines()
    if plan.pairs < statement.pairs_needed:
        lines.append(
            f"the confirmation budget ({plan.pairs} pairs per candidate) cannot reach min_effect "
            f"{design.min_effect:.1%}: it detects {statement.confirmation_mde:.1%}"
        )
    feedback.note("power before confirmation", "heading")
    feedback.note("  " + "\n  ".join(lines))
    return _power_record(statement, lines)


def _power_record(statement: PowerStatement, lines: list[str]) -> dict[str, Any]:
    return {
        "lines": lines,
        "log_sd": statement.log_sd,
        "confirmation_pairs": statement.confirmation_pairs,
        "confirmation_mde": _finite(statement.confirmation_mde),
        "pairs_needed": statement.pairs_needed,
        "sweep_power": statement.sweep_power,
    }


def _mde_spent(plan: ConfirmationPlan, looks: dict[int, list[RatioEstimate]]) -> float:
    """The MDE at the pairs the confirmation actually measured (the fewest of any candidate), with the noise
    it measured."""
    latest = [e[-1] for e in looks.values() if e]
    if not latest:
        return math.inf
    sd = math.sqrt(statistics.fmean(e.log_sd**2 for e in latest))
    design = plan.design
    n = min(e.n for e in latest)
    return mde(sd, n, alpha=design.alpha, m=len(plan.candidates), power=design.power, looks=design.looks)


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
        "engine start per arm of each); the noise between engine starts is larger than the run-level noise above "
        f"and is measured by those trials themselves{few}"
    )


def screening_power(
    arms: dict[str, list[dict[str, float]]], search: Search, trials: int, restart_keys: Sequence[str] = ()
) -> dict[str, Any]:
    """The power statement before screening, from the baseline trial's pairs (both arms vLLM as installed: the
    host's per-pair noise at run level), and a line on the dimensions compared by restart pairs."""
    metric = search.objectives[0].metric
    pairs = [run_pair(metric, t, r) for t, r in zip(arms["trial"], arms["reference"], strict=True)]
    estimate = pairs_estimate(pairs, metric)
    wall = statistics.median(r["wall_s"] for r in arms["reference"])
    cand = Candidate(-1, {}, "runs", 1 / (2 * wall))
    statement = power_statement(
        estimate.log_sd,
        trials=trials,
        screening_pairs=search.pairs.max,
        design=design_for(search, [cand]),
        pairs_per_minute=60 * cand.pairs_per_s,
    )
    restarts = restart_pairs_line(restart_keys, search.pairs)
    return _power_record(statement, statement.lines() + ([restarts] if restarts else []))


def pending(study: optuna.Study) -> str:
    """The note for a study whose screening is not (yet) confirmed."""
    return (
        "no confirmed winner: confirmation pending; run `tuner sweep EXPERIMENT.yaml --resume --storage URL "
        f"--study-name {study.study_name}` to confirm the candidates"
    )
