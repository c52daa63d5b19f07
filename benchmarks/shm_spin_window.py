"""A paired, confirmed sweep of ``shm_spin_window`` on the CPU engine: 0, 1 ms, 10 ms, 100 ms and vLLM's own 1 s.

    python benchmarks/shm_spin_window.py   # writes results/reference/shm-spin-window-cpu.json

Runs ``tuner sweep experiments/shm-spin-window.yaml`` (one engine, run-level pairs against vLLM's 1 s window in
mirrored order, the best candidates confirmed on fresh pairs with Holm across them) and prints, per window, the
screening ratio of output tokens/s with its 95% CI, the per-pair noise, and what the confirmation decided.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENT = ROOT / "experiments" / "shm-spin-window.yaml"
METRIC = "output_tokens_per_s"


def window_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per trial of the sweep: its window (None: vLLM's own), screening estimate and confirmation."""
    confirmation = summary.get("confirmation") or {}
    confirmed = {r["trial"]: r for r in (confirmation.get("decision") or {}).get("rows", [])}
    rows = []
    for trial in summary["trials"]:
        window = (trial["strategies"].get("shm_spin_window") or {}).get("window_s")
        ratio = (trial.get("ratios") or {}).get(METRIC)
        row: dict[str, Any] = {"trial": trial["number"], "window_s": window, "state": trial["state"]}
        if ratio:
            row["screening"] = {k: ratio[k] for k in ("ratio", "ci_low", "ci_high", "n", "log_sd", "verdict")}
        if trial["number"] in confirmed:
            decided = confirmed[trial["number"]]
            row["confirmation"] = {k: decided["confirmation"][k] for k in ("ratio", "ci_low", "ci_high", "n")}
            row["confirmed"] = decided["confirmed"]
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "reference" / "shm-spin-window-cpu.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        experiment = yaml.safe_load(EXPERIMENT.read_text())
        experiment["output_dir"] = tmp
        path = Path(tmp) / "shm-spin-window.yaml"
        path.write_text(yaml.safe_dump(experiment))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        done = subprocess.run([sys.executable, "-m", "tuner", "sweep", str(path)], env=env, check=False)
        summary_path = Path(tmp) / experiment["name"] / "sweep" / "summary.json"
        if not summary_path.exists():
            sys.exit(f"the sweep wrote no summary (exit {done.returncode})")
        summary = json.loads(summary_path.read_text())
    rows = window_rows(summary)
    figures = {
        "command": "python benchmarks/shm_spin_window.py",
        "experiment": str(EXPERIMENT.relative_to(ROOT)),
        "metric": METRIC,
        "sweep_exit": done.returncode,
        "winner": summary.get("winner"),
        "power": (summary.get("confirmation") or {}).get("power", {}).get("lines"),
        "trials": rows,
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
        "versions": summary["environment"]["versions"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"{'window':>8}  {'screening ratio [95% CI]':<28} {'log SD':>7}  confirmation")
    for row in rows:
        window = "vLLM 1 s" if row["window_s"] is None else f"{row['window_s']:g} s"
        s = row.get("screening")
        screening = f"{s['ratio']:.3f} [{s['ci_low']:.3f}, {s['ci_high']:.3f}]" if s else row["state"]
        sd = f"{s['log_sd']:.3f}" if s and s.get("log_sd") is not None else "-"
        c = row.get("confirmation")
        decided = (
            f"{c['ratio']:.3f} [{c['ci_low']:.3f}, {c['ci_high']:.3f}] {'confirmed' if row['confirmed'] else 'not'}"
            if c
            else "-"
        )
        print(f"{window:>8}  {screening:<28} {sd:>7}  {decided}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
