"""The sweep's report: its winner and confirmation, trials against the baseline, the Pareto front, GC and tail
latency of the baseline against the best trial, and parameter importance; one function per section."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from tuner.metrics import HIGHER_IS_BETTER, PooledAttribution, metric_unit
from tuner.plugin.protocol import ProcessReport
from tuner.records import (
    ConstraintRecord,
    GcPacingRecord,
    Loaded,
    SweepSummary,
    TrialRow,
    TrialState,
    min_effect,
    objective_value,
    trial_estimate,
    trial_process_lists,
    trial_ratio,
)
from tuner.report.confirmation_section import confirmation_section
from tuner.report.describe import (
    ProcessGc,
    aggregate_processes,
    baseline_trial,
    describe_engine,
    describe_strategies,
    fmt_num,
    fmt_p,
    fmt_ratio,
    measured_by,
    measured_device,
    metric_title,
    pick_best,
    ratio_metrics,
    trial_label,
    verdict_words,
    vllm_version,
)
from tuner.report.document import Doc
from tuner.report.sections import environment_section, gc_sections
from tuner.report.stall_section import stall_section
from tuner.report.tail_section import tail_sections
from tuner.report.upstream_section import upstream_section
from tuner.report.workload_section import workload_section


def sweep_doc(loaded: Loaded, out: Path) -> Doc:
    """The sweep's report, section by section."""
    summary = loaded.sweep
    name = summary["experiment"]
    trials = sorted(summary["trials"], key=lambda t: t["number"])
    doc = Doc(f"Sweep report: {name}")
    _overview(doc, loaded, trials)
    _winner_section(doc, summary)
    confirmation_section(doc, summary)
    workload_section(doc, out, summary["workload"], title=name)
    _trials_section(doc, out, summary, trials, name)
    stall_section(doc, trials)
    _pareto_section(doc, out, summary, trials, name)
    _baseline_against_best(doc, out, summary, name)
    _importance_section(doc, out, summary, name)
    upstream_section(doc, (s for t in trials for s in t["strategies"]), summary["environment"])
    environment_section(doc, summary["environment"], None)
    return doc


def _overview(doc: Doc, loaded: Loaded, trials: Sequence[TrialRow]) -> None:
    summary = loaded.sweep
    switches = sorted(s for s in summary["switch_s"] if isinstance(s, (int, float)))
    states = sorted({t["state"] for t in trials})
    doc.bullets(
        [
            f"source: `{loaded.path}` (schema `{summary['schema']}`)",
            f"created: {summary['created']}",
            "objectives: " + ", ".join(f"{o['metric']} ({o['direction']})" for o in summary["objectives"]),
            "constraints: " + (", ".join(_constraint(c) for c in summary["constraints"]) or "none"),
            f"trials: {len(trials)} (" + ", ".join(f"{s} {sum(t['state'] == s for t in trials)}" for s in states) + ")",
            f"engine starts: {summary['engine_starts']}"
            + (f", median switch {switches[len(switches) // 2] * 1e3:.1f} ms" if switches else ""),
            f"device: {measured_device(summary['environment'])}; {vllm_version(summary['environment'])}",
        ]
    )


def _winner_section(doc: Doc, summary: SweepSummary) -> None:
    winner = summary["winner"]
    doc.h("Winner")
    if winner["trial"] is not None:
        engine = describe_engine(winner["engine"], winner["vllm_env"])
        doc.p(
            f"**Trial #{winner['trial']}**: `{describe_strategies(winner['strategies'])}`"
            + (f" with engine `{engine}`" if engine else "")
            + (f" ({winner['reason']})" if winner["reason"] else "")
        )
    else:
        doc.p(f"No winner: {winner['reason']}; keep vLLM as installed.")
    if winner["effect"]:
        doc.p(
            f"Effect (the confirmation estimate on fresh pairs, not the screening one): {fmt_ratio(winner['effect'])}"
            + (f"; {repeated_words(winner['repeated_ci'])}" if winner["repeated_ci"] else "")
        )
    if winner["env"] and winner["confirmed"]:
        doc.code(winner["env"])


def repeated_words(interval: Sequence[float | None]) -> str:
    """The winner's gain interval that inverts the sequential decision, in words (None: unbounded)."""
    low, high = (f"{b - 1:+.2%}" if b is not None else "unbounded" for b in interval)
    return (
        f"its gain lies in [{low}, {high}] by the interval that inverts the decision (each look's "
        "O'Brien-Fleming boundary at its Holm share of alpha; wider than the last look's fixed-sample interval)"
    )


