"""``tuner compare A B``: two runs, or two trials of a sweep, metric by metric.

A side is a run (its directory or ``run.json``) or one trial of a sweep, written ``SWEEP#N`` where ``SWEEP`` is
the experiment directory, its ``sweep/`` directory or ``summary.json`` and ``N`` the trial number (``SWEEP#baseline``
picks the baseline trial). Runs and trials can be mixed.

For every metric both sides measured, the result holds each side's median over its repetitions and the ratio
B/A of medians with a seeded bootstrap 95% CI and a Mann-Whitney p-value (:func:`tuner.stats.unpaired_ratio`:
separate runs are not paired). The verdict says whether B is better or worse than A for that metric
(throughput: higher is better; latency: lower is better) or that there is no significant difference; with
fewer than two repetitions on a side there is no test, only the ratio. The result is labelled descriptive:
the two sides ran at different times, so host drift between them is not cancelled (on a drifting host such
unpaired tests call identical configurations different 19-49% of the time); a sweep's paired ratios are the
verdict to trust.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import UserError
from tuner.metrics import HIGHER_IS_BETTER, METRIC_NAMES, metric_unit
from tuner.records import Loaded, TrialRow, TrialState, engine_overrides, load, run_reps, trial_metric, trial_reps
from tuner.report.describe import describe_engine, describe_strategies, vllm_version
from tuner.stats import unpaired_ratio

COMPARE_SCHEMA = "tuner.compare/1"
# ``no_difference`` in the table: the shorter wording fits an 80-column terminal; the notes spell it out.


@dataclass
class Side:
    """One arm of a comparison: per-repetition flat metrics (possibly none) and stored medians."""

    spec: str
    label: str
    source: str
    reps: list[dict[str, float]]
    medians: dict[str, float]
    environment: Mapping[str, Any]
    strategies: Mapping[str, Any]
    engine: Mapping[str, Any]

    def values(self, metric: str) -> list[float]:
        return [r[metric] for r in self.reps if metric in r and math.isfinite(r[metric])]

    def median(self, metric: str) -> float | None:
        values = self.values(metric)
        if values:
            return float(statistics.median(values))
        return self.medians.get(metric)


def split_spec(spec: str) -> tuple[Path, str | None]:
    """``PATH`` or ``PATH#TRIAL`` (a path that itself contains ``#`` and exists is taken whole)."""
    if "#" in spec and not Path(spec).exists():
        path, _, trial = spec.rpartition("#")
        return Path(path), trial.strip()
    return Path(spec), None


def load_side(spec: str) -> Side:
    path, trial_ref = split_spec(spec)
    loaded = load(path)
    if loaded.kind == "run":
        if trial_ref is not None:
            raise UserError.single(spec, f"{loaded.path} is a run, not a sweep: drop `#{trial_ref}`")
        return _run_side(spec, loaded)
    trials = {t["number"]: t for t in loaded.sweep["trials"]}
    if trial_ref is None:
        raise UserError.single(
            spec, f"{loaded.path} is a sweep: name a trial as `{path}#N` (trials: {_numbers(trials)})"
        )
    return _trial_side(spec, loaded, _find_trial(spec, trial_ref, trials))


def _run_side(spec: str, loaded: Loaded) -> Side:
    run = loaded.run
    medians = {k: v["median"] for k, v in run["summary"].items() if isinstance(v, dict) and "median" in v}
    label = f"{run['experiment']} run {run['created']}".strip()
    return Side(
        spec,
        label,
        str(loaded.path),
        run_reps(run),
        medians,
        run["environment"],
        run["strategies"],
        engine_overrides(run),
    )


def _trial_side(spec: str, loaded: Loaded, trial: TrialRow) -> Side:
    if trial["state"] != TrialState.COMPLETE:
        raise UserError.single(spec, f"trial {trial['number']} is {trial['state']}, it has no measurements")
    medians = {k: float(v) for k in trial["metrics"] if (v := trial_metric(trial, k)) is not None}
    label = f"{loaded.sweep['experiment']} #{trial['number']}" + (" (baseline)" if trial["is_baseline"] else "")
    return Side(
        spec,
        label,
        f"{loaded.path}#{trial['number']}",
        trial_reps(trial),
        medians,
        loaded.sweep["environment"],
        trial["strategies"],
        trial["engine"],
    )


