"""PNG plots of a sweep for ``tuner report``: each trial's ratio to the baseline with its CI, the Pareto front of two
objectives, and parameter importance.

Every function takes plain numbers, draws one figure on :mod:`tuner.report.figures`' canvas, writes it atomically
and returns its path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from tuner.report.figures import SERIES_COLORS, VERDICT_COLORS, finite, new_figure, save_figure

VERDICT_LABELS = {
    "better": "better (screening, unadjusted)",
    "worse": "worse (screening, unadjusted)",
    "no_difference": "no difference (within ±min_effect)",
    "not_significant": "not significant",
    "inconclusive": "not significant",
}


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
    fig = new_figure(min(max(9.0, (1.6 if detailed else 0.45) * n_bars + 3.5), 24), 1.2 + 4.0 * len(panels))
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
        lows = [*(v for v in finite([b.ci_low for b in panel.bars]) if v > 0), 1.0]
        highs = [*finite([b.ci_high for b in panel.bars]), 1.0]
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
    return save_figure(fig, path)


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
    fig = new_figure(8, 5.2)
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
    return save_figure(fig, path)


def importance(path: Path, values: dict[str, float], *, title: str) -> Path:
    """Horizontal bars of parameter importance, largest on top."""
    ordered = sorted(values.items(), key=lambda kv: kv[1])
    fig = new_figure(8, 1.2 + 0.45 * max(len(ordered), 1))
    ax = fig.subplots()
    ax.barh([k for k, _ in ordered], [v for _, v in ordered], color=SERIES_COLORS[0])
    for y, (_, v) in enumerate(ordered):
        ax.annotate(f"{v:.2f}", (v, y), textcoords="offset points", xytext=(4, -3), fontsize=8)
    ax.set(xlabel="relative importance (first objective; sums to 1)", ylabel="parameter", title=title)
    ax.set_xlim(0, max([v for _, v in ordered] + [0.01]) * 1.15)
    return save_figure(fig, path)
