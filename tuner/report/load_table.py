"""A capacity search's per-load table, one row per load, SLO tier and arm: offered and achieved load, the tier's
goodput and attainment with their intervals (pure functions on the capacity record), and its CSV (``tuner export
loads``).

Achieved load and goodput: :func:`tuner.records.capacity.level_rates`.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from tuner.errors import UserError
from tuner.records import ARMS, CapacityRecord, capacity_file, level_rates, load_capacity, write_text
from tuner.stats import arm_attainment


@dataclass(frozen=True)
class LoadRow:
    """One arm at one load, on one SLO tier. ``difference`` and its interval (configuration - reference, paired per
    request) are the load's on that tier, on both arms' rows; None at a load of one round."""

    load: float
    tier: str  # "slo": measure.slo at capacity.attainment; else a name from capacity.tiers
    arm: str
    offered_rps: float | None  # None: every request sent at once
    achieved_rps: float
    goodput_rps: float
    rounds: int
    requests: int  # per round
    attainment: float  # the share of requests passing every check of the tier, pooled over rounds
    attainment_ci_low: float
    attainment_ci_high: float
    difference: float | None
    difference_ci_low: float | None
    difference_ci_high: float | None


def load_rows(record: CapacityRecord) -> list[LoadRow]:
    """Every probed load's rows, lowest load first, then tiers in the file's order, reference first."""
    rows = []
    for level, tier, arm in ((lv, t["name"], arm) for lv in record["levels"] for t in record["tiers"] for arm in ARMS):
        rps = level["offered_rps"]
        difference = level["tiers"][tier]["difference"]
        achieved, goodput = level_rates(level, arm, tier)
        share = arm_attainment(level["tiers"][tier]["rounds"][arm], level["requests"])
        rows.append(
            LoadRow(
                load=level["load"],
                tier=tier,
                arm=arm,
                offered_rps=rps if rps is not None and math.isfinite(rps) else None,
                achieved_rps=achieved,
                goodput_rps=goodput,
                rounds=level["rounds"],
                requests=level["requests"],
                attainment=share.attainment,
                attainment_ci_low=share.ci_low,
                attainment_ci_high=share.ci_high,
                difference=difference["difference"] if difference else None,
                difference_ci_low=difference["ci_low"] if difference else None,
                difference_ci_high=difference["ci_high"] if difference else None,
            )
        )
    return rows


def loads_csv(record: CapacityRecord) -> str:
    """The rows as CSV with a header (empty cells where a value is None)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([f.name for f in fields(LoadRow)])
    for row in load_rows(record):
        writer.writerow(["" if v is None else f"{v:.6g}" if isinstance(v, float) else v for v in astuple(row)])
    return out.getvalue()


def export_loads(path: Path, output: Path) -> Path:
    """Write the per-load table of the capacity search ``path`` names (its ``capacity.json``, its directory or
    the experiment's) to ``output`` as CSV."""
    found = capacity_file(path)
    if found is None:
        raise UserError.single(str(path), "no capacity search here (capacity.json, or a directory holding one)")
    return write_text(output, loads_csv(load_capacity(found)))
