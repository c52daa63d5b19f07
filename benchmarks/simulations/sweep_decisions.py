"""Sweep-level error rates, power and bias of screening + confirmation, on the simulated host (no engine).

    python -m benchmarks.simulations.sweep_decisions [--sweeps 1000] [--out results/reference/sweep-decisions-sim.json]

Drives the harness of tests/simulation.py through the tool's real decision code (tuner.sweep.decisions,
tuner.sweep.plans, tuner.sweep.power_statements) with the default design (up to 3 candidates by screening lower
bound, each confirmed on its own plan within its own budget, one-sided 2.5% with Holm, 4 O'Brien-Fleming looks read
on each look's sign-flip test with the tool's 10,000 flips). The sweeps mix grains as a real space does: 8 trials in
short step blocks (per-pair SD ~0.036, 10 pairs/s, 20 s of screening), 6 in slow step blocks (~0.11, 0.5 pairs/s)
and 6 in run-level pairs (~0.15, a pair every 5 s), with 30 s of confirmation per candidate (the
quickstart's budgets). Prints, and writes as JSON:

1. the sweep-level false-winner rate when nothing helps;
2. the rate of screening calls ("better"/"worse (screening, unadjusted)", as the tables print them) when nothing
   helps, per trial and per sweep, by grain;
3. the power to deploy one real +1% (and +0.7%, where the power is mid-range and a wrong promise shows) step-block
   trial among the 20, against the tool's own promise made before the sweep (selection across the grains by
   screening lower bound, times that trial's own plan);
4. the bias of the reported (confirmation) effect and how often its 95% CI covers the truth.

The step grains are measured by the body of their steps, as the tool's are, its guard read at screening (a
breached guard is never nominated) and at every confirmation look (:func:`tuner.sweep.confirmation.guard_check`).
``gpu_*``: sweeps whose 8 step trials are in the H100 recordings' shape (5% of steps holding a pause past the cap:
the body's per-pair SD 0.31 against the plain mean's 0.44; 60 s of screening, 300 s of confirmation), A/A and one
real +2% trial, 1000 sweeps each. The promise counts the guard: a candidate measured by the body is confirmed
only where its guard also holds, so its power is the body's times the guard's
(:func:`tuner.stats.guarded_power`, from the whole time's per-pair SD in its screening).

Each again (``*_drift``) where the promise rests on a calibration of 300 pairs and the sweep's host noise then
stands exp(0.35 z) times where it was calibrated (:data:`tuner.stats.sd_prediction.DRIFT`, this CPU's), the 8 step
trials in heavy-tailed 1-step pairs (excess kurtosis ~23, as this CPU's): the promise is then averaged over where
the noise may stand, as the tool's is.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from scipy import stats

from tests.simulation import (
    FINE_GRAIN,
    GPU_BODY_GRAIN,
    HEAVY_GRAIN,
    RUN_GRAIN,
    SLOW_GRAIN,
    SimGrain,
    SweepOutcome,
    SweepSpec,
    run_sweeps,
)
from tuner.records.files import write_json
from tuner.report.describe import verdict_words
from tuner.stats.sd_prediction import DRIFT
from tuner.sweep.plans import Design

GRAINS: tuple[SimGrain, ...] = (FINE_GRAIN,) * 8 + (SLOW_GRAIN,) * 6 + (RUN_GRAIN,) * 6
DRIFTING_GRAINS: tuple[SimGrain, ...] = (HEAVY_GRAIN,) * 8 + (SLOW_GRAIN,) * 6 + (RUN_GRAIN,) * 6
GPU_GRAINS: tuple[SimGrain, ...] = (GPU_BODY_GRAIN,) * 8 + (SLOW_GRAIN,) * 6 + (RUN_GRAIN,) * 6
BUDGET_S = 30.0
GPU_BUDGET_S = 300.0
"""Confirmation seconds per candidate in the H100-shaped sweeps (60 s of screening per step trial): +2% is then
mid-range power."""
CALIBRATION_PAIRS = 300
"""The drifting sweeps' promise rests on a calibration of this many 1-step pairs (the quickstart's: 249-338)."""


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
    return {"rate": hits / total, "ci": [ci.low, ci.high], "hits": hits, "of": total}


def mean_ci(values: list[float]) -> dict[str, Any]:
    """A mean with its t-based 95% interval."""
    arr = np.asarray(values)
    half = float(stats.t.ppf(0.975, arr.size - 1) * arr.std(ddof=1) / math.sqrt(arr.size))
    return {"mean": float(arr.mean()), "ci": [float(arr.mean()) - half, float(arr.mean()) + half]}


def screening_calls(outcomes: list[SweepOutcome], grains: tuple[SimGrain, ...]) -> dict[str, Any]:
    """Screening "better"/"worse" calls per trial and per sweep, by grain, labelled as the tables print them."""
    out: dict[str, Any] = {}
    for verdict in ("better", "worse"):
        label = verdict_words(verdict, screening=True)
        per_grain = {}
        for grain in dict.fromkeys(grains):
            index = [j for j, g in enumerate(grains) if g == grain]
            calls = sum(o.screening_calls[j] == verdict for o in outcomes for j in index)
            per_grain[grain.name] = rate(calls, len(outcomes) * len(index))
        any_call = sum(any(c == verdict for c in o.screening_calls) for o in outcomes)
        out[label] = {"per_trial": per_grain, "sweeps_with_one": rate(any_call, len(outcomes))}
    return out


def summarize(outcomes: list[SweepOutcome], gain: float, grains: tuple[SimGrain, ...]) -> dict[str, Any]:
    """What the sweeps deployed, how many pairs they spent, and (with a real gain) power and the effect's error."""
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
        achieved = rate(len(real), len(outcomes))
        promised = float(np.nanmean([o.promised for o in outcomes]))
        out |= {
            "power": achieved,
            "promised": promised,
            "promised_minus_achieved_points": 100 * (promised - achieved["rate"]),
            "selected": float(np.mean([o.selected for o in outcomes])),
            "bias_log": mean_ci(errors) if len(errors) > 1 else None,
            "coverage": float(np.mean([e.ci_low <= 1 + gain <= e.ci_high for e in reported])) if reported else None,
            "repeated_coverage": (
                float(np.mean([o.repeated[0] <= 1 + gain <= o.repeated[1] for o in real if o.repeated]))
                if real
                else None
            ),
        }
    else:
        out["screening_calls"] = screening_calls(outcomes, grains)
    return out


