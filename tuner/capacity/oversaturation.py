"""When a load's remaining rounds are not run: both arms over-saturated and missing every SLO tier.

A bracketing probe asks for several rounds at a load. Where both arms fell behind the offered load in every round so
far (they completed requests at under half the rate they were sent: the queue grows without bound, as GuideLLM stops
a probe once the server is over-saturated) and both missed every tier, more rounds there only confirm a miss the
search has already seen: the knees lie below, and the grid that follows measures the loads around them. The rule
needs send times to compare with (a rate or a trace's speed); a concurrency knob sends every request at once, so
its levels always run their rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tuner.capacity.slo import CapacitySlo
from tuner.records import ARMS

BEHIND = 0.5
"""An arm is over-saturated in a run that completed requests at under this share of the offered rate."""


def oversaturated(
    slo: CapacitySlo,
    met: dict[str, list[list[list[bool]]]],
    runs: dict[str, list[dict[str, float]]],
    offered_rps: float,
) -> bool:
    """Whether both arms were over-saturated in every round so far (``runs``: each run's ``wall_s``) and missed
    every tier of ``slo`` on the pooled flags of those rounds (``met``: per arm, round, check, request)."""
    if not math.isfinite(offered_rps) or not all(runs[arm] for arm in ARMS):
        return False
    for arm in ARMS:
        requests = len(met[arm][0][0])
        if any(requests / run["wall_s"] >= BEHIND * offered_rps for run in runs[arm] if run["wall_s"] > 0):
            return False
        if any(_meets(shares, met[arm]) for shares in slo.tiers.values()):
            return False
    return True


def _meets(shares: Sequence[tuple[int, float]], rounds: list[list[list[bool]]]) -> bool:
    """Whether the pooled flags of ``rounds`` pass every check of a tier at its share."""
    for check, least in shares:
        flags = [flag for each in rounds for flag in each[check]]
        if sum(flags) < least * len(flags):
            return False
    return True
