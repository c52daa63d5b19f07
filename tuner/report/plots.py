"""PNG plots for ``tuner report`` (matplotlib's Agg canvas, no pyplot).

Every function takes plain numbers, draws one figure, writes it atomically and returns its path. Figures are
built with :class:`matplotlib.figure.Figure` on a :class:`FigureCanvasAgg` directly, so nothing touches a
display, the process-wide backend or pyplot's global state.
"""

from __future__ import annotations

import io
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from tuner.plugin.protocol import tag_hidden
from tuner.records.files import write_bytes

DPI = 110
VERDICT_COLORS = {
    "better": "#2a9d3f",
    "worse": "#d62728",
    "no_difference": "#8c8c8c",
    "not_significant": "#f4a300",
    "inconclusive": "#f4a300",  # summaries written before the equivalence margin
    "baseline": "#222222",
}
VERDICT_LABELS = {
    "better": "better (screening, unadjusted)",
    "worse": "worse (screening, unadjusted)",
    "no_difference": "no difference (within ±min_effect)",
    "not_significant": "not significant",
    "inconclusive": "not significant",
}
PERCENTILE_COLORS = {"p50": "#4c72b0", "p90": "#dd8452", "p99": "#c44e52"}
SERIES_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


def figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches on its own Agg canvas (no pyplot, no display)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: Path) -> Path:
    """Render to PNG and replace ``path`` atomically."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return write_bytes(path, buffer.getvalue())


def _grouped_bars(
    ax: Axes, labels: Sequence[str], series: Mapping[str, Sequence[float]], colors: Sequence[str]
) -> None:
    n = max(len(series), 1)
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        xs = [x + (i - (n - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width=width * 0.95, label=name, color=colors[i % len(colors)])
    ax.set_xticks(range(len(labels)), labels)


def _finite(values: Sequence[float]) -> list[float]:
    return [v for v in values if v is not None and math.isfinite(v)]


def _median(values: Sequence[float]) -> float:
    ordered = sorted(_finite(values))
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# --------------------------------------------------------------------------------------------- runs


def throughput(
    path: Path, reps: Sequence[str], tokens: Mapping[str, Sequence[float]], requests: Sequence[float], *, title: str
) -> Path:
    """Token throughput (grouped bars) and request throughput per repetition, each with its median."""
    fig = figure(9, 3.8)
    left, right = fig.subplots(1, 2, width_ratios=[2, 1])
    nice = {name: name.replace("_tokens_per_s", " tokens/s") for name in tokens}
    _grouped_bars(left, reps, {nice[k]: v for k, v in tokens.items()}, SERIES_COLORS)
    for i, values in enumerate(tokens.values()):
        left.axhline(_median(values), color=SERIES_COLORS[i], linestyle="--", linewidth=1)
    left.set(title="tokens per second", xlabel="repetition", ylabel="throughput [tok/s]")
    left.margins(y=0.18)
    left.legend(loc="upper left", ncol=2, fontsize=8)
    right.bar(range(len(reps)), requests, color=SERIES_COLORS[2], width=0.6, label="requests/s")
    right.axhline(_median(requests), color="#333333", linestyle="--", linewidth=1, label="median")
    right.set_xticks(range(len(reps)), reps)
    right.set(title="requests per second", xlabel="repetition", ylabel="throughput [req/s]")
    right.margins(y=0.18)
    right.legend(loc="upper left", ncol=2, fontsize=8)
    fig.suptitle(title)
    return save(fig, path)


def latency(
    path: Path, reps: Sequence[str], families: Mapping[str, Mapping[str, Sequence[float]]], *, title: str
) -> Path:
    """One panel per latency family (TTFT, TPOT, ITL, E2E): p50/p90/p99 per repetition."""
    fig = figure(10, 6.4)
    axes = fig.subplots(2, 2).ravel()
    for ax, (family, percentiles) in zip(axes, families.items(), strict=False):
        _grouped_bars(ax, reps, percentiles, [PERCENTILE_COLORS.get(p, "#777777") for p in percentiles])
        ax.set(title=family.upper(), xlabel="repetition", ylabel="latency [ms]")
        ax.margins(y=0.18)
        ax.legend(fontsize=8, loc="upper left", ncol=3)
    for ax in axes[len(families) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    return save(fig, path)


def bucket_labels(edges_ms: Sequence[float], n_counts: int) -> list[str]:
    """Labels of the log-spaced pause buckets: ``≤0.01``, ``0.01–0.03``, …, ``>1000`` (ms)."""
    labels = [f"≤{edges_ms[0]:g}"] if edges_ms else []
    labels += [f"{lo:g}–{hi:g}" for lo, hi in itertools.pairwise(edges_ms)]
    if n_counts > len(edges_ms) and edges_ms:
        labels.append(f">{edges_ms[-1]:g}")
    return labels[:n_counts] + [f"bucket {i}" for i in range(len(labels), n_counts)]


def gc_histograms(
    path: Path, edges_ms: Sequence[float], processes: dict[str, Mapping[str, Sequence[int]]], *, title: str
) -> Path:
    """One panel per process; grouped bars per series (e.g. baseline vs best) over the pause buckets."""
    n_counts = max((len(c) for series in processes.values() for c in series.values()), default=len(edges_ms) + 1)
    labels = bucket_labels(edges_ms, n_counts)
    rows = max(len(processes), 1)
    fig = figure(10, 1.2 + 2.5 * rows)
    axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
    for ax, (process, series) in zip(axes, processes.items(), strict=False):
        padded = {name: [*counts, *[0] * (n_counts - len(counts))] for name, counts in series.items()}
        _grouped_bars(ax, labels, padded, SERIES_COLORS)
        width = 0.8 / max(len(padded), 1)
        for i, counts in enumerate(padded.values()):
            for x, count in enumerate(counts):
                if count:
                    offset = (i - (len(padded) - 1) / 2) * width
                    ax.annotate(str(count), (x + offset, count), ha="center", va="bottom", fontsize=7)
        total = {name: sum(counts) for name, counts in padded.items()}
        if len(total) == 1:
            counted = f"{next(iter(total.values()))} collections"
        else:
            counted = ", ".join(f"{k}: {v}" for k, v in total.items()) + " collections"
        ax.set_title(f"{process} — {counted}", fontsize=10)
        ax.set_ylabel("collections")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.margins(y=0.2)
        ax.tick_params(axis="x", labelsize=8)
        if len(padded) > 1:
            ax.legend(fontsize=8, loc="upper right")
        if not any(total.values()):
            ax.text(0.5, 0.5, "no collections in the window", transform=ax.transAxes, ha="center", color="#777777")
            ax.set_ylim(0, 1)
    axes[-1].set_xlabel("GC pause [ms] (log-spaced buckets)")
    fig.suptitle(title)
    return save(fig, path)


def gc_share_rss(
    path: Path,
    processes: Sequence[str],
    share_pct: Mapping[str, Sequence[float]],
    peak_rss_mib: Mapping[str, Sequence[float]],
    *,
    title: str,
) -> Path:
    """GC share of wall time (%) and peak RSS (MiB) per process, one bar per series."""
    fig = figure(10, 3.8)
    left, right = fig.subplots(1, 2)
    labels = [p if len(p) <= 16 else p[:15] + "…" for p in processes]
    _grouped_bars(left, labels, share_pct, SERIES_COLORS)
    left.set(title="time in GC", xlabel="process", ylabel="GC share of wall time [%]")
    _grouped_bars(right, labels, peak_rss_mib, SERIES_COLORS)
    right.set(title="peak resident memory", xlabel="process", ylabel="peak RSS [MiB]")
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(y=0.1)
    if len(share_pct) > 1:
        fig.legend(*left.get_legend_handles_labels(), loc="outside lower center", ncol=len(share_pct), fontsize=8)
    fig.suptitle(title)
    return save(fig, path)


# -------------------------------------------------------------------------------------------- sweeps


@dataclass(frozen=True)
class RatioBar:
    label: str
    ratio: float
    ci_low: float
    ci_high: float
    verdict: str
    feasible: bool
    baseline: bool


@dataclass(frozen=True)
class RatioPanel:
    title: str
    bars: list[RatioBar]


def ratios(path: Path, panels: Sequence[RatioPanel], *, title: str) -> Path:
    """Per metric: each trial's ratio to the baseline as a bar from 1, with its CI; baseline marked at 1."""
    n_bars = max((len(p.bars) for p in panels), default=1)
    detailed = n_bars <= 10  # few trials: tick labels carry the configuration, else just the trial number
    fig = figure(min(max(9.0, (1.6 if detailed else 0.45) * n_bars + 3.5), 24), 1.2 + 4.0 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    seen: set[str] = set()
    any_infeasible = False
    for ax, panel in zip(axes, panels, strict=True):
        ax.axhline(1.0, color="#333333", linewidth=1)
        for x, bar in enumerate(panel.bars):
            if bar.baseline:
                ax.plot([x], [1.0], marker="D", color=VERDICT_COLORS["baseline"], markersize=8, zorder=3)
                continue
            seen.add(bar.verdict)
            color = VERDICT_COLORS.get(bar.verdict, "#8c8c8c")
            any_infeasible |= not bar.feasible
            ax.bar(
                x,
                bar.ratio - 1.0,
                bottom=1.0,
                width=0.6,
                color=color,
                alpha=1.0 if bar.feasible else 0.35,
                hatch=None if bar.feasible else "//",
                edgecolor="#444444" if not bar.feasible else color,
            )
            ax.errorbar(
                [x],
                [bar.ratio],
                yerr=[[max(bar.ratio - bar.ci_low, 0.0)], [max(bar.ci_high - bar.ratio, 0.0)]],
                fmt="o",
                color="#111111",
                markersize=4,
                capsize=4,
                linewidth=1.2,
            )
            above = bar.ratio >= 1.0
            ax.annotate(
                f"{bar.ratio:.3f}",
                (x, bar.ci_high if above else bar.ci_low),
                textcoords="offset points",
                xytext=(0, 4 if above else -4),
                ha="center",
                va="bottom" if above else "top",
                fontsize=8,
            )
        ax.set_xlim(-0.6, len(panel.bars) - 0.4)
        labels = [b.label if detailed else b.label.split("\n", 1)[0] for b in panel.bars]
        ax.set_xticks(range(len(panel.bars)), labels)
        ax.tick_params(axis="x", labelsize=7.5 if detailed else 8, rotation=0 if detailed or n_bars <= 30 else 90)
        ax.set_title(panel.title)
        ax.set_ylabel("trial / baseline, log scale")
        # Ratios live on a log scale: 0.8x and 1.25x are equally far from 1, and one outlier
        # does not flatten every other bar.
        lows = [*(v for v in _finite([b.ci_low for b in panel.bars]) if v > 0), 1.0]
        highs = [*_finite([b.ci_high for b in panel.bars]), 1.0]
        pad = max(math.log(max(highs) / min(lows)) * 0.18, 0.01)
        ax.set_yscale("log")
        ax.set_ylim(min(lows) * math.exp(-pad), max(highs) * math.exp(pad))
        ax.yaxis.set_major_locator(RatioLocator())
        ax.yaxis.set_major_formatter(FuncFormatter(ratio_tick_label))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, axis="y", alpha=0.3)
    handles: list[Patch | Line2D] = [
        Patch(color=VERDICT_COLORS[v], label=VERDICT_LABELS[v]) for v in VERDICT_LABELS if v in seen
    ]
    handles.append(Line2D([], [], marker="D", color=VERDICT_COLORS["baseline"], linestyle="", label="baseline (= 1)"))
    handles.append(Line2D([], [], marker="o", color="#111111", label="ratio with 95% CI"))
    if any_infeasible:
        handles.append(Patch(facecolor="#cccccc", edgecolor="#444444", hatch="//", label="infeasible (constraint)"))
    axes[0].legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1].set_xlabel("trial")
    fig.suptitle(title)
    return save(fig, path)


