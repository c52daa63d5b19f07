"""A sweep over an engine argument by restart pairs on the CPU engine, screened and confirmed.

    python -m benchmarks.engine.restart_sweep   # writes results/reference/restart-sweep-cpu.json

Runs ``tuner sweep experiments/restart-dimensions.yaml``: ``max_num_seqs`` 32 against the file's 8, each arm of
every pair on an engine started for it (mirrored order), then fresh restart pairs for the candidate. Prints each
trial's screening ratio of output tokens/s with its 95% CI and p, the engine start times, and the confirmation.
"""

from __future__ import annotations

import statistics

from benchmarks.engine.reference_sweep import ROOT, fmt_estimate, sweep_from_command_line

OUT_NAME, COMMAND = "restart-sweep-cpu.json", "python -m benchmarks.engine.restart_sweep"
EXPERIMENT = ROOT / "experiments" / "restart-dimensions.yaml"


def main() -> None:
    result = sweep_from_command_line(__doc__, EXPERIMENT, OUT_NAME, COMMAND)
    print(f"{'trial':<28} {'method':<14} {'screening [95% CI]':<26} {'p':>6}  {'start s':>8}  confirmation")
    for row in result["trials"]:
        label = (
            "baseline" if row["baseline"] else ", ".join(f"{k}={v}" for k, v in {**row["engine"], **row["env"]}.items())
        )
        s = row.get("screening")
        p = f"{s['p_value']:.3f}" if s and s.get("p_value") is not None else "-"
        starts = row.get("engine_start_s")
        start_s = f"{statistics.median(starts['trial'] + starts['reference']):.1f}" if starts else "-"
        c = row.get("confirmation")
        decided = f"{fmt_estimate(c)} n={c['n']} {'confirmed' if row['confirmed'] else 'not'}" if c else "-"
        print(f"{label:<28} {row['method']:<14} {fmt_estimate(s):<26} {p:>6}  {start_s:>8}  {decided}")
    print(result["winner"]["reason"] if result["winner"] else "no winner record")


if __name__ == "__main__":
    main()
