"""Rich tables of results for the terminal."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def repetitions_table(repetitions: list[dict[str, Any]], title: str) -> Table:
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


def telemetry_table(processes: list[dict[str, Any]], title: str) -> Table:
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
