"""Report sections a run and a sweep share: GC per process, and the environment."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tuner.report.describe import (
    ProcessGc,
    environment_rows,
)
from tuner.report.document import Doc


def gc_sections(doc: Doc, out: Path, series: dict[str, list[ProcessGc]], *, title: str, intro: str = "") -> None:
    from tuner.report import gc_plots

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
            gc_plots.gc_histograms(
                out / "gc_pauses.png",
                edges,
                {f"{name} ({roles[name] or '-'})": counts for name, counts in hist.items()},
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
        gc_plots.gc_share_rss(out / "gc_memory.png", names, share, rss, title=f"{title}: GC share and peak RSS"),
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


def environment_section(doc: Doc, env: Mapping[str, Any], engine_args: Mapping[str, Any] | None) -> None:
    doc.h("Environment")
    doc.table(["key", "value"], environment_rows(env) or [["-", "-"]])
    if engine_args:
        doc.p("Engine arguments:")
        doc.table(["argument", "value"], [[k, str(v)] for k, v in engine_args.items()])
