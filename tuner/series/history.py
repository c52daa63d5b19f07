"""``tuner history``: change points in stored benchmark series (:mod:`tuner.series.stored`), found by Apache Otava.

Otava's e-divisive detector (the Hunter variant: windows, then weak change points merged by Student's t-test)
finds where the mean of a series shifts. Each change point carries the last commit before it and the first after
it (the commits to look at: ``before..after``), the change of the mean in percent and the t-test's p-value.
Nothing here prints: the CLI renders the records.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tuner.errors import UserError
from tuner.series.entries import Better
from tuner.series.stored import Series, load_series, select

Verdict = Literal["regression", "improvement", "change"]
PLOT_COLOR = {"regression": "worse", "improvement": "better", "change": "not_significant"}  # keys of VERDICT_COLORS


@dataclass(frozen=True)
class ChangePoint:
    """A shift of the mean between ``points[index - 1]`` (commit ``before``) and ``points[index]`` (``after``)."""

    index: int
    before: str
    after: str
    mean_before: float
    mean_after: float
    change_pct: float
    p_value: float
    verdict: Verdict


@dataclass(frozen=True)
class SeriesHistory:
    """A series, its change points and its plot."""

    series: Series
    change_points: tuple[ChangePoint, ...]
    plot: Path


# ---------------------------------------------------------------------------------------- detection


def detect(series: Series, *, max_p: float = 0.001, min_change_pct: float = 0.0) -> tuple[ChangePoint, ...]:
    """Otava's change points of ``series`` at p <= ``max_p`` and a mean change of at least ``min_change_pct``%."""
    try:
        from otava.series import AnalysisOptions, Metric
        from otava.series import Series as OtavaSeries
    except ImportError:
        raise UserError.single("apache-otava", "not installed: pip install 'vllm-hosttune[history]'") from None

    options = AnalysisOptions()
    options.max_pvalue = max_p
    options.min_magnitude = min_change_pct / 100
    values = [p.value for p in series.points]
    data = OtavaSeries(series.name, None, list(range(len(values))), {"value": Metric()}, {"value": values}, {})
    found = []
    for cp in data.analyze(options).change_points["value"]:
        index = int(cp.index)
        change = float(cp.forward_change_percent())
        found.append(
            ChangePoint(
                index=index,
                before=series.points[index - 1].commit,
                after=series.points[index].commit,
                mean_before=float(cp.mean_before()),
                mean_after=float(cp.mean_after()),
                change_pct=change,
                p_value=float(cp.pvalue()),
                verdict=_verdict(series.better, change),
            )
        )
    return tuple(found)


def _verdict(better: Better | None, change_pct: float) -> Verdict:
    if better is None or change_pct == 0:
        return "change"
    return "improvement" if (change_pct > 0) == (better == "bigger") else "regression"


# -------------------------------------------------------------------------------------------- plots


def plot_name(series: Series) -> str:
    """A file name for the series' plot: readable, filesystem-safe, unique per (suite, name)."""
    slug = re.sub(r"[^A-Za-z0-9_.=+-]+", "_", series.name).strip("_.")[:120]
    digest = hashlib.sha1(f"{series.suite}\0{series.name}".encode()).hexdigest()[:8]
    return f"{slug}-{digest}.png"


def plot(series: Series, change_points: Sequence[ChangePoint], path: Path) -> Path:
    """Values by commit, the mean of each stretch between change points, each change point marked and labelled."""
    from tuner.report import VERDICT_COLORS, new_figure, save_figure

    fig = new_figure(10, 4.2)
    ax = fig.subplots()
    xs = range(len(series.points))
    ax.plot(xs, [p.value for p in series.points], marker="o", markersize=3, linewidth=1, color="#4c72b0")
    bounds = [0, *(cp.index for cp in change_points), len(series.points)]
    for start, stop in itertools.pairwise(bounds):
        mean = sum(p.value for p in series.points[start:stop]) / (stop - start)
        ax.hlines(mean, start - 0.4, stop - 0.6, colors="#222222", linewidth=1.6)
    for cp in change_points:
        color = VERDICT_COLORS[PLOT_COLOR[cp.verdict]]
        ax.axvline(cp.index - 0.5, color=color, linestyle="--", linewidth=1.4)
        ax.annotate(
            f"{cp.change_pct:+.1f}% (p={cp.p_value:.1g})\n{cp.before[:7]}..{cp.after[:7]}",
            (cp.index - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -4),
            textcoords="offset points",
            va="top",
            fontsize=8,
            color=color,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )
    ticks = list(xs)[:: max(1, math.ceil(len(series.points) / 20))]
    ax.set_xticks(ticks, [series.points[i].commit[:7] for i in ticks], rotation=60, fontsize=7)
    ax.set_xlabel("commit (in the order stored)")
    ax.set_ylabel(series.unit or "value")
    ax.grid(True, axis="y", alpha=0.3)
    better = {"bigger": " (higher is better)", "smaller": " (lower is better)", None: ""}[series.better]
    ax.set_title(f"{series.name}{better}", fontsize=9)
    return save_figure(fig, path)


# ------------------------------------------------------------------------------------------ command


def analyse_series(
    path: Path,
    out: Path,
    *,
    patterns: Sequence[str] = (),
    max_p: float = 0.001,
    min_change_pct: float = 0.0,
) -> list[SeriesHistory]:
    """Load the series at ``path``, keep those matching ``patterns``, find their change points, plot each in ``out``."""
    chosen = select(load_series(path), patterns, path)
    results = []
    for series in chosen:
        found = detect(series, max_p=max_p, min_change_pct=min_change_pct)
        try:
            drawn = plot(series, found, out / plot_name(series))
        except OSError as exc:
            raise UserError.single(str(out), f"cannot write the plots: {exc.strerror or exc}") from None
        results.append(SeriesHistory(series, found, drawn))
    return results


def append_markdown(target: Path, text: str) -> None:
    """Append ``text`` to ``target``: every step of a GitHub job appends to ``$GITHUB_STEP_SUMMARY``."""
    try:
        with target.open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UserError.single(str(target), f"cannot write the summary: {exc.strerror or exc}") from None


def summary_markdown(results: Sequence[SeriesHistory], source: Path, max_p: float) -> str:
    """A markdown summary (for ``$GITHUB_STEP_SUMMARY``): what was analysed and every change point."""
    from tuner.report import Doc

    doc = Doc("Benchmark history: change points")
    found = [(r, cp) for r in results for cp in r.change_points]
    points = sum(len(r.series.points) for r in results)
    doc.bullets(
        [
            f"source: `{source}`: {len(results)} series, {points} points",
            f"method: Apache Otava e-divisive change-point detection, p ≤ {max_p:g}",
            f"plots: `{results[0].plot.parent}/`" if results else "plots: none",
        ]
    )
    if not found:
        doc.p("No change points.")
        return doc.markdown()
    doc.table(
        ["series", "commits", "change", "mean before → after", "p", "verdict", "plot"],
        [
            [
                r.series.name,
                f"`{cp.before[:12]}..{cp.after[:12]}`",
                f"{cp.change_pct:+.2f}%",
                f"{cp.mean_before:.4g} → {cp.mean_after:.4g} {r.series.unit}".rstrip(),
                f"{cp.p_value:.2g}",
                cp.verdict,
                r.plot.name,
            ]
            for r, cp in found
        ],
    )
    return doc.markdown()
