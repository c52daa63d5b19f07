"""Glue for ``tuner sweep``: open the study, queue the baseline (and grid), screen, confirm, summarise, export."""

from __future__ import annotations

from pathlib import Path

from optuna import Study

from tuner.config import Experiment
from tuner.errors import StudyIncomplete
from tuner.feedback import SILENT, Feedback, TableData
from tuner.records import SweepSummary, TrialRow, cost_line, min_effect
from tuner.report import describe_engine, describe_strategies, fmt_ratio, measured_by, verdict_words
from tuner.sweep import study_attrs
from tuner.sweep.confirmation import run_confirmation
from tuner.sweep.study import default_storage, enqueue_missing, open_study
from tuner.sweep.summary import current_confirmation, summarize_study, verdict_line, write_outputs
from tuner.sweep.trials import Sweep


def run_sweep(
    experiment: Experiment,
    feedback: Feedback = SILENT,
    *,
    storage: str | None = None,
    resume: bool = False,
    aa: bool = False,
    study_name: str | None = None,
    n_trials: int | None = None,
) -> None:
    name = study_name or (f"{experiment.name}-aa" if aa else experiment.name)
    study = open_study(experiment, storage or default_storage(experiment), resume=resume, study_name=name)
    remaining = enqueue_missing(study, experiment, aa=aa)
    if n_trials is not None:
        remaining = n_trials
    sweep = Sweep(experiment, study, feedback, aa=aa)
    if sweep.calibration is not None:
        feedback.note(f"calibration ({sweep.calibration['created']}): {cost_line(sweep.calibration)}")
    else:
        feedback.note("no calibration of this host: step-level blocks of one step; `tuner calibrate` measures it")
    out_dir = experiment.output_dir / experiment.name / ("sweep-aa" if aa else "sweep")
    try:
        if remaining:
            sweep.run(remaining)
        else:
            feedback.note("nothing left to run: every trial of this study is finished")
        if not aa:
            confirm_candidates(study, experiment, sweep, feedback)
    finally:  # also on Ctrl-C (even one that lands while the engine closes): what finished is summarised and kept
        try:
            sweep.close()
        finally:
            summary = write_summary(study, experiment, sweep, out_dir, feedback)
    require_complete(summary)


def confirm_candidates(study: Study, experiment: Experiment, sweep: Sweep, feedback: Feedback) -> None:
    """Confirm the screening's candidates on fresh pairs and store the result on the study, unless the study
    already holds a confirmation of the screening as it stands (a resumed, finished study)."""
    rows = summarize_study(study, experiment, sweep)
    if rows["incomplete"] or current_confirmation(study, rows["trials"], sweep.search) is not None:
        return
    feedback.note("confirmation: re-testing the screening's candidates against the baseline", "heading")
    record = run_confirmation(rows["trials"], sweep.search, sweep.fresh_pairs, feedback, sweep.look_estimate)
    study_attrs.record(study, {"confirmation": record})


def write_summary(
    study: Study, experiment: Experiment, sweep: Sweep | None, out_dir: Path, feedback: Feedback
) -> SweepSummary:
    """Summarise the study from its storage into ``out_dir``; show the trials table and the verdict."""
    summary = summarize_study(study, experiment, sweep)
    paths = write_outputs(summary, out_dir)
    feedback.table(trials_table(summary))
    feedback.note(verdict_line(summary))
    feedback.note("wrote " + ", ".join(str(p) for p in paths))
    return summary


def require_complete(summary: SweepSummary) -> None:
    """Raise :class:`StudyIncomplete` (exit 5) unless the study measured what it was asked to."""
    if summary["incomplete"]:
        raise StudyIncomplete("the study is incomplete: " + "; ".join(summary["incomplete"]))


def trials_table(summary: SweepSummary) -> TableData:
    objectives = [o["metric"] for o in summary["objectives"]]
    margin = min_effect(summary)
    columns = (
        "#",
        "state",
        "strategies",
        "engine",
        *objectives,
        "measured by",
        "ratio [95% CI]",
        "p",
        "pairs",
        "feasible",
        "screening call",
    )
    rows = []
    for row in summary["trials"]:
        first = row["ratios"].get(objectives[0]) if row["ratios"] else None
        ci = fmt_ratio(first)
        p = f"{first['p_value']:.3f}" if first and first.get("p_value") is not None else "-"  # none: not estimated
        strategies = "baseline" if row["is_baseline"] else describe_strategies(row["strategies"])
        rows.append(
            (
                str(row["number"]),
                row["state"],
                strategies,
                describe_engine(row["engine"], row.get("env")),
                *[f"{row['anchored'].get(m, float('nan')):.2f}" if row["anchored"] else "-" for m in objectives],
                measured_by(row),
                ci,
                p,
                restart_cell(row) if row.get("restart_pairs") else str(row["pairs"]),
                str(row["feasible"]),
                "-" if row["is_baseline"] else verdict_words(row["verdict"], screening=True, margin=margin),
            )
        )
    return TableData(
        title=f"{summary['experiment']}: trials against the baseline (screening)",
        columns=columns,
        rows=rows,
        caption="objective columns: each trial's paired ratio x the baseline's median (drift between trials cancels); "
        f"ratio: {objectives[0]}, trial / baseline, of the quantity its method measures (steps: decode step time per "
        "step, as 1 / step time for a throughput, ratio of sums over step blocks; runs and starts: end to end over "
        "repetitions); screening call: that trial's two-sided 5% test, not adjusted for the number of trials (only "
        "confirmation decides); pairs: 'starts' where each arm of a pair ran on an engine started for it (restart "
        "pairs), with the paired ratio of mean engine stop time (below 1: the trial's engines stop faster)",
    )


def restart_cell(row: TrialRow) -> str:
    """A restart trial's pairs cell: its start pairs, and its stop-time ratio where it has one."""
    stop = row.get("stop_time")
    return f"{row['pairs']} starts" + (f", stop {fmt_ratio(stop)}" if stop else "")