def ratio_tick_label(value: float, _pos: int | None = None) -> str:
    """A ratio tick's value as placed: ticks fall on steps such as 0.025, which two decimals would misstate."""
    return f"{value:.4f}".rstrip("0").rstrip(".")


class RatioLocator(MaxNLocator):
    """Round ticks on a log-scaled ratio axis: a few below 1 and a few above, always including 1."""

    def __init__(self) -> None:
        super().__init__(nbins=4, steps=[1, 2, 2.5, 5, 10])

    def tick_values(self, vmin: float, vmax: float) -> Any:
        ticks = {1.0}
        if vmin < 1.0:
            ticks |= {float(v) for v in super().tick_values(vmin, 1.0) if vmin <= v <= 1.0 and v > 0}
        if vmax > 1.0:
            ticks |= {float(v) for v in super().tick_values(1.0, vmax) if 1.0 <= v <= vmax}
        return sorted(ticks)


@dataclass(frozen=True)
class ParetoPoint:
    label: str
    x: float
    y: float
    front: bool
    feasible: bool
    baseline: bool


def pareto(path: Path, points: Sequence[ParetoPoint], *, x_label: str, y_label: str, title: str) -> Path:
    """Scatter of two objectives; the Pareto front joined and highlighted, the baseline marked."""
    fig = figure(8, 5.2)
    ax = fig.subplots()
    others = [p for p in points if not p.front and not p.baseline]
    feasible = [p for p in others if p.feasible]
    infeasible = [p for p in others if not p.feasible]
    front = sorted((p for p in points if p.front), key=lambda p: p.x)
    if feasible:
        ax.scatter([p.x for p in feasible], [p.y for p in feasible], color="#8c8c8c", s=40, label="trial")
    if infeasible:
        ax.scatter([p.x for p in infeasible], [p.y for p in infeasible], color="#bbbbbb", marker="x", s=50,
                   label="infeasible (constraint)")  # fmt: skip
    if front:
        ax.plot([p.x for p in front], [p.y for p in front], color="#d62728", linewidth=1.2, linestyle="--")
        ax.scatter([p.x for p in front], [p.y for p in front], color="#d62728", s=80, edgecolor="black",
                   zorder=3, label="Pareto front")  # fmt: skip
    base = [p for p in points if p.baseline]
    if base:
        ax.scatter([p.x for p in base], [p.y for p in base], color="black", marker="D", s=70, zorder=4,
                   label="baseline")  # fmt: skip
    for p in points:
        ax.annotate(p.label, (p.x, p.y), textcoords="offset points", xytext=(6, 5), fontsize=8)
    ax.set(xlabel=x_label, ylabel=y_label, title=title)
    ax.grid(True, alpha=0.3)
    ax.margins(0.12)
    ax.legend(fontsize=8, loc="best")
    return save(fig, path)


