"""A paired, confirmed sweep of ``shm_spin_window`` on the CPU engine: 0, 1 ms, 10 ms, 100 ms and vLLM's own 1 s.

    python -m benchmarks.engine.shm_spin_window   # writes results/reference/shm-spin-window-cpu.json

Runs ``tuner sweep experiments/shm-spin-window.yaml`` (one engine, run-level pairs against vLLM's 1 s window in
mirrored order, the best candidates confirmed on fresh pairs with Holm across them) and prints, per window, the
screening ratio of output tokens/s with its 95% CI, the per-pair noise, and what the confirmation decided.
"""

from __future__ import annotations

from benchmarks.engine.reference_sweep import ROOT, fmt_estimate, sweep_from_command_line

OUT_NAME, COMMAND = "shm-spin-window-cpu.json", "python -m benchmarks.engine.shm_spin_window"
EXPERIMENT = ROOT / "experiments" / "shm-spin-window.yaml"


def main() -> None:
    result = sweep_from_command_line(__doc__, EXPERIMENT, OUT_NAME, COMMAND)
    print(f"{'window':>8}  {'screening ratio [95% CI]':<28} {'log SD':>7}  confirmation")
    for row in result["trials"]:
        window_s = (row["strategies"].get("shm_spin_window") or {}).get("window_s")
        window = "vLLM 1 s" if window_s is None else f"{window_s:g} s"
        s = row.get("screening")
        sd = f"{s['log_sd']:.3f}" if s and s.get("log_sd") is not None else "-"
        c = row.get("confirmation")
        decided = f"{fmt_estimate(c)} {'confirmed' if row['confirmed'] else 'not'}" if c else "-"
        print(f"{window:>8}  {fmt_estimate(s) if s else row['state']:<28} {sd:>7}  {decided}")


if __name__ == "__main__":
    main()
