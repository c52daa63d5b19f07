"""``tuner sweep``: an Optuna study over strategy sets, engine args and vLLM variables, measured in pairs on live
engines.

- The baseline (vLLM as installed, no strategies) is enqueued first; every trial is paired against the
  reference arm (no strategies) on the same engine, so host drift cancels.
- Trials that differ only in switchable strategies share one engine (:mod:`tuner.sweep.engines`). A trial that
  changes the engine start (engine args, vLLM variables) or holds a restart-only strategy is measured by restart
  pairs instead: each arm of every pair on an engine started for it (:mod:`tuner.sweep.measuring`).
- A trial runs in three steps: its configuration is recorded, its arms are measured, and its record is made from
  both in one call (:func:`tuner.sweep.trial_record.trial_record`); a trial that fails records why instead.
- Screening only nominates candidates; the single-process command then confirms them against the baseline
  with fresh pairs (:mod:`tuner.sweep.confirmation`), and only a confirmed winner is written to ``winner.yaml``
  (:mod:`tuner.sweep.summary`). The study itself (storage, sampler, queued points) is :mod:`tuner.sweep.study`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optuna

from tuner.config import RESTART_HEADS, Experiment, StartConfig, split_key
from tuner.feedback import SILENT, Feedback, Task, task
from tuner.measure import Workbench
from tuner.records import calibration_path, load_calibration
from tuner.sweep import study_attrs
from tuner.sweep.engines import Engines, Watchdog
from tuner.sweep.measuring import Measured, Measurer
from tuner.sweep.noise import power_before_screening
from tuner.sweep.study import planned_configs, require_search, trial_config
from tuner.sweep.trial_attrs import INTERRUPTED_FAILURE, read, record
from tuner.sweep.trial_record import configuration, trial_record

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
        self.calibration = load_calibration(calibration_path(experiment.output_dir, experiment.name))
        installable = sorted({h for k in self.search.space if (h := split_key(k)[0]) not in RESTART_HEADS})
        self.engines = Engines(experiment, installable, self._workload_on_record)
        self.measurer = Measurer(experiment, self.search, self.engines, self.calibration, feedback, aa=aa)
        self.fresh_pairs = self.measurer.fresh_pairs  # the engine side of a confirmation look
        self.look_estimate = self.measurer.look_estimate  # and its estimate
        self.start_s, self.switch_s = self.engines.start_s, self.measurer.switch_s  # the lists they extend

    def close(self) -> None:
        self.engines.close()

    def _workload_on_record(self, bench: Workbench) -> None:
        if study_attrs.read(self.study)["workload"] is None:
            study_attrs.record(self.study, {"workload": bench.workload})

    def objective(self, trial: optuna.Trial) -> list[float]:
        """Measure ``trial`` and record it. Stopped by Ctrl-C or SIGTERM at any point once Optuna runs it, it is
        recorded as interrupted, so that a resume queues its point again; a failure is recorded with its reason."""
        is_baseline = read(trial)["baseline"]
        config = StartConfig()
        watchdog = Watchdog(self.engines.kill, self.search.trial_timeout_s)
        try:
            config = trial_config(trial, self.search, aa=self.aa)
            record(trial, configuration(config, aa=self.aa and not is_baseline))
            measured = self._measure(trial, config, is_baseline, watchdog)
        except KeyboardInterrupt:
            record(trial, {"failure": INTERRUPTED_FAILURE})
            self.feedback.note(f"trial {trial.number} interrupted", "warning")
            raise
        except optuna.TrialPruned:
            raise
        except Exception as exc:
            reason = f"exceeded the trial time limit of {watchdog.limit_s:g} s" if watchdog.fired else None
            record(trial, {"failure": reason or f"{type(exc).__name__}: {exc}"})
            self.feedback.note(f"trial {trial.number} failed: {type(exc).__name__}: {exc}", "error")
            self.close()  # an engine in an unknown state is not reused
            raise
        attrs, values = trial_record(
            config, measured, self.search, is_baseline=is_baseline, aa=self.aa, baseline_metrics=self._baseline()
        )
        record(trial, attrs)
        return values

    def _measure(self, trial: optuna.Trial, config: StartConfig, is_baseline: bool, watchdog: Watchdog) -> Measured:
        """The trial's arms: by restart pairs, or on the engine of its engine args (the watchdog armed once up)."""
        label = f"trial {trial.number}"
        progress = self.feedback.task(label + (" (baseline)" if is_baseline else ""), total=self.search.pairs.max)
        seed = self.search.seed + trial.number
        try:
            if not is_baseline and self.measurer.needs_restarts(config):
                progress.update(description=f"{label}: restart pairs")
                watchdog.arm()
                on_pair = self._pair_callback(trial, progress, prunable=True)
                return Measured(self.measurer.restart_pairs(config, self.search.pairs, seed=seed, on_pair=on_pair))
            bench = self.engines.get(StartConfig(config.engine, config.env))
            watchdog.arm()
            on_pair = self._pair_callback(trial, progress, prunable=not is_baseline)
            return self.measurer.on_engine(
                bench, config.strategies, seed=seed, is_baseline=is_baseline, on_pair=on_pair, progress=progress,
                label=label,
            )  # fmt: skip
        finally:
            watchdog.cancel()
            progress.close()

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

    def _baseline(self) -> dict[str, float] | None:
        """The baseline trial's medians, which ratios are scaled by (None before it finished, e.g. on another
        worker: the trial's own reference arm then)."""
        for done in self.study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
            attrs = read(done)
            if attrs["baseline"] and attrs["metrics"]:
                return dict(attrs["metrics"])
        return None

    def screening_power(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        """After the baseline trial: print what the sweep's budgets can detect, from the noise of each way its
        trials will be measured (:mod:`tuner.sweep.noise`), and store it."""
        attrs = read(trial)
        arms = attrs["arms"]
        if not attrs["baseline"] or self.aa or len(arms["trial"]) < 2:
            return
        power = power_before_screening(
            planned_configs(self.experiment), self.measurer.method_of, lambda c: self.measurer.grain(c.strategies),
            self.calibration, arms, self.search,
        )  # fmt: skip
        study_attrs.record(study, {"power_before_screening": power})
        self.feedback.note("power before screening (the noise of each way the trials are measured)", "heading")
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
