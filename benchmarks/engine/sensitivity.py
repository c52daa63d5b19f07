"""Engine seconds per +-1% for run-level pairs, the old step level (16-step blocks) and the grain chosen now,
for a known delay in EngineCore and one in the worker, on the engine at hand; and the A/A false-positive rate.

    python -m benchmarks.engine.sensitivity [--gpu-shape] [--out results/reference/sensitivity-cpu.json]

One engine (the quickstart's), every comparison paired on it. For each side of the pipeline a busy-wait of 2% of
a step (:class:`strategies.known_delay.KnownDelay`) is measured by each method for the same budget; each gives its
estimate, whether its CI covers the known size, and the engine seconds a +-1% CI would need ((seconds per pair) x
(1.96 x per-pair log SD / log 1.01)^2). Then an A/A at the chosen grain in which every engine process switches per
batch is cut into >= 100 comparisons of ``--aa-pairs`` pairs: the share called different must be about 5% (with
its Clopper-Pearson 95% interval). ``--gpu-shape`` runs the CPU engine in a GPU host's default topology
(worker inside EngineCore, forked, async scheduling with its batch queue; the test plugin in tests/third_party).

The committed references were made while a step block could end in a ``gc.collect(0)`` ("settled"): their old
level is 16-step settled blocks, and they hold a ``gc_threshold`` row at settled 16- and 128-step blocks. The
settle went with GC pacing's decomposition (933dc0a; GC thresholds are measured by ``benchmarks.engine.gc_pacing``),
so a new run's old level is 16-step blocks as the comparison makes them now, and it has no ``gc_threshold`` row.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

from scipy.stats import binomtest

from benchmarks import ROOT
from benchmarks.engine.paired import gpu_shape
from tuner.config import load_experiment
from tuner.config.search import Objective, Pairs
from tuner.measure.grain import DEFAULT_BLOCK_STEPS
from tuner.measure.interleave import InterleaveResult, interleaved_comparison
from tuner.measure.pairing import paired_runs
from tuner.measure.workbench import Workbench
from tuner.metrics.pairs import pairs_estimate, run_pair
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records.calibration import engine_s_per_pct
from tuner.records.files import write_json
from tuner.stats import RatioEstimate
from tuner.vllm.environment import environment_record

SWITCH_ONLY: StrategySet = {"known_delay": {}}
SHARE = 0.02
OLD_BLOCK_STEPS = 16


def _row(estimate: RatioEstimate | None, pairs: int, elapsed_s: float, known: float | None) -> dict[str, Any]:
    if estimate is None:
        return {"pairs": pairs, "elapsed_s": elapsed_s, "estimate": None}
    return {
        "pairs": pairs,
        "elapsed_s": round(elapsed_s, 1),
        "estimate": round(estimate.ratio, 5),
        "ci": [round(estimate.ci_low, 5), round(estimate.ci_high, 5)],
        "known": None if known is None else round(known, 5),
        "covered": None if known is None else estimate.ci_low <= known <= estimate.ci_high,
        "engine_s_per_pct": round(engine_s_per_pct(elapsed_s / max(pairs, 1), estimate.log_sd), 1),
    }


def _steps(bench: Workbench, a: StrategySet, b: StrategySet, k: int, budget: float, seed: int) -> InterleaveResult:
    return interleaved_comparison(bench, a, b, block_steps=k, budget_s=budget, seed=seed)


def _step_row(result: InterleaveResult, delay_s: float | None) -> dict[str, Any]:
    known = None
    if delay_s is not None and result.sums:
        known = 1 + delay_s * sum(a[0] for a, _ in result.sums) / sum(a[1] for a, _ in result.sums)
    return {"block_steps": result.block_steps} | _row(result.estimate, len(result.sums), result.elapsed_s, known)


def _runs(bench: Workbench, trial: StrategySet, budget: float, step_s: float, delay_s: float) -> dict[str, Any]:
    metric = "output_tokens_per_s"
    began = time.perf_counter()
    arms = paired_runs(
        bench, trial, Pairs(min=2, max=10_000), Objective(metric=metric), None, seed=5,
        on_pair=lambda n, _e: time.perf_counter() - began > budget,
    )  # fmt: skip
    elapsed = time.perf_counter() - began
    bench.switch({})
    estimate = pairs_estimate([run_pair(metric, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)], metric)
    # The throughput ratio of a delay that adds delay_s to a step of step_s (decode-dominated runs).
    return {"block_steps": None} | _row(estimate, len(arms.trial), elapsed, step_s / (step_s + delay_s))


def _false_positives(result: InterleaveResult, size: int) -> dict[str, Any]:
    chunks = [result.sums[i : i + size] for i in range(0, len(result.sums) - size + 1, size)]
    different = 0
    for chunk in chunks:
        estimate = InterleaveResult(estimate=None, sums=chunk).estimate_at(0.95)
        different += estimate is not None and estimate.verdict in ("better", "worse")
    interval = binomtest(different, len(chunks), 0.05).proportion_ci(confidence_level=0.95, method="exact")
    return {
        "block_steps": result.block_steps,
        "pairs_per_comparison": size,
        "comparisons": len(chunks),
        "called_different": different,
        "rate": different / max(len(chunks), 1),
        "rate_ci95": [round(interval.low, 4), round(interval.high, 4)],
        "elapsed_s": round(result.elapsed_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-shape", action="store_true", help="uni executor, forked EngineCore, async scheduling")
    parser.add_argument("--budget", type=float, default=40.0, help="engine seconds per method and side")
    parser.add_argument("--aa-budget", type=float, default=150.0)
    parser.add_argument("--aa-pairs", type=int, default=12, help="pairs per A/A comparison")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.gpu_shape:
        gpu_shape()
    out = args.out or ROOT / "results" / "reference" / f"sensitivity-cpu{'-gpu-shape' if args.gpu_shape else ''}.json"
    experiment = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    bench = Workbench.start(experiment, encode_spec({}, ["known_delay"]))
    try:
        k = DEFAULT_BLOCK_STEPS
        pilot = _steps(bench, {}, SWITCH_ONLY, k, 10, seed=1)
        step_s = pilot.mean_step_s["A"] or 0.02
        delay_s = SHARE * step_s
        result: dict[str, Any] = {
            "command": "python -m benchmarks.engine.sensitivity" + (" --gpu-shape" if args.gpu_shape else ""),
            "environment": environment_record(),
            "topology": "uni,fork,async (GPU default shape)" if args.gpu_shape else "mp, spawn, sync (CPU default)",
            "mean_step_ms": round(step_s * 1e3, 3),
            "known_delay_share": SHARE,
            "budget_s": args.budget,
            "sides": {},
        }
        for side in ("engine_core", "worker"):
            delayed = {"known_delay": {f"{side}_ms": delay_s * 1e3}}
            print(f"{side}: known delay {delay_s * 1e3:.3f} ms", flush=True)
            rows = {
                "runs": _runs(bench, delayed, args.budget, step_s, delay_s),
                f"steps_K{OLD_BLOCK_STEPS}": _step_row(
                    _steps(bench, SWITCH_ONLY, delayed, OLD_BLOCK_STEPS, args.budget, seed=2), delay_s
                ),
                f"steps_K{k}": _step_row(_steps(bench, SWITCH_ONLY, delayed, k, args.budget, seed=3), delay_s),
            }
            runs_cost = rows["runs"].get("engine_s_per_pct") or math.inf
            rows["runs_over_new"] = round(runs_cost / rows[f"steps_K{k}"]["engine_s_per_pct"], 1)
            rows["old_over_new"] = round(
                rows[f"steps_K{OLD_BLOCK_STEPS}"]["engine_s_per_pct"] / rows[f"steps_K{k}"]["engine_s_per_pct"],
                2,
            )
            result["sides"][side] = rows
            print(rows, flush=True)
        print("A/A", flush=True)
        result["aa"] = _false_positives(_steps(bench, {}, SWITCH_ONLY, k, args.aa_budget, seed=4), args.aa_pairs)
        print(result["aa"], flush=True)
    finally:
        bench.session.close()
    write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
