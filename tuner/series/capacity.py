"""A capacity search as a dashboard series: the configuration's capacity over the reference's, with its 95% CI.

One entry per search and SLO tier, ``<prefix>/capacity-ratio/<config>/<knob>[/<tier>]`` (unit ``x reference``,
bigger is better), so the perf workflow charts what a configuration is worth at the SLO commit by commit. A ratio
with a censored arm or an interval open on either side gives no point: the chart would draw a bound as a number.
"""

from __future__ import annotations

import math

from tuner.records import CapacityRecord, TierRecord
from tuner.series.entries import BenchEntry
from tuner.series.naming import config_name

CAPACITY_UNIT = "x reference"


def capacity_entries(record: CapacityRecord, prefix: str) -> list[BenchEntry]:
    """The capacity ratio of each SLO tier of ``record`` as a bigger-is-better entry (none for a tier whose estimate
    is not bounded); a tier of ``capacity.tiers`` adds its name to the series' (the one tier of ``measure.slo``
    keeps the name it always had)."""
    return [entry for tier in record["tiers"] if (entry := _tier_entry(record, tier, prefix)) is not None]


def _tier_entry(record: CapacityRecord, tier: TierRecord, prefix: str) -> BenchEntry | None:
    estimate = tier["estimate"]
    if estimate is None or estimate["ratio_bound"] != "exact":
        return None
    ratio, low, high = estimate["ratio"], estimate["ci_low"], estimate["ci_high"]
    if ratio is None or low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    search = record["search"]
    name = config_name(record["configuration"]["strategies"], None)
    capacity_a, capacity_b = estimate["capacity_a"]["load"], estimate["capacity_b"]["load"]
    extra = "\n".join(
        [
            record["summary"],
            f"tier {tier['name']}: {tier['words']}",
            f"reference {capacity_a:.4g} -> configuration {capacity_b:.4g} {search['unit']}",
            f"vllm: {record['vllm']}; {estimate['passes']} passes, {len(record['levels'])} loads, "
            f"{search['spent_s']:.0f} engine-s, stopped: {search['stop']}",
        ]
    )
    suffix = "" if tier["name"] == "slo" else f"/{tier['name']}"
    return {
        "name": f"{prefix}/capacity-ratio/{name}/{search['knob']}{suffix}",
        "unit": CAPACITY_UNIT,
        "value": round(ratio, 6),
        "range": f"{low:.3f}-{high:.3f}x (95% CI)",
        "extra": extra,
    }
