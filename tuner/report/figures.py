"""The canvas and palette every plot shares (matplotlib's Agg canvas, no pyplot).

Figures are built with :class:`matplotlib.figure.Figure` on a :class:`FigureCanvasAgg` directly, so nothing touches
a display, the process-wide backend or pyplot's global state; :func:`save_figure` writes each one atomically.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from tuner.records import write_bytes

DPI = 110
VERDICT_COLORS = {
    "better": "#2a9d3f",
    "worse": "#d62728",
    "no_difference": "#8c8c8c",
    "not_significant": "#f4a300",
    "inconclusive": "#f4a300",  # summaries written before the equivalence margin
    "baseline": "#222222",
}
PERCENTILE_COLORS = {"p50": "#4c72b0", "p90": "#dd8452", "p99": "#c44e52"}
SERIES_COLORS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860")


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches on its own Agg canvas (no pyplot, no display)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Figure, path: Path) -> Path:
    """Render to PNG and replace ``path`` atomically."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return write_bytes(path, buffer.getvalue())


def grouped_bars(ax: Axes, labels: Sequence[str], series: Mapping[str, Sequence[float]], colors: Sequence[str]) -> None:
    """One group of bars per label, one bar per series in it."""
    n = max(len(series), 1)
    width = 0.8 / n
    for i, (name, values) in enumerate(series.items()):
        xs = [x + (i - (n - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, values, width=width * 0.95, label=name, color=colors[i % len(colors)])
    ax.set_xticks(range(len(labels)), labels)


def finite(values: Sequence[float]) -> list[float]:
    """The finite values of a series (missing ones are nan or None)."""
    return [v for v in values if v is not None and math.isfinite(v)]
