"""Report sections on the critical path: GC pauses hidden vs critical per process, and tail latency explained."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from tuner.metrics import PooledAttribution, Timeline, pooled
from tuner.plugin.protocol import ProcessReport
from tuner.records import RunRecord
from tuner.report.document import Doc

PAUSE_CLASSES: tuple[Literal["critical", "hidden", "overran"], ...] = ("critical", "hidden", "overran")


def critical_rows(label: str, process_lists: Iterable[Sequence[ProcessReport]]) -> list[list[str]]:
    """Per process and class (critical, hidden): collections per generation, total, share of wall time, longest,
    summed over the measurement windows."""
    sums: dict[tuple[str, str], dict[str, Any]] = {}
    walls: defaultdict[str, float] = defaultdict(float)
    for processes in process_lists:
        for proc in processes:
            gc = proc["gc"]
            if "critical" not in gc:
                continue  # telemetry from before the classification
            name = str(proc["process_name"])
            walls[name] += float(gc["window_s"])
            for kind in PAUSE_CLASSES:
                if kind not in gc:
                    continue
                into = sums.setdefault((name, kind), {"n": [0, 0, 0], "s": 0.0, "max": 0.0})
                into["n"] = [a + b for a, b in zip(into["n"], gc[kind]["collections"], strict=True)]
                into["s"] += gc[kind]["total_s"]
                into["max"] = max(into["max"], *gc[kind]["max_pause_ms"])
    return [
        [
            label,
            name,
            kind,
            "/".join(map(str, v["n"])),
            f"{v['s'] * 1e3:.2f}",
            f"{v['s'] / walls[name]:.3%}",
            f"{v['max']:.2f}",
        ]
        for (name, kind), v in sums.items()
        if walls[name] > 0
    ]


def _share(hits: int, n: int) -> str:
    return f"{hits / n:.0%} ({hits}/{n})" if n else "-"


def attribution_rows(label: str, record: PooledAttribution) -> list[list[str]]:
    """One row per process and kind of pause: its share of each tail's samples (every row counts every tail)."""
    samples = record["samples"]
    keys = [k for k in ("all", "p99", "slo") if k in samples]
    return [
        [label, row["source"], row["what"], *(_share(row["hits"][k], samples[k]) for k in keys)]
        for row in record["rows"]
    ]


def tail_sections(
    doc: Doc,
    out: Path,
    configs: Mapping[str, tuple[Iterable[Sequence[ProcessReport]], PooledAttribution | None]],
    timeline: Timeline | None,
    *,
    title: str,
) -> None:
    """The critical-path GC table, the tail attribution table and the timeline plot; ``configs`` maps a label to
    its process lists and pooled attribution."""
    from tuner.report import gc_plots

    doc.h("GC on the critical path")
    doc.p(
        "A pause is *hidden* when the thread that ran it was blocked at a wait point (EngineCore waiting for its "
        "workers or the device, a worker for its next command, the offline front-end for engine output), else "
        "*critical*; *overran* are the hidden ones after which the wait returned at once (what it waited for had "
        "probably arrived during the pause, so part of it was on the critical path). Share is of wall time."
    )
    rows = [row for label, (lists, _) in configs.items() for row in critical_rows(label, lists)]
    headers = ["config", "process", "class", "gen0/1/2", "total ms", "share", "longest ms"]
    if rows:
        doc.table(headers, rows)
    else:
        doc.p("No classified GC telemetry in this result.")

    doc.h("Tail latency explained")
    records = {label: record for label, (_, record) in configs.items() if record}
    if not records:
        doc.p("No tail attribution in this result (no streamed tokens, or no shared clock).")
        return
    first = next(iter(records.values()))
    thresholds = first["thresholds_ms"]
    keys = [k for k in ("all", "p99", "slo") if k in first["samples"]]
    names = {"all": "all ITL", "p99": f"ITL ≥ p99 ({thresholds['p99']:.1f} ms)"}
    if "slo" in thresholds:
        names["slo"] = f"ITL > SLO ({thresholds['slo']:.1f} ms)"
    doc.p(
        "Share of inter-token samples (client side) whose interval overlaps a GC pause of each process, by generation "
        "and class, or an EngineCore step above its p99. The *all ITL* column is the chance level: a tail share far "
        "above it points at the cause."
    )
    doc.table(
        ["config", "process", "overlaps", *(names[k] for k in keys)],
        [row for label, record in records.items() for row in attribution_rows(label, record)],
    )
    if timeline:
        doc.image(
            gc_plots.timeline(out / "timeline.png", timeline, title=f"{title}: the slowest token's window"),
            "EngineCore steps, GC pauses per process and the slowest inter-token gaps in one window.",
        )


def run_tail(run: RunRecord) -> tuple[PooledAttribution | None, Timeline | None]:
    """A run's pooled attribution and its last repetition's timeline."""
    tails = [rep["tail"] for rep in run["repetitions"]]
    last = next((t for t in reversed(tails) if t), None)
    return pooled(tails), last["timeline"] if last else None
