"""The sweep's report: its winner and confirmation, trials against the baseline, the Pareto front, GC and tail
latency of the baseline against the best trial, and parameter importance; one function per section."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tuner.metrics.table import HIGHER_IS_BETTER, metric_unit
from tuner.records.loader import Loaded, objective_value, trial_process_lists
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


def _confirmation_section(doc: Doc, summary: Mapping[str, Any]) -> None:
    """The power statements and the candidates' screening and confirmation estimates side by side."""
    power = summary.get("power") or {}
    confirmation = summary.get("confirmation")
    if not power and confirmation is None:
        return  # a summary from before the confirmation phase
    doc.h("Confirmation")
    doc.p(
        "Screening (the search) only nominates candidates; each is re-tested against the baseline on fresh pairs "
        "(O'Brien-Fleming looks, Holm across candidates). Only the confirmation estimate is an effect."
    )
    titles = {"before_screening": "Power before screening", "before_confirmation": "Power before confirmation"}
    for phase, title in titles.items():
        if power.get(phase):
            doc.p(f"{title}:")
            doc.bullets(list(power[phase]["lines"]))
    if confirmation is None:
        doc.p(str((summary.get("winner") or {}).get("reason", "confirmation pending")))
        return
    doc.bullets(list(confirmation.get("notes") or []) + [m for m in [confirmation.get("mde_note")] if m])
    decision = confirmation["decision"]
    plans = {p["trial"]: p for p in confirmation.get("plan") or [] if isinstance(p, dict)}  # per candidate (newer)
    rows = {r["trial"]: r for r in decision["rows"]}
    first = summary["objectives"][0]["metric"]
    screened = {t["number"]: (t.get("ratios") or {}).get(first) for t in summary.get("trials") or []}
    doc.table(
        ["trial", "measured by", "planned pairs (MDE)", "screening ratio [95% CI]", "confirmation ratio [95% CI]",
         "pairs", "p (Holm)", "status"],
        [
            [
                f"#{trial}",
                str((plans.get(trial) or {}).get("grain") or "-"),
                _planned(plans.get(trial)),
                fmt_ratio((rows.get(trial) or {}).get("screening") or screened.get(trial)),
                fmt_ratio((rows.get(trial) or {}).get("confirmation")),
                str(((rows.get(trial) or {}).get("confirmation") or {}).get("n", 0)),
                fmt_p((rows.get(trial) or {}).get("p_holm")),
                (rows.get(trial) or {}).get("status") or "not measured: its budget cannot reach the test's level",
            ]
            for trial in (plans or rows)
        ]
        or [["-", "-", "-", "-", "-", "-", "-", decision["reason"]]],
    )  # fmt: skip
    doc.p(
        "Each candidate is planned on its own: the method and grain of its screening, its screening's per-pair "
        "noise, the pairs its budget holds at its pair rate, its MDE (80% power, one-sided 2.5%, Holm over the "
        "candidates measured). The decision reads each look's sign-flip test, whose CI is the one shown."
    )


def _planned(plan: Mapping[str, Any] | None) -> str:
    if not plan:
        return "-"
    mde = f"{plan['mde']:.2%}" if plan.get("mde") is not None else "-"
    return f"{plan['pairs']} ({mde})"


def sweep_doc(loaded: Loaded, out: Path) -> Doc:
    """The sweep's report, section by section."""
    summary = loaded.sweep
    name = str(summary.get("experiment", "?"))
    trials = sorted(summary["trials"], key=lambda t: t["number"])
    doc = Doc(f"Sweep report: {name}")
    _overview(doc, loaded, trials)
    _winner_section(doc, summary)
    _confirmation_section(doc, summary)
    workload_section(doc, out, summary["workload"], title=name)
    _trials_section(doc, out, summary, trials, name)
    stall_section(doc, trials)
    _pareto_section(doc, out, summary, trials, name)
    _baseline_against_best(doc, out, summary, name)
    _importance_section(doc, out, summary, name)
    upstream_section(doc, (s for t in trials for s in t.get("strategies") or {}), summary.get("environment") or {})
    environment_section(doc, summary.get("environment") or {}, None)
    return doc


