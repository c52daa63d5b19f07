"""SLO attainment at one load: the share of requests that met every target in each arm, and their paired difference.

At a load level both arms replay the same requests in each round (one run per arm), so every request is met or
missed in A and in B. Requests met or missed in both carry no information about the difference; the discordant
ones do (met in A only, met in B only), as in McNemar's test. The estimand is the pooled attainment difference,
B minus A, over all rounds: (met in B only - met in A only) / requests.

Requests are not independent, and the dependence reaches across a whole run: a burst of arrivals makes many
consecutive requests miss, a backlog it leaves carries into the next burst, and a run whose host was a little
slower misses more everywhere. So the independent unit is the round: the variance of the difference is taken
between rounds (the cluster-robust variance of a ratio estimate, rounds as clusters), Kish's design effect (that
variance over the one independent requests would give, at least 1) deflates the discordant counts, Tango's score
interval (1998) is taken on the deflated counts, and the variance's few degrees of freedom are paid for with the
t quantile at rounds - 1 in place of the normal one (Cameron and Miller's few-cluster rule). On a simulated
queueing server (``benchmarks/simulations/capacity_sim.py``, 2000 A/A comparisons each at 3, 5 and 8 rounds of 300
requests, at the knee and past it), request-level McNemar called 27-72% of them different; ten chunks of consecutive
requests per round as clusters still 1.6-28%, as a run's slowness and backlog tie its chunks together; rounds as
clusters with the normal quantile 1.0-2.5% at the knee but 5.3-10.4% past it (attainment 0.56-0.81); with the t
quantile 0.0-2.5% everywhere. That is the price of honesty at few rounds: with 3 rounds a difference needs about
twice the evidence it would with many (t_2 = 4.30), and power is low: B's steps 5% shorter (+1.2 points of
attainment at the knee) were called better in 4.8% of comparisons at 5 rounds and in 19.9% at 8.

Tango's interval inverts the score test whose value at 0 is McNemar's statistic (here on deflated counts), so the
p-value is that test's and the interval excludes 0 exactly when p < 1 - confidence. It stays honest with few or no
discordant requests: with none at all (whatever both arms missed) the design effect is 1 and the interval is
+-q^2 / (requests + q^2) at the quantile q, e.g. +-2.0 points for 3 rounds of 300 requests, +-0.23 for 8; it is
[0, 0] only when nothing can differ (no requests).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TypeAlias, TypedDict

import numpy as np
import numpy.typing as npt
from scipy.optimize import brentq
from scipy.stats import t as student

METHOD = "tango-score-round-deff-t"
"""The interval of :class:`AttainmentDifference`: Tango's score interval on counts deflated by the between-round
design effect, at the t quantile with rounds - 1 degrees of freedom."""
MetFlags: TypeAlias = Sequence[Sequence[bool]] | npt.NDArray[np.bool_]
"""Each round's met flags per request, in arrival order: nested sequences, or a (rounds, requests) array."""
_Z_CAP = 1e6  # a score statistic with zero variance is +-inf; capped so that root finding stays finite

LEAST_ROUNDS = 2
"""Rounds a level's difference needs: its variance is taken between them."""


@dataclass(frozen=True)
class PairedCounts:
    """Per round of one load level: requests (per arm), met in A, met in A only, met in B only."""

    requests: tuple[int, ...]
    met_a: tuple[int, ...]
    only_a: tuple[int, ...]
    only_b: tuple[int, ...]

    @classmethod
    def from_rounds(cls, met_a: MetFlags, met_b: MetFlags) -> PairedCounts:
        """Counts from each round's met flags per request in arrival order, the same requests in both arms."""
        if len(met_a) != len(met_b):
            raise ValueError(f"arms have different rounds: {len(met_a)} and {len(met_b)}")
        rows = []
        for a_round, b_round in zip(met_a, met_b, strict=True):
            a, b = np.asarray(a_round, dtype=bool), np.asarray(b_round, dtype=bool)
            if a.shape != b.shape or a.ndim != 1:
                raise ValueError(f"a round needs one flag per request in both arms, got {a.shape} and {b.shape}")
            rows.append((a.size, int(a.sum()), int(np.sum(a & ~b)), int(np.sum(b & ~a))))
        requests, met, only_a, only_b = (tuple(column) for column in zip(*rows, strict=True)) if rows else ((),) * 4
        return cls(requests, met, only_a, only_b)

    @property
    def rounds(self) -> int:
        return len(self.requests)

    @property
    def met_b(self) -> tuple[int, ...]:
        return tuple(m - a + b for m, a, b in zip(self.met_a, self.only_a, self.only_b, strict=True))

    def merged(self, other: PairedCounts) -> PairedCounts:
        """These rounds followed by ``other``'s."""
        return PairedCounts(*(mine + theirs for mine, theirs in zip(self._columns(), other._columns(), strict=True)))

    def _columns(self) -> tuple[tuple[int, ...], ...]:
        return self.requests, self.met_a, self.only_a, self.only_b


class AttainmentDifferenceRecord(TypedDict):
    """An :class:`AttainmentDifference` as records keep it."""

    attainment_a: float
    attainment_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float
    requests: int
    rounds: int
    discordant: list[int]
    design_effect: float
    confidence: float
    method: str
    flagged: bool


