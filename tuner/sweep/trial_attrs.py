"""A sweep trial's Optuna user attributes: the one module that names, writes and reads them.

Optuna keeps what a trial measured as free-form user attributes; here they get one type, so that mypy checks the
writing half (:func:`record`) and the reading half (:func:`read`) against the same keys, as Optuna's own
``_constrained_optimization.py`` owns its constraints key. The keys a trial row of ``summary.json`` carries too are
declared once, in :class:`tuner.records.loader.TrialFields`. A trial that never recorded an attribute (written by
an older sweep, failed, or still running) reads it at its empty value (:data:`EMPTY`), as ``records/upgrade.py``
fills an older ``summary.json``: readers index, they do not guess defaults.
"""

from __future__ import annotations

import copy
from typing import cast

import optuna

from tuner.records import TRIAL_FIELD_DEFAULTS, TrialFields, TrialState

INTERRUPTED_FAILURE = "interrupted"  # the failure recorded on a trial stopped by Ctrl-C or SIGTERM


class TrialAttrs(TrialFields, total=False):
    """What a trial records (:class:`TrialFields`), and what only the study reads back."""

    baseline: bool  # enqueued with the baseline trial
    arms: dict[str, list[dict[str, float]]]  # {"reference": [...], "trial": [...]}: flat metrics per repetition
    constraints: list[float]  # Optuna's constraint values (<= 0 is feasible)


EMPTY = cast(
    TrialAttrs,
    {
        **TRIAL_FIELD_DEFAULTS,
        "anchored": {},
        "telemetry": [],
        "baseline": False,
        "arms": {"reference": [], "trial": []},
    },
)
"""Every attribute but ``constraints`` at its empty value (Optuna's constraints function treats a trial without
them as feasible, which is its own decision, made where the sampler is built)."""


def record(trial: optuna.Trial, attrs: TrialAttrs) -> None:
    """Store ``attrs`` on ``trial`` (each key one user attribute)."""
    for key, value in attrs.items():
        trial.set_user_attr(key, value)


def read(trial: optuna.Trial | optuna.trial.FrozenTrial) -> TrialAttrs:
    """The attributes stored on ``trial``, each one it never recorded at its :data:`EMPTY` value."""
    return cast(TrialAttrs, {**copy.deepcopy(EMPTY), **trial.user_attrs})


def state(trial: optuna.trial.FrozenTrial) -> TrialState:
    """The trial's state for the record: Optuna's, INTERRUPTED where a failed trial was stopped, not broken."""
    if trial.state == optuna.trial.TrialState.FAIL and read(trial)["failure"] == INTERRUPTED_FAILURE:
        return TrialState.INTERRUPTED
    return TrialState(trial.state.name)
