"""Older result files brought to the current layout, in place: what :func:`tuner.records.loader.load` guarantees.

Fields are only ever added within a schema's major version; a file written before a field existed gets its empty
value, so that every field of a record type (:mod:`tuner.records.loader`) is present after loading. Fields every
version wrote are filled too, empty, so that a hand-made or truncated file reads as one with nothing in them.
Nothing on disk changes.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from tuner.metrics import HIGHER_IS_BETTER

_RUN_DEFAULTS: dict[str, Any] = {
    "kind": "run",
    "experiment": "",
    "created": "",
    "config": {},
    "engine": {},
    "environment": {},
    "strategies": {},
    "summary": {},
    "memory": {},
    "workload": None,
}
_ENGINE_DEFAULTS: dict[str, Any] = {"args": {}, "start_s": math.nan, "mode": "", "env": {}}
_REPETITION_DEFAULTS: dict[str, Any] = {"processes": [], "tail": None}
_ENVIRONMENT_DEFAULTS: dict[str, Any] = {
    **dict.fromkeys(("python", "platform", "cpu_count", "cpu_model", "device", "git_sha", "hostname")),
    "versions": {},
}
TRIAL_FIELD_DEFAULTS: dict[str, Any] = {
    "aa": False,
    "strategies": {},
    "engine": {},
    "env": None,
    "restart_pairs": None,
    "engine_stops": None,
    "stop_time": None,
    "metrics": {},
    "ratios": {},
    "feasible": None,
    "feasible_ci": None,
    "slo_checks": [],
    "verdict": None,
    "switch_s": [],
    "token_ids_match": None,
    "tail": None,
    "failure": None,
    "worker": None,
    "step_interleave": None,
    "gc_pacing": None,
}
"""The empty value of each :class:`tuner.records.loader.TrialFields` key a trial records as it runs (``anchored`` and
``telemetry`` are derived from others when an older file lacks them: :func:`_upgrade_trial`)."""
_TRIAL_DEFAULTS: dict[str, Any] = {
    **TRIAL_FIELD_DEFAULTS,
    "is_baseline": False,
    "params": {},
    "values": None,
    "repetitions": [],
}
_SUMMARY_DEFAULTS: dict[str, Any] = {
    "kind": "sweep",
    "experiment": "",
    "study": None,
    "created": "",
    "environment": {},
    "config": {},
    "constraints": [],
    "engine_starts": None,
    "start_s": [],
    "switch_s": [],
    "pareto": [],
    "importance": {},
    "best": [],
    "confirmation": None,
    "power": {},
    "aa": {},
    "incomplete": [],
    "workload": None,
}
_WINNER_DEFAULTS: dict[str, Any] = {
    "trial": None,
    "confirmed": False,
    "reason": "",
    "effect": None,
    "repeated_ci": None,
    "strategies": {},
    "engine": {},
    "env": "",
    "vllm_env": {},
}
_CONFIRMATION_DEFAULTS: dict[str, Any] = {
    "screened": [],
    "notes": [],
    "metric": "",
    "plan": [],
    "power": None,
    "pairs_spent": {},
    "pairs": {},
    "mde_spent": {},
    "mde_note": None,
}
_DECISION_DEFAULTS: dict[str, Any] = {
    "winner": None,
    "reason": "",
    "stop": True,
    "look": 0,
    "rows": [],
    "repeated_ci": None,
}
_POWER_DEFAULTS: dict[str, Any] = {"before_screening": None, "before_confirmation": None}
_RATIO_DEFAULTS: dict[str, Any] = {"source": ""}
"""A stored ratio's ``source`` (added on 2026-11-29; before, only step-measured ratios said "steps")."""
_STEP_DEFAULTS: dict[str, Any] = {
    "estimand": "mean",
    "guard": None,
    "driven_by": "offline batches",
    "left_out": [],
    "stalls": None,
    "run_level": {},
}
"""A step comparison's fields added since the first (``driven_by`` on 2026-11-27, ``estimand`` and ``guard`` on
2026-11-29): what the older comparisons were."""


def _direction(metric: object) -> str:
    """The direction an objective written without one had: its metric's (``tuner.metrics.HIGHER_IS_BETTER``)."""
    return "maximize" if metric in HIGHER_IS_BETTER else "minimize"