def describe(name: str, summary: dict[str, Any]) -> str:
    wrong = summary["false_winner"]
    line = f"{name}: false winner {wrong['rate']:.1%} [{wrong['ci'][0]:.1%}, {wrong['ci'][1]:.1%}]"
    if "power" in summary:
        power = summary["power"]
        line += (
            f"; deployed {power['rate']:.1%} [{power['ci'][0]:.1%}, {power['ci'][1]:.1%}] against "
            f"{summary['promised']:.1%} promised ({summary['promised_minus_achieved_points']:+.1f} points); "
            f"selected {summary['selected']:.1%}"
        )
        if summary["bias_log"]:
            bias = summary["bias_log"]
            line += f"; effect bias {bias['mean']:+.2%} [{bias['ci'][0]:+.2%}, {bias['ci'][1]:+.2%}]"
            line += f", CI coverage {summary['coverage']:.1%} (the interval inverting the decision: "
            line += f"{summary['repeated_coverage']:.1%})"
    for label, calls in summary.get("screening_calls", {}).items():
        per_trial = ", ".join(f"{g} {r['rate']:.2%}" for g, r in calls["per_trial"].items())
        line += f"\n  '{label}' per trial: {per_trial}; sweeps with one: {calls['sweeps_with_one']['rate']:.1%}"
    return line + f"; confirmation pairs per candidate {summary['used_pairs']:.0f} of {summary['planned_pairs']:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweeps", type=int, default=1000, help="simulated A/A sweeps (x2 with a real gain)")
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", type=Path, default=Path("results/reference/sweep-decisions-sim.json"))
    args = parser.parse_args()
    console = Console(soft_wrap=True)
    design = Design()
    began = time.perf_counter()
    result: dict[str, Any] = {
        "config": {
            "sweeps": args.sweeps,
            "seed": args.seed,
            "budget_s": BUDGET_S,
            "design": vars(design),
            "grains": {
                name: [
                    {"name": g.name, "trials": grains.count(g), "pairs_per_s": g.pairs_per_s,
                     "screening_pairs": g.screening_pairs, "body": g.body}
                    for g in dict.fromkeys(grains)
                ]
                for name, grains in (("stationary", GRAINS), ("drift", DRIFTING_GRAINS), ("gpu", GPU_GRAINS))
            },
            "drift": {"host_drift": DRIFT, "calibration_pairs": CALIBRATION_PAIRS},
        }
    }  # fmt: skip
    scenarios = (
        ("aa", 0.0, args.sweeps),
        ("step_gain_1pct", 0.01, 2 * args.sweeps),
        ("step_gain_0.7pct", 0.007, 2 * args.sweeps),
    )
    runs = [(name, gain, sweeps, drift, DRIFTING_GRAINS if drift else GRAINS, BUDGET_S)
            for (name, gain, sweeps), drift in itertools.product(scenarios, (False, True))]  # fmt: skip
    runs += [
        ("gpu_aa", 0.0, args.sweeps, False, GPU_GRAINS, GPU_BUDGET_S),
        ("gpu_step_gain_2pct", 0.02, args.sweeps, False, GPU_GRAINS, GPU_BUDGET_S),
    ]
    for name, gain, sweeps, drift, grains, budget_s in runs:
        spec = SweepSpec(
            gains=(gain,) + (0.0,) * (len(grains) - 1), grains=grains, budget_s=budget_s, design=design,
            report_flips=10_000, host_drift=DRIFT if drift else 0.0,
            calibration_pairs=CALIBRATION_PAIRS if drift else 0,
        )  # fmt: skip
        key = f"{name}_drift" if drift else name
        result[key] = summary = summarize(run_sweeps(spec, sweeps, args.seed), gain, grains)
        console.print(describe(key, summary))
    result["seconds"] = round(time.perf_counter() - began, 1)
    write_json(args.out, rounded(result))
    console.print(f"wrote {args.out} ({result['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
