"""GC pacing as deployed: a larger gen0 threshold against the reference on the lifetime yardstick, measured taken
apart (the mutator step by step, the collector arm by arm: ``tuner.measure.gc_pacing``) against long run-level
pairs (the truth: each arm runs whole repetitions, collecting at its own pace), and an A/A of the same load.

    python -m benchmarks.engine.gc_pacing [--gpu-shape] [--out results/reference/gc-pacing-cpu.json]

On this CPU the engine's own garbage collection is ~0.01-0.03% of a step, so pacing it cannot be seen;
``known_gc_load`` with ``lifetime_steps`` makes objects in EngineCore that live one step (as request state lives
for a request's decode), so GC becomes a known share of the step and a larger gen0 threshold lets more of them die
young: it changes the collector's total work. The trial is the quickstart's ``gc_threshold`` (``gen0_per_seq:
64``) in the engine's processes only (the test strategy ``engine_gc_threshold``, ``tests/third_party``):
``gc_threshold`` also paces the front-end's collector, which run-level pairs see and step-level comparisons leave
out (``left_out`` in a sweep's record). The run-level record also holds each arm's wall and critical GC seconds
per run and the ratio of the time outside GC: where run-level pairs and steps differ, it says whether the collector
or the time between the engine's steps holds the difference.

``--gpu-shape`` runs the CPU engine in a GPU host's default topology (``uni`` executor, forked EngineCore, async
scheduling: the worker shares EngineCore's process and one-step blocks carry a washout) and writes
``gc-pacing-cpu-gpu-shape.json``.

The checks (``--run-level-s`` of run-level pairs against ``--budget-s`` of the decomposed comparison):

- the run-level CI excludes 1 (the yardstick's effect is real) and overlaps the decomposed CI;
- the decomposed CI is at most a third as wide for at most a fifth of the engine time;
- the decomposed A/A covers 1.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.engine.paired import gpu_shape, test_plugins_on_path
from tuner.config import load_experiment
from tuner.config.search import Objective, Pairs
from tuner.measure.gc_pacing import PacingComparison, pacing_comparison
from tuner.measure.pairing import Arms, paired_runs
from tuner.measure.workbench import Workbench
from tuner.metrics.pairs import pairs_estimate, run_pair
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records.files import write_json
from tuner.stats import RatioEstimate
from tuner.stats.product import in_orientation
from tuner.vllm.environment import environment_record

LOAD: StrategySet = {"known_gc_load": {"engine_core_objects": 6000, "refs_per_object": 20, "lifetime_steps": 1}}
TRIAL: StrategySet = {**LOAD, "engine_gc_threshold": {"gen0_per_seq": 64}}
METRIC = "output_tokens_per_s"
MIN_EFFECT = 0.01


def _interval(estimate: RatioEstimate, engine_s: float) -> dict[str, Any]:
    return {"ratio": estimate.ratio, "ci_low": estimate.ci_low, "ci_high": estimate.ci_high, "engine_s": engine_s}


def decomposed(
    bench: Workbench, trial: StrategySet, budget_s: float, seed: int
) -> tuple[dict[str, Any], PacingComparison]:
    """The comparison taken apart, as a throughput ratio (trial over reference), and its parts."""
    comparison = pacing_comparison(
        bench, LOAD, trial, block_steps=1, budget_s=budget_s, min_effect=MIN_EFFECT, seed=seed
    )
    assert comparison.estimate is not None, "the mutator measured fewer than two pairs"
    engine_s = comparison.collector_s + comparison.mutator.elapsed_s
    record = _interval(in_orientation(comparison.estimate, True), engine_s) | {"parts": comparison.to_dict()}
    return record, comparison


def run_level(bench: Workbench, budget_s: float) -> dict[str, Any]:
    """Long run-level pairs of the two arms (mirrored order): the throughput ratio end to end."""
    began = time.perf_counter()
    arms = paired_runs(
        bench, TRIAL, Pairs(min=2, max=100_000), Objective(metric=METRIC), None, seed=9, reference=LOAD,
        on_pair=lambda n, _e: time.perf_counter() - began > budget_s,
    )  # fmt: skip
    bench.switch({})
    elapsed = time.perf_counter() - began
    estimate = pairs_estimate([run_pair(METRIC, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)], METRIC)
    per_run = {arm: _wall_and_gc(arms, arm) for arm in ("reference", "trial")}
    (wall_a, gc_a), (wall_b, gc_b) = per_run["reference"], per_run["trial"]
    return _interval(estimate, elapsed) | {
        "pairs": estimate.n,
        "log_sd": estimate.log_sd,
        "p_value": estimate.p_value,
        "per_run_s": {arm: {"wall": wall, "gc": gc} for arm, (wall, gc) in per_run.items()},
        "non_gc_ratio": (wall_b - gc_b) / (wall_a - gc_a),
    }


def _wall_and_gc(arms: Arms, arm: str) -> tuple[float, float]:
    """An arm's mean wall seconds per run and the GC seconds on the critical path of its busiest process
    (EngineCore here) per run: where a run-level gap the steps do not show lies."""
    runs = getattr(arms, arm)
    wall = sum(m["wall_s"] for m in runs) / len(runs)
    return wall, sum(m["gc_critical_share_max"] * m["wall_s"] for m in runs) / len(runs)


def _width(interval: dict[str, Any]) -> float:
    return float(interval["ci_high"] / interval["ci_low"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=60.0, help="engine seconds of the decomposed comparison")
    parser.add_argument("--run-level-s", type=float, default=330.0, help="engine seconds of run-level pairs")
    parser.add_argument("--gpu-shape", action="store_true", help="uni executor, forked EngineCore, async scheduling")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    test_plugins_on_path()  # the engine-only threshold strategy
    if args.gpu_shape:
        gpu_shape()
    out = args.out or ROOT / "results" / "reference" / f"gc-pacing-cpu{'-gpu-shape' if args.gpu_shape else ''}.json"
    experiment = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    bench = Workbench.start(experiment, encode_spec({}, ["known_gc_load", "engine_gc_threshold"]))
    try:
        print(f"decomposed comparison ({args.budget_s:g} s)", flush=True)
        found, parts = decomposed(bench, TRIAL, args.budget_s, seed=1)
        print(f"  {found['ratio']:.4f} [{found['ci_low']:.4f}, {found['ci_high']:.4f}]; {parts.note()}", flush=True)
        print(f"decomposed A/A ({args.budget_s:g} s)", flush=True)
        aa, aa_parts = decomposed(bench, LOAD, args.budget_s, seed=2)
        print(f"  {aa['ratio']:.4f} [{aa['ci_low']:.4f}, {aa['ci_high']:.4f}]; {aa_parts.note()}", flush=True)
        print(f"run-level pairs ({args.run_level_s:g} s)", flush=True)
        runs = run_level(bench, args.run_level_s)
        print(
            f"  {runs['ratio']:.4f} [{runs['ci_low']:.4f}, {runs['ci_high']:.4f}] over {runs['pairs']} pairs; "
            f"time outside GC per run, trial over reference: {runs['non_gc_ratio']:.4f}",
            flush=True,
        )
    finally:
        bench.session.close()
    width_ratio = (_width(found) - 1) / (_width(runs) - 1)
    time_ratio = found["engine_s"] / runs["engine_s"]
    result: dict[str, Any] = {
        "command": "python -m benchmarks.engine.gc_pacing" + (" --gpu-shape" if args.gpu_shape else ""),
        "environment": environment_record(),
        "topology": "uni,fork,async (GPU default shape)" if args.gpu_shape else "mp, spawn, sync (CPU default)",
        "load": LOAD,
        "trial": TRIAL,
        "decomposed": found,
        "run_level": runs,
        "aa": aa,
        "width_ratio": width_ratio,
        "engine_time_ratio": time_ratio,
        "checks": {
            "run_level_excludes_1": not runs["ci_low"] <= 1 <= runs["ci_high"],
            "intervals_overlap": found["ci_low"] <= runs["ci_high"] and runs["ci_low"] <= found["ci_high"],
            "a_third_as_wide": width_ratio <= 1 / 3,
            "a_fifth_of_the_time": time_ratio <= 1 / 5,
            "aa_covers_1": aa["ci_low"] <= 1 <= aa["ci_high"],
        },
    }
    print(f"width ratio {width_ratio:.3f}, engine-time ratio {time_ratio:.3f}", result["checks"], sep="\n")
    write_json(out, result)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