def _find_trial(spec: str, ref: str, trials: dict[int, TrialRow]) -> TrialRow:
    if ref.lower() == "baseline":
        base = next((t for t in trials.values() if t["is_baseline"]), None)
        if base is None:
            raise UserError.single(spec, "this sweep has no baseline trial")
        return base
    try:
        number = int(ref)
    except ValueError:
        raise UserError.single(spec, f"trial must be a number or `baseline`, got {ref!r}") from None
    if number not in trials:
        raise UserError.single(spec, f"no trial {number} in this sweep (trials: {_numbers(trials)})")
    return trials[number]


def _numbers(trials: dict[int, Any]) -> str:
    return ", ".join(str(n) for n in sorted(trials)) or "none"


def compare_sides(a: Side, b: Side, *, n_resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """B relative to A for every metric both sides have, as JSON-ready data (schema ``tuner.compare/1``)."""
    names = [m for m in ["wall_s", *METRIC_NAMES] if a.median(m) is not None and b.median(m) is not None]
    rows = []
    for metric in names:
        higher = metric in HIGHER_IS_BETTER
        va, vb = a.values(metric), b.values(metric)
        ma, mb = a.median(metric), b.median(metric)
        row: dict[str, Any] = {
            "metric": metric,
            "unit": metric_unit(metric),
            "higher_is_better": higher,
            "a_median": ma,
            "b_median": mb,
            "a_n": len(va),
            "b_n": len(vb),
            "ratio": None,
            "ci_low": None,
            "ci_high": None,
            "p_value": None,
            "verdict": None,
            "note": None,
        }
        if len(va) >= 2 and len(vb) >= 2 and min(va + vb) > 0:
            est = unpaired_ratio(vb, va, higher_is_better=higher, n_resamples=n_resamples, seed=seed).to_dict()
            row.update({k: est[k] for k in ("ratio", "ci_low", "ci_high", "p_value", "verdict")})
        else:
            if ma and mb is not None and ma > 0:
                row["ratio"] = mb / ma
            row["note"] = (
                "needs at least 2 repetitions on each side for a test"
                if len(va) < 2 or len(vb) < 2
                else "non-positive values: no ratio test"
            )
        rows.append(row)
    return {
        "schema": COMPARE_SCHEMA,
        "paired": False,
        "note": UNPAIRED_WARNING,
        "a": _side_json(a),
        "b": _side_json(b),
        "differences": _differences(a, b),
        "metrics": rows,
    }


UNPAIRED_WARNING = (
    "descriptive: unpaired samples measured at different times; host drift between them is not cancelled, "
    "so a 'better'/'worse' here can be drift (identical configurations are called different 19-49% of the time "
    "on a drifting host); for a verdict compare configurations in pairs (`tuner sweep`)"
)


def _side_json(side: Side) -> dict[str, Any]:
    return {
        "spec": side.spec,
        "label": side.label,
        "source": side.source,
        "repetitions": len(side.reps),
        "strategies": side.strategies,
        "engine": side.engine,
        "device": side.environment["device"],
        "vllm": vllm_version(side.environment),
        "git_sha": side.environment["git_sha"],
    }


def _differences(a: Side, b: Side) -> list[str]:
    """Differences between the two sides' environments that make a comparison suspect."""
    notes = []
    for key in ("device", "hostname", "python"):
        va, vb = a.environment[key], b.environment[key]
        if va != vb:
            notes.append(f"{key}: {va} vs {vb}")
    if vllm_version(a.environment) != vllm_version(b.environment):
        notes.append(f"vllm: {vllm_version(a.environment)} vs {vllm_version(b.environment)}")
    return notes


def compare_notes(result: dict[str, Any]) -> list[str]:
    """Lines to print under the table: both configurations and how to read the numbers."""
    a, b = result["a"], result["b"]
    counts = sorted({f"{row['a_n']}/{row['b_n']}" for row in result["metrics"]})

    def config(side: dict[str, Any]) -> str:
        engine = f"; engine {describe_engine(side['engine'])}" if "#" in side["spec"] and side["engine"] else ""
        return describe_strategies(side["strategies"]) + engine

    return [
        f"A: {a['label']}: {config(a)} ({a['source']})",
        f"B: {b['label']}: {config(b)} ({b['source']})",
        f"Medians over {' or '.join(counts)} repetitions (A/B). Separate samples: the ratio's 95% CI is a bootstrap, "
        "p a Mann-Whitney test; 'not significant' means no significant difference. "
        "Throughput is better higher, latency (ms) lower.",
        f"Warning: {result['note']}.",
    ]
