"""The calibration's report: ``report.md`` and ``precision.png`` beside ``calibration.json``."""

from __future__ import annotations

import math
from pathlib import Path

from tuner.calibration import Calibration, cost_line
from tuner.results import plots
from tuner.results.files import write_text


def _label(method: str, block_steps: int | None) -> str:
    return "runs" if method == "runs" else f"steps K={block_steps}"


def _ci(ci: tuple[float, float] | None) -> str:
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "-"


def write_report(directory: Path, record: Calibration) -> Path:
    """Write the report and its plot into ``directory``; return the report's path."""
    points = [
        plots.PrecisionPoint(
            _label(p["method"], p["block_steps"]),
            p["elapsed_s"],
            100 * math.expm1(1.96 * p["log_sd"] / math.sqrt(max(p["pairs"], 1))),
            p["engine_s_per_pct"],
        )
        for p in record["precision"]
    ]
    plots.precision(directory / "precision.png", points, title=f"{record['experiment']}: A/A precision per method")
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