def importance(path: Path, values: dict[str, float], *, title: str) -> Path:
    """Horizontal bars of parameter importance, largest on top."""
    ordered = sorted(values.items(), key=lambda kv: kv[1])
    fig = figure(8, 1.2 + 0.45 * max(len(ordered), 1))
    ax = fig.subplots()
    ax.barh([k for k, _ in ordered], [v for _, v in ordered], color=SERIES_COLORS[0])
    for y, (_, v) in enumerate(ordered):
        ax.annotate(f"{v:.2f}", (v, y), textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.set(xlabel="relative importance (first objective; sums to 1)", ylabel="parameter", title=title)
    ax.set_xlim(0, max([v for _, v in ordered] + [0.01]) * 1.15)
    return save(fig, path)


def timeline(path: Path, window: Mapping[str, Any], *, title: str) -> Path:
    """One window of a repetition: EngineCore's steps, every process's GC pauses (critical solid, hidden hatched)
    and the slowest inter-token samples in it, on one time axis (ms from the window's start)."""
    pauses: Mapping[str, Sequence[Sequence[float]]] = window["pauses"]
    lanes = ["EngineCore steps", *(f"{name} GC" for name in pauses), "slowest tokens"]
    fig = figure(10, 1.0 + 0.5 * len(lanes))
    ax = fig.add_subplot()
    y = {lane: len(lanes) - 1 - i for i, lane in enumerate(lanes)}
    steps = [(s * 1e3, (e - s) * 1e3) for s, e in window["steps"]]
    ax.broken_barh(steps, (y["EngineCore steps"] - 0.4, 0.8), facecolors=SERIES_COLORS[0], edgecolor="white", lw=0.3)
    for name, rows in pauses.items():
        for start, end, tag in rows:
            hidden = tag_hidden(int(tag))
            ax.broken_barh(
                [(start * 1e3, max((end - start) * 1e3, 0.05))],
                (y[f"{name} GC"] - 0.4, 0.8),
                facecolors="none" if hidden else PERCENTILE_COLORS["p99"],
                edgecolor=PERCENTILE_COLORS["p99"],
                hatch="///" if hidden else None,
            )
    tokens = [(s * 1e3, (e - s) * 1e3) for s, e, _ in window["tokens"]]
    ax.broken_barh(tokens, (y["slowest tokens"] - 0.4, 0.8), facecolors=SERIES_COLORS[1], alpha=0.35)
    ax.set_yticks(list(y.values()), list(y))
    ax.set_xlim(0, window["span_s"] * 1e3)
    ax.set_xlabel("ms from the window's start")
    ax.set_title(title)
    ax.legend(
        handles=[
            Patch(color=SERIES_COLORS[0], label="engine step"),
            Patch(color=PERCENTILE_COLORS["p99"], label="GC pause, critical"),
            Patch(facecolor="none", edgecolor=PERCENTILE_COLORS["p99"], hatch="///", label="GC pause, hidden"),
            Patch(color=SERIES_COLORS[1], alpha=0.35, label="slowest inter-token gaps"),
        ],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25),
        ncol=4,
        fontsize="small",
    )
    return save(fig, path)


