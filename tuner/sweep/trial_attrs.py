"""A sweep trial's Optuna user attributes: the one module that names, writes and reads them.

Optuna keeps what a trial measured as free-form user attributes; here they get one type, so that mypy checks the
writing half (:func:`record`) and the reading half (:func:`read`) against the same keys, as Optuna's own
``_constrained_optimization.py`` owns its constraints key. Studies written before an attribute existed lack it:
readers use ``.get`` with the empty value.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import optuna

from tuner.records.loader import TrialState

INTERRUPTED_FAILURE = "interrupted"  # the failure recorded on a trial stopped by Ctrl-C or SIGTERM


class TrialAttrs(TypedDict, total=False):
    baseline: bool  # enqueued with the baseline trial
    aa: bool  # an A/A trial (the baseline against itself)
    strategies: dict[str, dict[str, Any]]
    engine: dict[str, Any]  # engine-arg overrides
    env: dict[str, Any]  # vLLM environment variable overrides
    restart_pairs: dict[str, list[float]]  # measured by restart pairs: each arm's engine start seconds
    engine_stops: dict[str, list[float]]  # restart pairs: each arm's engine stop seconds
    stop_time: dict[str, Any] | None  # restart pairs: the paired ratio of mean engine stop time (RatioEstimate)
    failure: str  # why it failed (INTERRUPTED_FAILURE when stopped)
    worker: str  # the worker that ran it (shared studies)
    metrics: dict[str, float]  # median of each flat metric over the trial's repetitions
    anchored: dict[str, float]  # what Optuna saw: each ratio times the baseline's median
    arms: dict[str, list[dict[str, float]]]  # {"reference": [...], "trial": [...]}: flat metrics per repetition
    ratios: dict[str, dict[str, Any]]  # per objective/constraint metric: the paired RatioEstimate as a dict
    constraints: list[float]  # Optuna's constraint values (<= 0 is feasible)
    feasible: bool
    feasible_ci: bool
    slo_checks: list[str]  # each SLO check, in words
    verdict: str | None
    switch_s: list[float]
    token_ids_match: bool | None
    telemetry: list[Any]
    tail: dict[str, Any] | None
    step_interleave: dict[str, Any]
    gc_pacing: dict[str, Any]  # a GC-pacing trial: each arm's gen0 cycle measured alone, and the grain it gave


def record(trial: optuna.Trial, attrs: TrialAttrs) -> None:
    """Store ``attrs`` on ``trial`` (each key one user attribute)."""
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


def read(trial: optuna.Trial | optuna.trial.FrozenTrial) -> TrialAttrs:
    """The attributes stored on ``trial`` (those of older studies may be missing)."""
    return cast(TrialAttrs, trial.user_attrs)


def state(trial: optuna.trial.FrozenTrial) -> TrialState:
    """The trial's state for the record: Optuna's, INTERRUPTED where a failed trial was stopped, not broken."""
    if trial.state == optuna.trial.TrialState.FAIL and read(trial).get("failure") == INTERRUPTED_FAILURE:
        return TrialState.INTERRUPTED
    return TrialState(trial.state.name)