def _trials_section(doc: Doc, out: Path, summary: SweepSummary, trials: Sequence[TrialRow], name: str) -> None:
    from tuner.report import sweep_plots

    objectives = summary["objectives"]
    metrics = ratio_metrics(summary)
    doc.h("Trials against the baseline")
    headers = [
        "#",
        "state",
        "configuration",
        *[f"{metric_title(o['metric'])} ({metric_unit(o['metric'])})" for o in objectives],
    ]
    headers += ["measured by", *[f"{metric_title(m)} ratio [95% CI]" for m in metrics]]
    headers += ["p", "feasible", "screening call", "note"]
    first = objectives[0]["metric"]
    margin = min_effect(summary)
    rows = []
    for t in trials:
        note = "; ".join(part for part in (t["failure"], _pacing(t["gc_pacing"])) if part)
        if t["number"] in summary["pareto"]:
            note = ("Pareto; " + note) if note else "Pareto"
        base = t["is_baseline"]
        rows.append(
            [
                str(t["number"]),
                t["state"],
                "baseline" if base else trial_label(t).split(" ", 1)[1],
                *[fmt_num(objective_value(t, o["metric"])) for o in objectives],
                measured_by(t),
                *["1 (reference)" if base else fmt_ratio(trial_ratio(t, m)) for m in metrics],
                fmt_p(estimate.p_value if (estimate := trial_estimate(t, first)) else None),
                _feasible(t["feasible"]),
                "baseline" if base else verdict_words(t["verdict"], screening=True, margin=margin),
                note,
            ]
        )
    doc.table(headers, rows)
    doc.p(
        "Ratios are trial / baseline (1 = no change), each of the quantity its method measures: *steps* compare "
        "decode step time per step inside one engine (a ratio of sums over step blocks, shown as 1 / step time for a "
        "throughput; latency percentiles, TTFT and memory stay end to end from the trial's run-level pairs), *runs* "
        "whole repetitions paired on the same engine end to end, *starts* repetitions on engines started for each "
        f"arm. The screening call is on the first objective ({first}): that trial's two-sided test at 5%, not "
        "adjusted for the number of trials, so with many trials some calls are chance; only the confirmation "
        'decides. "no difference" is said only when the CI lies within ±min_effect (an equivalence test). The '
        "objective columns are what the study saw: each trial's paired ratio times the baseline's median, so drift "
        "between trials cancels."
    )
    doc.p(
        f"screening calls 'better' (unadjusted): {_numbers(summary['best'])}; "
        f"Pareto front: {_numbers(summary['pareto'])}"
    )

    if metrics:
        panels = [_ratio_panel(trials, m) for m in metrics]
        doc.image(
            sweep_plots.ratios(out / "ratios.png", panels, title=f"{name}: trials relative to the baseline"),
            "Each trial's ratio to the baseline with its 95% CI, coloured by verdict; hatched bars are infeasible.",
        )
    else:
        doc.p("No trial carries ratios to the baseline yet.")


def _pareto_section(doc: Doc, out: Path, summary: SweepSummary, trials: Sequence[TrialRow], name: str) -> None:
    from tuner.report import sweep_plots

    objectives = summary["objectives"]
    if len(objectives) < 2:
        return
    doc.h("Pareto front")
    x_metric, y_metric = objectives[0]["metric"], objectives[1]["metric"]
    points = [
        sweep_plots.ParetoPoint(
            label=f"#{t['number']}",
            x=x,
            y=y,
            front=t["number"] in summary["pareto"],
            feasible=t["feasible"] is not False,
            baseline=t["is_baseline"],
        )
        for t in trials
        if t["state"] == TrialState.COMPLETE
        and (x := objective_value(t, x_metric)) is not None
        and (y := objective_value(t, y_metric)) is not None
    ]
    if points:
        doc.image(
            sweep_plots.pareto(
                out / "pareto.png",
                points,
                x_label=_axis(x_metric, objectives[0]["direction"]),
                y_label=_axis(y_metric, objectives[1]["direction"]),
                title=f"{name}: {metric_title(x_metric)} vs {metric_title(y_metric)}",
            ),
            "The first two objectives as Optuna saw them: each trial's paired ratio times the baseline's median, "
            "so that host drift between trials cancels; the Pareto front (feasible, non-dominated) is highlighted.",
        )
    else:
        doc.p("No completed trial has values for both objectives.")


