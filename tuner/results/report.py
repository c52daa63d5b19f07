"""``tuner report``: a Markdown + self-contained HTML report with PNG plots for a run or a sweep.

Inputs (both versioned by their ``schema`` key, see ``results/README.md``):

- a run: ``<run dir>/run.json`` (``tuner.run/1``), given as the directory or the file;
- a sweep: ``<experiment>/sweep/summary.json`` (``tuner.sweep/1``), given as the experiment directory, the
  ``sweep/`` directory or the file.

The report goes next to the input: ``<run dir>/report/`` for a run, ``<experiment>/report/`` for a sweep
(``report-aa/`` for an A/A sweep in ``sweep-aa/``). Every file is written atomically.

Records come from :func:`tuner.results.records.load`, wording from :mod:`tuner.results.describe`, the document
model from :mod:`tuner.results.document`.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tuner.metrics import LATENCY_FAMILIES, METRIC_NAMES
from tuner.results.describe import (
    ProcessGc,
    aggregate_processes,
    baseline_trial,
    describe_engine,
    describe_strategies,
    environment_rows,
    fmt_num,
    fmt_p,
    fmt_ratio,
    is_higher_better,
    metric_title,
    metric_unit,
    pick_best,
    ratio_metrics,
    trial_label,
    vllm_version,
)
from tuner.results.document import Doc
from tuner.results.files import write_text
from tuner.results.records import Loaded, load, objective_value, run_reps, trial_process_lists
from tuner.results.tail_section import run_tail, tail_sections
from tuner.results.workload_section import workload_section

PERCENTILES = ("p50", "p90", "p99")


def report_dir(loaded: Loaded) -> Path:
    """Where the report of ``loaded`` goes (next to the input)."""
    if loaded.kind == "run":
        return loaded.path.parent / "report"
    sweep_dir = loaded.path.parent
    if sweep_dir.name.startswith("sweep"):
        return sweep_dir.parent / ("report" + sweep_dir.name[len("sweep") :])
    return sweep_dir / "report"


def build_report(path: Path, out_dir: Path | None = None) -> list[Path]:
    """Write ``report.md``, ``report.html`` and the PNG plots for the result at ``path``; return the paths."""
    loaded = load(path)
    out = out_dir or report_dir(loaded)
    out.mkdir(parents=True, exist_ok=True)
    doc = _run_doc(loaded, out) if loaded.kind == "run" else _sweep_doc(loaded, out)
    images = [block[1] for block in doc.blocks if block[0] == "img"]
    md = write_text(out / "report.md", doc.markdown())
    page = write_text(out / "report.html", doc.html())
    return [md, page, *images]


# ---- run


def _run_doc(loaded: Loaded, out: Path) -> Doc:
    from tuner.results import plots

    run = loaded.run
    reps = run_reps(run)
    labels = [str(int(rep.get("index", i)) + 1) for i, rep in enumerate(run["repetitions"])]
    doc = Doc(f"Run report: {run.get('experiment', '?')}")
    env = run.get("environment") or {}
    engine = run.get("engine") or {}
    doc.bullets(
        [
            f"source: `{loaded.path}` (schema `{run['schema']}`)",
            f"created: {run.get('created', '?')}",
            f"strategies: `{describe_strategies(run.get('strategies'))}`",
            f"engine: {engine.get('mode', '?')} mode, start {fmt_num(engine.get('start_s'), 3)} s",
            f"device: {env.get('device', '?')}; {vllm_version(env)}",
            f"repetitions: {len(reps)}",
        ]
    )

    doc.h("Summary over repetitions")
    names = [m for m in ["wall_s", *METRIC_NAMES] if any(m in r for r in reps)]
    rows = []
    for metric in names:
        values = [r[metric] for r in reps if metric in r]
        mean = statistics.fmean(values)
        cv = statistics.stdev(values) / mean if len(values) > 1 and mean else 0.0
        rows.append(
            [
                metric,
                metric_unit(metric),
                fmt_num(statistics.median(values)),
                fmt_num(mean),
                fmt_num(min(values)),
                fmt_num(max(values)),
                f"{cv:.1%}",
            ]
        )
    doc.table(["metric", "unit", "median", "mean", "min", "max", "CV"], rows)
    workload_section(doc, out, run.get("workload"), title=str(run.get("experiment")))

    doc.h("Throughput")
    tokens = {m: [r.get(m, math.nan) for r in reps] for m in ("output_tokens_per_s", "total_tokens_per_s")}
    requests = [r.get("requests_per_s", math.nan) for r in reps]
    doc.image(
        plots.throughput(
            out / "throughput.png", labels, tokens, requests, title=f"{run.get('experiment')}: throughput"
        ),
        "Throughput per repetition (the dashed line is the median).",
    )

    doc.h("Latency")
    families = {
        family: {pct: [r.get(f"{family}_{pct}_ms", math.nan) for r in reps] for pct in PERCENTILES}
        for family in LATENCY_FAMILIES
    }
    doc.image(
        plots.latency(out / "latency.png", labels, families, title=f"{run.get('experiment')}: latency percentiles"),
        "TTFT, TPOT, ITL and E2E latency percentiles per repetition.",
    )
    doc.table(
        ["rep", *[f"{f.upper()} {p}" for f in LATENCY_FAMILIES for p in ("p50", "p99")]],
        [
            [label] + [fmt_num(r.get(f"{f}_{p}_ms")) for f in LATENCY_FAMILIES for p in ("p50", "p99")]
            for label, r in zip(labels, reps, strict=True)
        ],
    )

    processes = aggregate_processes(rep.get("processes") or [] for rep in run["repetitions"])
    _gc_sections(doc, out, {"run": processes}, title=str(run.get("experiment")))
    tail, timeline = run_tail(run)
    lists = [rep.get("processes") or [] for rep in run["repetitions"]]
    tail_sections(doc, out, {"run": (lists, tail)}, timeline, title=str(run.get("experiment")))
    _environment(doc, env, run.get("engine", {}).get("args"))
    return doc


def _gc_sections(doc: Doc, out: Path, series: dict[str, list[ProcessGc]], *, title: str, intro: str = "") -> None:
    from tuner.results import plots

    doc.h("Garbage collection per process")
    if intro:
        doc.p(intro)
    if not any(series.values()):
        doc.p("No per-process GC telemetry in this result.")
        return
    names: list[str] = []
    for processes in series.values():
        names += [p.name for p in processes if p.name not in names]
    edges = next((p.edges_ms for procs in series.values() for p in procs if p.edges_ms), [])
    hist = {
        name: {label: next((p.counts for p in procs if p.name == name), []) for label, procs in series.items()}
        for name in names
    }
    roles = {p.name: ",".join(p.roles) for procs in series.values() for p in procs}
    windows = max((p.windows for procs in series.values() for p in procs), default=1)
    if edges:
        doc.image(
            plots.gc_histograms(
                out / "gc_pauses.png",
                edges,
                {f"{name} ({roles.get(name) or '-'})": counts for name, counts in hist.items()},
                title=f"{title}: GC pause histogram per process",
            ),
            "GC pauses per process, counted in log-spaced buckets"
            + (
                f", summed over the measured repetitions (up to {windows})."
                if windows > 1
                else ", from one measurement window (one repetition)."
            ),
        )
    share = {label: [_find(procs, n, lambda p: p.gc_share * 100) for n in names] for label, procs in series.items()}
    rss = {
        label: [_find(procs, n, lambda p: p.peak_rss_bytes / 2**20) for n in names] for label, procs in series.items()
    }
    doc.image(
        plots.gc_share_rss(out / "gc_memory.png", names, share, rss, title=f"{title}: GC share and peak RSS"),
        "Share of wall time spent in GC and peak resident memory, per process.",
    )
    rows = []
    for label, processes in series.items():
        for p in processes:
            rows.append(
                ([label] if len(series) > 1 else [])
                + [
                    p.name,
                    ",".join(p.roles) or "-",
                    "/".join(str(c) for c in p.collections),
                    f"{p.gc_total_s * 1e3:.2f}",
                    f"{p.gc_share:.3%}",
                    f"{p.max_pause_ms:.2f}",
                    str(p.freeze_count),
                    f"{p.peak_rss_bytes / 2**20:.0f}",
                    ", ".join(p.active) or "-",
                ]
            )
    headers = ["process", "roles", "gen0/1/2", "GC ms", "GC share", "max pause ms", "frozen", "peak RSS MiB", "active"]
    doc.table((["config"] if len(series) > 1 else []) + headers, rows)


def _find(processes: list[ProcessGc], name: str, value: Any) -> float:
    proc = next((p for p in processes if p.name == name), None)
    return float(value(proc)) if proc is not None else math.nan


def _environment(doc: Doc, env: dict[str, Any], engine_args: dict[str, Any] | None) -> None:
    doc.h("Environment")
    doc.table(["key", "value"], environment_rows(env) or [["-", "-"]])
    if engine_args:
        doc.p("Engine arguments:")
        doc.table(["argument", "value"], [[k, str(v)] for k, v in engine_args.items()])


# ---- sweep


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
    doc.table(
        ["trial", "screening ratio [95% CI]", "confirmation ratio [95% CI]", "pairs", "p (Holm)", "status"],
        [
            [
                f"#{r['trial']}",
                fmt_ratio(r["screening"]),
                fmt_ratio(r["confirmation"]),
                str((r["confirmation"] or {}).get("n", 0)),
                fmt_p(r["p_holm"]),
                r["status"],
            ]
            for r in decision["rows"]
        ]
        or [["-", "-", "-", "-", "-", decision["reason"]]],
    )


def _sweep_doc(loaded: Loaded, out: Path) -> Doc:
    from tuner.results import plots

    summary = loaded.sweep
    name = str(summary.get("experiment", "?"))
    trials = sorted(summary["trials"], key=lambda t: t["number"])
    objectives = summary["objectives"]
    constraints = summary.get("constraints") or []
    env = summary.get("environment") or {}
    doc = Doc(f"Sweep report: {name}")
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

    winner = summary.get("winner") or {}
    doc.h("Winner")
    if winner.get("trial") is not None:
        doc.p(
            f"**Trial #{winner['trial']}**: `{describe_strategies(winner.get('strategies'))}`"
            + (f" with engine `{describe_engine(winner.get('engine'))}`" if winner.get("engine") else "")
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
    _confirmation_section(doc, summary)
    workload_section(doc, out, summary["workload"], title=name)

    metrics = ratio_metrics(summary)
    doc.h("Trials against the baseline")
    headers = [
        "#",
        "state",
        "configuration",
        *[f"{metric_title(o['metric'])} ({metric_unit(o['metric'])})" for o in objectives],
    ]
    headers += [f"{metric_title(m)} ratio [95% CI]" for m in metrics] + ["p", "feasible", "verdict", "note"]
    first = objectives[0]["metric"]
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
                *[fmt_ratio(ratios.get(m)) if not t.get("is_baseline") else "1 (reference)" for m in metrics],
                fmt_p((ratios.get(first) or {}).get("p_value")),
                _feasible(t.get("feasible")),
                "baseline" if t.get("is_baseline") else (t.get("verdict") or "-"),
                note,
            ]
        )
    doc.table(headers, rows)
    doc.p(
        "Ratios are trial / baseline from repetitions paired on the same engine (1 = no change); the verdict is "
        f"on the first objective ({first}) and needs the 95% CI clear of 1 and p < 0.05. The objective columns are "
        "what the study saw: each trial's paired ratio times the baseline's median, so drift between trials cancels."
    )
    doc.p(f"best: {_numbers(summary.get('best'))}; Pareto front: {_numbers(summary.get('pareto'))}")

    if metrics:
        panels = [_ratio_panel(trials, m) for m in metrics]
        doc.image(
            plots.ratios(out / "ratios.png", panels, title=f"{name}: trials relative to the baseline"),
            "Each trial's ratio to the baseline with its 95% CI, coloured by verdict; hatched bars are infeasible.",
        )
    else:
        doc.p("No trial carries ratios to the baseline yet.")

    if len(objectives) >= 2:
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

    base = baseline_trial(summary)
    best, why = pick_best(summary)
    series: dict[str, list[ProcessGc]] = {}
    if base is not None:
        series["baseline"] = aggregate_processes(trial_process_lists(base))
    if best is not None:
        short = "winner" if why.startswith(("confirmed", "best significant")) else "top ratio"
        series[f"#{best['number']} ({short})"] = aggregate_processes(trial_process_lists(best))
    intro = f"The baseline against trial #{best['number']} ({why}): `{trial_label(best)}`." if best else ""
    _gc_sections(doc, out, series, title=name, intro=intro)
    configs: dict[str, tuple[list[list[dict[str, Any]]], dict[str, Any] | None]] = {}
    timeline = None
    for trial, label in ((base, "baseline"), (best, f"#{best['number']}" if best else "")):
        if trial is not None and label not in configs:
            configs[label] = (trial_process_lists(trial), (trial.get("tail") or {}).get("trial"))
            timeline = (trial.get("tail") or {}).get("timeline") or timeline
    tail_sections(doc, out, configs, timeline, title=name)

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

    _environment(doc, env, None)
    return doc


def _ratio_panel(trials: Sequence[Mapping[str, Any]], metric: str) -> Any:
    from tuner.results import plots

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
                verdict=str(r.get("verdict") or "inconclusive"),
                feasible=t.get("feasible") is not False,
                baseline=False,
            )
        )
    direction = "higher is better" if is_higher_better(metric) else "lower is better"
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
