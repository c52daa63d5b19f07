"""The experiment file's ``capacity:`` section: how ``tuner capacity`` looks for the largest load that meets the SLO.

The SLO is either ``measure.slo`` (per-request targets, as ``vllm bench serve --goodput``) with the share of requests
that must meet every target (``attainment``), or the SLO tiers operators write (``tiers``: per-metric percentiles and
an error rate, as AIPerf takes them), each given its own capacity from the one search; this section also says how the
knee is searched. The load is one knob of the workload,
whichever it uses: a trace's replay speed (``dataset.schedule: trace``; load = 1 / ``time_scale``), a Poisson or
fixed ``rate`` (requests/s) or a ``concurrency`` cap (requests in flight).
"""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PERCENTILE = re.compile(r"p(\d{1,2}(?:\.\d{1,3})?)")
"""A percentile's key in a tier: ``p95``, ``p99.9``."""


class LoadKnob(StrEnum):
    """Which part of the workload ``tuner capacity`` turns up and down."""

    SPEED = "speed"
    """A trace replayed faster or slower: load = 1 / ``dataset.time_scale`` (2 replays twice as fast as recorded)."""
    RATE = "rate"
    """``workload.rate``, requests/s."""
    CONCURRENCY = "concurrency"
    """``workload.concurrency``, requests in flight (whole numbers)."""

    @property
    def unit(self) -> str:
        return {"speed": "x recorded speed", "rate": "requests/s", "concurrency": "requests in flight"}[self.value]


class Contention(BaseModel):
    """``capacity.contention``: when a round is run again, once, because other work on the saturated host took CPUs
    the comparison needed during one of its runs (:mod:`tuner.capacity.contention`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cpus: float = Field(0.25, gt=0, le=4096, description="other processes used this many CPUs during a run")


class Tier(BaseModel):
    """One SLO tier of ``capacity.tiers``: per-metric percentile targets in milliseconds (``ttft_ms: {p95: 200}``:
    95% of requests see a TTFT of at most 200 ms; a failed request meets none) and an error-rate target."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    ttft_ms: dict[str, float] = Field(default_factory=dict, description="time to first token: {p95: 200}")
    tpot_ms: dict[str, float] = Field(default_factory=dict, description="time per output token after the first")
    e2e_ms: dict[str, float] = Field(default_factory=dict, description="end-to-end latency")
    errors: float | None = Field(None, gt=0, lt=1, description="at most this share of requests failed (0.01: 1%)")

    @field_validator("ttft_ms", "tpot_ms", "e2e_ms")
    @classmethod
    def _percentiles(cls, targets: dict[str, float]) -> dict[str, float]:
        for key, limit in targets.items():
            found = PERCENTILE.fullmatch(key)
            if found is None or not 0 < float(found.group(1)) < 100:
                raise ValueError(f"{key!r} is not a percentile: write p50, p95, p99 or p99.9 (above 0, below 100)")
            if not (math.isfinite(limit) and limit > 0):
                raise ValueError(f"{key}: a latency target must be a positive number of ms, got {limit}")
        return targets

    @model_validator(mode="after")
    def _some(self) -> Tier:
        if not (self.ttft_ms or self.tpot_ms or self.e2e_ms or self.errors is not None):
            raise ValueError("a tier needs a target: ttft_ms, tpot_ms or e2e_ms ({p95: 200}) or errors")
        return self


class CapacitySearch(BaseModel):
    """``capacity:``: the attainment target and the knee search's settings."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    attainment: float = Field(0.99, gt=0, lt=1, description="share of requests that must meet every measure.slo target")
    tiers: dict[str, Tier] = Field(
        default_factory=dict,
        description="SLO tiers by name, each with its capacity from one search (instead of measure.slo and attainment)",
    )
    load: LoadKnob | None = Field(None, description="speed, rate or concurrency; none: the one the workload uses")
    start: float | Literal["auto"] | None = Field(
        None,
        description="first load probed (knob units; > 0); auto: where the engine, all requests at once, just keeps up "
        "with the sends; none: the workload's",
    )
    min_load: float | None = Field(None, gt=0, description="never probe below this load")
    max_load: float | None = Field(None, gt=0, description="never probe above this load")
    growth: float = Field(2.0, gt=1.3, le=16, description="bracketing steps up or down by this factor")
    resolution: float = Field(1.1, gt=1, le=4, description="grid loads at most this factor apart around the knee")
    rounds: int = Field(3, ge=2, le=100, description="rounds per bracketing load (a round: one run of each arm)")
    max_rounds: int = Field(50, ge=2, le=10_000, description="at most this many rounds at a grid load")
    precision: float = Field(
        0.05, gt=0, le=1, description="stop once the capacity ratio's CI half-width (log scale) is at most this"
    )
    budget_s: float = Field(900, gt=0, le=7 * 24 * 3600, description="engine seconds the search may spend")
    engine: dict[str, Any] = Field(
        default_factory=dict,
        description="the configuration's engine arguments on top of engine: (an engine per arm: restart pairs)",
    )
    env: dict[str, Any] = Field(
        default_factory=dict, description="the configuration's vLLM variables on top of env: (restart pairs)"
    )
    in_both_arms: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="strategies in force in both arms, the configuration's own on top: a setting of the host's, not "
        "what is compared (e.g. shm_spin_window where the server and the engine's processes outnumber the CPUs)",
    )
    contention: Contention | None = Field(
        Contention(), description="run a round again once when other work took CPUs from one of its runs; null: never"
    )

    @model_validator(mode="after")
    def _ordered(self) -> CapacitySearch:
        if self.tiers and "attainment" in self.model_fields_set:
            raise ValueError("attainment is the share of measure.slo; tiers set their own shares: keep one")
        for name in self.tiers:
            if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}", name):
                raise ValueError(f"tier name {name!r}: letters, digits, '.', '_' or '-', at most 40")
        low, high = self.min_load or 0.0, self.max_load or math.inf
        if low >= high:
            raise ValueError(f"min_load ({low:g}) must be below max_load ({high:g})")
        if isinstance(self.start, float) and not self.start > 0:
            raise ValueError(f"start ({self.start:g}) must be a positive load, or auto")
        if isinstance(self.start, float) and not low <= self.start <= high:
            raise ValueError(f"start ({self.start:g}) must lie within [min_load, max_load]")
        return self
