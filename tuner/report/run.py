"""A run's report (``run.json``, ``tuner.run/1``): throughput and latency per repetition, GC and the tail, the
workload and the environment. :mod:`tuner.report.build` writes it.

Records come from :func:`tuner.records.load`, wording from :mod:`tuner.report.describe`, the document model from
:mod:`tuner.report.document`.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from tuner.metrics import LATENCY_FAMILIES, METRIC_NAMES, metric_unit
from tuner.records import Loaded, run_reps
from tuner.report.describe import aggregate_processes, describe_strategies, fmt_num, measured_device, vllm_version
from tuner.report.document import Doc
from tuner.report.sections import environment_section, gc_sections
from tuner.report.tail_section import run_tail, tail_sections
from tuner.report.upstream_section import upstream_section
from tuner.report.workload_section import workload_section

PERCENTILES = ("p50", "p90", "p99")


def run_doc(loaded: Loaded, out: Path) -> Doc:
    from tuner.report import run_plots

    run = loaded.run
    reps = run_reps(run)
    labels = [str(rep["index"] + 1) for rep in run["repetitions"]]
    name = run["experiment"]
    doc = Doc(f"Run report: {name}")
    env, engine = run["environment"], run["engine"]
    doc.bullets(
        [
            f"source: `{loaded.path}` (schema `{run['schema']}`)",
            f"created: {run['created']}",
            f"strategies: `{describe_strategies(run['strategies'])}`",
            f"engine: {engine['mode']} mode, start {fmt_num(engine['start_s'], 3)} s",
            f"device: {measured_device(env)}; {vllm_version(env)}",
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
    workload_section(doc, out, run["workload"], title=name)

    doc.h("Throughput")
    tokens = {m: _per_rep(reps, m) for m in ("output_tokens_per_s", "total_tokens_per_s")}
    doc.image(
        run_plots.throughput(
            out / "throughput.png", labels, tokens, _per_rep(reps, "requests_per_s"), title=f"{name}: throughput"
        ),
        "Throughput per repetition (the dashed line is the median).",
    )

    doc.h("Latency")
    families = {
        family: {pct: _per_rep(reps, f"{family}_{pct}_ms") for pct in PERCENTILES} for family in LATENCY_FAMILIES
    }
    doc.image(
        run_plots.latency(out / "latency.png", labels, families, title=f"{name}: latency percentiles"),
        "TTFT, TPOT, ITL and E2E latency percentiles per repetition.",
    )
    doc.table(
        ["rep", *[f"{f.upper()} {p}" for f in LATENCY_FAMILIES for p in ("p50", "p99")]],
        [
            [label] + [fmt_num(families[f][p][i]) for f in LATENCY_FAMILIES for p in ("p50", "p99")]
            for i, label in enumerate(labels)
        ],
    )

    lists = [rep["processes"] for rep in run["repetitions"]]
    gc_sections(doc, out, {"run": aggregate_processes(lists)}, title=name)
    tail, timeline = run_tail(run)
    tail_sections(doc, out, {"run": (lists, tail)}, timeline, title=name)
    upstream_section(doc, run["strategies"], env)
    environment_section(doc, env, engine["args"])
    return doc


def _per_rep(reps: list[dict[str, float]], metric: str) -> list[float]:
    """``metric`` of each repetition (nan where one did not measure it)."""
    return [r.get(metric, math.nan) for r in reps]
