"""The calibration's report: ``report.md`` and ``precision.png`` beside ``calibration.json``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tuner.records import Calibration, cost_line, write_text


def _label(method: str, block_steps: int | None) -> str:
    return "runs" if method == "runs" else f"steps K={block_steps}"


def _ci(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-"


def write_calibration_report(directory: Path, record: Calibration) -> Path:
    """Write the report and its plot into ``directory``; return the report's path."""
    points = [
        PrecisionPoint(
            _label(p["method"], p["block_steps"]),
            p["elapsed_s"],
            100 * math.expm1(1.96 * p["log_sd"] / math.sqrt(max(p["pairs"], 1))),
            p["engine_s_per_pct"],
        )
        for p in record["precision"]
    ]
    precision_plot(directory / "precision.png", points, title=f"{record['experiment']}: A/A precision per method")
    lines = [
        f"# Calibration: {record['experiment']}",
        "",
        f"vLLM {record['vllm']}; {record['topology']['executor']}, {record['topology']['scheduling']} scheduling; "
        f"{record['created']}, {record['elapsed_s']:.0f} s.",
        "",
        f"**{cost_line(record)}.** `tuner sweep` compares at {record['recommended_block_steps']}-step blocks.",
        "",
        "## A/A noise per method",
        "",
        "| method | pairs | engine s | per-pair log SD | A/A ratio | 95% CI | engine s per +-1% |",
        "|---|---:|---:|---:|---:|---|---:|",
        *(
            f"| {_label(p['method'], p['block_steps'])} | {p['pairs']} | {p['elapsed_s']:.1f} | {p['log_sd']:.4f} | "
            f"{p['ratio'] or math.nan:.4f} | {_ci(p['ci'])} | {p['engine_s_per_pct']:.0f} |"
            for p in record["precision"]
        ),
        "",
        "![precision](precision.png)",
        "",
        "## Known delays (step-time ratio; the 99.9% CI must cover the known size)",
        "",
        "| side | delay ms | block steps | known | estimate | 95% CI | 99.9% CI | covered |",
        "|---|---:|---:|---:|---:|---|---|---|",
        *(
            f"| {r['side']} | {r['delay_ms']:.3f} | {r['block_steps']} | {r['known']:.4f} | "
            f"{r['ratio'] or math.nan:.4f} | {_ci(r['ci'])} | {_ci(r['ci_strict'])} | "
            f"{'yes' if r['covered'] else '**no**'} |"
            for r in record["recovery"]
        ),
        "",
        f"GC during the A/A: {record['gc']['gen0_collections']} gen0 collections in {record['gc']['steps']} steps "
        f"(the most of any engine process), {record['gc']['gc_share']:.3%} of its time.",
        "",
        "## Strategies on this path",
        "",
        *(f"- `{name}`: {verdict}" for name, verdict in record["strategies"].items()),
        "",
    ]
    return write_text(directory / "report.md", "\n".join(lines))


@dataclass(frozen=True)
class PrecisionPoint:
    """One method's A/A: engine seconds spent, and the +-CI half-width (in %) it reached."""

    label: str
    elapsed_s: float
    half_width_pct: float
    engine_s_per_pct: float


def precision_plot(path: Path, points: Sequence[PrecisionPoint], *, title: str) -> Path:
    """Precision against engine time per method: each measured point and its 1/sqrt(time) curve, log-log."""
    from tuner.report.figures import SERIES_COLORS, new_figure, save_figure

    fig = new_figure(7, 4.2)
    ax = fig.subplots()
    for color, point in zip(itertools.cycle(SERIES_COLORS), points, strict=False):
        if not (math.isfinite(point.engine_s_per_pct) and point.engine_s_per_pct > 0):
            continue
        times = [point.engine_s_per_pct * f for f in (0.04, 0.1, 0.25, 1, 4, 16, 64)]
        ax.plot(times, [(point.engine_s_per_pct / t) ** 0.5 for t in times], color=color, lw=1, alpha=0.6)
        ax.plot([point.elapsed_s], [point.half_width_pct], "o", color=color, label=point.label)
    ax.axhline(1.0, color="grey", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("engine seconds")
    ax.set_ylabel("95% CI half-width (%)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return save_figure(fig, path)
