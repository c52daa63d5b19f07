"""Scaled pairing on the simulated server: what the capacity ratio gains when B replays each round's requests at the
load times a scale c, not at A's load.

    nice -n 19 python -m benchmarks.simulations.capacity_scaled [--out results/reference/capacity-scaled-sim.json]
        [--searches N]

A design study for ``tuner capacity``, whose planner runs both arms of a round at one load: no tool code changes
here. When the arms really differ (B's steps 10% shorter, bursty arrivals), the ratio's spread in
``benchmarks.simulations.capacity_sim`` is mostly not the host's noise: with the simulated host's drift, run noise
and step jitter all switched off, its SD fell only from 0.070 to 0.060 (300 searches). It is the request sets: A's
crossing is read between two grid loads and B's between two others, 16% higher, so a pass's bursts weigh
differently on the two arms. Scaled, B sees the very arrival pattern A sees, c times faster; with c at the true
ratio both arms cross at one grid load, the bursts are common to both as under A/A, and c times B's crossing on
that scale is B's capacity.

Each case runs the tool's planner (:class:`tuner.capacity.KneePlanner`, 160 runs, the same seeds in every case)
with B at c times each load: c = 1 (the tool today), c the true ratio (an oracle: the ceiling), c 5% either side
of it, c = A's step time over B's (known before any load is run: a step comparison measures it in seconds), and c
from a pilot: a search at c = 1 of 48 runs whose estimate (kept within 0.7-1.5; 1 where censored)
sets c for a second search of 112, the pilot's rounds discarded (a lower bound on a planner that would pool them).
Each estimate and interval is c times the search's. Prints and writes, per case, the coverage of the true ratio
(with its Wilson 95% interval), the log estimates' SD and robust SD (1.4826 MAD), bias (mean with its standard
error, and median), the median half-width of the log interval and the share of open intervals.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.simulations.capacity_model import Host, Server, World, true_capacity
from benchmarks.simulations.capacity_sim import log_interval, rate, rounded, run_searches
from tuner.capacity import KneePlanner
from tuner.records.files import write_json
from tuner.stats.capacity import CapacityEstimate

PILOT_RUNS = 48
BUDGET_RUNS = 160


def scaled_summary(
    estimates: Sequence[CapacityEstimate | None], scales: Sequence[float], truth: float
) -> dict[str, Any]:
    """Coverage, spread, bias and width of c times each search's estimate, against the true ratio ``truth``."""
    rows = [(e, c) for e, c in zip(estimates, scales, strict=True) if e is not None and 0 < e.ratio < math.inf]
    logs = np.array([math.log(c * e.ratio) for e, c in rows]) - math.log(truth)
    ends = np.array([log_interval(e) for e, _ in rows]) + np.log([[c] for _, c in rows]) - math.log(truth)
    halves = (ends[:, 1] - ends[:, 0]) / 2
    bounded = np.isfinite(halves)
    sd = float(np.std(logs, ddof=1))
    return {
        "covered": rate(int(np.sum((ends[:, 0] <= 0) & (ends[:, 1] >= 0))), len(rows)),
        "sd_log_ratio": sd,
        "robust_sd_log_ratio": float(1.4826 * np.median(np.abs(logs - np.median(logs)))),
        "bias_log": float(np.mean(logs)),
        "bias_log_se": sd / math.sqrt(len(logs)),
        "median_bias_log": float(np.median(logs)),
        "median_half_width_log": float(np.median(halves[bounded])) if bounded.any() else None,
        "open_interval": rate(int(np.sum(~bounded)), len(rows)),
        "searches": len(estimates),
    }


def searched(
    rng: np.random.Generator, world: World, start: float, count: int, budget: float, scales: Sequence[float]
) -> list[CapacityEstimate | None]:
    """Each search's estimate, B at each load times its scale."""
    make = partial(KneePlanner, start, 0.95, budget=budget, precision=0.03)
    return [s.estimate() for s in run_searches(rng, world, count, make, scales)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--searches", type=int, default=300, help="simulated searches per case")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path("results/reference/capacity-scaled-sim.json"))
    args = parser.parse_args()
    if args.searches < 2:
        parser.error(f"--searches must be at least 2, got {args.searches}")
    began = time.perf_counter()
    result: dict[str, Any] = {"config": {"searches": args.searches, "seed": args.seed, "budget_runs": BUDGET_RUNS,
                                         "pilot_runs": PILOT_RUNS}, "cases": {}}  # fmt: skip
    for arrivals, bursty in (("bursty", True), ("poisson", False)):
        world = World(Server(), Host(), bursty=bursty, effect=0.0)
        knee = true_capacity(world, 0.95, 0.0)
        truth = true_capacity(world, 0.95, 0.1) / knee
        faster, n = replace(world, effect=0.1), args.searches
        cases: dict[str, Any] = {"truth": truth}
        result["cases"][arrivals] = cases
        fixed = {"tool (c = 1)": 1.0, "oracle (c = truth)": truth, "c = 1.05 truth": 1.05 * truth,
                 "c = truth / 1.05": truth / 1.05, "c = A's step time / B's": 1 / (1 - faster.effect)}  # fmt: skip
        for name, c in fixed.items():
            scales = [c] * n
            estimates = searched(np.random.default_rng(args.seed), faster, 0.6 * knee, n, BUDGET_RUNS, scales)
            cases[name] = scaled_summary(estimates, scales, truth)
            say(arrivals, name, cases[name], began)
        pilots = searched(np.random.default_rng(args.seed + 1), faster, 0.6 * knee, n, PILOT_RUNS, [1.0] * n)
        cases["pilot alone (c = 1)"] = scaled_summary(pilots, [1.0] * n, truth)
        scales = [float(np.clip(e.ratio, 0.7, 1.5)) if e and 0 < e.ratio < math.inf else 1.0 for e in pilots]
        rest = searched(np.random.default_rng(args.seed + 2), faster, 0.6 * knee, n, BUDGET_RUNS - PILOT_RUNS, scales)
        cases["c from the pilot"] = scaled_summary(rest, scales, truth)
        for name in ("pilot alone (c = 1)", "c from the pilot"):
            say(arrivals, name, cases[name], began)
    result["seconds"] = round(time.perf_counter() - began, 1)
    write_json(args.out, rounded(result))
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")


def say(arrivals: str, name: str, case: dict[str, Any], began: float) -> None:
    covered = case["covered"]
    print(f"{arrivals}, {name}: covered {covered['rate']:.1%} [{covered['ci'][0]:.1%}, {covered['ci'][1]:.1%}], SD "
          f"{case['sd_log_ratio']:.4f} (robust {case['robust_sd_log_ratio']:.4f}), bias {case['bias_log']:+.4f} ± "
          f"{case['bias_log_se']:.4f} (median {case['median_bias_log']:+.4f}), median half-width "
          f"{case['median_half_width_log'] or math.inf:.4f}, open {case['open_interval']['rate']:.1%} "
          f"({time.perf_counter() - began:.0f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
