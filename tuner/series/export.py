"""``tuner export bench``: results as input for benchmark-action/github-action-benchmark.

The action's custom tools read a JSON list of entries::

    [{"name": str, "unit": str, "value": number, "range": str (optional), "extra": str (optional)}, ...]

``customBiggerIsBetter`` gets the metrics where higher is better (throughput, goodput, SLO attainment and their
ratios), ``customSmallerIsBetter`` the latency percentiles (``{ttft,tpot,itl,e2e}_{p50,p90,p99}_ms``) and their
ratios. The action draws one chart per entry name, so names stay stable from commit to commit.

Series, in separate files because the workflow alerts on them differently:

- ``ratio`` (a sweep): for every configuration the sweep measured, its paired ratio to the baseline measured
  alongside it on the same engine, per objective and constraint, with the 95% CI in ``range`` (e.g.
  ``1.02-1.08x (95% CI)``): ``<prefix>/ratio-to-baseline/<config>/<metric>``, unit ``x baseline``. ``<config>``
  is :func:`config_name` of the trial's settings (never "best", which names a different trial from run to
  run). These are stable to about ±1-2% and are what regressions are judged on.
- ``absolute``: the medians over repetitions of the sweep's baseline trial (vLLM as installed:
  ``<prefix>/baseline-absolute/<metric>``) or of a run (``<prefix>/run/<metric>``), ``range`` ``± sd``. They move
  with the host and with vLLM (about ±12% run to run on the GPU host), so they are context, not a gate. No
  absolute figures are exported for the other configurations: across runs they would compare two engines.

- ``capacity`` (a capacity search, ``results/<name>/capacity``): the configuration's capacity over the
  reference's at the SLO, with its CI (:mod:`tuner.series.capacity`).

The prefix defaults to the experiment name. ``extra`` is human-readable context: the configuration, the vLLM
version, the device, the git revision, the repetitions and the verdicts. Every file is checked against the entry
format (:mod:`tuner.series.entries`) before anything is written.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeGuard

from tuner.errors import UserError
from tuner.metrics import HIGHER_IS_BETTER, LATENCY_FAMILIES, metric_unit
from tuner.records import (
    Loaded,
    RunRecord,
    SweepSummary,
    TrialRow,
    TrialState,
    capacity_file,
    engine_overrides,
    load,
    load_capacity,
    run_reps,
    trial_estimate,
    trial_metric,
    trial_reps,
    write_json,
)
from tuner.report import (
    UNBOUNDED,
    baseline_trial,
    describe_engine,
    describe_strategies,
    measured_device,
    ratio_metrics,
    vllm_version,
)
from tuner.series.capacity import capacity_entries
from tuner.series.entries import KINDS, TOOLS, BenchEntry, Better, validate
from tuner.series.naming import config_name
from tuner.stats import RatioEstimate

Series = Literal["ratio", "absolute", "capacity"]
THROUGHPUT = sorted(HIGHER_IS_BETTER)
LATENCY = [f"{family}_{pct}_ms" for family in LATENCY_FAMILIES for pct in ("p50", "p90", "p99")]
METRICS: dict[Better, list[str]] = {"bigger": THROUGHPUT, "smaller": LATENCY}
RATIO_UNIT = "x baseline"
Entries = dict[Better, list[BenchEntry]]


def _context(
    environment: Mapping[str, Any], strategies: Mapping[str, Any], engine: Mapping[str, Any], n: int, more: str = ""
) -> str:
    lines = [
        f"strategies: {describe_strategies(strategies)}",
        *([f"engine: {describe_engine(engine)}"] if engine else []),
        f"vllm: {vllm_version(environment)}",
        f"device: {measured_device(environment)}",
        f"git: {(environment['git_sha'] or '?')[:12]}",
        f"repetitions: {n}" if n else "repetitions: not kept",
    ]
    if more:
        lines.append(more)
    return "\n".join(lines)


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _spread(values: list[float]) -> str | None:
    return f"± {statistics.stdev(values):.4g}" if len(values) >= 2 else None


def _entry(name: str, unit: str, value: float, spread: str | None, extra: str) -> BenchEntry:
    entry: BenchEntry = {"name": name, "unit": unit, "value": round(float(value), 6)}
    if spread:
        entry["range"] = spread
    entry["extra"] = extra
    return entry


def _absolute(prefix: str, reps: list[dict[str, float]], medians: Mapping[str, float | None], extra: str) -> Entries:
    out: Entries = {k: [] for k in KINDS}
    for kind in KINDS:
        for metric in METRICS[kind]:
            value = medians[metric]
            if not _finite(value):
                continue
            values = [r[metric] for r in reps if metric in r]
            out[kind].append(_entry(f"{prefix}/{metric}", metric_unit(metric), value, _spread(values), extra))
    return out


def _configurations(summary: SweepSummary) -> dict[str, TrialRow]:
    """The measured trial of each configuration by :func:`config_name` (repeated: the one with most pairs)."""
    first = summary["objectives"][0]["metric"]

    def pairs(trial: TrialRow) -> int:
        estimate = trial_estimate(trial, first)
        return estimate.n if estimate else 0

    chosen: dict[str, TrialRow] = {}
    for trial in sorted(summary["trials"], key=lambda t: t["number"]):
        if trial["state"] != TrialState.COMPLETE or trial["is_baseline"] or not trial["ratios"]:
            continue
        name = config_name(trial["strategies"], trial["engine"])
        if name not in chosen or pairs(trial) >= pairs(chosen[name]):
            chosen[name] = trial
    return dict(sorted(chosen.items()))


def _ratio_facts(summary: SweepSummary, trial: TrialRow, ratio: RatioEstimate) -> str:
    first = summary["objectives"][0]["metric"]
    on_first = trial_estimate(trial, first)
    verdict = f"trial #{trial['number']}: verdict on {first}: {trial['verdict'] or '-'}"
    if on_first and math.isfinite(on_first.p_value):
        verdict += f" (p = {on_first.p_value:.3g})"
    facts = [verdict, f"this ratio: {ratio.verdict or '-'}, paired over {ratio.n} pairs"]
    if trial["feasible"] is False:
        facts.append("infeasible: breaks a constraint")
    if summary["winner"]["confirmed"] and summary["winner"]["trial"] == trial["number"]:
        facts.append("the confirmed winner of this sweep")
    elif trial["number"] in summary["best"]:
        facts.append("a significant winner in screening (not confirmed)")
    return "\n".join(facts)


def _ratios(summary: SweepSummary, prefix: str) -> Entries:
    out: Entries = {k: [] for k in KINDS}
    metrics = ratio_metrics(summary)
    for name, trial in _configurations(summary).items():
        for metric in metrics:
            ratio = trial_estimate(trial, metric)
            if ratio is None or not math.isfinite(ratio.ratio):
                continue
            low, high = ratio.ci_low, ratio.ci_high
            bounded = math.isfinite(low) and math.isfinite(high) and low > 1 / UNBOUNDED and high < UNBOUNDED
            ci = f"{low:.3f}-{high:.3f}x (95% CI)" if bounded else None
            facts = _ratio_facts(summary, trial, ratio)
            extra = _context(
                summary["environment"], trial["strategies"], trial["engine"], len(trial_reps(trial)), facts
            )
            kind: Better = "bigger" if metric in HIGHER_IS_BETTER else "smaller"
            out[kind].append(_entry(f"{prefix}/ratio-to-baseline/{name}/{metric}", RATIO_UNIT, ratio.ratio, ci, extra))
    return out


def bench_entries(loaded: Loaded, prefix: str | None = None) -> dict[Series, Entries]:
    """The entry lists of a run (``absolute`` only) or a sweep (``ratio`` and ``absolute``), by kind."""
    prefix = prefix or loaded.data["experiment"] or "tuner"
    if loaded.kind == "run":
        return {"absolute": _run_absolute(loaded.run, prefix)}
    summary = loaded.sweep
    return {"ratio": _ratios(summary, prefix), "absolute": _baseline_absolute(summary, prefix)}


def _run_absolute(run: RunRecord, prefix: str) -> Entries:
    """A run's medians over its repetitions."""
    reps = run_reps(run)
    medians: dict[str, float | None] = {
        m: statistics.median([r[m] for r in reps if m in r]) if any(m in r for r in reps) else None
        for m in THROUGHPUT + LATENCY
    }
    extra = _context(run["environment"], run["strategies"], engine_overrides(run), len(reps))
    return _absolute(f"{prefix}/run", reps, medians, extra)


