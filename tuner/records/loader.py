"""The records the tuner writes and reads, and their one loader: ``run.json`` and ``sweep/summary.json``.

The record types are the file format: writers build them, readers get them from :func:`load`, mypy checks both
sides, and ``tests/test_records_schema.py`` checks ``docs/records.md`` against them. Each file carries a
``schema`` key (``<family>/<major version>``); :func:`load` accepts the versions listed here and refuses any
other with a clear message. Fields are only ever added within a major version.

Older files lack fields added since, and older sweeps kept per-process telemetry per repetition (``processes``)
instead of once per trial (``telemetry``) and had no ``anchored`` values: the loader upgrades them, so that every
field of a record type is present after loading and readers index it (:mod:`tuner.records.upgrade`).
:mod:`tuner.records.values` reads the numbers out of loaded records.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict, cast

from tuner.errors import UserError
from tuner.metrics import Attribution, RunMetrics, TailRecord
from tuner.plugin.protocol import ProcessReport
from tuner.records.json_values import JsonObject, StrategyParams
from tuner.records.sections import (
    AaRecord,
    ConfirmationRecord,
    ConstraintRecord,
    GcPacingRecord,
    PowerRecord,
    StoredRatio,
    TrialStepRecord,
)
from tuner.records.upgrade import upgrade_run, upgrade_summary
from tuner.stats import RatioRecord
from tuner.traffic import WorkloadRecord
from tuner.vllm import EnvironmentRecord

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

    args: JsonObject  # resolved EngineArgs
    start_s: float
    mode: str  # offline, streaming, serve or endpoint
    env: dict[str, str]  # vLLM's environment variables the experiment set


class Repetition(TypedDict):
    """One measured repetition of a run."""

    index: int
    metrics: RunMetrics | JsonObject  # as measured; an older run's may lack metrics added since
    processes: list[ProcessReport]  # one per vLLM process (none from an endpoint the tuner did not start)
    tail: Attribution | None  # the tail attribution (None without streamed tokens)


class RunRecord(TypedDict):
    """``run.json``: one configuration measured on one engine (``tuner run``)."""

    schema: str
    kind: Literal["run"]
    experiment: str
    created: str  # ISO-8601 UTC
    config: JsonObject  # the experiment as loaded
    engine: EngineRecord
    environment: EnvironmentRecord  # every key present after loading
    strategies: StrategyParams
    repetitions: list[Repetition]
    summary: dict[str, dict[str, float]]  # per flat metric: mean, median, min, max, cv
    memory: dict[str, dict[str, float]]  # per process: first_rss_mb, last_rss_mb, growth_mb
    workload: WorkloadRecord | None  # the requests replayed (None: a run from before 0.1)


class TrialFields(TypedDict, total=False):
    """What a sweep trial records as it runs, under the same keys in its Optuna user attributes
    (:class:`tuner.sweep.trial_attrs.TrialAttrs`) and in ``summary.json`` (:class:`TrialRow`).

    Not total: each key is written when its part of the trial is done, so a running, failed or older trial's
    attributes lack some, while a loaded :class:`TrialRow` has every one (the loader fills those a file lacks with
    their empty value; a TypedDict cannot be partial in one subclass and total in another).
    """

    aa: bool  # an A/A trial (the baseline against itself)
    strategies: StrategyParams
    engine: JsonObject  # engine-arg overrides
    env: dict[str, str] | None  # vLLM environment variable overrides (None: a study written before them)
    restart_pairs: dict[str, list[float]] | None  # restart pairs only: each arm's engine start seconds
    engine_stops: dict[str, list[float]] | None  # restart pairs only: each arm's engine stop seconds
    stop_time: RatioRecord | None  # restart pairs only: the paired ratio of mean engine stop time
    failure: str | None  # why it failed (tuner.sweep.trial_attrs.INTERRUPTED_FAILURE when stopped)
    worker: str | None  # the worker that ran it (shared studies)
    metrics: dict[str, float]  # median of each flat metric over the trial's repetitions
    anchored: dict[str, float]  # what Optuna saw: each ratio times the baseline's median (drift cancels)
    ratios: dict[str, StoredRatio]  # per objective/constraint metric: the paired ratio
    feasible: bool | None
    feasible_ci: bool | None  # feasibility on the CI bound (SLO candidacy)
    slo_checks: list[str]  # each SLO check, in words
    verdict: str | None  # the screening call on the first objective
    switch_s: list[float]
    token_ids_match: bool | None
    telemetry: list[ProcessReport]  # per-process GC data of the last measured repetition: ProcessReports, compacted
    tail: TailRecord | None  # each arm's attributions pooled, and the trial arm's last timeline
    step_interleave: TrialStepRecord | None  # the step-level comparison, when the trial was compared per step
    gc_pacing: GcPacingRecord | None  # a GC-pacing trial: its mutator and collector parts


class TrialRepetition(TypedDict):
    """One repetition of a sweep trial's arm: its flat metrics."""

    metrics: dict[str, float]
    processes: NotRequired[list[ProcessReport]]  # older sweeps only: per-process telemetry of each repetition


