"""The records the tuner writes and reads, and their one loader: ``run.json`` and ``sweep/summary.json``.

The record types are the file format: writers build them, readers get them from :func:`load`, mypy checks both
sides, and ``tests/test_records_schema.py`` checks ``results/README.md`` against them. Each file carries a
``schema`` key (``<family>/<major version>``); :func:`load` accepts the versions listed here and refuses any
other with a clear message. Fields are only ever added within a major version.

Per-repetition metrics are nested in a run (``ttft_ms: {p50: ...}``, as measured) and flat in a sweep trial (as
paired); :func:`flat` reads both. Older sweeps kept per-process telemetry per repetition (``processes``) instead of
once per trial (``telemetry``), and had no ``anchored`` values; the loader upgrades them, so readers see one layout.
"""

from __future__ import annotations

import copy
import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

from tuner.errors import UserError
from tuner.metrics.table import LATENCY_FAMILIES
from tuner.metrics.timings import flat_metrics
from tuner.plugin.protocol import ProcessReport
from tuner.traffic.workload_record import WorkloadRecord

RUN_SCHEMA = "tuner.run/1"
SWEEP_SCHEMA = "tuner.sweep/1"
SUPPORTED_RUN_SCHEMAS = {RUN_SCHEMA}
SUPPORTED_SWEEP_SCHEMAS = {SWEEP_SCHEMA}

Kind = Literal["run", "sweep"]


class TrialState(StrEnum):
    """A trial row's state: Optuna's own, with a trial stopped by Ctrl-C or SIGTERM told apart from one that failed."""

    COMPLETE = "COMPLETE"
    PRUNED = "PRUNED"
    FAIL = "FAIL"
    INTERRUPTED = "INTERRUPTED"
    RUNNING = "RUNNING"
    WAITING = "WAITING"

    def is_finished(self) -> bool:
        """Whether the trial has stopped running (as Optuna's ``TrialState.is_finished``)."""
        return self not in (TrialState.RUNNING, TrialState.WAITING)

    def is_done(self) -> bool:
        """Whether its point needs no more runs: a failed or interrupted trial's point is queued again."""
        return self in (TrialState.COMPLETE, TrialState.PRUNED)


class EngineRecord(TypedDict):
    """How the engine of a run was started."""

    args: dict[str, Any]  # resolved EngineArgs
    start_s: float
    mode: str  # offline, streaming, serve or endpoint
    env: NotRequired[dict[str, str]]  # vLLM's environment variables the experiment set (older runs lack it)


class Repetition(TypedDict):
    """One measured repetition of a run."""

    index: int
    metrics: dict[str, Any]  # nested: latency families as {mean, p50, p90, p99}
    processes: list[ProcessReport]  # one per vLLM process (none from an endpoint the tuner did not start)
    tail: dict[str, Any] | None  # the tail attribution (None without streamed tokens)


class RunRecord(TypedDict):
    """``run.json``: one configuration measured on one engine (``tuner run``)."""

    schema: str
    kind: Literal["run"]
    experiment: str
    created: str  # ISO-8601 UTC
    config: dict[str, Any]  # the experiment as loaded
    engine: EngineRecord
    environment: dict[str, Any]
    strategies: dict[str, dict[str, Any]]
    repetitions: list[Repetition]
    summary: dict[str, dict[str, float]]  # per flat metric: mean, median, min, max, cv
    memory: dict[str, dict[str, float]]  # per process: first_rss_mb, last_rss_mb, growth_mb
    workload: NotRequired[WorkloadRecord]  # the requests replayed (added in 0.1: older runs lack it)


class TrialRow(TypedDict):
    """One trial of a sweep as ``summary.json`` keeps it (read back from the Optuna study)."""

    number: int
    state: TrialState
    is_baseline: bool
    aa: bool  # an A/A trial (the baseline against itself)
    strategies: dict[str, dict[str, Any]]
    engine: dict[str, Any]  # engine-arg overrides
    env: NotRequired[dict[str, Any] | None]  # vLLM environment variable overrides (None: an older study)
    restart_pairs: NotRequired[dict[str, list[float]] | None]  # restart pairs only: each arm's engine start seconds
    engine_stops: NotRequired[dict[str, list[float]] | None]  # restart pairs only: each arm's engine stop seconds
    stop_time: NotRequired[dict[str, Any] | None]  # restart pairs only: paired ratio of mean engine stop time
    params: dict[str, Any]  # Optuna parameters
    values: list[float] | None  # what Optuna saw
    metrics: dict[str, float]  # median of each flat metric over the trial's repetitions
    anchored: dict[str, float]  # each ratio times the baseline's median (drift between trials cancels)
    ratios: dict[str, dict[str, Any]]  # per objective/constraint metric: the paired RatioEstimate
    feasible: bool | None
    feasible_ci: bool | None  # feasibility on the CI bound (SLO candidacy)
    slo_checks: list[str]  # each SLO check, in words
    verdict: str | None  # on the first objective
    pairs: int
    switch_s: list[float]
    token_ids_match: bool | None
    repetitions: list[dict[str, Any]]  # each {metrics} (flat)
    telemetry: list[ProcessReport]  # per-process GC data of the last measured repetition
    tail: dict[str, Any] | None
    failure: str | None
    worker: str | None  # the worker that ran it (shared studies)
    step_interleave: dict[str, Any] | None
    gc_pacing: NotRequired[dict[str, Any] | None]  # a GC-pacing trial: its arms' gen0 cycles and the grain they gave


