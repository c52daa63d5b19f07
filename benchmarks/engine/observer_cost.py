"""What the telemetry costs: one engine, GC timers and step intervals on vs off, paired.

    python -m benchmarks.engine.observer_cost [--pairs 12] [--out results/reference/observer-cost-cpu.json]

The ``telemetry`` control op removes the GC probe's ``gc.callbacks`` hook and stops recording step intervals in
every process (the wait-point wrappers stay: they are a Python call per wait either way). Repetitions alternate in
mirrored order; the throughput ratio on / off is a paired ratio of sums with its bootstrap CI (the goal: within
0.5% of 1). Where host noise makes that CI wider than the cost, the per-event costs estimate its direct part: each
is timed in isolation (µs per GC pause timed, per step recorded, per wait marked) and scaled to one engine step.
"""

from __future__ import annotations

import argparse
import gc
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from benchmarks.engine.paired import ENGINE, paired_runs, throughput_ratio, workbench
from strategies.framework.wait_points import waiting
from tuner.plugin.gc_probe import GcProbe
from tuner.plugin.intervals import IntervalRing
from tuner.records.files import write_json
from tuner.vllm.environment import environment_record

REFERENCE_STEP_MS = 31.0  # EngineCore's median step on an H100 with vLLM 0.26 (issue #16)


def per_event_us(n: int = 200_000) -> dict[str, float]:
    """Microseconds per observed event, each timed alone in this process."""
    probe, ring = GcProbe(), IntervalRing()
    info = {"generation": 0, "collected": 0}

    def timed(event: Callable[[], None]) -> float:
        started = time.perf_counter()
        for _ in range(n):
            event()
        return (time.perf_counter() - started) / n * 1e6

    def pause() -> None:
        probe._callback("start", info)
        probe._callback("stop", info)

    def step() -> None:
        ring.add(time.monotonic(), time.monotonic(), 0)

    def wait() -> None:
        with waiting():
            pass

    gc.disable()
    try:
        return {"gc_pause": timed(pause), "step_record": timed(step), "wait_marked": timed(wait)}
    finally:
        gc.enable()


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
    costs = per_event_us()
    # Per step: one step record in EngineCore, one marked wait per process (3 on the CPU path), and the pauses.
    pauses_per_step = 1.0  # ~300 collections per ~250 steps in the H100 measurement
    step_us = costs["step_record"] + 3 * costs["wait_marked"] + pauses_per_step * costs["gc_pause"]
    collections = sum(sum(p["gc"]["collections"]) for r in runs["on"] for p in r["processes"])
    console.print(
        f"throughput telemetry on / off: {ratio['ratio']:.4f} [95% CI {ratio['ci'][0]:.4f}, {ratio['ci'][1]:.4f}], "
        f"p = {ratio['p']:.3f}, {ratio['n']} pairs; {collections} collections timed in the 'on' arm"
    )
    record = {"environment": environment_record(), "engine": engine, "pairs": args.pairs, "throughput": ratio}
    write_json(
        args.out, {**record, "per_event_us": costs, "per_step_us": step_us, "reference_step_ms": REFERENCE_STEP_MS}
    )
    console.print(
        "per event (µs): "
        + ", ".join(f"{k} {v:.2f}" for k, v in costs.items())
        + f"; per step ~{step_us:.1f} µs = {step_us / (REFERENCE_STEP_MS * 1e3):.4%} of a "
        + f"{REFERENCE_STEP_MS:.0f} ms step"
    )
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