class TrialRow(TrialFields):
    """One trial of a sweep as ``summary.json`` keeps it (read back from the Optuna study); after loading, every
    key (those of :class:`TrialFields` too) is present."""

    number: int
    state: TrialState
    is_baseline: bool
    params: JsonObject  # Optuna parameters
    values: list[float] | None  # what Optuna saw
    pairs: int
    repetitions: list[TrialRepetition]


class Winner(TypedDict):
    trial: int | None
    confirmed: bool
    reason: str
    effect: RatioRecord | None  # the confirmation estimate
    repeated_ci: list[float | None] | None  # the gain (throughput ratio) interval inverting the decision
    strategies: StrategyParams
    engine: JsonObject
    env: str  # TUNER_PLUGIN=...
    vllm_env: dict[str, str]  # vLLM's environment variables to deploy with


class ObjectiveRecord(TypedDict):
    """One objective of a sweep: the metric and which way is better."""

    metric: str
    direction: Literal["maximize", "minimize"]


class SweepSummary(TypedDict):
    """``sweep/summary.json``: a study, its verdicts and its winner (``tuner sweep`` / ``tuner worker``)."""

    schema: str
    kind: Literal["sweep"]
    experiment: str
    study: str | None  # None: a summary from before study names were kept
    created: str
    environment: EnvironmentRecord  # as in a run
    config: JsonObject
    objectives: list[ObjectiveRecord]
    constraints: list[ConstraintRecord]
    engine_starts: int | None
    start_s: list[float]
    switch_s: list[float]
    trials: list[TrialRow]
    pareto: list[int]
    importance: dict[str, float]
    best: list[int]  # screening's significant trials, best first
    confirmation: ConfirmationRecord | None
    power: PowerRecord
    winner: Winner
    incomplete: list[str]
    workload: WorkloadRecord | None  # None until the study's first engine started
    aa: dict[str, AaRecord]  # A/A sweeps: per method ({} for any other sweep)


@dataclass(frozen=True)
class Loaded:
    """One result file, checked and upgraded: ``kind`` says which record ``data`` is."""

    kind: Kind
    path: Path  # the JSON file itself
    data: RunRecord | SweepSummary

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
    """Load and check a run or a sweep summary, upgraded (:mod:`tuner.records.upgrade`) so that every field of its
    record type is present; bad input raises :class:`UserError`."""
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
        upgrade_run(data)
        return Loaded("run", file, cast(RunRecord, data))
    if schema in SUPPORTED_SWEEP_SCHEMAS:
        _require_list(data, "trials", where, non_empty=False)
        _require_list(data, "objectives", where, non_empty=True)
        for index, objective in enumerate(data["objectives"]):
            if not isinstance(objective, dict) or "metric" not in objective:
                raise UserError.single(where, "every objective needs a `metric`", f"objectives[{index}]")
        for index, trial in enumerate(data["trials"]):
            if not isinstance(trial, dict) or "number" not in trial or "state" not in trial:
                raise UserError.single(where, "every trial needs `number` and `state`", f"trials[{index}]")
        upgrade_summary(data)
        return Loaded("sweep", file, cast(SweepSummary, data))
    raise UserError.single(where, f"unsupported result schema {schema!r} (this tuner reads {known})", "schema")


def _require_list(data: dict[str, Any], key: str, where: str, *, non_empty: bool) -> None:
    value = data.get(key)
    if not isinstance(value, list) or (non_empty and not value):
        raise UserError.single(where, "missing or empty" if non_empty else "missing (expected a list)", key)