def _baseline_absolute(summary: SweepSummary, prefix: str) -> Entries:
    """The medians of a sweep's baseline trial (none when it did not complete)."""
    base = baseline_trial(summary)
    if base is None or base["state"] != TrialState.COMPLETE:
        return {k: [] for k in KINDS}
    reps = trial_reps(base)
    medians = {m: trial_metric(base, m) for m in THROUGHPUT + LATENCY}
    extra = _context(summary["environment"], {}, base["engine"], len(reps), "config: baseline (vLLM as installed)")
    return _absolute(f"{prefix}/baseline-absolute", reps, medians, extra)


def _target(out: Path, parts: Sequence[str]) -> Path:
    return out.with_name("-".join([out.stem, *parts]) + (out.suffix or ".json")) if parts else out


def export_bench(
    path: Path, out: Path, *, kind: Better | None = None, series: Series | None = None, prefix: str | None = None
) -> list[Path]:
    """Check every file first, then write them: one per series and kind the input has and the options leave open.

    ``out`` is the file when one is asked for; otherwise its stem gets ``-<series>`` (a sweep, ``series`` not
    given) and ``-<kind>`` (``kind`` not given): ``bench-ratio-bigger.json``, ``bench-absolute-smaller.json``...
    Of several files, an empty one is left out; a single file asked for must have entries. Nothing is written
    when any file would be invalid; every problem is a :class:`UserError` (one line, exit 2).
    """
    capacity = capacity_file(path)
    if capacity is not None:
        record = load_capacity(capacity)
        where, what = str(capacity), "capacity search"
        entries: dict[Series, Entries] = {
            "capacity": {"bigger": capacity_entries(record, prefix or record["experiment"]), "smaller": []}
        }
    else:
        loaded = load(path)
        where, what = str(loaded.path), loaded.kind
        entries = bench_entries(loaded, prefix)
    if series is not None and series not in entries:
        raise UserError.single(where, f"a {what} has no {series} series (only: {', '.join(entries)})")
    chosen_series = [series] if series is not None else list(entries)
    chosen_kinds = [kind] if kind is not None else list(KINDS)
    files: dict[Path, list[BenchEntry]] = {}
    for which in chosen_series:
        for tool in chosen_kinds:
            parts = ([which] if len(chosen_series) > 1 else []) + ([tool] if kind is None else [])
            listed = entries[which][tool]
            problems = validate(listed)
            if problems:  # never hand the action a file it would misread, nor half of the files
                detail = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
                raise UserError.single(where, f"cannot export the {which} series for {TOOLS[tool]}: {detail}")
            if listed:
                files[_target(out, parts)] = listed
            elif len(chosen_series) * len(chosen_kinds) == 1:
                raise UserError.single(where, f"nothing to export in the {which} series for {TOOLS[tool]}")
    if not files:
        raise UserError.single(where, "nothing to export: no completed measurements")
    written = []
    for target, listed in files.items():
        try:
            written.append(write_json(target, listed))
        except OSError as exc:
            raise UserError.single(str(target), f"cannot write: {exc.strerror or exc}") from None
    return written
