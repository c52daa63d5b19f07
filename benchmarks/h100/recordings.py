"""The H100 per-step recordings and what every projection from them shares: reading the runs, engine minutes per
+-1% (C * v * tau), the mean over runs (variance adds over engine time: see :mod:`benchmarks.h100.projection`), the
sign-flip CI, known injected effects and exact rates.

The recordings are in ``../shared/data/h100-steps`` (README there) unless a script's ``--data`` says otherwise.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import binomtest
from scipy.stats import t as student_t

from benchmarks import ROOT

DATA = ROOT.parent / "shared" / "data" / "h100-steps"
"""Where the recordings are by default (outside the repository: they are not ours to commit)."""
Z = NormalDist().inv_cdf(0.975)
LOG_1PCT = math.log(1.01)
FLIPS = 10_000
TOPOLOGIES = {"sync": 0, "async": 1}  # washout steps before each block's compared steps
OFFSET_SPAN = 16  # each (run, seed) drops a random 0-15 leading steps: unit edges fall at every phase of the recording
CHUNK_STEPS = 256  # one calibration sub-comparison: 256 steps' worth of consecutive units (~7 s of engine time)
CALIBRATION_FLIPS = 2000
INJECTIONS = ("aa", "mult", "add", "halve")

Floats = npt.NDArray[np.floating[Any]]


@dataclass(frozen=True)
class Run:
    """One label of one file, reduced to its full-batch steps in time order."""

    name: str
    block: npt.NDArray[np.int64]
    arm: npt.NDArray[np.int64]
    seconds: Floats
    full: npt.NDArray[np.bool_]  # running == the full batch
    settle: dict[int, float]  # block -> seconds of its closing gc.collect(0)


def load(paths: list[Path]) -> tuple[dict[str, Run], int]:
    """Every run of every file, and the full-batch running count (the modal one, the same in every run)."""
    runs, modes = {}, set()
    for path in paths:
        for label, data in json.loads(path.read_text()).items():
            log = np.asarray(data["log"], dtype=np.float64)
            values, counts = np.unique(log[:, 3], return_counts=True)
            mode = int(values[np.argmax(counts)])
            modes.add(mode)
            runs[f"{path.stem.rsplit('_', 2)[-2]}_{path.stem.rsplit('_', 1)[-1]}/{label}"] = Run(
                name=label,
                block=log[:, 1].astype(np.int64),
                arm=log[:, 0].astype(np.int64),
                seconds=log[:, 2],
                full=log[:, 3] == mode,
                settle={int(b): float(s) for _, b, s in data["settle"]},
            )
    if len(modes) != 1:
        raise ValueError(f"runs disagree on the full batch: {sorted(modes)}")
    return runs, modes.pop()


def minutes(total_seconds: float, half_width: float) -> float:
    """Engine minutes for a +-1% half-width, from ``half_width`` reached in ``total_seconds``."""
    return total_seconds * (half_width / LOG_1PCT) ** 2 / 60.0


def slope(d: Floats, c: Floats) -> float:
    """OLS slope of d on c (with an intercept)."""
    cc = c - c.mean()
    return float(cc @ (d - d.mean()) / (cc @ cc))


def sign_flip_ci(y: Floats, confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """CI of mean(y) inverting the two-sided sign-flip test (exact enumeration when 2**n <= FLIPS), by bisection."""
    n = y.size
    if 2**n <= FLIPS:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    else:
        signs = np.random.default_rng(seed).choice([-1.0, 1.0], (FLIPS, n))

    def accepted(delta: float) -> bool:
        z = y - delta
        return float(np.mean(np.abs(signs @ z) >= abs(z.sum()) - 1e-12)) >= 1.0 - confidence

    bounds = []
    for sign in (-1.0, 1.0):
        inner, outer = float(y.mean()), float(y.mean()) + sign
        for _ in range(50):
            middle = (inner + outer) / 2
            inner, outer = (middle, outer) if accepted(middle) else (inner, middle)
        bounds.append(inner)
    return bounds[0], bounds[1]


def spread(values: list[float]) -> dict[str, Any]:
    """Median and [min, max] (secondary figures: ratios and checks, not engine minutes)."""
    return {"median": float(np.median(values)), "range": [float(min(values)), float(max(values))]}


def over_runs(
    values: list[float], n_runs: int, weights: list[float] | None = None, detail: bool = True
) -> dict[str, Any]:
    """Engine minutes per +-1% over runs, from ``values`` in run-major order (the same number of seeds per run).

    ``mean``: the mean over runs of the per-run means over seeds (see the module docstring for why the mean);
    ``ci95_over_runs``: t interval of that mean over the runs (n_runs - 1 df); ``runs_range``: min and max of the
    per-run figures in ``runs``; ``time_weighted_mean`` (with ``weights``, the runs' engine seconds): the cost of one
    comparison pooling every run's pairs; ``median_run_seed``: the median over runs x seeds (secondary). Without
    ``detail`` (secondary figures: a small JSON) the per-run figures are left out."""
    per_run = np.asarray(values, dtype=np.float64).reshape(n_runs, -1).mean(axis=1)
    mean = float(per_run.mean())
    half = float(student_t.ppf(0.975, n_runs - 1) * per_run.std(ddof=1) / math.sqrt(n_runs))
    out: dict[str, Any] = {
        "mean": mean,
        "ci95_over_runs": [mean - half, mean + half],
        "runs_range": [float(per_run.min()), float(per_run.max())],
    }
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        out["time_weighted_mean"] = float(w @ per_run / w.sum())
    out["median_run_seed"] = float(np.median(values))
    if detail:
        out["runs"] = [float(v) for v in per_run]
    return out


def inject(steps: Floats, is_trial: npt.NDArray[np.bool_], kind: str) -> tuple[Floats, Floats]:
    """B's steps with a known effect, and every step's seconds had it run B (for the per-chunk true ratio).

    mult: x 1.01; add: + 1% of the run's median step; halve: steps above twice the median lose half their excess
    (an arm that halves pauses: the effect sits on the heavy tail); aa: none."""
    median = float(np.median(steps))
    if kind == "aa":
        as_b = steps
    elif kind == "mult":
        as_b = steps * 1.01
    elif kind == "add":
        as_b = steps + 0.01 * median
    elif kind == "halve":
        as_b = np.where(steps > 2 * median, 2 * median + (steps - 2 * median) / 2, steps)
    else:
        raise ValueError(kind)
    return np.where(is_trial[:, None], as_b, steps), as_b


def proportion(hits: int, n: int) -> dict[str, Any]:
    """A rate with its exact (Clopper-Pearson) 95% CI."""
    ci = binomtest(hits, n).proportion_ci() if n else None
    return {"rate": hits / n if n else math.nan, "ci": [ci.low, ci.high] if ci else None, "n": n}


def rounded(value: Any) -> Any:
    """``value`` with every float cut to 4 significant digits (a small, readable JSON)."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value