class Winner(TypedDict):
    trial: int | None
    confirmed: bool
    reason: str
    effect: dict[str, Any] | None  # the confirmation estimate
    strategies: dict[str, dict[str, Any]]
    engine: dict[str, Any]
    env: str  # TUNER_PLUGIN=...
    vllm_env: NotRequired[dict[str, str]]  # vLLM's environment variables to deploy with (older studies lack it)


class SweepSummary(TypedDict):
    """``sweep/summary.json``: a study, its verdicts and its winner (``tuner sweep`` / ``tuner worker``)."""

    schema: str
    kind: Literal["sweep"]
    experiment: str
    study: str
    created: str
    environment: dict[str, Any]
    config: dict[str, Any]
    objectives: list[dict[str, str]]  # {metric, direction}
    constraints: list[dict[str, Any]]
    engine_starts: int | None
    start_s: list[float]
    switch_s: list[float]
    trials: list[TrialRow]
    pareto: list[int]
    importance: dict[str, float]
    best: list[int]  # screening's significant trials, best first
    confirmation: dict[str, Any] | None
    power: dict[str, Any]  # before_screening, before_confirmation
    winner: Winner
    incomplete: list[str]
    workload: WorkloadRecord | None  # None until the study's first engine started
    aa: NotRequired[dict[str, dict[str, Any]]]  # A/A sweeps: per method, comparisons and significant ones


@dataclass(frozen=True)
class Loaded:
    """One result file, checked and upgraded: ``kind`` says which record ``data`` is."""

    kind: Kind
    path: Path  # the JSON file itself
    data: dict[str, Any]

    @property
    def run(self) -> RunRecord:
        assert self.kind == "run", self.path
        return cast(RunRecord, self.data)

    @property
    def sweep(self) -> SweepSummary:
        assert self.kind == "sweep", self.path
        return cast(SweepSummary, self.data)


def resolve(path: Path) -> Path:
    """The result file behind ``path`` (a run dir, an experiment dir, a sweep dir or a JSON file)."""
    if not path.exists():
        raise UserError.single(str(path), "no such file or directory")
    if path.is_file():
        return path
    for candidate in (path / "run.json", path / "summary.json", path / "sweep" / "summary.json"):
        if candidate.is_file():
            return candidate
    runs = sorted(path.glob("*/run.json"))
    if runs:
        return runs[-1]  # an experiment directory without a sweep: its latest run
    raise UserError.single(
        str(path), "not a result: expected run.json, summary.json, sweep/summary.json or <run>/run.json in it"
    )