# ------------------------------------------------------------------------------------------ dashboard


@dataclass(frozen=True)
class BenchPoint:
    run: str  # the run's label on the x axis (a commit, a file)
    value: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class BenchSeries:
    name: str
    unit: str
    better: str | None  # "bigger" / "smaller" (None: not known)
    points: list[BenchPoint]


def dashboard(path: Path, series: Sequence[BenchSeries], *, title: str, alert: Mapping[str, float]) -> Path:
    """github-action-benchmark's chart page, drawn here: one small chart per series, its value per run with the
    95% CI, 1 (the baseline) marked for ratios and the value at which the action would alert after the last
    point (``alert[better]``, e.g. 1.05 for 105%)."""
    columns = 2 if len(series) > 1 else 1
    rows = math.ceil(len(series) / columns)
    fig = figure(5.2 * columns, 0.8 + 2.3 * rows)
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    for ax, item in zip(axes, series, strict=False):
        xs = list(range(len(item.points)))
        values = [p.value for p in item.points]
        ax.plot(xs, values, marker="o", color=SERIES_COLORS[0], linewidth=1.2, zorder=3)
        for x, point in zip(xs, item.points, strict=True):
            if point.ci_low is not None and point.ci_high is not None:
                ax.errorbar(
                    [x],
                    [point.value],
                    yerr=[[point.value - point.ci_low], [point.ci_high - point.value]],
                    color="#111111",
                    capsize=4,
                    linewidth=1,
                )
        if item.unit == "x baseline":
            ax.axhline(1.0, color="#333333", linewidth=0.8, linestyle=":")
        if item.better is not None and item.better in alert and values:
            factor = alert[item.better]
            threshold = values[-1] / factor if item.better == "bigger" else values[-1] * factor
            ax.axhline(threshold, color=VERDICT_COLORS["worse"], linewidth=0.8, linestyle="--")
            low, high = ax.get_ylim()
            ax.set_ylim(min(low, threshold * 0.99), max(high, threshold * 1.01))  # the threshold stays in view
        ax.set_xticks(xs, [p.run for p in item.points], fontsize=7)
        ax.set_xlim(-0.6, max(len(xs) - 0.4, 0.6))
        ax.set_ylabel(item.unit, fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title(_wrap(item.name, 60), fontsize=7.5)
        ax.grid(True, axis="y", alpha=0.3)
    for ax in axes[len(series) :]:
        ax.set_visible(False)
    handles = [
        Line2D([], [], marker="o", color="#111111", label="value with 95% CI"),
        Line2D([], [], color="#333333", linestyle=":", label="baseline (= 1)"),
        Line2D([], [], color=VERDICT_COLORS["worse"], linestyle="--", label="alert threshold for the next point"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8)
    fig.suptitle(title, fontsize=10)
    return save(fig, path)


def _wrap(text: str, width: int) -> str:
    """Wrap a series name at its ``/`` and ``+`` separators (names are long and have no spaces)."""
    lines, line = [], ""
    for part in text.replace("+", "+\x00").replace("/", "/\x00").split("\x00"):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])
