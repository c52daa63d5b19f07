"""A capacity search's per-load table, one row per load and arm: offered and achieved load, goodput and attainment
with their intervals (pure functions on the capacity record), and its CSV (``tuner export loads``).

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
    """One arm at one load. ``difference`` and its interval (configuration - reference, paired per request) are
    the load's, on both arms' rows; None at a load of one round."""

    load: float
    arm: str
    offered_rps: float | None  # None: every request sent at once
    achieved_rps: float
    goodput_rps: float
    rounds: int
    requests: int  # per round
    attainment: float  # the share of requests meeting every target, pooled over rounds
    attainment_ci_low: float
    attainment_ci_high: float
    difference: float | None
    difference_ci_low: float | None
    difference_ci_high: float | None


def load_rows(record: CapacityRecord) -> list[LoadRow]:
    """Every probed load's rows, loads in the order probed, reference first."""
    rows = []
    for level in record["levels"]:
        difference = level["difference"]
        rps = level["offered_rps"]
        for arm in ARMS:
            achieved, goodput = level_rates(level, arm)
            share = arm_attainment([r["attainment"] for r in level["runs"][arm]], level["requests"])
            paired = (difference["difference"], difference["ci_low"], difference["ci_high"]) if difference else None
            rows.append(
                LoadRow(
                    load=level["load"],
                    arm=arm,
                    offered_rps=rps if rps is not None and math.isfinite(rps) else None,
                    achieved_rps=achieved,
                    goodput_rps=goodput,
                    rounds=level["rounds"],
                    requests=level["requests"],
                    attainment=share.attainment,
                    attainment_ci_low=share.ci_low,
                    attainment_ci_high=share.ci_high,
                    difference=paired[0] if paired else None,
                    difference_ci_low=paired[1] if paired else None,
                    difference_ci_high=paired[2] if paired else None,
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
