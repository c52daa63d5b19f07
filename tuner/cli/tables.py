"""Rich tables of results for the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from tuner.feedback import TableData
from tuner.records import Calibration, CapacityRecord
from tuner.report import LEVEL_COLUMNS, level_rows, verdict_words


def render(data: TableData) -> Table:
    """A library table as a rich table (cells are plain text, never markup)."""
    table = Table(title=data.title, caption=data.caption)
    for column in data.columns:
        table.add_column(column)
    for row in data.rows:
        table.add_row(*(Text(cell) for cell in row))
    return table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def repetitions_table(repetitions: Sequence[Mapping[str, Any]], title: str) -> Table:
    table = Table(title=title)
    for column in (
        "rep",
        "req/s",
        "out tok/s",
        "total tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL p50",
        "ITL p99",
        "E2E p99",
    ):
        table.add_column(column, justify="right")
    for rep in repetitions:
        m = rep["metrics"]
        table.add_row(
            str(rep["index"] + 1),
            f"{m['requests_per_s']:.2f}",
            f"{m['output_tokens_per_s']:.1f}",
            f"{m['total_tokens_per_s']:.1f}",
            _ms(m["ttft_ms"]["p50"]),
            _ms(m["ttft_ms"]["p99"]),
            _ms(m["tpot_ms"]["p50"]),
            _ms(m["itl_ms"]["p50"]),
            _ms(m["itl_ms"]["p99"]),
            _ms(m["e2e_ms"]["p99"]),
        )
    table.caption = "latencies in ms"
    return table


def telemetry_table(processes: Sequence[Mapping[str, Any]], title: str) -> Table:
    table = Table(title=title)
    for column in (
        "process",
        "roles",
        "gen0/1/2",
        "GC s",
        "GC share",
        "max pause ms",
        "critical GC s (gen0/1/2)",
        "critical max ms",
        "frozen",
        "peak RSS MiB",
        "active strategies",
    ):
        table.add_column(column, justify="left" if column in {"process", "roles", "active strategies"} else "right")
    for proc in processes:
        gc = proc["gc"]
        table.add_row(
            f"{proc['process_name']} ({proc['pid']})",
            ",".join(proc["roles"]) or "-",
            "/".join(str(c) for c in gc["collections"]),
            f"{gc['gc_total_s']:.4f}",
            f"{gc['gc_share']:.3%}",
            f"{gc['max_pause_ms']:.2f}",
            f"{gc['critical']['total_s']:.4f} ({'/'.join(str(c) for c in gc['critical']['collections'])})",
            f"{gc['critical_max_pause_ms']:.2f}",
            str(gc["freeze_count"]),
            f"{gc['peak_rss_bytes'] / 2**20:.0f}",
            ", ".join(proc["active"]) or "-",
        )
    return table


def compare_table(result: dict[str, Any]) -> Table:
    a, b = result["a"], result["b"]
    table = Table(
        title=f"B / A — A: {a['label']} · B: {b['label']}", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True
    )
    table.add_column("metric", no_wrap=True)
    table.add_column("A", justify="right", no_wrap=True)
    table.add_column("B", justify="right", no_wrap=True)
    table.add_column("B/A (95% CI)", justify="right", no_wrap=True)
    table.add_column("p", justify="right", no_wrap=True)
    table.add_column("verdict", min_width=11)
    styles = {"better": "green", "worse": "red"}
    for row in result["metrics"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.3f}"
        if row["ci_low"] is not None and row["ci_high"] is not None:
            ratio += f" ({row['ci_low']:.2f}–{row['ci_high']:.2f})"
        style = styles.get(row["verdict"] or "", "")
        verdict = verdict_words(row["verdict"], screening=False)
        table.add_row(
            row["metric"],
            _num(row["a_median"]),
            _num(row["b_median"]),
            ratio,
            "-" if row["p_value"] is None else f"{row['p_value']:.2g}",
            f"[{style}]{verdict}[/{style}]" if style else verdict,
        )
    return table


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"


def calibration_table(record: Calibration) -> Table:
    """Engine seconds per +-1% per method, the recommended grain marked, and the known-delay checks."""
    table = Table(title=f"{record['experiment']}: what a +-1% CI costs per method ({record['topology']['executor']})")
    for column in ("method", "pairs", "engine s", "A/A 95% CI", "engine s per ±1%"):
        table.add_column(column)
    for p in record["precision"]:
        chosen = p["method"] == "steps" and p["block_steps"] == record["recommended_block_steps"]
        label = "runs" if p["method"] == "runs" else f"steps K={p['block_steps']}" + (" ← chosen" if chosen else "")
        ci = f"[{p['ci'][0]:.4f}, {p['ci'][1]:.4f}]" if p["ci"] else "-"
        table.add_row(label, str(p["pairs"]), f"{p['elapsed_s']:.0f}", ci, f"{p['engine_s_per_pct']:.0f}")
    for r in record["recovery"]:
        ci = f"[{r['ci'][0]:.4f}, {r['ci'][1]:.4f}]" if r["ci"] else "-"
        verdict = "covered (99.9% CI)" if r["covered"] else "NOT covered (99.9% CI)"
        table.add_row(
            f"known {r['side']} delay, K={r['block_steps']}", "", "", ci, f"known {r['known']:.4f}: {verdict}"
        )
    return table


def capacity_table(record: CapacityRecord) -> Table:
    """Each probed load: both arms' attainment and their paired per-request difference."""
    table = Table(title=f"{record['experiment']}: attainment per load ({record['search']['unit']})")
    for column in LEVEL_COLUMNS:
        table.add_column(column)
    for row in level_rows(record):
        table.add_row(*row)
    return table
