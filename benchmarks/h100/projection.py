"""Engine minutes a 95% CI of +-1% needs per step-block length K, replayed from real H100 per-step times.

    nice -n 19 .venv/bin/python -m benchmarks.h100.projection --seeds 20 --calibration-seeds 120 \
        --body-calibration-seeds 40 --output results/reference/h100-projection.json

``headline.cheapest`` is the sweep's default estimator, the body (:mod:`benchmarks.h100.body_projection`'s method on the
same runs); ``headline.plain`` is the plain ratio of sums this module's own method below describes.

The step interleaver's budget question, answered with measured host noise instead of the simulator's: the full-batch
steps of each A/A run in ../shared/data/h100-steps (README there) are cut, in time order, into blocks of K steps,
consecutive blocks paired, and the arms assigned at random within each pair (one assignment per seed), as the
interleaver does. Per run, K and seed the project's estimator :func:`tuner.stats.paired_ratio_of_sums` (steps over
step seconds, mean step time B/A) gives ``log_sd``, the SD of the per-pair influence values of log R; the engine time
for +-1% is the pairs' step seconds times (half-width / log 1.01)**2, the half-width from the normal approximation
1.96 * log_sd / sqrt(n) (the target needs thousands of pairs, where it holds; the inverted sign-flip CI of the same
call is compared per K). That is C * v * tau with C = (1.96 / log 1.01)**2, v = log_sd**2 the per-pair variance and
tau the engine seconds per pair.

Headline (``headline`` in the JSON, the first table printed): the MEAN OVER RUNS of the per-run engine minutes per
+-1% (each run's figure the mean over its seeds), with the min-max of the per-run figures and a t 95% CI over the 6
runs (5 df), for two topologies at every K. Why the mean: variance adds over engine time. After engine time E spent
in host state i the variance of log R is v_i * tau_i / E, so v * tau (the cost) is a variance-time product; a
comparison that spends equal engine time in each run's host state has variance mean_i(v_i * tau_i) / E, so what it
costs is the mean of the per-run costs, not their median. (A median of per-run figures ignores how much the noisier
runs add: here the runs fall in two clusters and the median sits in the gap, flipping with the seed.) Runs are
weighted equally, each being one draw of the host's state; their lengths (504 or ~1016 full steps) are the
recording's choice. The time-weighted mean, which is what one comparison pooling every run's pairs would cost (its
per-pair variance pooled over all pairs), is kept as ``time_weighted_mean``; the median over runs x seeds as
``median_run_seed``; both are secondary.

Topologies: ``sync`` re-pairs the steps as recorded (synchronous scheduling: a block of K compared steps costs K
steps). ``async`` models vLLM's GPU default (async scheduling with a batch queue): the first step of every block
finishes the other arm's batch, so it is run but not compared. It is modelled from the data by re-pairing with a
one-step gap before each block: each block takes K + 1 consecutive recorded steps, the first (the washout at that
position) counted as engine time but not compared. This costs more than the (K + 1) / K in time: the compared blocks
of a pair are one step further apart, and the steps' autocorrelation falls with the lag, so the per-pair variance
rises too. Both topologies drop the same random 0-15 leading steps per run and seed (the phase of ``layout`` below),
so unit edges fall at every phase of the recording's own switch profile.

``per_K`` keeps the recording's phase (units from each run's first step), synchronous only, with the log-ratio
figures below; its engine minutes are reported the same way (mean over runs, per-run figures, min-max, CI).

On the log-ratio scale (per pair log mean B - log mean A) it also evaluates the neighbour-slope adjustment: the
time-ordered difference d = log(second block) - log(first block) is regressed on the drift across the pair,
c = log(next block) - log(previous block) (steps outside the pair), and the per-pair effect is s * (d - beta * c)
with s = +1 when B came second. beta, d and c do not change when arms are swapped, so the sign-flip test stays exact.
The AB runs (real arms: default gen0 threshold vs a scaled one) check that the adjustment leaves the point estimate
inside the unadjusted CI, and give the ratio of sums with each block's gc.collect(0) settle time charged to it.

On the ratio of sums itself (``adjusted``, K = 1, 2, 4): :func:`benchmarks.h100.step_adjust.adjusted_step_fit` (the same
neighbour drift regressed out of each unit's time-ordered contrast in seconds, exact sign-flip test and inverted CI)
against the plain ratio of sums, for pairs and for other randomization units (mirrored ABBA quadruples, runs of 2 or
4 alternating pairs), with random phases; per design the A/A false-positive rate and the coverage of injected
effects (multiplicative, additive, halved pauses) over chunks of 256 steps, and the share of a carry-over each design
reports (ADJUSTED_NOTES).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from benchmarks import ROOT
from benchmarks.h100.body_projection import body_headline, calibration_lines
from benchmarks.h100.designs import ab_check, calibration, design_projection
from benchmarks.h100.notes import ADJUSTED_NOTES, DEFAULT_ESTIMATOR_NOTE, HEADLINE_NOTE, NOTES
from benchmarks.h100.plain import aa_projection, cheapest, topology_projection
from benchmarks.h100.recordings import DATA, TOPOLOGIES, Run, load, rounded
from benchmarks.h100.tables import ab_line, adjusted_table, headline_table, per_k_table
from tuner.records.files import write_json

COMMAND = (
    "nice -n 19 .venv/bin/python -m benchmarks.h100.projection --seeds 20 --calibration-seeds 120 "
    "--body-calibration-seeds 40 --output results/reference/h100-projection.json"
)
K_VALUES = (1, 2, 4, 8, 16, 32)
ADJUSTED_K = (1, 2, 4)
DESIGNS = ("AB", "ABBA", "ABAB", "ABABABAB")  # randomization units: pairs, mirrored quadruples, alternating runs


def plain_headline(runs: dict[str, Run], seeds: int) -> dict[str, Any]:
    """The plain ratio of sums in both topologies at every K, and the cheapest K of each (``headline.plain``)."""
    aa = [run for run in runs.values() if run.name.startswith("AA")]
    topologies = {
        name: {k: topology_projection(aa, k, seeds, washout) for k in K_VALUES} for name, washout in TOPOLOGIES.items()
    }
    return {
        "what": HEADLINE_NOTE,
        "runs": [name for name, run in runs.items() if run.name.startswith("AA")],
        **{name: {str(k): row for k, row in rows.items()} for name, rows in topologies.items()},
        "cheapest": {name: cheapest(rows) for name, rows in topologies.items()},
    }


def adjusted_designs(aa: list[Run], seeds: int, calibration_seeds: int, stats_seeds: int) -> dict[str, dict[str, Any]]:
    """Per K of ADJUSTED_K and randomization unit, the plain and adjusted ratio of sums and their calibration."""
    adjusted: dict[str, dict[str, Any]] = {}
    for k in ADJUSTED_K:
        for pattern in DESIGNS:
            started = time.perf_counter()
            row = design_projection(aa, k, pattern, seeds)
            row["calibration"] = calibration(aa, k, pattern, calibration_seeds, stats_seeds)
            row["seconds"] = time.perf_counter() - started
            adjusted[f"K{k}/{pattern}"] = row
    return adjusted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="the H100 per-step recordings")
    parser.add_argument("--seeds", type=int, default=20, help="random arm assignments per run and K")
    parser.add_argument(
        "--calibration-seeds", type=int, default=120, help="random designs per run, K and design for the chunk checks"
    )
    parser.add_argument(
        "--stats-seeds", type=int, default=5, help="calibration seeds also run through tuner.stats (cross-check)"
    )
    parser.add_argument(
        "--body-calibration-seeds", type=int, default=40, help="random assignments per run for the body's chunks"
    )
    parser.add_argument("--output", type=Path, default=ROOT / "results" / "reference" / "h100-projection.json")
    args = parser.parse_args()
    began = time.perf_counter()
    paths = sorted(args.data.glob("*.json"))
    runs, full_batch = load(paths)
    aa = [run for run in runs.values() if run.name.startswith("AA")]
    plain = plain_headline(runs, args.seeds)

    console = Console(soft_wrap=True, width=180)
    body = body_headline(aa, args.seeds, args.body_calibration_seeds, console.print)
    body.pop("rows")
    headline: dict[str, Any] = {
        "estimator": DEFAULT_ESTIMATOR_NOTE,
        "cheapest": body.pop("cheapest"),
        "calibration": body.pop("calibration"),
        "body": body,
        "plain": plain,
    }
    per_k = {k: aa_projection(aa, k, args.seeds) for k in K_VALUES}
    ab = {name: ab_check(run) for name, run in runs.items() if run.name.startswith("AB")}
    adjusted = adjusted_designs(aa, args.seeds, args.calibration_seeds, args.stats_seeds)

    console.print(headline_table(plain, len(aa), args.seeds))
    for name, best in headline["cheapest"].items():
        console.print(f"the sweep's default, the body: cheapest {name} K={best['K']}, {best['engine_min_per_pct']:.3g}")
    for line in calibration_lines(headline["calibration"]):
        console.print(f"the body's calibration, {line}")
    for name, best in plain["cheapest"].items():
        console.print(
            f"cheapest {name}: K={best['K']} ({best['engine_min_per_pct']:.3g} engine min per +-1%); runs "
            f"(of {len(aa)}) in which another K costs less: "
            + ", ".join(f"K={k} {n}" for k, n in best["runs_cheaper_than_it"].items() if k != str(best["K"]))
        )
    console.print(per_k_table(per_k, len(aa), args.seeds))
    for name, res in ab.items():
        console.print(ab_line(name, res))
    console.print(adjusted_table(adjusted, args.seeds, args.calibration_seeds))
    result = {
        "command": COMMAND,
        "data": [os.path.relpath(p, ROOT) for p in paths],
        "full_batch": full_batch,
        "seeds": args.seeds,
        "headline": headline,
        "per_K": {str(k): row for k, row in per_k.items()},
        "ab": ab,
        "adjusted": adjusted,
        "notes": NOTES,
        "adjusted_notes": ADJUSTED_NOTES,
        "seconds": round(time.perf_counter() - began, 1),
    }
    write_json(args.output, rounded(result))
    console.print(f"wrote {args.output} ({result['seconds']:.1f} s)")


if __name__ == "__main__":
    main()
