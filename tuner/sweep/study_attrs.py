"""A sweep study's own Optuna user attributes: the one module that names, writes and reads them.

A trial's attributes are :mod:`tuner.sweep.trial_attrs`'; these belong to the study as a whole: what the sweep's
budgets could detect before screening, the confirmation's record, and the workload its engines replayed. An
attribute the study has not recorded (yet, or ever: an older study) reads as ``None``.
"""

from __future__ import annotations

from typing import TypedDict, cast

import optuna

from tuner.records import ConfirmationRecord, ScreeningPowerRecord, upgrade_workload
from tuner.traffic import WorkloadRecord


class StudyAttrs(TypedDict, total=False):
    power_before_screening: ScreeningPowerRecord  # :func:`tuner.sweep.noise.power_before_screening`
    confirmation: ConfirmationRecord  # :func:`tuner.sweep.confirmation.run_confirmation`'s record
    workload: WorkloadRecord  # set when the study's first engine is up


class StoredStudyAttrs(TypedDict):
    """What :func:`read` gives: every attribute, ``None`` where the study has not recorded it."""

    power_before_screening: ScreeningPowerRecord | None
    confirmation: ConfirmationRecord | None
    workload: WorkloadRecord | None


def record(study: optuna.Study, attrs: StudyAttrs) -> None:
    """Store ``attrs`` on ``study`` (each key one user attribute)."""
    for key, value in attrs.items():
        study.set_user_attr(key, value)


def read(study: optuna.Study) -> StoredStudyAttrs:
    """The attributes stored on ``study``, ``None`` for each it has not recorded."""
    attrs = {key: study.user_attrs.get(key) for key in StudyAttrs.__optional_keys__}
    upgrade_workload(attrs["workload"])  # a study's workload may predate fields added since
    return cast(StoredStudyAttrs, attrs)
