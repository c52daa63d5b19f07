"""RSS growth per process over a long run with the GC thresholds raised (and, for contrast, without).

    python -m benchmarks.engine.memory_growth [--minutes 10] [--out results/reference/memory-growth-cpu.json]

A configuration that trades GC time for memory shows here as RSS that keeps growing; in a sweep the same
figure is the `peak_rss_mb` metric, which a constraint can bound.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks.engine.measurement import ENGINE  # the measurement benchmarks' engine
from tuner.config import Experiment
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import encode_spec
from tuner.records.files import write_json
from tuner.vllm.environment import environment_record

RAISED = {"gc_threshold": {"base": 700, "gen0_per_seq": 4096, "gen1": 10_000, "gen2": 10_000}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="per arm")
    parser.add_argument("--out", type=Path, default=Path("results/reference/memory-growth-cpu.json"))
    args = parser.parse_args()
    console = Console()
    experiment = Experiment.model_validate(
        {
            "name": "memory-growth",
            "engine": ENGINE,
            "workload": {
                "num_prompts": 32,
                "input_len": {"dist": "fixed", "value": 32},
                "output_len": {"dist": "fixed", "value": 128},
            },
        }
    )
    bench = Workbench.start(experiment, encode_spec({}, ["gc_threshold"]))
    session = bench.session
    result: dict[str, Any] = {"environment": environment_record(), "engine": ENGINE, "minutes": args.minutes}
    try:
        for arm, strategies in (("native", {}), ("raised", RAISED)):
            bench.switch(strategies)
            samples: list[dict[str, Any]] = []
            deadline = time.monotonic() + args.minutes * 60
            while time.monotonic() < deadline:
                rep = bench.repetition()
                samples.append(
                    {
                        p["process_name"]: {
                            "rss_mb": p["gc"]["rss_bytes"] / 2**20,
                            "gc_s": p["gc"]["gc_total_s"],
                            "collections": p["gc"]["collections"],
                        }
                        for p in rep["processes"]
                    }
                )
            result[arm] = {
                "strategies": strategies,
                "repetitions": len(samples),
                "first": samples[0],
                "last": samples[-1],
                "growth_mb": {name: samples[-1][name]["rss_mb"] - samples[0][name]["rss_mb"] for name in samples[0]},
                "gc_s_total": {name: sum(s[name]["gc_s"] for s in samples) for name in samples[0]},
            }
    finally:
        session.close()
    table = Table(title=f"RSS growth over {args.minutes:g} min per arm")
    for column in ("process", "native growth MiB", "native GC s", "raised growth MiB", "raised GC s"):
        table.add_column(column, justify="right" if column != "process" else "left")
    for name in result["native"]["growth_mb"]:
        table.add_row(
            name,
            f"{result['native']['growth_mb'][name]:+.1f}",
            f"{result['native']['gc_s_total'][name]:.3f}",
            f"{result['raised']['growth_mb'][name]:+.1f}",
            f"{result['raised']['gc_s_total'][name]:.3f}",
        )
    console.print(table)
    write_json(args.out, result)
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
