"""A sweep study's own Optuna user attributes: the one module that names, writes and reads them.

A trial's attributes are :mod:`tuner.sweep.trial_attrs`'; these belong to the study as a whole: what the sweep's
budgets could detect before screening, the confirmation's record, and the workload its engines replayed. An
attribute the study has not recorded (yet, or ever: an older study) reads as ``None``.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

import optuna

from tuner.traffic import WorkloadRecord


class StudyAttrs(TypedDict, total=False):
    power_before_screening: dict[str, Any]  # :func:`tuner.sweep.noise.power_before_screening`
    confirmation: dict[str, Any]  # :func:`tuner.sweep.confirmation.run_confirmation`'s record
    workload: WorkloadRecord  # set when the study's first engine is up


class StoredStudyAttrs(TypedDict):
    """What :func:`read` gives: every attribute, ``None`` where the study has not recorded it."""

    power_before_screening: dict[str, Any] | None
    confirmation: dict[str, Any] | None
    workload: WorkloadRecord | None


def record(study: optuna.Study, attrs: StudyAttrs) -> None:
    """Store ``attrs`` on ``study`` (each key one user attribute)."""
    for key, value in attrs.items():
        study.set_user_attr(key, value)


def read(study: optuna.Study) -> StoredStudyAttrs:
    """The attributes stored on ``study``, ``None`` for each it has not recorded."""
    return cast(StoredStudyAttrs, {key: study.user_attrs.get(key) for key in StudyAttrs.__optional_keys__})
