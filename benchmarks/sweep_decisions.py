"""Sweep-level error rates, power and bias of screening + confirmation, on the simulated host (no engine).

    python -m benchmarks.sweep_decisions [--sweeps 1000] [--out results/reference/sweep-decisions-sim.json]

Drives the harness of tests/simulation.py (step blocks with per-pair SD 0.15, AR(1) host drift, heavy tails, rare
long pauses, mirrored order) through tuner.sweep.decisions with the default design (up to 3 candidates by
screening lower bound, confirmation sized for min_effect 1% at power 0.8, one-sided 2.5% with Holm, 4
O'Brien-Fleming looks) and the default screening budget (120 s of steps at 89 pairs/min = 178 pairs per trial).
Prints, and writes as JSON:
1. the sweep-level false-winner rate under A/A with 20 trials;
2. the power to deploy one real +2% or +1% trial among 20, against the plan's own promise;
3. the bias of the reported (confirmation) effect with its 95% CI, and how often the reported CI covers the truth
   (that CI inverts the sign-flip test, from 2000 flips, as the tool computes it; the screening rank and the
   confirmation looks are estimated with a handful of flips, so their bounds are the BCa bootstrap's);
4. the power statement for this budget, and for run-level pairs on the GPU host.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from scipy import stats

from tests.simulation import PAIRS_PER_MINUTE, SCREENING_PAIRS, STEP_HOST, SweepOutcome, SweepSpec, run_sweeps
from tuner.results.files import write_json
from tuner.sweep.decisions import Design, power_statement

TRIALS = 20
REPORT_RESAMPLES = 2000  # the reported effect's CI as the tool computes it


def rounded(value: Any) -> Any:
    """``value`` with every float cut to 5 significant digits (a small, readable JSON)."""
    if isinstance(value, float):
        return float(f"{value:.5g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def rate(hits: int, total: int) -> dict[str, Any]:
    """A proportion with its Wilson 95% interval."""
    ci = stats.binomtest(hits, total).proportion_ci(method="wilson")
    return {"rate": hits / total, "ci": [ci.low, ci.high], "hits": hits, "sweeps": total}


def mean_ci(values: list[float]) -> dict[str, Any]:
    """A mean with its t-based 95% interval."""
    arr = np.asarray(values)
    half = float(stats.t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / math.sqrt(arr.size))
    return {"mean": float(arr.mean()), "ci": [float(arr.mean()) - half, float(arr.mean()) + half]}


def summarize(outcomes: list[SweepOutcome], gain: float) -> dict[str, Any]:
    """What the sweeps deployed, how many pairs they spent, and (with a real gain) the reported effect's error."""
    deployed = [o for o in outcomes if o.winner is not None]
    real = [o for o in deployed if o.winner_gain and o.winner_gain > 0]
    out: dict[str, Any] = {
        "false_winner": rate(len(deployed) - len(real), len(outcomes)),
        "planned_pairs": float(np.mean([o.planned_pairs for o in outcomes])),
        "used_pairs": float(np.mean([o.used_pairs for o in outcomes])),
    }
    if gain > 0:
        reported = [o.effect for o in real if o.effect]
        errors = [math.log(e.ratio) - math.log1p(gain) for e in reported]
        out |= {
            "power": rate(len(real), len(outcomes)),
            "promised": float(np.nanmean([o.promised for o in outcomes])),
            "selected": float(np.mean([o.selected for o in outcomes])),
            "bias_log": mean_ci(errors),
            "reported_ci_half_width": float(np.mean([math.log(e.ci_high / e.ci_low) / 2 for e in reported])),
            "coverage": float(np.mean([e.ci_low <= 1 + gain <= e.ci_high for e in reported])),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweeps", type=int, default=1000, help="simulated sweeps per scenario")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", type=Path, default=Path("results/reference/sweep-decisions-sim.json"))
    args = parser.parse_args()
    console = Console(soft_wrap=True)
    design = Design()
    began = time.perf_counter()
    result: dict[str, Any] = {
        "config": {
            "trials": TRIALS,
            "sweeps": args.sweeps,
            "seed": args.seed,
            "screening_pairs": SCREENING_PAIRS,
            "design": vars(design),
            "host": vars(STEP_HOST),
        }
    }
    for name, gain in (("aa", 0.0), ("gain_2pct", 0.02), ("gain_1pct", 0.01)):
        spec = SweepSpec(gains=(gain,) + (0.0,) * (TRIALS - 1), design=design, report_resamples=REPORT_RESAMPLES)
        result[name] = summary = summarize(run_sweeps(spec, args.sweeps, args.seed), gain)
        wrong = summary["false_winner"]
        line = f"{name}: false winner {wrong['rate']:.1%} [{wrong['ci'][0]:.1%}, {wrong['ci'][1]:.1%}]"
        if gain > 0:
            power, bias = summary["power"], summary["bias_log"]
            line += (
                f"; +{gain:.0%} deployed {power['rate']:.1%} [{power['ci'][0]:.1%}, {power['ci'][1]:.1%}] "
                f"(promised {summary['promised']:.1%}, selected {summary['selected']:.1%}); reported effect bias "
                f"{bias['mean']:+.2%} [{bias['ci'][0]:+.2%}, {bias['ci'][1]:+.2%}] against a CI half-width of "
                f"{summary['reported_ci_half_width']:.2%}, CI coverage {summary['coverage']:.1%}"
            )
        line += f"; confirmation pairs per candidate {summary['used_pairs']:.0f} of {summary['planned_pairs']:.0f}"
        console.print(line)

    statements = {
        "steps_cpu": power_statement(
            0.15, trials=TRIALS, screening_pairs=SCREENING_PAIRS, design=design, pairs_per_minute=PAIRS_PER_MINUTE
        ),
        "runs_gpu": power_statement(0.13, trials=TRIALS, screening_pairs=12, design=design, pairs_per_minute=2.4),
    }
    result["power_statement"] = {key: s.lines() for key, s in statements.items()}
    for key, statement in statements.items():
        console.print(f"power statement ({key}):")
        for text in statement.lines():
            console.print(f"  {text}")
    result["seconds"] = round(time.perf_counter() - began, 1)
    write_json(args.out, rounded(result))
    console.print(f"wrote {args.out} ({result['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
