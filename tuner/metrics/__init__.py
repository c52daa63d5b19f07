"""Metrics: ``table`` (every metric's unit, direction, and whether steps measure it), ``timings`` (per-request
timings and the metrics computed from them) and ``tail_attribution`` (slow tokens explained by GC pauses and long
engine steps)."""

from tuner.metrics.table import (
    HIGHER_IS_BETTER,
    LATENCY_FAMILIES,
    METRIC_NAMES,
    STEP_LEVEL_METRICS,
    metric_unit,
    quantity,
)
from tuner.metrics.tail_attribution import attribute, pooled, tail_record
from tuner.metrics.timings import RequestTiming, flat_metrics, summarize

__all__ = [
    "HIGHER_IS_BETTER",
    "LATENCY_FAMILIES",
    "METRIC_NAMES",
    "STEP_LEVEL_METRICS",
    "RequestTiming",
    "attribute",
    "flat_metrics",
    "metric_unit",
    "pooled",
    "quantity",
    "summarize",
    "tail_record",
]
