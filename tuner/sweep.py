"""``tuner sweep``: an Optuna study over strategy sets and engine args, measured in pairs on live engines.

- The baseline (vLLM as installed, no strategies) is enqueued first; every trial is paired against the
  reference arm (no strategies) on the same engine, so host drift cancels.
- Trials that differ only in switchable strategies share one engine; it restarts only when engine args change.
- Screening only nominates candidates; the single-process command then confirms them against the baseline
  with fresh pairs (:mod:`tuner.confirmation`), and only a confirmed winner is written to ``winner.yaml``.
- Storage is any Optuna RDB URL (SQLite under the experiment's results by default, PostgreSQL for many
  workers); ``resume`` continues a study without repeating finished trials.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import inspect
import json
import math
import re
import shlex
import sqlite3
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import optuna

from tuner.config import Experiment
from tuner.confirmation import (
    CONFIRMATION_ATTR,
    SCREENING_POWER_ATTR,
    Candidate,
    Pair,
    estimate_from_dict,
    pending,
    run_pair,
    screening_power,
    screening_results,
)
from tuner.engine import EngineError, EngineSession
from tuner.engine_args import cli_flags
from tuner.environment import environment_record
from tuner.errors import UserError
from tuner.feedback import SILENT, Feedback, Task, task
from tuner.interleave import interleaved_comparison, step_pairs, step_ratio
from tuner.measure import Workbench
from tuner.metrics import HIGHER_IS_BETTER, STEP_LEVEL_METRICS
from tuner.pairing import Arms, measure_pairs, step_interleavable
from tuner.plugin.protocol import encode_spec
from tuner.results.records import SWEEP_SCHEMA, SweepSummary, TrialRow, TrialState, Winner
from tuner.search_space import (
    Pairs,
    Search,
    TrialConfig,
    baseline_params,
    config_from_params,
    grid,
    split_key,
    suggest,
)
from tuner.stats import unpaired_ratio
from tuner.tail import tail_record
from tuner.verdicts import slo

DEFAULT_TRIALS = 20
BASELINE_ATTR = "baseline"
WORKER_ATTR = "worker"
FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
UNPAIRED_NOTE = (
    "descriptive only: this trial's repetitions against the baseline trial's, measured at other times on another "
    "engine; host drift between them is not cancelled, so no verdict is drawn"
)
MAX_RETRY = 2  # a trial whose worker died is run again at most this often
TrialCallback = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]


def default_storage(experiment: Experiment) -> str:
    path = experiment.output_dir / experiment.name / "study.db"
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path.resolve()}"


def check_sqlite_file(url: str) -> None:
    """Refuse an existing SQLite file that is corrupt or holds something other than Optuna studies."""
    if not url.startswith("sqlite:///"):
        return
    path = Path(url.removeprefix("sqlite:///"))
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    except sqlite3.Error as exc:
        raise UserError.single(str(path), f"not a readable SQLite database ({exc}); nothing was changed") from None
    if tables and "studies" not in tables:
        raise UserError.single(
            str(path),
            "this SQLite file is not an Optuna study database (it holds "
            f"{', '.join(sorted(tables)[:5])}); nothing was changed",
        )


def make_storage(url: str, search: Search) -> optuna.storages.RDBStorage:
    """RDB storage with heartbeats, so a dead worker's trial is failed and retried (at most twice)."""
    check_sqlite_file(url)
    accepted = inspect.signature(optuna.storages.RDBStorage).parameters
    # Optuna 4.9 renamed the callback (and its argument); older releases only know the first names.
    retry_class = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", optuna.storages.RetryFailedTrialCallback)
    callback = (
        "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in accepted else "failed_trial_callback"
    )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return optuna.storages.RDBStorage(
                driver_url(url),
                heartbeat_interval=search.heartbeat_s,
                grace_period=search.grace_period_s,
                **{callback: retry_class(max_retry=MAX_RETRY)},
            )
    except Exception as exc:  # unreachable server, corrupt or foreign database, bad URL
        raise storage_error(url, exc) from None


