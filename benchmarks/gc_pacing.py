"""GC pacing as deployed: ``gc_threshold`` against the reference under a known GC load, at the step-level grain
the sweep chooses (blocks of several measured gen0 cycles of the slower arm, settled), against long run-level pairs
(the truth: each arm runs whole repetitions, collecting at its own pace), and each arm's gen0 collections per 1,000
steps inside the comparison against what it makes running alone.

    python -m benchmarks.gc_pacing [--out results/reference/gc-pacing-cpu.json]

On this CPU the engine's own garbage collection is ~0.01-0.03% of a step, so the effect of pacing it cannot be seen;
``known_gc_load`` makes cyclic garbage in EngineCore every step (in both arms), so GC becomes a known share of the
step and the gen0 cycle a few steps long. The checks:

- GC is at least 5% of EngineCore's step time (its collections inside the compared steps over their time);
- each arm's collections per 1,000 steps in the comparison (during its blocks' steps, and each block's settle) are
  within 15% of its own alone (so the blocks do not override the pacing they measure, as 64-step blocks did: every
  trial-arm collection was the block's settle);
- the step-level CI (as a throughput ratio, 1 / step-time ratio) covers the run-level estimate.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from tuner.config import load_experiment
from tuner.config.search import Objective, Pairs
from tuner.measure.gc_pacing import alone, measure_gc_cycles
from tuner.measure.grain import grain_for
from tuner.measure.interleave import InterleaveResult, interleaved_comparison
from tuner.measure.pairing import paired_runs
from tuner.measure.pairs import pairs_estimate, run_pair
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records.files import write_json
from tuner.vllm.environment import environment_record

REPO = Path(__file__).resolve().parent.parent
LOAD: StrategySet = {"known_gc_load": {"engine_core_objects": 300, "refs_per_object": 1000}}
TRIAL: StrategySet = {**LOAD, "gc_threshold": {"gen0_per_seq": 64}}
METRIC = "output_tokens_per_s"


def gc_share(result: InterleaveResult, arm: str) -> float | None:
    """EngineCore's GC time inside ``arm``'s compared steps over their time."""
    steps = [(dt, gc_s) for a, _, dt, gc_s in result.compared if a == arm]
    total = sum(dt for dt, _ in steps)
    return sum(gc_s for _, gc_s in steps) / total if total else None


def truth(bench: Workbench, budget_s: float) -> dict[str, Any]:
    """Long run-level pairs of the two arms (mirrored order): the throughput ratio end to end."""
    began = time.perf_counter()
    arms = paired_runs(
        bench, TRIAL, Pairs(min=2, max=100_000), Objective(metric=METRIC), None, seed=9, reference=LOAD,
        on_pair=lambda n, _e: time.perf_counter() - began > budget_s,
    )  # fmt: skip
    bench.switch({})
    estimate = pairs_estimate([run_pair(METRIC, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)], METRIC)
    return {"pairs": estimate.n, "elapsed_s": round(time.perf_counter() - began, 1)} | _ratio(estimate.to_dict())


def _ratio(data: dict[str, Any]) -> dict[str, Any]:
    return {k: data[k] for k in ("ratio", "ci_low", "ci_high", "p_value", "log_sd")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alone-s", type=float, default=20.0, help="engine seconds each arm runs alone")
    parser.add_argument("--step-budget", type=float, default=180.0, help="engine seconds of the step comparison")
    parser.add_argument("--truth-budget", type=float, default=300.0, help="engine seconds of run-level pairs")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "reference" / "gc-pacing-cpu.json")
    args = parser.parse_args()
    experiment = load_experiment(REPO / "experiments" / "quickstart.yaml")
    bench = Workbench.start(experiment, encode_spec({}, ["known_gc_load", "gc_threshold"]))
    try:
        print(f"each arm alone for {args.alone_s:g} s", flush=True)
        cycles, alone_rates = measure_gc_cycles(bench, LOAD, TRIAL, args.alone_s, seed=1)
        arms = (("reference", LOAD), ("trial", TRIAL))
        shares_alone = {arm: gc_share(alone(bench, s, 5.0, seed=3), "A") for arm, s in arms}
        grain = grain_for(TRIAL, None, cycles=cycles, budget_s=args.step_budget)
        print(grain.why, flush=True)
        step = interleaved_comparison(
            bench, LOAD, TRIAL, block_steps=grain.block_steps, settle=True, budget_s=args.step_budget, seed=7
        )
        assert step.estimate is not None, "the step comparison measured fewer than two pairs"
        print(f"run-level pairs for {args.truth_budget:g} s", flush=True)
        runs = truth(bench, args.truth_budget)
    finally:
        bench.session.close()
    est = step.estimate
    as_throughput = {"ratio": 1 / est.ratio, "ci_low": 1 / est.ci_high, "ci_high": 1 / est.ci_low}
    compared = {"reference": step.gen0_per_1000_steps["A"], "trial": step.gen0_per_1000_steps["B"]}
    pacing = {
        arm: {
            "alone": alone_rates[arm],
            "compared": compared[arm],
            "relative_difference": (compared[arm] or 0.0) / alone_rates[arm] - 1 if alone_rates[arm] else None,
        }
        for arm in ("reference", "trial")
    }
    result: dict[str, Any] = {
        "command": "python -m benchmarks.gc_pacing",
        "environment": environment_record(),
        "load": LOAD,
        "trial": TRIAL,
        "cycles": {
            "reference_steps": cycles.reference_steps, "trial_steps": cycles.trial_steps, "step_ms": cycles.step_s * 1e3
        },
        "grain": grain.why,
        "block_steps": grain.block_steps,
        "gc_share_of_step": {
            "alone": shares_alone, "compared": {"reference": gc_share(step, "A"), "trial": gc_share(step, "B")}
        },
        "gen0_per_1000_steps": pacing,
        "steps": {"pairs": est.n, "elapsed_s": round(step.elapsed_s, 1), "step_time_ratio": _ratio(est.to_dict()),
                  "as_throughput": as_throughput},
        "runs": runs,
        "checks": {
            "gc_share_at_least_5pct": min(v or 0.0 for v in shares_alone.values()) >= 0.05,
            "pacing_within_15pct": all(abs(p["relative_difference"] or 1.0) <= 0.15 for p in pacing.values()),
            "step_ci_covers_run_level": as_throughput["ci_low"] <= runs["ratio"] <= as_throughput["ci_high"],
        },
    }  # fmt: skip
    print(result["gc_share_of_step"], result["gen0_per_1000_steps"], result["steps"], runs, result["checks"], sep="\n")
    write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