def _baseline_against_best(doc: Doc, out: Path, summary: SweepSummary, name: str) -> None:
    """GC and tail latency of the baseline beside the best trial."""
    base = baseline_trial(summary)
    best, why = pick_best(summary)
    series: dict[str, list[ProcessGc]] = {}
    if base is not None:
        series["baseline"] = aggregate_processes(trial_process_lists(base))
    if best is not None:
        short = "winner" if why.startswith("confirmed") else "top ratio"
        series[f"#{best['number']} ({short})"] = aggregate_processes(trial_process_lists(best))
    intro = f"The baseline against trial #{best['number']} ({why}): `{trial_label(best)}`." if best else ""
    gc_sections(doc, out, series, title=name, intro=intro)
    configs: dict[str, tuple[list[list[ProcessReport]], PooledAttribution | None]] = {}
    timeline = None
    for trial, label in ((base, "baseline"), (best, f"#{best['number']}" if best else "")):
        if trial is not None and label not in configs:
            tail = trial["tail"]
            configs[label] = (trial_process_lists(trial), tail["trial"] if tail else None)
            timeline = (tail["timeline"] if tail else None) or timeline
    tail_sections(doc, out, configs, timeline, title=name)


def _importance_section(doc: Doc, out: Path, summary: SweepSummary, name: str) -> None:
    from tuner.report import sweep_plots

    first = summary["objectives"][0]["metric"]
    doc.h("Parameter importance")
    importance = {k: float(v) for k, v in summary["importance"].items() if isinstance(v, (int, float))}
    if importance:
        doc.image(
            sweep_plots.importance(out / "importance.png", importance, title=f"{name}: parameter importance"),
            f"Optuna parameter importance for the first objective ({first}).",
        )
        doc.table(
            ["parameter", "importance"], [[k, f"{v:.3f}"] for k, v in sorted(importance.items(), key=lambda kv: -kv[1])]
        )
    else:
        doc.p("Not available: too few completed trials (or too little variation) for an importance estimate.")


def _ratio_panel(trials: Sequence[TrialRow], metric: str) -> Any:
    from tuner.report import sweep_plots

    bars = []
    for t in trials:
        if t["is_baseline"]:
            bars.append(sweep_plots.RatioBar(f"#{t['number']}\nbaseline", 1.0, 1.0, 1.0, "baseline", True, True))
        elif (estimate := trial_estimate(t, metric)) is not None:
            bars.append(
                sweep_plots.RatioBar(
                    label=f"#{t['number']}\n{_wrap(describe_strategies(t['strategies']))}",
                    ratio=estimate.ratio,
                    ci_low=estimate.ratio if math.isnan(estimate.ci_low) else estimate.ci_low,
                    ci_high=estimate.ratio if math.isnan(estimate.ci_high) else estimate.ci_high,
                    verdict=estimate.verdict or "not_significant",
                    feasible=t["feasible"] is not False,
                    baseline=False,
                )
            )
    direction = "higher is better" if metric in HIGHER_IS_BETTER else "lower is better"
    return sweep_plots.RatioPanel(f"{metric_title(metric)} ({direction})", bars)


def _wrap(text: str, width: int = 22, lines: int = 4) -> str:
    """Wrap a configuration label at ``(`` and ``,`` boundaries (never inside a name), at most ``lines`` lines."""
    out: list[str] = []
    for token in re.split(r"(?<=[(,])\s*", text):
        if out and len(out[-1]) + len(token) <= width:
            out[-1] += token
        else:
            out.append(token)
    if len(out) > lines:
        out = [*out[: lines - 1], out[lines - 1][: width - 1] + "…"]
    return "\n".join(out)


AXIS_WORDS = {"maximize": "higher is better", "minimize": "lower is better"}


def _axis(metric: str, direction: Literal["maximize", "minimize"]) -> str:
    unit = metric_unit(metric)
    return f"{metric_title(metric)}" + (f" [{unit}]" if unit else "") + f" ({AXIS_WORDS[direction]})"


def _constraint(c: ConstraintRecord) -> str:
    bounds = [f"≤ {c['max']:g}"] if "max" in c else []
    bounds += [f"≥ {c['min']:g}"] if "min" in c else []
    return f"{c['metric']} {' and '.join(bounds)} {metric_unit(c['metric'])}".rstrip()


def _pacing(record: GcPacingRecord | None) -> str:
    """A GC-pacing trial's collector, in a few words: its factor on the step time, or the bound it was held to."""
    if not record:
        return ""
    if record["skipped"]:
        return f"GC pacing: collector within +-{record['bound']:.3%}"
    factor = record["collector"]["factor"] if record["collector"] else None
    if factor is None or factor["ratio"] is None:
        return "GC pacing: collector not measured"
    return f"GC pacing: collector x{factor['ratio']:.4f} [{factor['ci_low']:.4f}, {factor['ci_high']:.4f}]"


def _feasible(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "**no**")


def _numbers(values: Sequence[int]) -> str:
    return ", ".join(f"#{n}" for n in values) if values else "none"
