"""How often a plan's SD bound holds: the per-pair SD measured now against the one the next comparison meets.

    python -m benchmarks.engine.sd_prediction [--engines 10] [--out results/reference/sd-prediction.json]

Three kinds of evidence:

- **the H100 A/A recordings** (``../shared/data/h100-steps/``, 1-step pairs in random order): every run cut into
  windows of ``n`` consecutive pairs; each window predicts the next one in its run (within a calibration) and a
  window of every other run (between calibrations). Per window: the per-pair SD of the ratio of sums (its influence
  values, as the sweep computes it) and its excess kurtosis;
- **this CPU's quickstarts** as committed (every version of ``results/reference/quickstart/summary.json`` in the
  git history that holds a calibration): the calibration's 1-step SD against each step trial's screening SD;
- **fresh quickstart engines** (``--engines N``): N times, a fresh CPU engine of the quickstart runs the
  calibration's 1-step A/A (12 s, as ``tuner calibrate``) and then a screening's (20 s, stopping once its CI is
  within min_effect, as ``tuner sweep``), both with the calibration's switch-only yardstick: N quickstarts' worth of
  calibration -> screening pairs, in minutes each instead of a whole quickstart.

For each, the share of next SDs that lie below the chi-square bound (:func:`tuner.sweep.plans.sd_upper` before this
change) and below the prediction bound (:func:`tuner.stats.sd_prediction.predict_sd`), and inside its range; the
drift (SD of log SD between runs, less the sampling part) and the kurtosis that set its constants.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as _st

from benchmarks import ROOT
from benchmarks.h100.recordings import DATA, Run, load
from tuner.records.files import write_json
from tuner.stats.sd_prediction import DRIFT, KURTOSIS_FLOOR, excess_kurtosis, log_sd_error, predict_sd

WINDOWS = (32, 64, 128)
SEEDS = 5
QUICKSTART = "results/reference/quickstart/summary.json"


def influence(steps: np.ndarray, seed: int) -> np.ndarray:
    """1-step pairs of adjacent steps in random order: each pair's influence on the log ratio of sums."""
    n = steps.size // 2
    pairs = steps[: 2 * n].reshape(n, 2)
    flip = np.random.default_rng(seed).random(n) < 0.5
    b, a = np.where(flip, pairs[:, 1], pairs[:, 0]), np.where(flip, pairs[:, 0], pairs[:, 1])
    return np.asarray(n * (b / b.sum() - a / a.sum()), dtype=np.float64)


def windows(run: Run, n: int, seed: int) -> list[tuple[float, float | None]]:
    """(per-pair SD, excess kurtosis) of each window of ``n`` consecutive pairs of one run (the influence values
    recomputed inside each window, as a comparison of ``n`` pairs would)."""
    steps = run.seconds[run.full]
    out = []
    for start in range(0, steps.size - 2 * n + 1, 2 * n):
        values = influence(steps[start : start + 2 * n], seed)
        out.append((float(np.std(values, ddof=1)), excess_kurtosis(values)))
    return out


def chi_square_upper(log_sd: float, pairs: int) -> float:
    """The chi-square bound plans used before (normal pairs, the same SD next)."""
    return log_sd * math.sqrt((pairs - 1) / float(_st.chi2.ppf(0.05, pairs - 1)))


Case = tuple[float, int, float | None, float, int]
"""(per-pair SD, its pairs, kurtosis or None, the next comparison's SD, its pairs)."""


def tally(cases: list[Case]) -> dict[str, Any]:
    """Coverage of each bound over (sd, n, kurtosis, next sd, next n) cases, with the ratio next / predicted."""
    chi = [nxt <= chi_square_upper(sd, n) for sd, n, _, nxt, _ in cases]
    predicted = [predict_sd(sd, n, next_pairs=m, kurtosis=k) for sd, n, k, _, m in cases]
    inside = [p.low <= c[3] <= p.high for p, c in zip(predicted, cases, strict=True)]
    below = [c[3] <= p.high for p, c in zip(predicted, cases, strict=True)]
    ratios = np.array([c[3] / c[0] for c in cases])
    return {
        "cases": len(cases),
        "chi_square_covers": float(np.mean(chi)),
        "prediction_upper_covers": float(np.mean(below)),
        "prediction_range_covers": float(np.mean(inside)),
        "next_over_now_within_1_5x": float(np.mean((ratios <= 1.5) & (ratios >= 1 / 1.5))),
        "upper_over_now": float(np.median([p.high / p.log_sd for p in predicted])),
    }