def _overview(doc: Doc, loaded: Loaded, trials: Sequence[Mapping[str, Any]]) -> None:
    summary = loaded.sweep
    objectives = summary["objectives"]
    constraints = summary.get("constraints") or []
    env = summary.get("environment") or {}
    switches = sorted(s for s in summary.get("switch_s") or [] if isinstance(s, (int, float)))
    doc.bullets(
        [
            f"source: `{loaded.path}` (schema `{summary['schema']}`)",
            f"created: {summary.get('created', '?')}",
            "objectives: " + ", ".join(f"{o['metric']} ({o.get('direction', '?')})" for o in objectives),
            "constraints: " + (", ".join(_constraint(c) for c in constraints) or "none"),
            f"trials: {len(trials)} ("
            + ", ".join(f"{s} {sum(t['state'] == s for t in trials)}" for s in sorted({t["state"] for t in trials}))
            + ")",
            f"engine starts: {summary.get('engine_starts', '?')}"
            + (f", median switch {switches[len(switches) // 2] * 1e3:.1f} ms" if switches else ""),
            f"device: {env.get('device', '?')}; {vllm_version(env)}",
        ]
    )


def _winner_section(doc: Doc, summary: Mapping[str, Any]) -> None:
    winner = summary.get("winner") or {}
    doc.h("Winner")
    if winner.get("trial") is not None:
        doc.p(
            f"**Trial #{winner['trial']}**: `{describe_strategies(winner.get('strategies'))}`"
            + (
                f" with engine `{describe_engine(winner.get('engine'), winner.get('vllm_env'))}`"
                if winner.get("engine") or winner.get("vllm_env")
                else ""
            )
            + (f" ({winner['reason']})" if winner.get("reason") else "")
        )
    else:
        doc.p(
            f"No winner: {winner.get('reason', 'no trial significantly beats the baseline')}; keep vLLM as installed."
        )
    if winner.get("effect"):
        doc.p(
            f"Effect (the confirmation estimate on fresh pairs, not the screening one): {fmt_ratio(winner['effect'])}"
        )
    if winner.get("env") and winner["confirmed"]:
        doc.code(str(winner["env"]))


