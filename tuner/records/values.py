"""The numbers readers take out of loaded records: flat per-repetition metrics, a trial's medians, the values its
study saw, its ratios to the baseline, and the settings of the experiment a record was measured with.

Per-repetition metrics are nested in a run (``ttft_ms: {p50: ...}``, as measured) and flat in a sweep trial (as
paired); :func:`flat` reads both.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from tuner.metrics import LATENCY_FAMILIES, flat_metrics
from tuner.plugin.protocol import ProcessReport
from tuner.records.json_values import JsonObject
from tuner.records.loader import RunRecord, SweepSummary, TrialRow
from tuner.records.sections import StoredRatio
from tuner.stats import RatioEstimate


def flat(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Flat metrics of one repetition, whether stored nested (``ttft_ms: {p50: ...}``) or already flat."""
    if all(isinstance(metrics.get(f"{family}_ms"), dict) for family in LATENCY_FAMILIES):
        return flat_metrics(metrics)
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def run_reps(run: RunRecord) -> list[dict[str, float]]:
    """Per-repetition flat metrics of a run."""
    return [flat(rep["metrics"]) for rep in run["repetitions"]]


def trial_reps(trial: TrialRow) -> list[dict[str, float]]:
    """Per-repetition flat metrics of a sweep trial (empty when the summary only kept their count)."""
    return [flat(rep["metrics"]) for rep in trial["repetitions"]]


def trial_process_lists(trial: TrialRow) -> list[list[ProcessReport]]:
    """Per-process telemetry of a trial: per repetition where an older sweep kept it, else the one ``telemetry``
    snapshot."""
    per_rep = [rep["processes"] for rep in trial["repetitions"] if rep.get("processes")]
    return per_rep or ([trial["telemetry"]] if trial["telemetry"] else [])


def median_of(reps: Sequence[dict[str, float]], metric: str) -> float | None:
    values = [r[metric] for r in reps if metric in r and math.isfinite(r[metric])]
    return statistics.median(values) if values else None


def trial_metric(trial: TrialRow, metric: str) -> float | None:
    """The trial's median of ``metric`` (its stored ``metrics``, else computed from repetitions)."""
    value = trial["metrics"].get(metric)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return median_of(trial_reps(trial), metric)


def objective_value(trial: TrialRow, metric: str) -> float | None:
    """``metric`` as the study's objective saw it: anchored to the baseline."""
    value = trial["anchored"].get(metric)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return trial_metric(trial, metric)


def trial_ratio(trial: TrialRow, metric: str) -> StoredRatio | None:
    """The trial's paired ratio to the baseline for ``metric`` as stored (None where not measured)."""
    return trial["ratios"].get(metric)


def trial_estimate(trial: TrialRow, metric: str) -> RatioEstimate | None:
    """The trial's paired ratio to the baseline for ``metric`` as an estimate (None where none was estimated)."""
    return RatioEstimate.from_dict(trial_ratio(trial, metric))


def engine_overrides(run: RunRecord) -> JsonObject:
    """The engine-arg overrides a run's experiment asked for (its ``engine.args`` are them resolved)."""
    return config_section(run["config"], "engine")


def min_effect(summary: SweepSummary) -> float | None:
    """The equivalence margin of a sweep's confirmation (None: a summary from before it was kept)."""
    value = config_section(config_section(summary["config"], "search"), "confirm").get("min_effect")
    return float(value) if isinstance(value, (int, float)) else None


def config_section(config: JsonObject, key: str) -> JsonObject:
    """One section of an experiment as a record keeps it (``{}`` where it has none)."""
    section = config.get(key)
    return section if isinstance(section, Mapping) else {}
