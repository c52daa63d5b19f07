"""The SLO a capacity search meets: its checks (what each request passes or not) and its tiers (the share of requests
each check needs), read from the experiment, and each request's flags from a run.

Without ``capacity.tiers`` there is one tier, ``slo``: one check, "met every ``measure.slo`` target", with
``capacity.attainment`` as its share (as ``vllm bench serve --goodput`` counts goodput). With tiers, each metric's
percentile is a check of its own (``ttft_ms: {p95: 200}``: 95% of requests within a TTFT of 200 ms; a request that
did not complete passes no latency check) and ``errors: 0.01`` is the check "completed" with a share of 99%. Tiers
that name the same target share its check, so every check is measured once per run and every tier is estimated from
the same runs (:func:`tuner.stats.capacity_ratio` with the tier's :class:`tuner.stats.Share` list).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from tuner.config import CapacitySearch, Experiment, Tier
from tuner.measure import MeasuredRepetition
from tuner.metrics import RequestLatency
from tuner.records import LATENCY_NAMES, CheckMetric, CheckRecord, TierRecord, targets_words
from tuner.stats import Share


class Check(NamedTuple):
    """What one request passes or not: every ``measure.slo`` target ("slo"), one metric within ``limit_ms``, or
    having completed."""

    metric: CheckMetric
    limit_ms: float | None = None

    def words(self, slo: Sequence[tuple[str, float]] = ()) -> str:
        """``TTFT <= 200 ms``; "completed"; the joint check names ``slo``'s targets."""
        if self.metric == "completed":
            return "completed"
        if self.metric == "slo":
            return targets_words(dict(slo))
        return f"{LATENCY_NAMES[self.metric]} <= {self.limit_ms:g} ms"

    def passed(self, met: Sequence[bool], latencies: Sequence[RequestLatency | None]) -> list[bool]:
        """Per request of a run: whether it passed (``met``: each met every ``measure.slo`` target)."""
        if self.metric == "slo":
            return list(met)
        if self.metric == "completed":
            return [found is not None for found in latencies]
        assert self.limit_ms is not None
        return [found is not None and getattr(found, self.metric) <= self.limit_ms for found in latencies]


@dataclass(frozen=True)
class CapacitySlo:
    """The checks every run is scored on and the tiers (by name, in the file's order) each estimated from them."""

    checks: tuple[Check, ...]
    tiers: dict[str, tuple[Share, ...]]
    slo: tuple[tuple[str, float], ...] = ()  # measure.slo's targets that are set, for the joint check's words

    @classmethod
    def of(cls, experiment: Experiment) -> CapacitySlo:
        """The experiment's SLO: ``capacity.tiers``, or ``measure.slo`` at ``capacity.attainment`` (module
        docstring)."""
        settings = experiment.capacity or CapacitySearch()
        slo = tuple((key, value) for key, value in experiment.measure.slo.model_dump().items() if value is not None)
        if not settings.tiers:
            return cls((Check("slo"),), {"slo": (Share(0, settings.attainment),)}, slo)
        checks: list[Check] = []
        tiers = {name: tuple(_shares(tier, checks)) for name, tier in settings.tiers.items()}
        return cls(tuple(checks), tiers, slo)

    def flags(self, rep: MeasuredRepetition) -> list[list[bool]]:
        """Per check, per request of the run: passed or not."""
        return [check.passed(rep["met"], rep["latencies"]) for check in self.checks]

    def joint(self, name: str, flags: Sequence[Sequence[bool]]) -> list[bool]:
        """Per request: whether it passed every check of tier ``name`` (``flags``: :meth:`flags` of a run)."""
        picked = [flags[share.check] for share in self.tiers[name]]
        return [all(each) for each in zip(*picked, strict=True)]

    def words(self, name: str) -> str:
        """``95% of requests within TTFT <= 200 ms, 99% within TPOT <= 50 ms and at most 1% failed``."""
        parts = []
        for check, least in self.tiers[name]:
            metric = self.checks[check]
            if metric.metric == "completed":
                parts.append(f"at most {100 * (1 - least):.4g}% failed")
            else:
                parts.append(f"{100 * least:.4g}% {'of requests ' if not parts else ''}within {metric.words(self.slo)}")
        return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"

    def records(self) -> tuple[list[CheckRecord], list[TierRecord]]:
        """The checks and the tiers (not yet estimated) as records keep them."""
        checks: list[CheckRecord] = [
            {"metric": c.metric, "limit_ms": c.limit_ms, "words": c.words(self.slo)} for c in self.checks
        ]
        tiers: list[TierRecord] = [
            {
                "name": name,
                "words": self.words(name),
                "shares": [{"check": s.check, "least": s.least} for s in shares],
                "estimate": None,
            }
            for name, shares in self.tiers.items()
        ]
        return checks, tiers


def _shares(tier: Tier, checks: list[Check]) -> list[Share]:
    """The tier's shares, each check added to ``checks`` unless an earlier tier named it."""
    wanted = [
        (Check(metric, limit), float(key[1:]) / 100)
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms")
        for key, limit in getattr(tier, metric).items()
    ]
    if tier.errors is not None:
        wanted.append((Check("completed"), 1 - tier.errors))
    shares = []
    for check, least in wanted:
        if check not in checks:
            checks.append(check)
        shares.append(Share(checks.index(check), least))
    return shares
