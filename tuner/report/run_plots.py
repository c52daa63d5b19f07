"""PNG plots of a run for ``tuner report``: token and request throughput, and latency percentiles, per repetition.

Every function takes plain numbers, draws one figure on :mod:`tuner.report.figures`' canvas, writes it atomically
and returns its path.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from tuner.report.figures import PERCENTILE_COLORS, SERIES_COLORS, finite, grouped_bars, new_figure, save_figure


def _median(values: Sequence[float]) -> float:
    ordered = sorted(finite(values))
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def throughput(
    path: Path, reps: Sequence[str], tokens: Mapping[str, Sequence[float]], requests: Sequence[float], *, title: str
) -> Path:
    """Token throughput (grouped bars) and request throughput per repetition, each with its median."""
    fig = new_figure(9, 3.8)
    left, right = fig.subplots(1, 2, width_ratios=[2, 1])
    nice = {name: name.replace("_tokens_per_s", " tokens/s") for name in tokens}
    grouped_bars(left, reps, {nice[k]: v for k, v in tokens.items()}, SERIES_COLORS)
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
    return save_figure(fig, path)


def latency(
    path: Path, reps: Sequence[str], families: Mapping[str, Mapping[str, Sequence[float]]], *, title: str
) -> Path:
    """One panel per latency family (TTFT, TPOT, ITL, E2E): p50/p90/p99 per repetition."""
    fig = new_figure(10, 6.4)
    axes = fig.subplots(2, 2).ravel()
    for ax, (family, percentiles) in zip(axes, families.items(), strict=False):
        grouped_bars(ax, reps, percentiles, [PERCENTILE_COLORS[p] for p in percentiles])
        ax.set(title=family.upper(), xlabel="repetition", ylabel="latency [ms]")
        ax.margins(y=0.18)
        ax.legend(fontsize=8, loc="upper left", ncol=3)
    for ax in axes[len(families) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    return save_figure(fig, path)
