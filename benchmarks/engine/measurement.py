"""Benchmarks of the measurement itself on the engine at hand (CPU here, a GPU host where available).

    python -m benchmarks.engine.measurement [--quick] [--out results/reference/measurement-cpu.json]

Prints, and writes as JSON:
1. switching a strategy set on a running engine vs starting an engine (issue: "switch < 1 s");
2. run-level A/A: the share of >= 20 paired A/A comparisons called significant (should be <= 5%);
3. for the same wall-clock budget, the 95% CI width of the ratio reached by run-level pairs and by
   step-level interleaving (both A/A, so both should contain 1).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from tuner.config import Experiment
from tuner.config.search import Objective, Pairs
from tuner.measure.interleave import interleaved_comparison
from tuner.measure.pairing import paired_runs
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records.files import write_json
from tuner.stats import false_positive_rate
from tuner.vllm.environment import environment_record

ENGINE = {
    "model": "builtin:opt-tiny",
    "max_num_seqs": 32,
    "max_model_len": 512,
    "enforce_eager": True,
    "gpu_memory_utilization": 0.2,
    "dtype": "float32",  # 3x faster than bf16 on CPUs without bf16 units
}
STRATEGIES = ["gc_threshold", "shared_empty_kv_blocks"]


def experiment(engine: dict[str, Any]) -> Experiment:
    return Experiment.model_validate(
        {
            "name": "measurement-bench",
            "engine": engine,
            "workload": {
                "num_prompts": engine["max_num_seqs"],
                "input_len": {"dist": "fixed", "value": 16},
                "output_len": {"dist": "fixed", "value": 64},
            },
            "measure": {"warmup_prompts": 8},
        }
    )


def start(engine: dict[str, Any]) -> Workbench:
    return Workbench.start(experiment(engine), encode_spec({}, STRATEGIES))


def width(est: Any) -> float:
    return est.ci_high / est.ci_low - 1


def switch_vs_restart(engine: dict[str, Any], console: Console) -> tuple[dict[str, Any], Workbench]:
    """Switching a strategy set in place, 30 times, against a cold and a warm engine start; the warm engine back."""
    bench = start(engine)
    switch_s = []
    sets: list[StrategySet] = [
        {"gc_threshold": {"gen0_per_seq": 64}},
        {"shared_empty_kv_blocks": {"enabled": False}},
        {},
    ]
    for i in range(30):
        began = time.perf_counter()
        bench.switch(sets[i % len(sets)])
        switch_s.append(time.perf_counter() - began)
    first_start = bench.session.start_s
    bench.session.close()
    bench = start(engine)  # a second (warm) start
    console.print(
        f"switch a strategy set in place: median {statistics.median(switch_s) * 1e3:.1f} ms, "
        f"max {max(switch_s) * 1e3:.1f} ms; engine start {first_start:.1f} s / {bench.session.start_s:.1f} s"
    )
    return {
        "switch_ms_median": statistics.median(switch_s) * 1e3,
        "switch_ms_max": max(switch_s) * 1e3,
        "engine_start_s": [first_start, bench.session.start_s],
    }, bench


def run_level_aa(bench: Workbench, comparisons: int, pairs_per: int, console: Console) -> dict[str, Any]:
    """``comparisons`` run-level A/As of ``pairs_per`` pairs each: how many are called different."""
    objective = Objective(metric="output_tokens_per_s")
    estimates = []
    began = time.perf_counter()
    for i in range(comparisons):
        arms = paired_runs(bench, {}, Pairs(min=pairs_per, max=pairs_per), objective, None, seed=i)
        estimates.append(arms.ratio(objective.metric))
    fpr = false_positive_rate(estimates)
    console.print(
        f"run-level A/A: {sum(e.verdict in ('better', 'worse') for e in estimates)} of {comparisons} "
        f"comparisons significant ({fpr:.0%}); per-pair log-ratio SD "
        f"{statistics.median(e.log_sd for e in estimates):.3f}"
    )
    return {
        "comparisons": comparisons,
        "pairs_each": pairs_per,
        "false_positive_rate": fpr,
        "log_sd_median": statistics.median(e.log_sd for e in estimates),
        "seconds": time.perf_counter() - began,
    }


def equal_budget(bench: Workbench, budget: float, console: Console) -> dict[str, Any]:
    """An A/A by run-level pairs and one by step blocks, each for ``budget`` engine seconds: their CI widths."""
    objective = Objective(metric="output_tokens_per_s")
    began = time.perf_counter()
    runs = paired_runs(
        bench,
        {},
        Pairs(min=2, max=10_000),
        objective,
        None,
        seed=99,
        on_pair=lambda n, _e: time.perf_counter() - began > budget,
    )
    run_est = runs.ratio(objective.metric)
    # the grain this reference was measured with, then settled by a gc.collect(0) at each block end (removed in
    # 933dc0a); benchmarks/engine/sensitivity.py measures the grain chosen now
    step = interleaved_comparison(bench, {}, {}, block_steps=16, budget_s=budget)
    assert step.estimate is not None
    console.print(
        f"same {budget:.0f} s budget, A/A: run-level pairs n={run_est.n} CI width {width(run_est):.1%} "
        f"(SD {run_est.log_sd:.3f}); step interleaving n={step.estimate.n} CI width "
        f"{width(step.estimate):.1%} (SD {step.estimate.log_sd:.3f})"
    )
    return {
        "budget_s": budget,
        "run_level": {
            "pairs": run_est.n,
            "ci": [run_est.ci_low, run_est.ci_high],
            "ci_width": width(run_est),
            "log_sd": run_est.log_sd,
        },
        "step_interleave": {
            "pairs": step.estimate.n,
            "ci": [step.estimate.ci_low, step.estimate.ci_high],
            "ci_width": width(step.estimate),
            "log_sd": step.estimate.log_sd,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer comparisons and a shorter budget")
    parser.add_argument("--model", default=ENGINE["model"])
    parser.add_argument("--max-num-seqs", type=int, default=ENGINE["max_num_seqs"])
    parser.add_argument("--out", type=Path, default=Path("results/reference/measurement-cpu.json"))
    args = parser.parse_args()
    console = Console()
    engine = {**ENGINE, "model": args.model, "max_num_seqs": args.max_num_seqs}
    comparisons, pairs_per, budget = (20, 6, 60.0) if not args.quick else (20, 6, 20.0)
    result: dict[str, Any] = {"environment": environment_record(), "engine": engine}
    result["switch_vs_restart"], bench = switch_vs_restart(engine, console)
    result["run_level_aa"] = run_level_aa(bench, comparisons, pairs_per, console)
    result["equal_budget"] = equal_budget(bench, budget, console)
    bench.session.close()
    write_json(args.out, result)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
