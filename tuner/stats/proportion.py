"""One arm's share of requests meeting the SLO at a load, pooled over rounds, with an interval the rounds' spread
widens.

A share pooled over ``rounds`` runs of ``requests`` each is not a binomial proportion of independent requests:
misses come in bursts, and a run on a slower moment of the host misses more of them. The interval is Wilson's score
interval on effective counts: the pooled requests divided by Kish's design effect, the variance of the share across
rounds over the variance independent requests would give (at least 1). It is descriptive, what the attainment plot
draws per arm (at the normal quantile: a t quantile at 1-2 rounds would stretch a run that met every target to
[0.38, 1]); the comparison between arms is paired per request (:mod:`tuner.stats.attainment`), which pays for a
variance from few rounds with the t quantile, and is not read off these.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import norm


@dataclass(frozen=True)
class ArmAttainment:
    attainment: float
    ci_low: float
    ci_high: float
    design_effect: float


def wilson(share: float, n: float, z: float) -> tuple[float, float]:
    """Wilson's score interval at the normal quantile ``z`` for a proportion ``share`` of ``n`` (possibly effective,
    non-integer) trials; the stall-rate difference (:mod:`tuner.stats.stall_rate`) builds on it too."""
    if n <= 0:
        return 0.0, 1.0
    shrink = z * z / n
    centre = (share + shrink / 2) / (1 + shrink)
    half = z * math.sqrt(share * (1 - share) / n + shrink / (4 * n)) / (1 + shrink)
    return max(0.0, centre - half), min(1.0, centre + half)


def arm_attainment(per_round: Sequence[float], requests: int, confidence: float = 0.95) -> ArmAttainment:
    """The pooled share over rounds of ``requests`` each (``per_round``: each round's share) and its interval."""
    if not per_round or requests < 1:
        raise ValueError("need at least one round of at least one request")
    share = statistics.fmean(per_round)
    pooled = len(per_round) * requests
    binomial = share * (1 - share) / pooled
    between = statistics.variance(per_round) / len(per_round) if len(per_round) > 1 else 0.0
    deff = max(1.0, between / binomial) if binomial > 0 else 1.0
    low, high = wilson(share, pooled / deff, float(norm.ppf(0.5 + confidence / 2)))
    return ArmAttainment(share, min(low, share), max(high, share), deff)  # rounding may not leave the share inside