def load(path: Path) -> Loaded:
    """Load and check a run or a sweep summary; bad input raises :class:`UserError`."""
    file = resolve(path)
    where = str(file)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError.single(where, f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError.single(where, f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    if not isinstance(data, dict):
        raise UserError.single(where, "not a tuner result (expected a JSON object)")
    schema = data.get("schema")
    known = ", ".join(sorted(SUPPORTED_RUN_SCHEMAS | SUPPORTED_SWEEP_SCHEMAS))
    if schema in SUPPORTED_RUN_SCHEMAS:
        _require_list(data, "repetitions", where, non_empty=True)
        for index, rep in enumerate(data["repetitions"]):
            if not isinstance(rep, dict) or not isinstance(rep.get("metrics"), dict):
                raise UserError.single(where, "every repetition needs a `metrics` object", f"repetitions[{index}]")
        return Loaded("run", file, data)
    if schema in SUPPORTED_SWEEP_SCHEMAS:
        _require_list(data, "trials", where, non_empty=False)
        _require_list(data, "objectives", where, non_empty=True)
        for index, trial in enumerate(data["trials"]):
            if not isinstance(trial, dict) or "number" not in trial or "state" not in trial:
                raise UserError.single(where, "every trial needs `number` and `state`", f"trials[{index}]")
            _upgrade_trial(trial)
        _fill(data, _SUMMARY_DEFAULTS)
        _upgrade_winner(data)
        return Loaded("sweep", file, data)
    raise UserError.single(where, f"unsupported result schema {schema!r} (this tuner reads {known})", "schema")


# What a field added since a record's first version holds in files written before it (copied, never shared).
_TRIAL_DEFAULTS: dict[str, Any] = {
    "is_baseline": False,
    "aa": False,
    "strategies": {},
    "engine": {},
    "params": {},
    "values": None,
    "metrics": {},
    "ratios": {},
    "feasible": None,
    "feasible_ci": None,
    "slo_checks": [],
    "verdict": None,
    "switch_s": [],
    "token_ids_match": None,
    "repetitions": [],
    "tail": None,
    "failure": None,
    "worker": None,
    "step_interleave": None,
}
_SUMMARY_DEFAULTS: dict[str, Any] = {
    "study": None,
    "constraints": [],
    "engine_starts": None,
    "start_s": [],
    "switch_s": [],
    "pareto": [],
    "importance": {},
    "best": [],
    "confirmation": None,
    "power": {},
    "incomplete": [],
    "workload": None,
}
_WINNER_DEFAULTS: dict[str, Any] = {
    "trial": None,
    "confirmed": False,
    "reason": "",
    "effect": None,
    "strategies": {},
    "engine": {},
    "env": "",
}


def _fill(record: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Give ``record`` each field of ``defaults`` it lacks, as a copy of the default."""
    for key, default in defaults.items():
        if key not in record:
            record[key] = copy.deepcopy(default)


def _upgrade_trial(trial: dict[str, Any]) -> None:
    """Bring a trial written by an older sweep to the current :class:`TrialRow` layout, in place: fields added
    since get their empty value; ``anchored`` (added later) is the trial's own medians, as Optuna saw them then;
    per-process telemetry kept per repetition gives ``telemetry`` from the last one."""
    _fill(trial, _TRIAL_DEFAULTS)
    trial.setdefault("anchored", trial["metrics"])
    reps = trial["repetitions"] if isinstance(trial["repetitions"], list) else []
    kept = [r["processes"] for r in reps if isinstance(r, dict) and r.get("processes")]
    trial.setdefault("telemetry", kept[-1] if kept else [])
    trial.setdefault("pairs", len(reps))


def _upgrade_winner(summary: dict[str, Any]) -> None:
    """Older sweeps named the best screened trial as the winner, with no confirmation on fresh pairs: it stays
    named but unconfirmed (``confirmed`` False, ``effect`` None); the YAML they inlined is in ``winner.yaml`` now."""
    if not isinstance(summary.get("winner"), dict):
        summary["winner"] = {"reason": "no winner recorded"}
    summary["winner"].pop("yaml", None)
    _fill(summary["winner"], _WINNER_DEFAULTS)


def _require_list(data: dict[str, Any], key: str, where: str, *, non_empty: bool) -> None:
    value = data.get(key)
    if not isinstance(value, list) or (non_empty and not value):
        raise UserError.single(where, "missing or empty" if non_empty else "missing (expected a list)", key)


def flat(metrics: dict[str, Any]) -> dict[str, float]:
    """Flat metrics of one repetition, whether stored nested (``ttft_ms: {p50: ...}``) or already flat."""
    if all(isinstance(metrics.get(f"{family}_ms"), dict) for family in LATENCY_FAMILIES):
        return flat_metrics(metrics)
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def run_reps(run: Mapping[str, Any]) -> list[dict[str, float]]:
    return [flat(rep["metrics"]) for rep in run["repetitions"]]


def trial_reps(trial: Mapping[str, Any]) -> list[dict[str, float]]:
    """Per-repetition flat metrics of a sweep trial (empty when the summary only kept their count)."""
    reps = trial.get("repetitions")
    if not isinstance(reps, list):
        return []
    return [flat(r["metrics"]) for r in reps if isinstance(r, dict) and isinstance(r.get("metrics"), dict)]


def trial_process_lists(trial: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """Per-process telemetry of a trial: per repetition when kept, else the one ``telemetry`` snapshot."""
    reps = trial.get("repetitions")
    per_rep = (
        [r["processes"] for r in reps if isinstance(r, dict) and r.get("processes")] if isinstance(reps, list) else []
    )
    if per_rep:
        return per_rep
    telemetry = trial.get("telemetry")
    return [telemetry] if isinstance(telemetry, list) and telemetry else []


def median_of(reps: Sequence[dict[str, float]], metric: str) -> float | None:
    values = [r[metric] for r in reps if metric in r and math.isfinite(r[metric])]
    return statistics.median(values) if values else None


def trial_metric(trial: Mapping[str, Any], metric: str) -> float | None:
    """The trial's median of ``metric`` (its stored ``metrics``, else computed from repetitions)."""
    value = (trial.get("metrics") or {}).get(metric)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return median_of(trial_reps(trial), metric)


def objective_value(trial: Mapping[str, Any], metric: str) -> float | None:
    """``metric`` as the study's objective saw it: anchored to the baseline."""
    value = (trial.get("anchored") or {}).get(metric)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return trial_metric(trial, metric)
