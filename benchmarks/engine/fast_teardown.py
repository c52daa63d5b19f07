"""fast_teardown against vLLM's own engine stop, by restart pairs on the CPU engine.

    python -m benchmarks.engine.fast_teardown   # writes results/reference/fast-teardown-cpu.json

Runs ``tuner sweep experiments/fast-teardown.yaml``: every arm of every pair on an engine started for it (the trial
arm's with fast_teardown in force from the start), each engine's stop timed until none of its processes is left.
Prints the paired ratio of mean stop time with its 95% CI and p, each arm's median stop, and the throughput ratio
(which the strategy should leave alone).
"""

from __future__ import annotations

import statistics

from benchmarks.engine.reference_sweep import ROOT, fmt_estimate, sweep_from_command_line

OUT_NAME, COMMAND = "fast-teardown-cpu.json", "python -m benchmarks.engine.fast_teardown"
EXPERIMENT = ROOT / "experiments" / "fast-teardown.yaml"


def main() -> None:
    result = sweep_from_command_line(__doc__, EXPERIMENT, OUT_NAME, COMMAND)
    for row in result["trials"]:
        if row["baseline"] or not row.get("stop_time"):
            continue
        stops, stop = row["engine_stop_s"], row["stop_time"]
        print(f"start pairs: {stop['n']}")
        for arm in ("reference", "trial"):
            print(f"  {arm:<9} median engine stop {statistics.median(stops[arm]):.2f} s  (each: {stops[arm]})")
        print(f"  stop time, trial/reference: {fmt_estimate(stop)}  p {stop['p_value']:.3g}")
        print(f"  output tokens/s, trial/reference: {fmt_estimate(row.get('screening'))}")
    print(result["winner"]["reason"] if result["winner"] else "no winner record")


if __name__ == "__main__":
    main()