def h100(paths: list[Path]) -> dict[str, Any]:
    """Within-run and between-run coverage on the A/A recordings, per window length."""
    runs = {name: run for name, run in load(paths)[0].items() if name.split("/")[1].startswith("AA")}
    out: dict[str, Any] = {"runs": sorted(runs)}
    whole = []
    for run in runs.values():
        values = influence(run.seconds[run.full], 0)
        whole.append((float(np.std(values, ddof=1)), values.size, excess_kurtosis(values)))
    log_sds = np.log([w[0] for w in whole])
    sampling = np.mean([log_sd_error(n, k) ** 2 for _, n, k in whole])
    out["whole_runs"] = {
        "log_sd": [w[0] for w in whole],
        "pairs": [w[1] for w in whole],
        "kurtosis": [w[2] for w in whole],
        "drift": math.sqrt(max(float(np.var(log_sds, ddof=1)) - float(sampling), 0.0)),  # between the runs
    }
    for n in WINDOWS:
        within, between, kurt = [], [], []
        for seed in range(SEEDS):
            cut = {name: windows(run, n, seed) for name, run in runs.items()}
            for ws in cut.values():
                kurt += [k for _, k in ws if k is not None]
                within += [(sd, n, k, nxt, n) for (sd, k), (nxt, _) in itertools.pairwise(ws)]
            for wa, wb in itertools.permutations(cut.values(), 2):
                between += [(sd, n, k, nxt, n) for (sd, k), (nxt, _) in zip(wa, wb, strict=False)]
        out[str(n)] = {
            "kurtosis_median": float(np.median(kurt)),
            "kurtosis_quartiles": [float(np.percentile(kurt, 25)), float(np.percentile(kurt, 75))],
            "within_run": tally(within),
            "between_runs": tally(between),
        }
    return out


def quickstarts() -> dict[str, Any]:
    """Each committed quickstart with a calibration: its 1-step SD against each step trial's screening SD."""
    shas = subprocess.run(
        ["git", "log", "--format=%h", "--", QUICKSTART], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    cases: list[Case] = []
    rows = []
    for sha in shas:
        shown = subprocess.run(["git", "show", f"{sha}:{QUICKSTART}"], cwd=ROOT, capture_output=True, text=True)
        if shown.returncode != 0:
            continue
        summary = json.loads(shown.stdout)
        groups = (summary.get("power") or {}).get("before_screening", {}).get("groups", [])
        calibrated = [g for g in groups if g.get("method") == "steps" and g.get("log_sd")]
        if not calibrated:
            continue
        sd, n = calibrated[0]["log_sd"], calibrated[0]["sd_pairs"]
        for trial in summary.get("trials", []):
            estimate = (trial.get("step_interleave") or {}).get("estimate") or {}
            if estimate.get("log_sd"):
                pairs = trial["step_interleave"]["pairs"]
                cases.append((sd, n, None, estimate["log_sd"], pairs))
                rows.append({"commit": sha, "calibration": [sd, n], "screening": [estimate["log_sd"], pairs]})
    return {"quickstarts": rows, **tally(cases), "drift": drift(cases)}


def drift(cases: list[Case]) -> float:
    """The SD of log SD between a measurement and the next beyond what sampling explains (mean square of the log
    ratios, whose expectation is 0, less both SDs' sampling variance at :data:`KURTOSIS_FLOOR`)."""
    square = float(np.mean([math.log(nxt / sd) ** 2 for sd, _, _, nxt, _ in cases]))
    sampling = float(np.mean([log_sd_error(n) ** 2 + log_sd_error(m) ** 2 for _, n, _, _, m in cases]))
    return math.sqrt(max(square - sampling, 0.0))


def fresh_engines(count: int) -> dict[str, Any]:
    """``count`` fresh quickstart engines, each a calibration A/A then a screening A/A (module docstring)."""
    from tuner.config import load_experiment
    from tuner.measure.interleave import interleaved_comparison
    from tuner.measure.step_sums import log_ratio_influence
    from tuner.measure.workbench import Workbench
    from tuner.plugin.protocol import encode_spec

    experiment = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    yardstick: dict[str, dict[str, Any]] = {"known_delay": {}}
    cases: list[Case] = []
    rows = []
    for i in range(count):
        bench = Workbench.start(experiment, encode_spec({}, ["known_delay"]))
        try:
            calibration = interleaved_comparison(bench, yardstick, yardstick, block_steps=1, budget_s=12.0, seed=i)
            screening = interleaved_comparison(
                bench, yardstick, yardstick, block_steps=1, budget_s=20.0, min_effect=0.01, seed=1000 + i
            )
        finally:
            bench.session.close()
        assert calibration.estimate is not None and screening.estimate is not None
        kurtosis = excess_kurtosis(log_ratio_influence(calibration.sums))  # the values the sweep's SD comes from
        case = (
            calibration.estimate.log_sd, len(calibration.sums), kurtosis, screening.estimate.log_sd, len(screening.sums)
        )  # fmt: skip
        cases.append(case)
        rows.append({"calibration": [case[0], case[1]], "kurtosis": kurtosis, "screening": [case[3], case[4]]})
        print(
            f"engine {i + 1}/{count}: calibration {case[0]:.4f} ({case[1]} pairs), screening {case[3]:.4f}", flush=True
        )
    return {"engines": rows, **tally(cases), "drift": drift(cases)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engines", type=int, default=0, help="fresh quickstart engines (calibration, screening)")
    parser.add_argument("--data", type=Path, default=DATA, help="the H100 per-step recordings")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "reference" / "sd-prediction.json")
    args = parser.parse_args()
    paths = sorted(args.data.glob("*.json"))
    if not paths:
        raise SystemExit(f"no H100 recordings under {args.data}")
    result = {
        "command": "python -m benchmarks.engine.sd_prediction" + (f" --engines {args.engines}" if args.engines else ""),
        "constants": {"kurtosis_floor": KURTOSIS_FLOOR, "drift": DRIFT},
        "h100": h100(paths),
        "cpu_quickstarts": quickstarts(),
        **({"cpu_fresh_engines": fresh_engines(args.engines)} if args.engines else {}),
    }
    print(json.dumps(result, indent=1)[:6000])
    write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
