"""``tuner report``: a Markdown + self-contained HTML report with PNG plots for a run or a sweep.

Inputs (each versioned by its ``schema`` key, see ``docs/records.md``):

- a run: ``<run dir>/run.json`` (``tuner.run/1``), given as the directory or the file;
- a sweep: ``<experiment>/sweep/summary.json`` (``tuner.sweep/1``), given as the experiment directory, the
  ``sweep/`` directory or the file;
- a capacity search: ``<experiment>/capacity/capacity.json`` (``tuner.capacity/1``), given as its directory or
  the file; its report goes beside it (:mod:`tuner.report.capacity`).

The report goes next to the input: ``<run dir>/report/`` for a run, ``<experiment>/report/`` for a sweep
(``report-aa/`` for an A/A sweep in ``sweep-aa/``). Every file is written atomically.

Records come from :func:`tuner.records.loader.load`, wording from :mod:`tuner.report.describe`, the document
model from :mod:`tuner.report.document`.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from tuner.metrics import LATENCY_FAMILIES, METRIC_NAMES, metric_unit
from tuner.records import Loaded, capacity_file, load, load_capacity, run_reps, write_text
from tuner.report.capacity import write_capacity_report
from tuner.report.describe import aggregate_processes, describe_strategies, fmt_num, measured_device, vllm_version
from tuner.report.document import Doc
from tuner.report.sections import environment_section, gc_sections
from tuner.report.sweep import sweep_doc
from tuner.report.tail_section import run_tail, tail_sections
from tuner.report.upstream_section import upstream_section
from tuner.report.workload_section import workload_section

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
    if (capacity := capacity_file(path)) is not None:  # beside its record, as `tuner capacity` wrote it
        return write_capacity_report(out_dir or capacity.parent, load_capacity(capacity))
    loaded = load(path)
    out = out_dir or report_dir(loaded)
    out.mkdir(parents=True, exist_ok=True)
    doc = _run_doc(loaded, out) if loaded.kind == "run" else sweep_doc(loaded, out)
    images = [block[1] for block in doc.blocks if block[0] == "img"]
    md = write_text(out / "report.md", doc.markdown())
    page = write_text(out / "report.html", doc.html())
    return [md, page, *images]


# ---- run


def _run_doc(loaded: Loaded, out: Path) -> Doc:
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
