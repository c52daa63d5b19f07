"""The projection's tables as printed (rich)."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from benchmarks.h100.recordings import CHUNK_STEPS


def mean_cell(m: dict[str, Any]) -> str:
    """Engine minutes as printed: mean over runs [min-max of the per-run figures]."""
    return f"{m['mean']:.3g} [{m['runs_range'][0]:.3g}-{m['runs_range'][1]:.3g}]"


def median_cell(m: dict[str, Any]) -> str:
    """A secondary ratio as printed: median [min-max] over runs x seeds."""
    return f"{m['median']:.3g} [{m['range'][0]:.3g}-{m['range'][1]:.3g}]"


def headline_table(headline: dict[str, Any], runs: int, seeds: int) -> Table:
    """Engine minutes per +-1% per K, synchronous and asynchronous (one washout step per block)."""
    table = Table(
        title=escape(
            f"H100 A/A steps re-paired at random phases: engine minutes for a 95% CI of +-1%, mean over {runs} runs "
            f"[min-max of per-run figures] (t 95% CI over runs), each run the mean of {seeds} random arm assignments"
        )
    )
    for column in ("K", "sync pairs/run", "sync min/+-1%", "sync CI", "async pairs/run", "async min/+-1%", "async CI"):
        table.add_column(column, justify="right")
    table.add_column("async/sync", justify="right")
    table.add_column("exact/normal s/a", justify="right")
    for key in headline["sync"]:
        sync, asyn = headline["sync"][key], headline["async"][key]
        cells = []
        for row in (sync, asyn):
            m = row["engine_min_per_pct"]
            cells += [
                "{}-{}".format(*row["pairs_per_run"]),
                mean_cell(m),
                "{:.3g}-{:.3g}".format(*m["ci95_over_runs"]),
            ]
        table.add_row(
            key,
            *cells,
            f"{asyn['engine_min_per_pct']['mean'] / sync['engine_min_per_pct']['mean']:.2f}",
            "{:.3f}/{:.3f}".format(*(r["exact_over_normal_half_width"]["median"] for r in (sync, asyn))),
        )
    return table


def adjusted_table(adjusted: dict[str, dict[str, Any]], seeds: int, calibration_seeds: int) -> Table:
    """Plain vs neighbour-drift adjusted ratio of sums per K and randomization unit."""
    table = Table(
        title=escape(
            "Ratio of sums, plain vs adjusted (benchmarks.h100.step_adjust), A/A re-paired with random offsets: engine "
            f"minutes per +-1% (exact inverted CI), mean over runs [min-max per run] ({seeds} seeds/run); A/A FPR and "
            f"coverage over chunks of {CHUNK_STEPS} steps ({calibration_seeds} seeds/run)"
        )
    )
    for column in (
        "K",
        "unit",
        "min plain",
        "min adjusted",
        "adj/plain means",
        "phase 0 p/a",
        "FPR plain",
        "FPR adj.",
        "cov. x1.01 p/a",
        "cov. +1% p/a",
        "cov. halve p/a",
        "spill share p/a",
    ):
        table.add_column(column, justify="right")

    def rate(m: dict[str, Any]) -> str:
        return f"{100 * m['rate']:.1f}% [{100 * m['ci'][0]:.1f}-{100 * m['ci'][1]:.1f}]"

    for key, row in adjusted.items():
        k, pattern = key.split("/")
        cal = row["calibration"]
        coverage = [
            f"{100 * cal[kind]['plain']['coverage']['rate']:.1f}/{100 * cal[kind]['adjusted']['coverage']['rate']:.1f}"
            for kind in ("mult", "add", "halve")
        ]
        spill = row["spill_1pct_measured_share"]
        table.add_row(
            k[1:],
            pattern,
            mean_cell(row["plain_engine_min_per_pct"]),
            mean_cell(row["adjusted_engine_min_per_pct"]),
            f"{row['adjusted_engine_min_per_pct']['mean'] / row['plain_engine_min_per_pct']['mean']:.3g}",
            "{:.3g}/{:.3g}".format(*(row["fixed_phase_engine_min_per_pct"][n]["mean"] for n in ("plain", "adjusted"))),
            rate(cal["aa"]["plain"]["false_positive"]),
            rate(cal["aa"]["adjusted"]["false_positive"]),
            *coverage,
            f"{spill['plain']:+.2f}/{spill['adjusted']:+.2f}",
        )
    return table


def per_k_table(per_k: dict[int, dict[str, Any]], runs: int, seeds: int) -> Table:
    """``per_K``: the plain ratio of sums at the recording's phase, with the log-ratio figures beside it."""
    table = Table(
        title=escape(
            "H100 A/A steps re-paired at the recording's phase (sync): engine minutes for a 95% CI of +-1%, mean "
            f"over {runs} runs [min-max per run] ({seeds} seeds/run); ratios: median [range] over runs x seeds"
        )
    )
    for column in (
        "K",
        "pairs/run",
        "log SD",
        "min/+-1% (RoS)",
        "exact/normal",
        "log-ratio SD",
        "min (log ratio)",
        "adj. SD",
        "min (adjusted)",
    ):
        table.add_column(column, justify="right")
    for k, row in per_k.items():
        table.add_row(
            str(k),
            "{}-{}".format(*row["pairs_per_run"]),
            "{:.2f}-{:.2f}".format(*row["log_sd"]),
            mean_cell(row["engine_min_per_pct"]),
            median_cell(row["exact_over_normal_half_width"]),
            "{:.2f}-{:.2f}".format(*row["log_ratio_sd"]),
            mean_cell(row["log_ratio_engine_min_per_pct"]),
            "{:.2f}-{:.2f}".format(*row["adjusted_log_sd"]),
            mean_cell(row["adjusted_engine_min_per_pct"]),
        )
    return table


def ab_line(name: str, res: dict[str, Any]) -> str:
    """One recorded A/B run checked both ways (``ab``)."""
    plain, settled, lr = res["ratio_of_sums"], res["ratio_of_sums_with_settle"], res["log_ratio"]
    return (
        f"{name} K={res['K']} {res['pairs']} pairs: step time B/A {plain['ratio']:.4f} "
        f"[{plain['ci'][0]:.4f}, {plain['ci'][1]:.4f}], with settle {settled['ratio']:.4f} "
        f"[{settled['ci'][0]:.4f}, {settled['ci'][1]:.4f}]; log ratio ({lr['pairs']} pairs) "
        f"{lr['unadjusted']['ratio']:.4f} [{lr['unadjusted']['ci'][0]:.4f}, {lr['unadjusted']['ci'][1]:.4f}], "
        f"adjusted {lr['adjusted']['ratio']:.4f} [{lr['adjusted']['ci'][0]:.4f}, {lr['adjusted']['ci'][1]:.4f}] "
        f"(beta {lr['beta']:.2f}, inside: {lr['adjusted_inside_ci']}); step_adjust "
        f"{res['step_adjusted']['ratio']:.4f} [{res['step_adjusted']['ci'][0]:.4f}, "
        f"{res['step_adjusted']['ci'][1]:.4f}]"
    )
