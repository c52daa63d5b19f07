"""A capacity search as a dashboard series: the configuration's capacity over the reference's, with its 95% CI.

One entry per search, ``<prefix>/capacity-ratio/<config>/<knob>`` (unit ``x reference``, bigger is better), so the
perf workflow charts what a configuration is worth at the SLO commit by commit. A ratio with a censored arm or an
interval open on either side gives no point: the chart would draw a bound as a number.
"""

from __future__ import annotations

import math

from tuner.records import CapacityRecord
from tuner.series.entries import BenchEntry
from tuner.series.naming import config_name

CAPACITY_UNIT = "x reference"


def capacity_entries(record: CapacityRecord, prefix: str) -> list[BenchEntry]:
    """The capacity ratio of ``record`` as one bigger-is-better entry (none when it is not a bounded estimate)."""
    estimate = record["estimate"]
    if estimate is None or estimate["ratio_bound"] != "exact":
        return []
    ratio, low, high = estimate["ratio"], estimate["ci_low"], estimate["ci_high"]
    if ratio is None or low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return []
    search = record["search"]
    name = config_name(record["configuration"]["strategies"], None)
    capacity_a, capacity_b = estimate["capacity_a"]["load"], estimate["capacity_b"]["load"]
    extra = "\n".join(
        [
            record["summary"],
            f"reference {capacity_a:.4g} -> configuration {capacity_b:.4g} {search['unit']}",
            f"vllm: {record['vllm']}; {estimate['passes']} passes, {len(record['levels'])} loads, "
            f"{search['spent_s']:.0f} engine-s, stopped: {search['stop']}",
        ]
    )
    return [
        {
            "name": f"{prefix}/capacity-ratio/{name}/{search['knob']}",
            "unit": CAPACITY_UNIT,
            "value": round(ratio, 6),
            "range": f"{low:.3f}-{high:.3f}x (95% CI)",
            "extra": extra,
        }
    ]
