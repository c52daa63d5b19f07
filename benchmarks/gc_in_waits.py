"""gc_in_waits against vLLM's native GC on one GC-heavy CPU engine, side by side, in one run.

    python benchmarks/gc_in_waits.py [--pairs 8] [--out results/reference/gc-in-waits-cpu.json]

Both arms run with ``gc_freeze: false`` (upstream's freeze undone, so EngineCore's whole heap is traversed by its
old-generation collections) and a raised ``max_num_seqs``: the GC-heavy setting. Pairs of repetitions in mirrored
order (AB BA ...); throughput is the paired ratio of sums with its bootstrap CI (:mod:`tuner.stats`). Per arm it
prints the critical and hidden GC of every process (count, seconds, longest pause), ``gc_critical_share_max``,
``gc_critical_max_pause_ms`` and the RSS growth of each process from the arm's first to its last repetition.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tuner.config import Experiment
from tuner.engine import open_session
from tuner.environment import environment_record
from tuner.measure import Workbench
from tuner.plugin import encode_spec
from tuner.results import write_json
from tuner.stats import mirrored_order, paired_ratio_of_sums

ENGINE = {
    "model": "builtin:opt-tiny",
    "max_num_seqs": 128,
    "max_model_len": 512,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 256 << 20,
    "dtype": "float32",
}
UNFROZEN = {"gc_freeze": {"enabled": False}}
ARMS = {"native": UNFROZEN, "gc_in_waits": {**UNFROZEN, "gc_in_waits": {}}}


def workbench(engine: dict[str, Any], install: list[str]) -> Workbench:
    """A started engine with ``install`` switchable, warmed up on the benchmark's workload."""
    experiment = Experiment.model_validate(
        {
            "name": "gc-in-waits-bench",
            "engine": engine,
            "workload": {
                "num_prompts": 2 * engine["max_num_seqs"],
                "input_len": {"dist": "fixed", "value": 16},
                "output_len": {"dist": "uniform", "low": 48, "high": 96},
            },
            "measure": {"warmup_prompts": 16},
        }
    )
    bench = Workbench(open_session(engine, encode_spec({}, install), streaming=False), experiment)
    bench.warm_up()
    return bench


def paired_runs(bench: Workbench, arms: dict[str, dict[str, Any]], pairs: int) -> dict[str, list[dict[str, Any]]]:
    """``pairs`` repetitions of each arm, in mirrored order; the repetitions per arm in order."""
    first, second = arms
    runs: dict[str, list[dict[str, Any]]] = {first: [], second: []}
    for flip in mirrored_order(pairs, seed=0):
        for arm in (second, first) if flip else (first, second):
            bench.switch(arms[arm])
            rep = bench.repetition(label=arm)
            rep.pop("token_ids")
            runs[arm].append(rep)
    return runs


def throughput_ratio(runs: dict[str, list[dict[str, Any]]], trial: str, reference: str) -> dict[str, Any]:
    """The paired ratio of sums of output tokens over wall time, trial / reference, with its 95% CI."""

    def amounts(arm: str) -> tuple[list[float], list[float]]:
        return [r["metrics"]["output_tokens"] for r in runs[arm]], [r["metrics"]["wall_s"] for r in runs[arm]]

    estimate = paired_ratio_of_sums(*amounts(trial), *amounts(reference))
    return {"ratio": estimate.ratio, "ci": [estimate.ci_low, estimate.ci_high], "p": estimate.p_value, "n": estimate.n}


def arm_summary(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Per process: GC by class summed over the arm's repetitions, and RSS growth first -> last repetition."""
    processes: dict[str, Any] = {}
    for name in [p["process_name"] for p in reps[0]["processes"]]:
        gcs = [next(p["gc"] for p in r["processes"] if p["process_name"] == name) for r in reps]
        row: dict[str, Any] = {}
        for kind in ("critical", "hidden"):
            row[kind] = {
                "collections": [sum(g[kind]["collections"][i] for g in gcs) for i in range(3)],
                "seconds": sum(g[kind]["total_s"] for g in gcs),
                "max_pause_ms": max(max(g[kind]["max_pause_ms"]) for g in gcs),
            }
        first, last = gcs[0]["rss_bytes"], gcs[-1]["rss_bytes"]
        row["rss_mb"] = [first / 2**20, last / 2**20]
        row["rss_growth"] = last / first - 1
        processes[name] = row
    metrics = [r["metrics"] for r in reps]
    return {
        "processes": processes,
        "gc_critical_share_max": max(m["gc_critical_share_max"] for m in metrics),
        "gc_critical_max_pause_ms": max(m["gc_critical_max_pause_ms"] for m in metrics),
        "output_tokens_per_s_median": sorted(m["output_tokens_per_s"] for m in metrics)[len(metrics) // 2],
        "rss_growth_max": max(p["rss_growth"] for p in processes.values()),
    }


def side_by_side(summaries: dict[str, dict[str, Any]]) -> Table:
    table = Table(title="GC per process, summed over each arm's repetitions")
    for column in ("arm", "process", "critical n (g0/1/2)", "critical s", "critical max ms", "hidden n", "hidden s"):
        table.add_column(column, justify="left" if column in {"arm", "process"} else "right")
    table.add_column("RSS first->last MiB", justify="right")
    for arm, summary in summaries.items():
        for name, row in summary["processes"].items():
            critical, hidden = row["critical"], row["hidden"]
            table.add_row(
                arm,
                name,
                "/".join(map(str, critical["collections"])),
                f"{critical['seconds']:.4f}",
                f"{critical['max_pause_ms']:.2f}",
                str(sum(hidden["collections"])),
                f"{hidden['seconds']:.4f}",
                f"{row['rss_mb'][0]:.0f} -> {row['rss_mb'][1]:.0f} ({row['rss_growth']:+.1%})",
            )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--max-num-seqs", type=int, default=ENGINE["max_num_seqs"])
    parser.add_argument("--out", type=Path, default=Path("results/reference/gc-in-waits-cpu.json"))
    args = parser.parse_args()
    console = Console(width=160)
    engine = {**ENGINE, "max_num_seqs": args.max_num_seqs}
    bench = workbench(engine, ["gc_freeze", "gc_in_waits"])
    try:
        runs = paired_runs(bench, ARMS, args.pairs)
    finally:
        bench.session.close()
    summaries = {arm: arm_summary(reps) for arm, reps in runs.items()}
    ratio = throughput_ratio(runs, "gc_in_waits", "native")
    console.print(side_by_side(summaries))
    for arm, summary in summaries.items():
        console.print(
            f"{arm:>12}: gc_critical_share_max {summary['gc_critical_share_max']:.3%}, gc_critical_max_pause_ms "
            f"{summary['gc_critical_max_pause_ms']:.2f}, output tok/s (median) "
            f"{summary['output_tokens_per_s_median']:.0f}, largest RSS growth {summary['rss_growth_max']:+.1%}"
        )
    console.print(
        f"throughput gc_in_waits / native: {ratio['ratio']:.4f} [95% CI {ratio['ci'][0]:.4f}, {ratio['ci'][1]:.4f}], "
        f"p = {ratio['p']:.3f}, {ratio['n']} pairs"
    )
    write_json(
        args.out,
        {
            "environment": environment_record(),
            "engine": engine,
            "arms": ARMS,
            "summary": summaries,
            "throughput": ratio,
        },
    )
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
