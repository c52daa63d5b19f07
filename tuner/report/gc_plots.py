"""PNG plots of GC and the tail for ``tuner report``: pause histograms and GC share per process, and one window
of a repetition (engine steps, GC pauses, the slowest tokens) on one time axis.

Every function takes plain numbers, draws one figure on :mod:`tuner.report.figures`' canvas, writes it atomically
and returns its path.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from tuner.plugin.protocol import tag_hidden
from tuner.report.figures import PERCENTILE_COLORS, SERIES_COLORS, grouped_bars, new_figure, save_figure


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
    fig = new_figure(10, 1.2 + 2.5 * rows)
    axes = fig.subplots(rows, 1, squeeze=False)[:, 0]
    for ax, (process, series) in zip(axes, processes.items(), strict=False):
        padded = {name: [*counts, *[0] * (n_counts - len(counts))] for name, counts in series.items()}
        grouped_bars(ax, labels, padded, SERIES_COLORS)
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
    return save_figure(fig, path)


def gc_share_rss(
    path: Path,
    processes: Sequence[str],
    share_pct: Mapping[str, Sequence[float]],
    peak_rss_mib: Mapping[str, Sequence[float]],
    *,
    title: str,
) -> Path:
    """GC share of wall time (%) and peak RSS (MiB) per process, one bar per series."""
    fig = new_figure(10, 3.8)
    left, right = fig.subplots(1, 2)
    labels = [p if len(p) <= 16 else p[:15] + "…" for p in processes]
    grouped_bars(left, labels, share_pct, SERIES_COLORS)
    left.set(title="time in GC", xlabel="process", ylabel="GC share of wall time [%]")
    grouped_bars(right, labels, peak_rss_mib, SERIES_COLORS)
    right.set(title="peak resident memory", xlabel="process", ylabel="peak RSS [MiB]")
    for ax in (left, right):
        ax.tick_params(axis="x", labelsize=8)
        ax.margins(y=0.1)
    if len(share_pct) > 1:
        fig.legend(*left.get_legend_handles_labels(), loc="outside lower center", ncol=len(share_pct), fontsize=8)
    fig.suptitle(title)
    return save_figure(fig, path)


def timeline(path: Path, window: Mapping[str, Any], *, title: str) -> Path:
    """One window of a repetition: EngineCore's steps, every process's GC pauses (critical solid, hidden hatched)
    and the slowest inter-token samples in it, on one time axis (ms from the window's start)."""
    pauses: Mapping[str, Sequence[Sequence[float]]] = window["pauses"]
    lanes = ["EngineCore steps", *(f"{name} GC" for name in pauses), "slowest tokens"]
    fig = new_figure(10, 1.0 + 0.5 * len(lanes))
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
    return save_figure(fig, path)
