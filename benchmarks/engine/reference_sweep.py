"""Run a committed experiment's sweep as a benchmark: ``tuner sweep`` in a scratch directory, its summary back,
and each trial's screening and confirmation as one row (shared by the sweep benchmarks)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks import ROOT

METRIC = "output_tokens_per_s"


def run_reference_sweep(experiment_path: Path) -> tuple[dict[str, Any], int]:
    """``tuner sweep`` of ``experiment_path`` with its output in a temporary directory: the summary and the exit
    status (the process exits when the sweep wrote no summary)."""
    with tempfile.TemporaryDirectory() as tmp:
        experiment = yaml.safe_load(experiment_path.read_text())
        experiment["output_dir"] = tmp
        path = Path(tmp) / experiment_path.name
        path.write_text(yaml.safe_dump(experiment))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"}
        done = subprocess.run([sys.executable, "-m", "tuner", "sweep", str(path)], env=env, check=False)
        summary_path = Path(tmp) / experiment["name"] / "sweep" / "summary.json"
        if not summary_path.exists():
            sys.exit(f"the sweep wrote no summary (exit {done.returncode})")
        return json.loads(summary_path.read_text()), done.returncode


def trial_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per trial of the sweep: what it ran, its screening estimate and its confirmation."""
    confirmation = summary.get("confirmation") or {}
    confirmed = {r["trial"]: r for r in (confirmation.get("decision") or {}).get("rows", [])}
    rows = []
    for trial in summary["trials"]:
        ratio = (trial.get("ratios") or {}).get(METRIC)
        row: dict[str, Any] = {
            "trial": trial["number"],
            "baseline": trial["is_baseline"],
            "strategies": trial["strategies"],
            "engine": trial["engine"],
            "env": trial.get("env") or {},
            "method": "restart pairs" if trial.get("restart_pairs") else "one engine",
            "state": trial["state"],
        }
        if ratio:
            row["screening"] = {k: ratio[k] for k in ("ratio", "ci_low", "ci_high", "n", "log_sd", "p_value")}
            row["screening"]["verdict"] = ratio["verdict"]
        if trial.get("restart_pairs"):
            row["engine_start_s"] = trial["restart_pairs"]
            row["engine_stop_s"] = trial.get("engine_stops")
            row["stop_time"] = trial.get("stop_time")
        if trial["number"] in confirmed:
            decided = confirmed[trial["number"]]
            row["confirmation"] = {k: decided["confirmation"][k] for k in ("ratio", "ci_low", "ci_high", "n")}
            row["confirmed"] = decided["confirmed"]
        rows.append(row)
    return rows


def figures(summary: dict[str, Any], exit_status: int, command: str, experiment_path: Path) -> dict[str, Any]:
    """What a sweep benchmark commits: the command, every trial's row, the winner and the power statements."""
    import platform

    return {
        "command": command,
        "experiment": str(experiment_path.relative_to(ROOT)),
        "metric": METRIC,
        "sweep_exit": exit_status,
        "winner": summary.get("winner"),
        "power": (summary.get("confirmation") or {}).get("power", {}).get("lines"),
        "trials": trial_rows(summary),
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
        "versions": summary["environment"]["versions"],
    }


def sweep_and_write(experiment_path: Path, out: Path, command: str) -> dict[str, Any]:
    """Run the experiment's sweep, write its :func:`figures` (with ``command``) to ``out`` and return them."""
    summary, status = run_reference_sweep(experiment_path)
    result = figures(summary, status, command, experiment_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def fmt_estimate(estimate: dict[str, Any] | None) -> str:
    return f"{estimate['ratio']:.3f} [{estimate['ci_low']:.3f}, {estimate['ci_high']:.3f}]" if estimate else "-"


def sweep_from_command_line(doc: str, experiment_path: Path, out_name: str, command: str) -> dict[str, Any]:
    """A sweep benchmark's command line (``--out``, by default ``results/reference/<out_name>``): run it, write its
    figures, say where, and return them for the benchmark's own table."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "reference" / out_name)
    out = parser.parse_args().out
    result = sweep_and_write(experiment_path, out, command)
    print(f"wrote {out}")
    return result
