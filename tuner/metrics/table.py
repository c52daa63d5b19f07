"""Every metric the tuner reports, in one table: its unit, which way is better, whether a step-level comparison
measures it, and where it comes from. Objectives, constraints, reports, exports and comparisons read it here, so a
new metric is one row (and the code that computes it)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Source(StrEnum):
    """Where a metric's values come from."""

    REQUESTS = "requests"  # the front-end's per-request timings (tuner.metrics.timings.summarize)
    REPLAY = "replay"  # how requests kept to their schedule, and vLLM's prefix-cache hits (where known)
    PROCESSES = "processes"  # the engine processes' own telemetry: worst over them
    RUN = "run"  # counts and wall time of one repetition


@dataclass(frozen=True)
class Metric:
    """One row of the table."""

    name: str
    unit: str
    higher_is_better: bool
    source: Source
    step_level: bool = False
    """Whether a step-time ratio stands in for it: decode throughput (1 / step time) and mean per-token latency
    (step time). Percentiles, TTFT, memory and GC figures come from run-level pairs only."""
    searchable: bool = True
    """Whether an objective or constraint may name it (counts and wall time describe a run; they are not goals)."""


LATENCY_FAMILIES = ("ttft", "tpot", "itl", "e2e")
"""Per-request latencies, each summarised as ``<family>_ms: {mean, p50, p90, p99}`` and flattened to
``<family>_<stat>_ms``."""
LATENCY_STATS = ("mean", "p50", "p90", "p99")


def _rows() -> list[Metric]:
    throughput = [
        Metric("output_tokens_per_s", "tok/s", True, Source.REQUESTS, step_level=True),
        Metric("total_tokens_per_s", "tok/s", True, Source.REQUESTS, step_level=True),
        Metric("requests_per_s", "req/s", True, Source.REQUESTS),
        Metric("goodput_requests_per_s", "req/s", True, Source.REQUESTS),
        Metric("slo_attainment", "fraction", True, Source.REQUESTS),
    ]
    pause = [Metric("longest_pause_ms", "ms", False, Source.REQUESTS)]  # nothing streamed while requests waited
    latency = [
        Metric(
            f"{family}_{stat}_ms", "ms", False, Source.REQUESTS, step_level=stat == "mean" and family in ("tpot", "itl")
        )
        for family in LATENCY_FAMILIES
        for stat in LATENCY_STATS
    ]
    processes = [
        Metric("peak_rss_mb", "MiB", False, Source.PROCESSES),
        Metric("gc_share_max", "fraction", False, Source.PROCESSES),
        Metric("gc_max_pause_ms", "ms", False, Source.PROCESSES),
        # "critical": only collections outside a wait point (on the critical path)
        Metric("gc_critical_share_max", "fraction", False, Source.PROCESSES),
        Metric("gc_critical_max_pause_ms", "ms", False, Source.PROCESSES),
    ]
    replay = [
        Metric("prefix_cache_hit_rate", "fraction", True, Source.REPLAY),
        Metric("send_lag_p99_ms", "ms", False, Source.REPLAY),
        Metric("send_lag_max_ms", "ms", False, Source.REPLAY),
    ]
    run = [
        Metric("wall_s", "s", False, Source.RUN, searchable=False),
        Metric("completed", "requests", True, Source.RUN, searchable=False),
        Metric("failed", "requests", False, Source.RUN, searchable=False),
        Metric("prompt_tokens", "tokens", True, Source.RUN, searchable=False),
        Metric("output_tokens", "tokens", True, Source.RUN, searchable=False),
    ]
    return [*throughput, *latency, *pause, *processes, *replay, *run]


METRICS: dict[str, Metric] = {m.name: m for m in _rows()}


def metric(name: str) -> Metric:
    """The row of ``name``; a name without one is refused (charts, tables and exports label values with it)."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}") from None


def metric_unit(name: str) -> str:
    """The unit of ``name`` (``ms``, ``tok/s``, ``fraction`` ...)."""
    return metric(name).unit


METRIC_NAMES = tuple(m.name for m in METRICS.values() if m.searchable)
"""What an objective or a constraint may name, in the table's order."""
HIGHER_IS_BETTER = frozenset(m.name for m in METRICS.values() if m.searchable and m.higher_is_better)
STEP_LEVEL_METRICS = frozenset(m.name for m in METRICS.values() if m.step_level)

PAIRS_BY_METHOD = {"steps": "step blocks", "runs": "run-level pairs", "restarts": "restart pairs"}
"""How each way of measuring pairs the arms, in words."""


def quantity(metric: str, method: str) -> str:
    """What a trial/baseline ratio of ``metric`` measured by ``method`` is a ratio of, in words: the quantity every
    table, report and summary names beside the ratio (a step ratio stands in for a throughput but is not one)."""
    pairs = PAIRS_BY_METHOD[method]
    if method == "steps":
        shown = f", shown as 1 / step time for {metric}" if metric in HIGHER_IS_BETTER else ""
        return f"decode step time per step{shown}: ratio of sums over {pairs}"
    if metric in HIGHER_IS_BETTER:
        return f"{metric} end to end (amount over wall time): ratio of sums over {pairs}"
    return f"{metric} per repetition: median of per-pair ratios over {pairs}"
