"""Metrics: ``table`` (every metric's unit, direction, and whether steps measure it), ``timings`` (per-request
timings and the metrics computed from them), ``pairs`` (a metric's paired estimate: a ratio of sums over pairs),
``tail_attribution`` (slow tokens explained by GC pauses and long engine steps) and ``host_load`` (how busy the
host was while a run measured)."""

from tuner.metrics.host_load import SATURATED, HostRecord, cpu_sample, host_record, run_load
from tuner.metrics.pairs import Pair, guard_estimate, pairs_estimate, run_pair
from tuner.metrics.table import (
    HIGHER_IS_BETTER,
    LATENCY_FAMILIES,
    METRIC_NAMES,
    STEP_LEVEL_METRICS,
    metric_unit,
    quantity,
)
from tuner.metrics.tail_attribution import (
    Attribution,
    PooledAttribution,
    TailRecord,
    Timeline,
    attribute,
    pooled,
    tail_record,
)
from tuner.metrics.timings import (
    RequestLatency,
    RequestTiming,
    RunMetrics,
    flat_metrics,
    latencies,
    met_each,
    summarize,
)

__all__ = [
    "HIGHER_IS_BETTER",
    "LATENCY_FAMILIES",
    "METRIC_NAMES",
    "SATURATED",
    "STEP_LEVEL_METRICS",
    "Attribution",
    "HostRecord",
    "Pair",
    "PooledAttribution",
    "RequestLatency",
    "RequestTiming",
    "RunMetrics",
    "TailRecord",
    "Timeline",
    "attribute",
    "cpu_sample",
    "flat_metrics",
    "guard_estimate",
    "host_record",
    "latencies",
    "met_each",
    "metric_unit",
    "pairs_estimate",
    "pooled",
    "quantity",
    "run_load",
    "run_pair",
    "summarize",
    "tail_record",
]
