"""``tuner dashboard``: github-action-benchmark's charts, rendered from ``tuner export bench`` files.

For a README or a report where the live gh-pages page cannot be shown: each file is one run (in the order
given), each entry name one series, its ``range`` (``0.98-1.05x (95% CI)`` for ratios) the CI drawn around the
value. Which way is better comes from the file name (``...-bigger.json`` / ``...-smaller.json``), as the action's
``tool`` says it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from matplotlib.lines import Line2D

from tuner.report import SERIES_COLORS, VERDICT_COLORS, new_figure, save_figure
from tuner.series.entries import Better, better_of, read_entries

RATIO_RANGE = re.compile(r"^(?P<low>[0-9.]+)-(?P<high>[0-9.]+)x\b")
PART = re.compile(r"-?((ratio|absolute)-)?(bigger|smaller)$")  # the files of one run differ only in this part
ALERT = {"bigger": 1.05, "smaller": 1.10}  # the perf workflow's alert thresholds on ratio series (105%, 110%)


@dataclass(frozen=True)
class BenchPoint:
    """One run's value of a series, with the CI its ``range`` gives (ratios only)."""

    run: str  # the run's label on the x axis (a commit, a file)
    value: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class BenchSeries:
    """One entry name's values over the runs, in the order the files were given."""

    name: str
    unit: str
    better: Better | None  # None: not known
    points: list[BenchPoint]


def _ci(text: str | None) -> tuple[float | None, float | None]:
    match = RATIO_RANGE.match(text or "")
    return (float(match["low"]), float(match["high"])) if match else (None, None)


def load(exports: Sequence[Path]) -> list[BenchSeries]:
    """Every series in ``exports`` (a file per run and kind, named ``<run>-<series>-<kind>.json`` as ``tuner export
    bench`` writes them: ``<run>`` labels the run), in the order the names first appear."""
    points: dict[str, tuple[str, Better | None, list[BenchPoint]]] = {}
    for path in exports:
        better = better_of(path.stem)
        for entry in read_entries(path):
            low, high = _ci(entry.get("range"))
            point = BenchPoint(PART.sub("", path.stem) or path.stem, float(entry["value"]), low, high)
            points.setdefault(entry["name"], (entry["unit"], better, []))[2].append(point)
    return [BenchSeries(name, unit, better, pts) for name, (unit, better, pts) in points.items()]


def render(exports: Sequence[Path], out: Path, title: str) -> Path:
    """Draw every series of ``exports`` into one PNG at ``out``."""
    return dashboard(out, load(exports), title=title, alert=ALERT)


def dashboard(path: Path, series: Sequence[BenchSeries], *, title: str, alert: Mapping[str, float]) -> Path:
    """github-action-benchmark's chart page, drawn here: one small chart per series, its value per run with the
    95% CI, 1 (the baseline) marked for ratios and the value at which the action would alert after the last
    point (``alert[better]``, e.g. 1.05 for 105%)."""
    columns = 2 if len(series) > 1 else 1
    rows = math.ceil(len(series) / columns)
    fig = new_figure(5.2 * columns, 0.8 + 2.3 * rows)
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
    return save_figure(fig, path)


def _wrap(text: str, width: int) -> str:
    """Wrap a series name at its ``/`` and ``+`` separators (names are long and have no spaces)."""
    lines, line = [], ""
    for part in text.replace("+", "+\x00").replace("/", "/\x00").split("\x00"):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    return "\n".join([*lines, line])