@dataclass(frozen=True)
class AttainmentDifference:
    """B's attainment minus A's at one load with its interval and that interval's p-value (module docstring)."""

    attainment_a: float
    attainment_b: float
    difference: float
    ci_low: float
    ci_high: float
    p_value: float  # the smallest 1 - confidence at which the interval excludes 0
    requests: int  # per arm, over all rounds
    rounds: int  # the clusters: the variance is taken between them
    discordant: tuple[int, int]  # (met in A only, met in B only)
    design_effect: float  # >= 1: how much the rounds' spread widened the interval over independent requests
    confidence: float
    method: str = METHOD

    @property
    def flagged(self) -> bool:
        """Whether the interval excludes 0 (so ``p_value < 1 - confidence``)."""
        return self.ci_low > 0 or self.ci_high < 0

    def to_dict(self) -> AttainmentDifferenceRecord:
        return {
            "attainment_a": self.attainment_a,
            "attainment_b": self.attainment_b,
            "difference": self.difference,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "requests": self.requests,
            "rounds": self.rounds,
            "discordant": list(self.discordant),
            "design_effect": self.design_effect,
            "confidence": self.confidence,
            "method": self.method,
            "flagged": self.flagged,
        }


def tango_score(only_a: float, only_b: float, requests: float, delta: float) -> float:
    """Tango's (1998) score statistic of "attainment B - attainment A = delta" from (possibly effective) counts of
    requests met in A only and in B only: the observed difference less delta over its standard error under that
    hypothesis, where the chance of "met in A only" is its maximum-likelihood value given delta. At delta = 0 it is
    McNemar's statistic (only_b - only_a) / sqrt(only_a + only_b); it falls as delta grows."""
    w = -only_a - only_b + (2 * requests - only_b + only_a) * delta
    root = math.sqrt(max(w * w + 8 * requests * only_a * delta * (1 - delta), 0.0))
    p_only_a = (root - w) / (4 * requests)
    variance = requests * (2 * p_only_a + delta * (1 - delta))
    surplus = only_b - only_a - requests * delta
    if variance <= 0:
        return 0.0 if surplus == 0 else math.copysign(_Z_CAP, surplus)
    return max(-_Z_CAP, min(_Z_CAP, surplus / math.sqrt(variance)))


def tango_interval(only_a: float, only_b: float, requests: float, quantile: float) -> tuple[float, float]:
    """Every delta whose score statistic lies within +-``quantile``: the interval that inverts the score test."""
    point = (only_b - only_a) / requests
    low, high = -1.0, 1.0
    if tango_score(only_a, only_b, requests, low) > quantile:
        low = brentq(lambda d: tango_score(only_a, only_b, requests, d) - quantile, -1.0, point, xtol=1e-12)
    if tango_score(only_a, only_b, requests, high) < -quantile:
        high = brentq(lambda d: tango_score(only_a, only_b, requests, d) + quantile, point, 1.0, xtol=1e-12)
    return float(low), float(high)


def round_design_effect(counts: PairedCounts) -> float:
    """Kish's design effect of the pooled difference with rounds as clusters: the cluster-robust variance (each
    round's surplus of B-only over A-only requests less its share of the pooled difference) over the multinomial
    variance of independent requests. At least 1; 1 when nothing is discordant or below two rounds."""
    n = np.asarray(counts.requests, dtype=np.float64)
    surplus = np.asarray(counts.only_b, dtype=np.float64) - np.asarray(counts.only_a, dtype=np.float64)
    total, k = float(n.sum()), len(n)
    difference = float(surplus.sum()) / total
    independent = ((sum(counts.only_a) + sum(counts.only_b)) / total - difference**2) / total
    if independent <= 0 or k < 2:
        return 1.0
    deviations = surplus - difference * n
    between = k / (k - 1) * float(deviations @ deviations) / total**2
    return max(1.0, between / independent)


@cache
def _quantile(confidence: float, df: int) -> float:
    return float(student.ppf((1 + confidence) / 2, df))


def attainment_difference(counts: PairedCounts, *, confidence: float = 0.95) -> AttainmentDifference:
    """The paired attainment difference of one load level's rounds (module docstring); needs ``LEAST_ROUNDS``."""
    if counts.rounds < LEAST_ROUNDS:
        raise ValueError(f"the between-round variance needs at least {LEAST_ROUNDS} rounds, got {counts.rounds}")
    if min(counts.requests) < 1:
        raise ValueError("every round needs at least one request")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    total, only_a, only_b = sum(counts.requests), sum(counts.only_a), sum(counts.only_b)
    deff, df = round_design_effect(counts), counts.rounds - 1
    effective = (only_a / deff, only_b / deff, total / deff)
    low, high = tango_interval(*effective, _quantile(confidence, df))
    return AttainmentDifference(
        attainment_a=sum(counts.met_a) / total,
        attainment_b=sum(counts.met_b) / total,
        difference=(only_b - only_a) / total,
        ci_low=low,
        ci_high=high,
        p_value=float(2 * student.sf(abs(tango_score(*effective, 0.0)), df)),
        requests=total,
        rounds=counts.rounds,
        discordant=(only_a, only_b),
        design_effect=deff,
        confidence=confidence,
    )


def paired_attainment(
    met_a: Sequence[Sequence[bool]], met_b: Sequence[Sequence[bool]], *, confidence: float = 0.95
) -> AttainmentDifference:
    """The paired attainment difference from each round's met flags per request in arrival order (the same requests,
    in the same order, in both arms of a round; rounds may hold different numbers of requests)."""
    return attainment_difference(PairedCounts.from_rounds(met_a, met_b), confidence=confidence)