def _trials_section(
    doc: Doc, out: Path, summary: Mapping[str, Any], trials: Sequence[Mapping[str, Any]], name: str
) -> None:
    from tuner.report import plots

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
    margin = ((summary.get("config") or {}).get("search") or {}).get("confirm", {}).get("min_effect")
    rows = []
    for t in trials:
        ratios = t.get("ratios") or {}
        note = t.get("failure") or ""
        if t["number"] in (summary.get("pareto") or []):
            note = ("Pareto; " + note) if note else "Pareto"
        rows.append(
            [
                str(t["number"]),
                t["state"],
                "baseline" if t.get("is_baseline") else trial_label(t).split(" ", 1)[1],
                *[fmt_num(objective_value(t, o["metric"])) for o in objectives],
                measured_by(t),
                *[fmt_ratio(ratios.get(m)) if not t.get("is_baseline") else "1 (reference)" for m in metrics],
                fmt_p((ratios.get(first) or {}).get("p_value")),
                _feasible(t.get("feasible")),
                "baseline" if t.get("is_baseline") else verdict_words(t.get("verdict"), screening=True, margin=margin),
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
        f"screening calls 'better' (unadjusted): {_numbers(summary.get('best'))}; "
        f"Pareto front: {_numbers(summary.get('pareto'))}"
    )

    if metrics:
        panels = [_ratio_panel(trials, m) for m in metrics]
        doc.image(
            plots.ratios(out / "ratios.png", panels, title=f"{name}: trials relative to the baseline"),
            "Each trial's ratio to the baseline with its 95% CI, coloured by verdict; hatched bars are infeasible.",
        )
    else:
        doc.p("No trial carries ratios to the baseline yet.")


def _pareto_section(
    doc: Doc, out: Path, summary: Mapping[str, Any], trials: Sequence[Mapping[str, Any]], name: str
) -> None:
    from tuner.report import plots

    objectives = summary["objectives"]
    if len(objectives) < 2:
        return
    doc.h("Pareto front")
    x_metric, y_metric = objectives[0]["metric"], objectives[1]["metric"]
    points = [
        plots.ParetoPoint(
            label=f"#{t['number']}",
            x=x,
            y=y,
            front=t["number"] in (summary.get("pareto") or []),
            feasible=t.get("feasible") is not False,
            baseline=bool(t.get("is_baseline")),
        )
        for t in trials
        if t["state"] == "COMPLETE"
        and (x := objective_value(t, x_metric)) is not None
        and (y := objective_value(t, y_metric)) is not None
    ]
    if points:
        doc.image(
            plots.pareto(
                out / "pareto.png",
                points,
                x_label=_axis(x_metric, objectives[0].get("direction")),
                y_label=_axis(y_metric, objectives[1].get("direction")),
                title=f"{name}: {metric_title(x_metric)} vs {metric_title(y_metric)}",
            ),
            "The first two objectives as Optuna saw them: each trial's paired ratio times the baseline's median, "
            "so that host drift between trials cancels; the Pareto front (feasible, non-dominated) is highlighted.",
        )
    else:
        doc.p("No completed trial has values for both objectives.")


def _baseline_against_best(doc: Doc, out: Path, summary: Mapping[str, Any], name: str) -> None:
    """GC and tail latency of the baseline beside the best trial."""
    base = baseline_trial(summary)
    best, why = pick_best(summary)
    series: dict[str, list[ProcessGc]] = {}
    if base is not None:
        series["baseline"] = aggregate_processes(trial_process_lists(base))
    if best is not None:
        short = "winner" if why.startswith(("confirmed", "best significant")) else "top ratio"
        series[f"#{best['number']} ({short})"] = aggregate_processes(trial_process_lists(best))
    intro = f"The baseline against trial #{best['number']} ({why}): `{trial_label(best)}`." if best else ""
    gc_sections(doc, out, series, title=name, intro=intro)
    configs: dict[str, tuple[list[list[dict[str, Any]]], dict[str, Any] | None]] = {}
    timeline = None
    for trial, label in ((base, "baseline"), (best, f"#{best['number']}" if best else "")):
        if trial is not None and label not in configs:
            configs[label] = (trial_process_lists(trial), (trial.get("tail") or {}).get("trial"))
            timeline = (trial.get("tail") or {}).get("timeline") or timeline
    tail_sections(doc, out, configs, timeline, title=name)


def _importance_section(doc: Doc, out: Path, summary: Mapping[str, Any], name: str) -> None:
    from tuner.report import plots

    first = summary["objectives"][0]["metric"]
    doc.h("Parameter importance")
    importance = {k: float(v) for k, v in (summary.get("importance") or {}).items() if isinstance(v, (int, float))}
    if importance:
        doc.image(
            plots.importance(out / "importance.png", importance, title=f"{name}: parameter importance"),
            f"Optuna parameter importance for the first objective ({first}).",
        )
        doc.table(
            ["parameter", "importance"], [[k, f"{v:.3f}"] for k, v in sorted(importance.items(), key=lambda kv: -kv[1])]
        )
    else:
        doc.p("Not available: too few completed trials (or too little variation) for an importance estimate.")


def _ratio_panel(trials: Sequence[Mapping[str, Any]], metric: str) -> Any:
    from tuner.report import plots

    bars = []
    for t in trials:
        if t.get("is_baseline"):
            bars.append(plots.RatioBar(f"#{t['number']}\nbaseline", 1.0, 1.0, 1.0, "baseline", True, True))
            continue
        r = (t.get("ratios") or {}).get(metric)
        if not r or r.get("ratio") is None:
            continue
        bars.append(
            plots.RatioBar(
                label=f"#{t['number']}\n{_wrap(describe_strategies(t.get('strategies')))}",
                ratio=float(r["ratio"]),
                ci_low=float(r["ci_low"]) if r.get("ci_low") is not None else float(r["ratio"]),
                ci_high=float(r["ci_high"]) if r.get("ci_high") is not None else float(r["ratio"]),
                verdict=str(r.get("verdict") or "not_significant"),
                feasible=t.get("feasible") is not False,
                baseline=False,
            )
        )
    direction = "higher is better" if metric in HIGHER_IS_BETTER else "lower is better"
    return plots.RatioPanel(f"{metric_title(metric)} ({direction})", bars)


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


def _axis(metric: str, direction: str | None) -> str:
    unit = metric_unit(metric)
    arrow = {"maximize": "higher is better", "minimize": "lower is better"}.get(direction or "", "")
    return f"{metric_title(metric)}" + (f" [{unit}]" if unit else "") + (f" ({arrow})" if arrow else "")


def _constraint(c: dict[str, Any]) -> str:
    bounds = []
    if c.get("max") is not None:
        bounds.append(f"≤ {c['max']:g}")
    if c.get("min") is not None:
        bounds.append(f"≥ {c['min']:g}")
    return f"{c['metric']} {' and '.join(bounds)} {metric_unit(c['metric'])}".rstrip()


def _feasible(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "**no**")


def _numbers(values: Any) -> str:
    return ", ".join(f"#{n}" for n in values) if values else "none"
