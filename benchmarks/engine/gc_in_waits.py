"""gc_in_waits against vLLM's native GC on one GC-heavy CPU engine, side by side, in one run.

    python -m benchmarks.engine.gc_in_waits [--pairs 8] [--out results/reference/gc-in-waits-cpu.json]

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

from benchmarks.engine.paired import ENGINE, paired_runs, throughput_ratio, workbench
from tuner.records.files import write_json
from tuner.vllm.environment import environment_record

UNFROZEN = {"gc_freeze": {"enabled": False}}
ARMS = {"native": UNFROZEN, "gc_in_waits": {**UNFROZEN, "gc_in_waits": {}}}


def arm_summary(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """Per process: GC by class summed over the arm's repetitions, and RSS growth first -> last repetition."""
    processes: dict[str, Any] = {}
    for name in [p["process_name"] for p in reps[0]["processes"]]:
        gcs = [next(p["gc"] for p in r["processes"] if p["process_name"] == name) for r in reps]
        row: dict[str, Any] = {}
        for kind in ("critical", "hidden", "overran"):
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
    columns = (
        "arm",
        "process",
        "critical n (g0/1/2)",
        "critical s",
        "critical max ms",
        "hidden n",
        "hidden s",
        "overran n",
    )
    for column in columns:
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
                str(sum(row["overran"]["collections"])),
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
        runs = paired_runs(bench, ("native", "gc_in_waits"), lambda arm: bench.switch(ARMS[arm]), args.pairs)
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
