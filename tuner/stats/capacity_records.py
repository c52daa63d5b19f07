"""How records keep a capacity estimate (:meth:`tuner.stats.capacity.CapacityEstimate.to_dict`): an open side (0 or
inf) and nan are None, since JSON has neither."""

from __future__ import annotations

import math
from typing import Literal, TypedDict

Bound = Literal["exact", "at_least", "below"]
""""exact": the crossing lies between two probed loads; "at_least": the target was met at every probed load (the
capacity is at least the highest); "below": it was missed at the lowest (the capacity is below it)."""
RatioBound = Literal["exact", "at_most", "at_least", "unknown"]


class ArmCapacityRecord(TypedDict):
    """One arm's :class:`Capacity` as records keep it: an open side (0 or inf) and nan are None."""

    load: float | None
    bound: Bound
    ci_low: float | None
    ci_high: float | None


class CapacityEstimateRecord(TypedDict):
    """A :class:`CapacityEstimate` as records keep it: an open side (0 or inf) and nan are None."""

    target: float
    capacity_a: ArmCapacityRecord
    capacity_b: ArmCapacityRecord
    ratio: float | None
    ratio_bound: RatioBound
    ci_low: float | None
    ci_high: float | None
    confidence: float
    rounds: int
    passes: int
    passes_beside: int
    levels: int
    log_sd: float | None
    method: str
    precision: float | None
    flagged: bool


def open_or_none(value: float) -> float | None:
    """``value`` for a record: None where it is an open side (0 or inf) or nan."""
    return value if math.isfinite(value) and value != 0 else None


def arm_capacity_record(load: float, bound: Bound, ci_low: float, ci_high: float) -> ArmCapacityRecord:
    """One arm's capacity as records keep it."""
    return {
        "load": open_or_none(load),
        "bound": bound,
        "ci_low": open_or_none(ci_low),
        "ci_high": open_or_none(ci_high),
    }