def _fill(record: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Give ``record`` each field of ``defaults`` it lacks, as a copy of the default."""
    for key, default in defaults.items():
        if key not in record:
            record[key] = copy.deepcopy(default)


def upgrade_run(run: dict[str, Any]) -> None:
    """Bring a run to the current :class:`tuner.records.loader.RunRecord` layout; a repetition's ``index`` is its
    place."""
    _fill(run, _RUN_DEFAULTS)
    _fill(run["engine"], _ENGINE_DEFAULTS)
    _fill(run["environment"], _ENVIRONMENT_DEFAULTS)
    upgrade_workload(run["workload"])
    for index, rep in enumerate(run["repetitions"]):
        rep.setdefault("index", index)
        _fill(rep, _REPETITION_DEFAULTS)


def _upgrade_trial(trial: dict[str, Any]) -> None:
    """Bring a trial written by an older sweep to the current :class:`tuner.records.loader.TrialRow` layout: fields
    added since get their empty value; ``anchored`` (added later) is the trial's own medians, as Optuna saw them;
    per-process telemetry kept per repetition gives ``telemetry`` from the last one. Repetitions stored as a
    count, or without metrics, are left out (``pairs`` still counts them)."""
    _fill(trial, _TRIAL_DEFAULTS)
    trial.setdefault("anchored", trial["metrics"])
    reps = trial["repetitions"] if isinstance(trial["repetitions"], list) else []
    kept = [r["processes"] for r in reps if isinstance(r, dict) and r.get("processes")]
    trial.setdefault("telemetry", kept[-1] if kept else [])
    trial.setdefault("pairs", len(reps))
    trial["repetitions"] = [r for r in reps if isinstance(r, dict) and isinstance(r.get("metrics"), dict)]
    for ratio in trial["ratios"].values():
        _fill(ratio, _RATIO_DEFAULTS)
    if trial["step_interleave"] is not None:
        _fill(trial["step_interleave"], _STEP_DEFAULTS)


def _upgrade_winner(summary: dict[str, Any]) -> None:
    """Older sweeps named the best screened trial as the winner, with no confirmation on fresh pairs: it stays
    named but unconfirmed (``confirmed`` False, ``effect`` None); the YAML they inlined is in ``winner.yaml`` now."""
    if not isinstance(summary.get("winner"), dict):
        summary["winner"] = {"reason": "no winner recorded"}
    summary["winner"].pop("yaml", None)
    _fill(summary["winner"], _WINNER_DEFAULTS)


def _upgrade_confirmation(confirmation: dict[str, Any] | None) -> None:
    """A confirmation record with the fields readers take: ``notes``, ``mde_note`` (None without one) and ``plan``,
    each candidate's plan (older studies planned the candidates together, in one object: none of them then)."""
    if confirmation is None:
        return
    _fill(confirmation, _CONFIRMATION_DEFAULTS)
    confirmation.setdefault("decision", {})
    _fill(confirmation["decision"], _DECISION_DEFAULTS)
    plan = confirmation["plan"]
    confirmation["plan"] = [p for p in plan if isinstance(p, dict)] if isinstance(plan, list) else []


def upgrade_summary(summary: dict[str, Any]) -> None:
    """Bring a sweep summary (its objectives, trials, winner and confirmation too) to the current
    :class:`tuner.records.loader.SweepSummary` layout."""
    for objective in summary["objectives"]:
        objective.setdefault("direction", _direction(objective["metric"]))
    for trial in summary["trials"]:
        _upgrade_trial(trial)
    _fill(summary, _SUMMARY_DEFAULTS)
    _fill(summary["environment"], _ENVIRONMENT_DEFAULTS)
    _fill(summary["power"], _POWER_DEFAULTS)
    upgrade_workload(summary["workload"])
    _upgrade_winner(summary)
    _upgrade_confirmation(summary["confirmation"])


def upgrade_capacity(capacity: dict[str, Any]) -> None:
    """Bring a capacity record to the current :class:`tuner.records.capacity.CapacityRecord` layout: ``host``
    (added on 2026-11-29) is None where the search did not sample the host's load; ``contention`` and the search's
    ``contention`` (added the same day) are None, and each level's ``set_aside`` empty, where no round was run again
    after other work took the host; the search's ``unloadable_from`` and ``start_auto`` (also that day) are None and
    its ``oversaturated`` counts none; the search's ``restarts`` (added on 2026-11-30) is None and each arm changes no
    engine argument or variable (the arms were switched in place), and its ``unpaired`` (also that day) is None;
    the host's ``waited`` and ``tool_wait_median`` (also that day) are None where the tool's wait for a CPU was not
    sampled."""
    capacity.setdefault("host", None)
    if isinstance(capacity["host"], dict):  # the tool's wait for a CPU, sampled since 2026-11-30
        capacity["host"].setdefault("waited", None)
        capacity["host"].setdefault("tool_wait_median", None)
    capacity.setdefault("contention", None)
    capacity.get("search", {}).setdefault("contention", None)
    capacity.get("search", {}).setdefault("unloadable_from", None)
    capacity.get("search", {}).setdefault("start_auto", None)
    capacity.get("search", {}).setdefault("oversaturated", {"loads": 0, "rounds": 0, "saved_s": 0.0})
    capacity.get("search", {}).setdefault("restarts", None)
    capacity.get("search", {}).setdefault("unpaired", None)
    for arm in ("reference", "configuration"):
        capacity.get(arm, {}).setdefault("engine", {})
        capacity.get(arm, {}).setdefault("env", {})
    for level in capacity.get("levels", []):
        level.setdefault("set_aside", {arm: [] for arm in level.get("runs", {})})
    upgrade_workload(capacity.get("workload"))


def upgrade_workload(workload: dict[str, Any] | None) -> None:
    """Bring a workload record (in a run, a summary, a capacity record or a study) to the current
    :class:`tuner.traffic.WorkloadRecord` layout: a dataset's ``output_clipped`` (added on 2026-11-27) is 0 where
    outputs were not counted apart."""
    if workload and isinstance(workload.get("dataset"), dict):
        workload["dataset"].setdefault("output_clipped", 0)
