"""What the telemetry costs: one engine, GC timers and step intervals on vs off, paired.

    python -m benchmarks.observer_cost [--pairs 12] [--out results/reference/observer-cost-cpu.json]

The ``telemetry`` control op removes the GC probe's ``gc.callbacks`` hook and stops recording step intervals in
every process (the wait-point wrappers stay: they are a Python call per wait either way). Repetitions alternate in
mirrored order; the throughput ratio on / off is a paired ratio of sums with its bootstrap CI (the goal: within
0.5% of 1).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from benchmarks.paired import ENGINE, paired_runs, throughput_ratio, workbench
from tuner.environment import environment_record
from tuner.results import write_json


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=12)
    parser.add_argument("--max-num-seqs", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("results/reference/observer-cost-cpu.json"))
    args = parser.parse_args()
    console = Console(width=160)
    engine = {**ENGINE, "max_num_seqs": args.max_num_seqs}
    bench = workbench(engine, [])
    try:
        runs = paired_runs(
            bench,
            ("off", "on"),
            lambda arm: bench.session.control({"op": "telemetry", "enabled": arm == "on"}),
            args.pairs,
        )
        bench.session.control({"op": "telemetry", "enabled": True})
    finally:
        bench.session.close()
    ratio = throughput_ratio(runs, "on", "off")
    collections = sum(sum(p["gc"]["collections"]) for r in runs["on"] for p in r["processes"])
    console.print(
        f"throughput telemetry on / off: {ratio['ratio']:.4f} [95% CI {ratio['ci'][0]:.4f}, {ratio['ci'][1]:.4f}], "
        f"p = {ratio['p']:.3f}, {ratio['n']} pairs; {collections} collections timed in the 'on' arm"
    )
    write_json(
        args.out, {"environment": environment_record(), "engine": engine, "pairs": args.pairs, "throughput": ratio}
    )
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