def storage_error(url: str, exc: Exception) -> UserError:
    """The error for a storage that cannot be used, on one line (without SQLAlchemy's link to its docs)."""
    reason = re.sub(r"(\\[nt]|\s)+", " ", str(exc).split("(Background on this error")[0]).strip()
    return UserError.single(url, f"cannot open the study storage: {reason}")


def driver_url(url: str) -> str:
    """``postgresql://`` through psycopg2 when psycopg 3 (SQLAlchemy's default) is not installed."""
    psycopg2_only = not importlib.util.find_spec("psycopg") and importlib.util.find_spec("psycopg2")
    if url.startswith("postgresql://") and psycopg2_only:
        return "postgresql+psycopg2://" + url.removeprefix("postgresql://")
    return url


def uses_grid(search: Search) -> bool:
    if search.sampler == "grid":
        return True
    return search.sampler == "auto" and search.categorical and len(grid(search.space)) <= (search.n_trials or 64)


def make_sampler(search: Search) -> optuna.samplers.BaseSampler:
    def constraints(trial: optuna.trial.FrozenTrial) -> list[float]:
        return list(trial.user_attrs.get("constraints", [0.0]))

    if uses_grid(search) or search.sampler == "random":
        return optuna.samplers.RandomSampler(seed=search.seed)  # grid points are enqueued; nothing is sampled
    if search.sampler == "nsga2" or (search.sampler == "auto" and len(search.objectives) > 1):
        return optuna.samplers.NSGAIISampler(seed=search.seed, constraints_func=constraints)
    return optuna.samplers.TPESampler(seed=search.seed, constraints_func=constraints)


def open_study(
    experiment: Experiment, storage: str | optuna.storages.RDBStorage, *, resume: bool, study_name: str
) -> optuna.Study:
    search = require_search(experiment)
    if isinstance(storage, str):
        storage = make_storage(storage, search)
    exists = study_name in {s.study_name for s in optuna.get_all_study_summaries(storage)}
    if exists and not resume:
        raise UserError.single(
            storage.url,
            f"study {study_name!r} already exists: add --resume to continue it, "
            "or remove the study / pick another --study-name",
        )
    pruner = (
        optuna.pruners.MedianPruner(n_startup_trials=2) if search.pruner == "median" else optuna.pruners.NopPruner()
    )
    study = optuna.create_study(
        study_name=study_name,
        storage=storage,
        sampler=make_sampler(search),
        pruner=pruner,
        directions=[o.resolved_direction for o in search.objectives],
        load_if_exists=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.metric for o in search.objectives])  # optuna-dashboard labels its axes
    return study


def require_search(experiment: Experiment) -> Search:
    """The experiment's ``search:`` section; without one it cannot be swept."""
    if experiment.search is None:
        raise UserError.single(experiment.name, "the experiment has no `search:` section to sweep", "search")
    return experiment.search


def _queued_points(experiment: Experiment, *, aa: bool) -> list[dict[str, Any]]:
    """The params queued up front: the baseline first, then (grid search only) every other grid point."""
    search = require_search(experiment)
    base = baseline_params(search.space, experiment.engine)
    if uses_grid(search) and not aa:
        return [base, *(p for p in grid(search.space) if p != base)]
    return [base]


def planned_trials(experiment: Experiment, *, aa: bool) -> int:
    """Finished trials that complete the study: the whole grid, else ``search.n_trials``."""
    search = require_search(experiment)
    if uses_grid(search) and not aa:
        return len(_queued_points(experiment, aa=aa))
    return search.n_trials or DEFAULT_TRIALS


def enqueue_missing(study: optuna.Study, experiment: Experiment, *, aa: bool) -> int:
    """Queue the baseline (and every grid point) not yet finished or queued; return the trials still to run."""
    states = (*FINISHED, optuna.trial.TrialState.WAITING, optuna.trial.TrialState.RUNNING)
    taken = [
        t.params or t.system_attrs.get("fixed_params", {}) for t in study.get_trials(deepcopy=False, states=states)
    ]
    wanted = _queued_points(experiment, aa=aa)
    for params in wanted:
        if params not in taken:
            study.enqueue_trial(params, user_attrs={BASELINE_ATTR: params == wanted[0]})
            taken.append(params)
    done = len(study.get_trials(deepcopy=False, states=FINISHED))
    return max(planned_trials(experiment, aa=aa) - done, 0)


