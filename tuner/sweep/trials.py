"""``tuner sweep``: an Optuna study over strategy sets, engine args and vLLM variables, measured in pairs on live
engines.

- The baseline (vLLM as installed, no strategies) is enqueued first; every trial is paired against the
  reference arm (no strategies) on the same engine, so host drift cancels.
- Trials that differ only in switchable strategies share one engine. A trial that changes the engine start
  (engine args, vLLM variables) or holds a restart-only strategy is measured by restart pairs instead: each arm
  of every pair on an engine started for it (:func:`tuner.measure.pairing.paired_runs` with ``restarts``).
- Screening only nominates candidates; the single-process command then confirms them against the baseline
  with fresh pairs (:mod:`tuner.sweep.confirmation`), and only a confirmed winner is written to ``winner.yaml``
  (:mod:`tuner.sweep.summary`). The study itself (storage, sampler, queued points) is :mod:`tuner.sweep.study`.
- Storage is any Optuna RDB URL (SQLite under the experiment's results by default, PostgreSQL for many
  workers); ``resume`` continues a study without repeating finished trials.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import optuna

from tuner.config import Experiment
from tuner.config.search import RESTART_HEADS, Pairs, split_key
from tuner.config.start import StartConfig
from tuner.engine.session import EngineError, EngineSession
from tuner.errors import UserError
from tuner.feedback import SILENT, Feedback, Task, task
from tuner.measure.gc_pacing import measure_gc_cycles
from tuner.measure.grain import Grain, grain_for, paces_gc
from tuner.measure.interleave import interleaved_comparison, step_pairs, step_ratio
from tuner.measure.pairing import Arms, Restarts, left_out_of_steps, paired_runs, step_interleavable
from tuner.measure.pairs import Pair, run_pair
from tuner.measure.workbench import Workbench
from tuner.metrics.table import STEP_LEVEL_METRICS, quantity
from tuner.metrics.tail_attribution import tail_record
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records.calibration import calibration_path, load_calibration
from tuner.stats import RatioEstimate
from tuner.sweep import study_attrs
from tuner.sweep.decisions import slo
from tuner.sweep.noise import power_before_screening
from tuner.sweep.plans import Candidate
from tuner.sweep.study import planned_configs, require_search, trial_config
from tuner.sweep.trial_attrs import INTERRUPTED_FAILURE, read, record
from tuner.sweep.watchdog import Watchdog

GC_PILOT_SHARE = 0.15
"""A GC-pacing trial measures each arm's gen0 cycle alone for this share of its step budget (each)."""
BASELINE_START = StartConfig()
"""The experiment's own engine args and environment variables, no strategy in force at start: the baseline's
engine."""
TrialCallback = Callable[[optuna.Study, optuna.trial.FrozenTrial], None]


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
        self.running: dict[str, dict[str, Any]] | None = None  # how the running engine was started
        self.start_s: list[float] = []
        self.failed_starts: dict[str, str] = {}  # engine config (JSON) -> why it did not start
        self.switch_s: list[float] = []
        self.installable = sorted({h for k in self.search.space if (h := split_key(k)[0]) not in RESTART_HEADS})
        self.calibration = load_calibration(calibration_path(experiment.output_dir, experiment.name))

    def _workbench(self, start: StartConfig = BASELINE_START, *, fresh: bool = False) -> Workbench:
        """The engine ``start`` configures (on top of the experiment's): the running one if it is that engine,
        else (or when ``fresh``) a new start."""
        wanted = {
            "engine": {**self.experiment.engine, **start.engine},
            "env": {**self.experiment.env, **start.env},
            "strategies": start.strategies,
        }
        if self.bench is None or wanted != self.running or fresh:
            self.close()
            key = json.dumps(wanted, sort_keys=True, default=str)
            if key in self.failed_starts:  # the same engine would fail the same way: once per config is enough
                raise EngineError(f"not started again: this engine config failed to start ({self.failed_starts[key]})")
            try:
                self.bench = self._start(wanted["engine"], wanted["env"], start.strategies)
            except EngineError as exc:
                self.failed_starts[key] = str(exc)
                raise
            self.session = self.bench.session
            self.start_s.append(self.session.start_s)
            if "workload" not in study_attrs.read(self.study):
                study_attrs.record(self.study, {"workload": self.bench.workload})
            self.running = wanted
        return self.bench

    def _start(self, engine: dict[str, Any], env: dict[str, Any], strategies: StrategySet) -> Workbench:
        return Workbench.start(self.experiment, encode_spec(strategies, self.installable), engine, env)

    def restart_keys(self) -> list[str]:
        """The space's keys compared by restart pairs: engine args, vLLM variables, restart-only strategies."""
        from strategies import strategy_classes

        classes = strategy_classes()
        return [
            key
            for key in self.search.space
            if (head := split_key(key)[0]) in RESTART_HEADS or (head in classes and not classes[head].switchable)
        ]

    def needs_restarts(self, config: StartConfig) -> bool:
        """Whether ``config`` is compared by restart pairs: it starts another engine than the baseline's (engine
        args or vLLM environment variables), or holds a strategy that cannot be undone in place."""
        from strategies import strategy_classes

        engine, env = self.experiment.engine, self.experiment.env
        moved = any(engine.get(k) != v for k, v in config.engine.items()) or any(
            env.get(k) != v for k, v in config.env.items()
        )
        return moved or any(not strategy_classes()[name].switchable for name in config.strategies)

    def kill(self) -> None:
        """Kill the running engine at once (a trial past its time limit)."""
        if self.session is not None:
            self.session.kill()

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
        self.session = self.bench = None

    def _close_timed(self) -> float:
        """Close the running engine; how long its stop took (restart pairs time every arm's)."""
        session = self.session
        self.close()
        if session is None or session.stop_s is None:  # a NaN here would only fail the stop-time estimate later
            raise EngineError("restart pairs asked to stop an engine that was not running")
        return session.stop_s

    def objective(self, trial: optuna.Trial) -> list[float]:
        """Measure ``trial``; stopped by Ctrl-C or SIGTERM at any point once Optuna runs it (its configuration
        still being recorded included), it is recorded as interrupted, so that a resume queues its point again."""
        try:
            return self._measure(trial)
        except KeyboardInterrupt:
            record(trial, {"failure": INTERRUPTED_FAILURE})
            self.feedback.note(f"trial {trial.number} interrupted", "warning")
            raise

    def _measure(self, trial: optuna.Trial) -> list[float]:
        is_baseline = bool(read(trial).get("baseline"))
        config = trial_config(trial, self.search, aa=self.aa)
        record(
            trial,
            {
                "aa": self.aa and not is_baseline,
                "strategies": config.strategies,
                "engine": config.engine,
                "env": config.env,
            },
        )
        restarts = not is_baseline and self.needs_restarts(config)
        progress = self.feedback.task(
            f"trial {trial.number}" + (" (baseline)" if is_baseline else ""), total=self.search.pairs.max
        )
        watchdog = Watchdog(self.kill, self.search.trial_timeout_s)
        try:
            if restarts:
                progress.update(description=f"trial {trial.number}: restart pairs")
                watchdog.arm()
                on_pair = self._pair_callback(trial, progress, prunable=True)
                arms = self._restart_pairs(
                    config, self.search.pairs, seed=self.search.seed + trial.number, on_pair=on_pair
                )
                record_restarts(trial, arms)
                return self._record(trial, arms, is_baseline)
            bench = self._workbench(StartConfig(config.engine, config.env))
            watchdog.arm()
            arms = self._on_engine(bench, trial, config.strategies, is_baseline, progress)
        except optuna.TrialPruned:
            raise
        except Exception as exc:
            reason = f"exceeded the trial time limit of {watchdog.limit_s:g} s" if watchdog.fired else None
            record(trial, {"failure": reason or f"{type(exc).__name__}: {exc}"})
            self.feedback.note(f"trial {trial.number} failed: {type(exc).__name__}: {exc}", "error")
            self.close()  # an engine in an unknown state is not reused
            raise
        finally:
            watchdog.cancel()
            progress.close()
        self.switch_s += arms.switch_s
        return self._record(trial, arms, is_baseline)

    def _restart_pairs(
        self,
        config: StartConfig,
        pairs: Pairs,
        *,
        seed: int,
        first_pair: int = 0,
        on_pair: Callable[[int, Any], bool] | None = None,
    ) -> Arms:
        """``config`` against the baseline by restart pairs: every arm of every pair on an engine started for it."""
        arms = paired_runs(
            None,
            config.strategies,
            pairs,
            self.search.objectives[0],
            self.search.confirm.min_effect,
            seed=seed,
            first_pair=first_pair,
            on_pair=on_pair,
            restarts=Restarts(lambda s: self._workbench(s, fresh=True), self._close_timed, config),
        )
        self.switch_s += arms.switch_s
        return arms

    def _on_engine(
        self, bench: Workbench, trial: optuna.Trial, strategies: StrategySet, is_baseline: bool, progress: Task
    ) -> Arms:
        """``strategies`` against the reference on the running engine: run-level pairs, and a step-level comparison
        where every strategy switches per step (its grain measured first for GC pacing, which may send it to run
        level). The baseline trial only needs its own repetitions: the minimum number of pairs."""
        seed = self.search.seed + trial.number
        steps = not is_baseline and self._use_steps(bench, strategies)
        grain, piloted_s = self._step_grain(bench, trial, strategies, seed) if steps else (None, 0.0)
        steps = grain is not None and not grain.run_level
        # Step trials take absolute metrics for objectives and SLOs from the minimum pairs, the verdict from steps.
        pairs = (
            Pairs(min=self.search.pairs.min, max=self.search.pairs.min) if is_baseline or steps else self.search.pairs
        )
        # An A/A sweep checks every method the real sweep would use: run-level pairs, and steps when the space holds
        # strategies that are compared step by step here.
        if self.aa and not is_baseline and self._space_uses_steps(bench):
            grain = self.grain(strategies)
        min_effect = self.search.confirm.min_effect
        on_pair = self._pair_callback(trial, progress, prunable=not is_baseline)
        arms = paired_runs(bench, strategies, pairs, self.search.objectives[0], min_effect, seed=seed, on_pair=on_pair)
        if grain is not None and not grain.run_level:
            progress.update(description=f"trial {trial.number}: step interleaving")
            arms.step_result = interleaved_comparison(
                bench,
                {},
                strategies,
                block_steps=grain.block_steps,
                settle=grain.settle,
                min_effect=min_effect,
                budget_s=max(self.search.step_budget_s - piloted_s, 0.0),
                seed=seed,
            )
            arms.step_result.grain = grain.why
            arms.step_result.left_out = left_out_of_steps(strategies)
        return arms

    def _step_grain(
        self, bench: Workbench, trial: optuna.Trial, strategies: StrategySet, seed: int
    ) -> tuple[Grain, float]:
        """The grain of ``strategies``' step comparison and the step-budget seconds spent choosing it: for GC
        pacing, each arm's gen0 cycle measured alone first (:data:`GC_PILOT_SHARE` of the step budget each, recorded
        on the trial), and run level where blocks of several such cycles do not fit the rest of the budget."""
        if not paces_gc(strategies):
            return self.grain(strategies), 0.0
        pilot_s = GC_PILOT_SHARE * self.search.step_budget_s
        cycles, alone_rates = measure_gc_cycles(bench, {}, strategies, pilot_s, seed)
        left = self.search.step_budget_s - 2 * pilot_s
        grain = grain_for(strategies, self.calibration, self.search.block_steps, cycles=cycles, budget_s=left)
        record(
            trial,
            {
                "gc_pacing": {
                    "cycles": asdict(cycles),
                    "alone_gen0_per_1000_steps": alone_rates,
                    "grain": grain.why,
                    "run_level": grain.run_level,
                }
            },
        )
        self.feedback.note(f"trial {trial.number}: {grain.why}")
        return grain, 2 * pilot_s

    def grain(self, strategies: StrategySet) -> Grain:
        """The block length and settle of a step-level comparison of ``strategies`` (see :mod:`tuner.measure.grain`)."""
        return grain_for(strategies, self.calibration, self.search.block_steps)

    def _use_steps(self, bench: Workbench, strategies: dict[str, dict[str, Any]]) -> bool:
        if self.search.method == "runs":
            return False
        possible = step_interleavable(strategies)
        if self.search.method == "steps" and not possible:
            raise UserError.single(
                self.experiment.name,
                f"{sorted(strategies)} cannot be compared per step (a strategy is not step-switchable: "
                "`tuner strategies list` says why): use method runs or auto",
                "search.method",
            )
        return possible

    def _space_uses_steps(self, bench: Workbench) -> bool:
        return self.search.method != "runs" and any(step_interleavable({name: {}}) for name in self.installable)

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
        ratios: dict[str, dict[str, Any]] = (
            {}
            if is_baseline
            else {
                metric: arms.ratio(metric, self.search.confirm.min_effect).to_dict()
                for metric in {o.metric for o in self.search.objectives} | {c.metric for c in self.search.constraints}
            }
        )
        if arms.step_result is not None:
            # The run-level ratios stay beside the steps': they see the front-end, which steps leave out.
            record(trial, {"step_interleave": {**arms.step_result.to_dict(), "run_level": dict(ratios)}})
            if not self.aa:  # A/A keeps both methods' verdicts apart (see summarize_study)
                # Steps stand in for throughput and mean per-token latency only; the rest keep run-level ratios.
                ratios |= {m: step_ratio(arms.step_result, m) for m in ratios if m in STEP_LEVEL_METRICS}
        pairs_method = "restarts" if arms.start_s["trial"] else "runs"
        for metric, ratio in ratios.items():  # every ratio names what it is a ratio of
            ratio["quantity"] = quantity(metric, "steps" if ratio.get("source") == "steps" else pairs_method)
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
            if c.metric in anchor and (est := RatioEstimate.from_dict(ratios.get(c.metric))) is not None
        ]
        record(
            trial,
            {
                "slo_checks": [c.describe() for c in checks],
                "feasible_ci": all(c.passed for c in checks),
                "metrics": medians,
                "anchored": values,
                "arms": {"reference": arms.reference, "trial": arms.trial},
                "ratios": ratios,
                "constraints": violations or [0.0],
                "feasible": all(v <= 0 for v in violations),
                "verdict": ratios[self.search.objectives[0].metric]["verdict"] if ratios else None,
                "switch_s": arms.switch_s,
                "token_ids_match": arms.token_ids_match,
                "telemetry": _compact(arms.telemetry),
                "tail": tail_record(arms.tails),
            },
        )
        return [values[o.metric] for o in self.search.objectives]

    def _anchor(self, arms: Arms) -> dict[str, float]:
        """The medians ratios are scaled by: the baseline trial's, or (before it finished, e.g. on another
        worker) this trial's own reference arm."""
        for done in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            attrs = read(done)
            if attrs.get("baseline") and attrs.get("metrics"):
                return dict(attrs["metrics"])
        return arms.medians("reference")

    def fresh_pairs(self, candidate: Candidate, done: int, wanted: int, left_s: float) -> list[Pair]:
        """``wanted`` fresh pairs of ``candidate`` against the baseline (a confirmation look): on the baseline
        engine, or by restart pairs; runs continue their mirrored order after the ``done`` pairs already measured."""
        metric = self.search.objectives[0].metric
        seed = self.search.seed + 7919 * (candidate.trial + 1)  # fresh pairs: not the screening's order
        size = max(wanted, 2)
        if candidate.method == "restarts":
            config = StartConfig(engine=candidate.engine, env=candidate.env, strategies=candidate.strategies)
            arms = self._restart_pairs(config, Pairs(min=size, max=size), seed=seed, first_pair=done)
            return [run_pair(metric, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)]
        bench = self._workbench()
        if candidate.method == "steps":  # at its screening's grain (a GC-pacing grain was measured then)
            return step_pairs(
                bench,
                {},
                candidate.strategies,
                wanted=wanted,
                budget_s=left_s,
                block_steps=candidate.block_steps or self.grain(candidate.strategies).block_steps,
                settle=candidate.settle,
                seed=seed + done,
            )
        arms = paired_runs(
            bench,
            candidate.strategies,
            Pairs(min=size, max=size),
            self.search.objectives[0],
            None,
            seed=seed,
            first_pair=done,
        )
        self.switch_s += arms.switch_s
        return [run_pair(metric, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)]

    def screening_power(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        """After the baseline trial: print what the sweep's budgets can detect, from the noise of each way its
        trials will be measured (:mod:`tuner.sweep.noise`), and store it."""
        attrs = read(trial)
        arms = attrs.get("arms")
        if not attrs.get("baseline") or self.aa or not arms or len(arms["trial"]) < 2:
            return
        power = power_before_screening(
            planned_configs(self.experiment), self.method_of, lambda c: self.grain(c.strategies), self.calibration,
            arms, self.search,
        )  # fmt: skip
        study_attrs.record(study, {"power_before_screening": power})
        self.feedback.note("power before screening (the noise of each way the trials are measured)", "heading")
        self.feedback.note("  " + "\n  ".join(power["lines"]))

    def method_of(self, config: StartConfig) -> str:
        """How a trial of ``config`` is measured: "restarts", "steps" (where every strategy switches per step and
        the search allows it) or "runs"."""
        if self.needs_restarts(config):
            return "restarts"
        return "steps" if self.search.method != "runs" and step_interleavable(config.strategies) else "runs"

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


def _compact(processes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keep = ("pid", "process_name", "roles", "active", "errors", "counters", "gc")
    return [{k: p[k] for k in keep if k in p} for p in processes]


# ------------------------------------------------------------------------------------------- summary


def record_restarts(trial: optuna.Trial, arms: Arms) -> None:
    """A restart trial's engine starts and stops per arm, and the paired ratio of mean stop time."""
    stop_time = arms.stop_time()
    record(
        trial,
        {
            "restart_pairs": arms.start_s,
            "engine_stops": arms.stop_s,
            "stop_time": stop_time.to_dict() if stop_time else None,
        },
    )