def trial_config(trial: optuna.Trial, search: Search, *, aa: bool) -> TrialConfig:
    """What ``trial`` runs. The baseline is vLLM as installed, whatever the space allows (e.g. a strategy fixed on):
    its params were enqueued for the record and are not asked from the space, whose choices may not include them.
    A/A trials run the baseline too."""
    if aa:
        return TrialConfig(strategies={}, engine={})
    if trial.user_attrs.get(BASELINE_ATTR):
        if _baseline_fits(search.space):  # its params on record, for Optuna's samplers and importance
            suggest(trial, search.space)
        return TrialConfig(strategies={}, engine={})
    return config_from_params(suggest(trial, search.space))


def _baseline_fits(space: dict[str, Any]) -> bool:
    """Whether the baseline's params (every toggle off; engine values are checked at load) are choices of the
    space, so that Optuna accepts them."""
    return all(False in spec for key, spec in space.items() if split_key(key)[1] is None and isinstance(spec, list))


class Sweep:
    """Runs the trials of one study, reusing the engine while its args stay the same."""

    def __init__(
        self, experiment: Experiment, study: optuna.Study, feedback: Feedback = SILENT, *, aa: bool = False
    ) -> None:
        self.experiment = experiment
        self.search = require_search(experiment)
        self.study = study
        self.feedback = feedback
        self.aa = aa
        self.session: EngineSession | None = None
        self.bench: Workbench | None = None
        self.engine_args: dict[str, Any] | None = None
        self.start_s: list[float] = []
        self.failed_starts: dict[str, str] = {}  # engine config (JSON) -> why it did not start
        self.switch_s: list[float] = []
        self.installable = sorted({split_key(k)[0] for k in self.search.space if split_key(k)[0] != "engine"})

    def _workbench(self, engine_overrides: dict[str, Any]) -> Workbench:
        wanted = {**self.experiment.engine, **engine_overrides}
        if self.bench is None or wanted != self.engine_args:
            self.close()
            key = json.dumps(wanted, sort_keys=True, default=str)
            if key in self.failed_starts:  # the same engine would fail the same way: once per config is enough
                raise EngineError(f"not started again: this engine config failed to start ({self.failed_starts[key]})")
            try:
                self.bench = Workbench.start(self.experiment, encode_spec({}, self.installable), wanted)
            except EngineError as exc:
                self.failed_starts[key] = str(exc)
                raise
            self.session = self.bench.session
            self.start_s.append(self.session.start_s)
            self.engine_args = wanted
        return self.bench

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        self.session = self.bench = None

    def objective(self, trial: optuna.Trial) -> list[float]:
        is_baseline = bool(trial.user_attrs.get(BASELINE_ATTR))
        config = trial_config(trial, self.search, aa=self.aa)
        trial.set_user_attr("aa", self.aa and not is_baseline)
        trial.set_user_attr("strategies", config.strategies)
        trial.set_user_attr("engine", config.engine)
        progress = self.feedback.task(
            f"trial {trial.number}" + (" (baseline)" if is_baseline else ""), total=self.search.pairs.max
        )
        watchdog = _Watchdog(self, self.search.trial_timeout_s)
        try:
            bench = self._workbench(config.engine)
            watchdog.arm()
            # The baseline trial only needs its own repetitions: the minimum number of pairs.
            pairs = Pairs(min=self.search.pairs.min, max=self.search.pairs.min) if is_baseline else self.search.pairs
            steps = not is_baseline and self._use_steps(bench, config.strategies)
            if steps:  # absolute metrics for objectives and SLOs from the minimum pairs; the verdict from steps
                pairs = Pairs(min=self.search.pairs.min, max=self.search.pairs.min)
            # An A/A sweep checks every method the real sweep would use: run-level pairs, and steps when the space
            # holds strategies that are compared step by step here.
            steps = steps or (self.aa and not is_baseline and self._space_uses_steps(bench))
            arms = measure_pairs(
                bench,
                config.strategies,
                pairs,
                self.search.objectives[0],
                self.search.resolution,
                seed=self.search.seed + trial.number,
                on_pair=self._pair_callback(trial, progress, prunable=not is_baseline),
            )
            if steps:
                progress.update(description=f"trial {trial.number}: step interleaving")
                arms.step_result = interleaved_comparison(
                    bench,
                    {},
                    config.strategies,
                    block_steps=self.search.block_steps,
                    resolution=self.search.resolution,
                    budget_s=self.search.step_budget_s,
                    seed=self.search.seed + trial.number,
                )
        except KeyboardInterrupt:
            trial.set_user_attr("failure", "interrupted")
            self.feedback.note(f"trial {trial.number} interrupted", "warning")
            raise
        except optuna.TrialPruned:
            raise
        except Exception as exc:
            reason = f"exceeded the trial time limit of {watchdog.limit_s:g} s" if watchdog.fired else None
            trial.set_user_attr("failure", reason or f"{type(exc).__name__}: {exc}")
            self.feedback.note(f"trial {trial.number} failed: {type(exc).__name__}: {exc}", "error")
            self.close()  # an engine in an unknown state is not reused
            raise
        finally:
            watchdog.cancel()
            progress.close()
        self.switch_s += arms.switch_s
        return self._record(trial, arms, is_baseline)

    def _use_steps(self, bench: Workbench, strategies: dict[str, dict[str, Any]]) -> bool:
        if self.search.method == "runs":
            return False
        possible = step_interleavable(strategies, bench.session.control({"op": "report"}))
        if self.search.method == "steps" and not possible:
            reason = "not step-switchable, or active outside the EngineCore process"
            raise UserError.single(
                self.experiment.name,
                f"{sorted(strategies)} cannot be compared per step here ({reason}): use method runs or auto",
                "search.method",
            )
        return possible

    def _space_uses_steps(self, bench: Workbench) -> bool:
        if self.search.method == "runs":
            return False
        reports = bench.session.control({"op": "report"})
        return any(step_interleavable({name: {}}, reports) for name in self.installable)

    def _pair_callback(self, trial: optuna.Trial, progress: Task, *, prunable: bool) -> Callable[[int, Any], bool]:
        def on_pair(done: int, estimate: Any) -> bool:
            progress.update(done)
            if estimate is None or not prunable or len(self.search.objectives) > 1:
                return False
            trial.report(estimate.ratio, step=done)
            if trial.should_prune():
                raise optuna.TrialPruned(f"pruned after {done} pairs")
            return False

        return on_pair

    def _record(self, trial: optuna.Trial, arms: Arms, is_baseline: bool) -> list[float]:
        medians = arms.medians("trial")
        ratios = (
            {}
            if is_baseline
            else {
                metric: arms.ratio(metric, self.search.resolution).to_dict()
                for metric in {o.metric for o in self.search.objectives} | {c.metric for c in self.search.constraints}
            }
        )
        if arms.step_result is not None:
            trial.set_user_attr("step_interleave", arms.step_result.to_dict())
            if not self.aa:  # A/A keeps both methods' verdicts apart (see summarize_study)
                # Steps stand in for throughput and mean per-token latency only; the rest keep run-level ratios.
                ratios |= {m: step_ratio(arms.step_result, m) for m in ratios if m in STEP_LEVEL_METRICS}
        # What Optuna sees (objectives, constraints): each ratio times the anchor's median, so that host drift
        # between trials, each measured at another time, cancels. Absolute medians stay in "metrics".
        anchor = medians if is_baseline else self._anchor(arms)
        scaled = {m: anchor[m] * float(r["ratio"]) for m, r in ratios.items() if r["ratio"] and m in anchor}
        values = {**medians, **scaled}
        violations = [c.violation(values[c.metric]) for c in self.search.constraints]
        # For candidacy each SLO is judged on the CI bound on its bad side (anchor x ratio CI), not the point.
        checks = [
            slo(c.metric, est, anchor[c.metric], max=c.max, min=c.min)
            for c in self.search.constraints
            if c.metric in anchor and (est := estimate_from_dict(ratios.get(c.metric))) is not None
        ]
        trial.set_user_attr("slo_checks", [c.describe() for c in checks])
        trial.set_user_attr("feasible_ci", all(c.passed for c in checks))
        trial.set_user_attr("metrics", medians)
        trial.set_user_attr("anchored", values)
        trial.set_user_attr("arms", {"reference": arms.reference, "trial": arms.trial})
        trial.set_user_attr("ratios", ratios)
        trial.set_user_attr("constraints", violations or [0.0])
        trial.set_user_attr("feasible", all(v <= 0 for v in violations))
        trial.set_user_attr("verdict", ratios[self.search.objectives[0].metric]["verdict"] if ratios else None)
        trial.set_user_attr("switch_s", arms.switch_s)
        trial.set_user_attr("token_ids_match", arms.token_ids_match)
        trial.set_user_attr("telemetry", _compact(arms.telemetry))
        trial.set_user_attr("tail", tail_record(arms.tails))
        return [values[o.metric] for o in self.search.objectives]

    def _anchor(self, arms: Arms) -> dict[str, float]:
        """The medians ratios are scaled by: the baseline trial's, or (before it finished, e.g. on another
        worker) this trial's own reference arm."""
        for done in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            if done.user_attrs.get(BASELINE_ATTR) and done.user_attrs.get("metrics"):
                return dict(done.user_attrs["metrics"])
        return arms.medians("reference")

    def fresh_pairs(self, candidate: Candidate, done: int, wanted: int, left_s: float) -> list[Pair]:
        """``wanted`` fresh pairs of ``candidate`` against the baseline on the baseline engine (a confirmation
        look); runs continue their mirrored order after the ``done`` pairs already measured."""
        bench = self._workbench({})
        metric = self.search.objectives[0].metric
        seed = self.search.seed + 7919 * (candidate.trial + 1)  # fresh pairs: not the screening's order
        if candidate.method == "steps":
            return step_pairs(
                bench,
                {},
                candidate.strategies,
                wanted=wanted,
                budget_s=left_s,
                block_steps=self.search.block_steps,
                seed=seed + done,
            )
        size = max(wanted, 2)
        arms = measure_pairs(
            bench,
            candidate.strategies,
            Pairs(min=size, max=size),
            self.search.objectives[0],
            self.search.resolution,
            seed=seed,
            first_pair=done,
        )
        self.switch_s += arms.switch_s
        return [run_pair(metric, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)]

    def screening_power(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        """After the baseline trial: print the power statement of the sweep from its pairs and store it."""
        arms = trial.user_attrs.get("arms")
        if not trial.user_attrs.get(BASELINE_ATTR) or self.aa or not arms or len(arms["trial"]) < 2:
            return
        power = screening_power(arms, self.search, max(planned_trials(self.experiment, aa=False) - 1, 1))
        study.set_user_attr(SCREENING_POWER_ATTR, power)
        self.feedback.note("power before screening (run-level noise of the baseline's own pairs)", "heading")
        self.feedback.note("  " + "\n  ".join(power["lines"]))

    def run(self, n_trials: int | None, callbacks: Sequence[TrialCallback] = ()) -> None:
        """Run ``n_trials`` trials (``None``: until a callback stops the study); the caller closes the engine."""
        # The tuner reports each trial itself; Optuna's own log would add a traceback per failed trial.
        optuna.logging.set_verbosity(optuna.logging.ERROR)
        with task(self.feedback, "study", n_trials) as study_task:

            def objective(trial: optuna.Trial) -> list[float]:
                try:
                    return self.objective(trial)
                finally:
                    study_task.advance()

            self.study.optimize(
                objective,
                n_trials=n_trials,
                timeout=self.search.timeout_s,
                catch=(Exception,),
                callbacks=[self.screening_power, *callbacks],
                gc_after_trial=False,
            )


class _Watchdog:
    """Kills the engine of a trial that runs past its time limit (the trial then fails with that reason).

    The clock starts when :meth:`arm` is called, once the trial's engine is up: starting an engine is not the
    configuration's time (and a new engine is only needed when engine args change).
    """

    def __init__(self, sweep: Sweep, limit_s: float | None) -> None:
        self.limit_s = limit_s or 0.0
        self.fired = False
        self._sweep = sweep
        self._timer = threading.Timer(self.limit_s, self._fire) if limit_s else None
        if self._timer is not None:
            self._timer.daemon = True

    def arm(self) -> None:
        if self._timer is not None:
            self._timer.start()

    def _fire(self) -> None:
        self.fired = True
        if self._sweep.session is not None:
            self._sweep.session.kill()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _compact(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("pid", "process_name", "roles", "active", "errors", "counters", "gc")
    return [{k: p[k] for k in keep if k in p} for p in processes]


# ------------------------------------------------------------------------------------------- summary


def summarize_study(study: optuna.Study, experiment: Experiment, sweep: Sweep | None) -> SweepSummary:
    """The study as plain data (schema ``tuner.sweep/1``), read back from storage."""
    search = require_search(experiment)
    trials = study.get_trials(deepcopy=False)
    baseline = next(
        (t for t in trials if t.user_attrs.get(BASELINE_ATTR) and t.state == optuna.trial.TrialState.COMPLETE), None
    )
    rows = [_trial_row(t, baseline, experiment) for t in trials]
    retried_as = {t.system_attrs["retry_history"][-1]: t.number for t in trials if t.system_attrs.get("retry_history")}
    for row in rows:
        if row["number"] in retried_as and not row["failure"]:
            row["failure"] = f"its worker stopped sending heartbeats; retried as trial {retried_as[row['number']]}"
    complete = [r for r in rows if r["state"] == "COMPLETE"]
    pareto = [t.number for t in study.best_trials if t.user_attrs.get("feasible")] if complete else []
    confirmation = current_confirmation(study, rows, search)
    summary: SweepSummary = {
        "schema": SWEEP_SCHEMA,
        "kind": "sweep",
        "experiment": experiment.name,
        "study": study.study_name,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "environment": environment_record(),
        "config": experiment.model_dump(mode="json"),
        "objectives": [{"metric": o.metric, "direction": o.resolved_direction} for o in search.objectives],
        "constraints": [c.model_dump(exclude_none=True) for c in search.constraints],
        "engine_starts": len(sweep.start_s) if sweep else None,
        "start_s": sweep.start_s if sweep else [],
        "switch_s": sweep.switch_s if sweep else [],
        "trials": rows,
        "pareto": pareto,
        "importance": _importance(study),
        "best": _best(rows, search) if baseline is not None else [],  # screening's significant trials
        "confirmation": confirmation,
        "power": {
            "before_screening": study.user_attrs.get(SCREENING_POWER_ATTR),
            "before_confirmation": (confirmation or {}).get("power"),
        },
        "winner": winner(rows, confirmation),
        "incomplete": incomplete_reasons(rows),
    }
    if baseline is None:
        summary["winner"]["reason"] = "no verdict: the baseline trial did not complete"
    elif confirmation is None:
        summary["winner"]["reason"] = "A/A sweep: nothing to confirm" if any(r["aa"] for r in rows) else pending(study)
    if any(r["aa"] for r in rows):
        aa = [r for r in complete if r["aa"]]
        by_method = {
            "runs": [r["verdict"] for r in aa if r["verdict"] is not None],
            "steps": [s["verdict"] for r in aa if (s := r["step_interleave"] or {}).get("estimate")],
        }
        summary["aa"] = {method: _aa_counts(verdicts) for method, verdicts in by_method.items() if verdicts}
    return summary


def current_confirmation(
    study: optuna.Study, rows: Sequence[Mapping[str, Any]], search: Search
) -> dict[str, Any] | None:
    """The study's confirmation record if it confirmed the screening as it stands (None when pending or stale:
    trials screened since)."""
    record = study.user_attrs.get(CONFIRMATION_ATTR)
    screened, _ = screening_results(rows, search.objectives[0].metric)
    if record is None or record["screened"] != sorted(r.trial for r in screened):
        return None
    return dict(record)


def _aa_counts(verdicts: list[str]) -> dict[str, Any]:
    hits = sum(v in ("better", "worse") for v in verdicts)
    return {"comparisons": len(verdicts), "significant": hits, "false_positive_rate": hits / len(verdicts)}


def incomplete_reasons(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why a study's result is not the one asked for: a baseline that did not complete, no completed trial, or
    failed trials (a failed trial that a later retry completed does not count)."""
    reasons = []
    retried = {r["number"] for r in rows if r["failure"] and "retried as trial" in r["failure"]}
    base = [r for r in rows if r["is_baseline"]]
    if base and not any(r["state"] == "COMPLETE" for r in base):
        why = next((r["failure"] for r in reversed(base) if r["failure"]), None) or base[-1]["state"]
        reasons.append(f"the baseline trial did not complete ({why})")
    others = [r for r in rows if not r["is_baseline"]]
    if others and not any(r["state"] in ("COMPLETE", "PRUNED") for r in others):
        reasons.append("no trial other than the baseline completed")
    failed = [r for r in others if r["state"] == "FAIL" and r["number"] not in retried]
    if failed:
        listed = "; ".join(f"#{r['number']}: {r['failure'] or 'no reason recorded'}" for r in failed[:3])
        more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
        reasons.append(f"{len(failed)} trial(s) failed: {listed}{more}")
    return reasons


def _trial_row(
    trial: optuna.trial.FrozenTrial, baseline: optuna.trial.FrozenTrial | None, experiment: Experiment
) -> TrialRow:
    attrs = trial.user_attrs
    state = cast(TrialState, "INTERRUPTED" if attrs.get("failure") == "interrupted" else trial.state.name)
    row: TrialRow = {
        "number": trial.number,
        "state": state,
        "is_baseline": bool(attrs.get(BASELINE_ATTR)),
        "aa": bool(attrs.get("aa")),
        "strategies": attrs.get("strategies", {}),
        "engine": attrs.get("engine", {}),
        "params": trial.params,
        "values": trial.values,
        "metrics": attrs.get("metrics", {}),
        "anchored": attrs.get("anchored") or attrs.get("metrics", {}),  # what Optuna saw; see Sweep._record
        "ratios": attrs.get("ratios", {}),
        "feasible": attrs.get("feasible"),
        "feasible_ci": attrs.get("feasible_ci"),
        "slo_checks": attrs.get("slo_checks", []),
        "verdict": attrs.get("verdict"),
        "pairs": len(attrs.get("arms", {}).get("trial", [])),
        "switch_s": attrs.get("switch_s", []),
        "token_ids_match": attrs.get("token_ids_match"),
        "repetitions": [{"metrics": m} for m in attrs.get("arms", {}).get("trial", [])],
        "telemetry": attrs.get("telemetry", []),
        "tail": attrs.get("tail"),
        "failure": attrs.get("failure"),
        "worker": attrs.get(WORKER_ATTR),
        "step_interleave": attrs.get("step_interleave"),
    }
    if baseline is not None and row["engine"] and not row["is_baseline"] and row["metrics"]:
        first = experiment.search.objectives[0].metric if experiment.search else "output_tokens_per_s"
        base_values = [m[first] for m in baseline.user_attrs.get("arms", {}).get("trial", [])]
        values = [m[first] for m in attrs.get("arms", {}).get("trial", [])]
        if len(base_values) >= 2 and len(values) >= 2:
            est = unpaired_ratio(values, base_values, higher_is_better=first in HIGHER_IS_BETTER)
            row["vs_baseline_unpaired"] = {
                first: {**est.to_dict(), "verdict": None},
                "note": UNPAIRED_NOTE,
            }
    return row


def _best(rows: Sequence[TrialRow], search: Search) -> list[int]:
    """Feasible trials that significantly beat the baseline, best first by the first objective's ratio."""
    first = search.objectives[0]
    winners = [
        r
        for r in rows
        if r["state"] == "COMPLETE" and r["feasible"] and r["verdict"] == "better" and not r["is_baseline"]
    ]
    sign = -1 if first.resolved_direction == "maximize" else 1
    winners.sort(key=lambda r: sign * r["ratios"][first.metric]["ratio"])
    return [r["number"] for r in winners]


def _importance(study: optuna.Study) -> dict[str, float]:
    try:
        complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if len(complete) < 3:
            return {}
        evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
        return dict(optuna.importance.get_param_importances(study, evaluator=evaluator, target=lambda t: t.values[0]))
    except Exception:  # too few or too uniform trials for an importance estimate
        return {}


def winner(rows: Sequence[TrialRow], confirmation: dict[str, Any] | None) -> Winner:
    """The configuration to deploy: the confirmed winner with its confirmation estimate as the effect, or vLLM
    as installed when confirmation found none (or has not run)."""
    decision = (confirmation or {}).get("decision") or {}
    number = decision.get("winner")
    row = next((r for r in rows if r["number"] == number), None) if number is not None else None
    strategies = row["strategies"] if row else {}
    engine = row["engine"] if row else {}
    return {
        "trial": row["number"] if row else None,
        "confirmed": row is not None,
        "reason": decision.get("reason", "no confirmed winner"),
        "effect": next((r["confirmation"] for r in decision.get("rows", []) if r["trial"] == number), None),
        "strategies": strategies,
        "engine": engine,
        "env": f"TUNER_PLUGIN='{encode_spec(strategies)}'",
    }


def write_outputs(summary: SweepSummary, out_dir: Path) -> list[Path]:
    """``summary.json``, and ``winner.yaml`` / ``winner.env`` for a confirmed winner only; without one,
    ``no-confirmed-winner.txt`` says so (and any older winner files are removed). Atomic writes."""
    import yaml

    from tuner.results.files import write_json, write_text

    best = summary["winner"]
    written = [write_json(out_dir / "summary.json", summary)]
    stale = ("no-confirmed-winner.txt",) if best["confirmed"] else ("winner.yaml", "winner.env")
    for name in stale:
        (out_dir / name).unlink(missing_ok=True)
    if not best["confirmed"]:
        text = f"{best['reason']}\nDeploy vLLM as installed (no TUNER_PLUGIN, no engine-arg changes).\n"
        return [*written, write_text(out_dir / "no-confirmed-winner.txt", text)]
    flags = shlex.join(cli_flags(best["engine"]))
    env = (
        f"# {best['reason']}\n"
        f"# Enable in production: pip install vllm-hosttune, then\n"
        f"#   {best['env']} vllm serve MODEL {flags}\n{best['env']}\n"
    )
    body = yaml.safe_dump({"strategies": best["strategies"], "engine": best["engine"]}, sort_keys=True)
    return [
        *written,
        write_text(out_dir / "winner.yaml", f"# {best['reason']}\n{body}"),
        write_text(out_dir / "winner.env", env),
    ]


def verdict_line(summary: SweepSummary) -> str:
    aa = summary.get("aa")
    if aa:
        return "A/A: " + "; ".join(
            f"{method}: {c['significant']} of {c['comparisons']} comparisons called significant "
            f"({c['false_positive_rate']:.0%})"
            for method, c in aa.items()
        )
    trials = summary["trials"]
    starts = summary["engine_starts"]
    switches = [s for t in trials for s in t["switch_s"]]
    median_switch = sorted(switches)[len(switches) // 2] if switches else math.nan
    return (
        f"{len(trials)} trials, {starts} engine start(s), median switch {median_switch * 1e3:.1f} ms; "
        f"{detectable(summary)}; winner: {summary['winner']['reason']}"
    )


def detectable(summary: SweepSummary) -> str:
    """The minimum detectable effect the sweep reached: at the confirmation's pairs, else the screening's."""
    confirmation = summary.get("confirmation") or {}
    power = summary.get("power") or {}
    if confirmation.get("mde_spent") is not None:
        return f"minimum detectable effect {confirmation['mde_spent']:.2%} at the confirmation pairs spent"
    for phase in ("before_confirmation", "before_screening"):
        mde_value = (power.get(phase) or {}).get("confirmation_mde")
        if mde_value is not None:
            return f"minimum detectable effect {mde_value:.2%} at the planned confirmation"
    return "minimum detectable effect not estimated"
