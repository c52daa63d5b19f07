"""Engine minutes a 95% CI of +-1% needs per step-block length K, replayed from real H100 per-step times.

    nice -n 19 .venv/bin/python -m benchmarks.h100_projection --seeds 20 --calibration-seeds 120 \
        --body-calibration-seeds 40 --output results/reference/h100-projection.json

``headline.cheapest`` is the sweep's default estimator, the body (:mod:`benchmarks.body_projection`'s method on the
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

On the ratio of sums itself (``adjusted``, K = 1, 2, 4): :func:`benchmarks.step_adjust.adjusted_step_fit` (the same
neighbour drift regressed out of each unit's time-ordered contrast in seconds, exact sign-flip test and inverted CI)
against the plain ratio of sums, for pairs and for other randomization units (mirrored ABBA quadruples, runs of 2 or
4 alternating pairs), with random phases; per design the A/A false-positive rate and the coverage of injected
effects (multiplicative, additive, halved pauses) over chunks of 256 steps, and the share of a carry-over each design
reports (ADJUSTED_NOTES).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from scipy.stats import binomtest
from scipy.stats import t as student_t

from benchmarks.step_adjust import adjusted_step_fit, random_units
from tuner.records.files import write_json
from tuner.stats import RatioEstimate, paired_ratio_of_sums, ratio_of_sums_estimates

ROOT = Path(__file__).resolve().parents[1]
COMMAND = (
    "nice -n 19 .venv/bin/python -m benchmarks.h100_projection --seeds 20 --calibration-seeds 120 "
    "--body-calibration-seeds 40 --output results/reference/h100-projection.json"
)
K_VALUES = (1, 2, 4, 8, 16, 32)
Z = NormalDist().inv_cdf(0.975)
LOG_1PCT = math.log(1.01)
FLIPS = 10_000
TOPOLOGIES = {"sync": 0, "async": 1}  # washout steps before each block's compared steps
ADJUSTED_K = (1, 2, 4)
DESIGNS = ("AB", "ABBA", "ABAB", "ABABABAB")  # randomization units: pairs, mirrored quadruples, alternating runs
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


def topology_projection(runs: list[Run], k: int, seeds: int, washout: int) -> dict[str, Any]:
    """The A/A steps re-paired at ``k`` compared steps per block, each block preceded by ``washout`` steps that are
    charged as engine time but not compared (0: synchronous, as recorded; 1: async scheduling's washout step), at
    the random phase of :func:`layout`; per run and seed the engine minutes per +-1% from tuner.stats'
    ``log_sd`` (C * v * tau), and the exact inverted CI over the normal one."""
    acc: dict[str, list[float]] = {key: [] for key in ("min", "var", "tau", "total", "exact", "compared")}
    pairs = []
    for index, run in enumerate(runs):
        steps = run.seconds[run.full]
        for seed in range(seeds):
            offset = int(np.random.default_rng([seed, index, k, 7]).integers(0, OFFSET_SPAN))  # layout()'s phase
            x = steps[offset:]
            span = k + washout
            n = x.size // (2 * span)
            cut = x[: 2 * span * n].reshape(n, 2, span)  # (pair, first/second in time, washout + compared steps)
            blocks = cut[:, :, washout:].sum(axis=-1)
            total = float(cut.sum())  # engine time: compared and washout steps
            s = np.random.default_rng([seed, index, k, 17]).choice([-1.0, 1.0], n)  # +1: B second
            b_time = np.where(s > 0, blocks[:, 1], blocks[:, 0])
            a_time = np.where(s > 0, blocks[:, 0], blocks[:, 1])
            amount = np.full(n, float(k))
            est = paired_ratio_of_sums(amount, b_time, amount, a_time, higher_is_better=False, seed=seed)
            normal = Z * est.log_sd / math.sqrt(n)
            acc["min"].append(minutes(total, normal))
            acc["var"].append(est.log_sd**2)
            acc["tau"].append(total / n)
            acc["total"].append(total)
            acc["exact"].append((math.log(est.ci_high) - math.log(est.ci_low)) / 2 / normal)
            acc["compared"].append(float(blocks.sum()) / total)
            pairs.append(n)

    def run_means(key: str) -> list[float]:
        return [float(v) for v in np.reshape(acc[key], (len(runs), seeds)).mean(axis=1)]

    return {
        "washout_steps_per_block": washout,
        "engine_steps_per_pair": 2 * (k + washout),
        "pairs_per_run": [min(pairs), max(pairs)],
        "engine_min_per_pct": over_runs(acc["min"], len(runs), weights=run_means("total")),
        "run_pair_log_var": run_means("var"),
        "run_engine_seconds_per_pair": run_means("tau"),
        "compared_share_of_engine_time": float(np.mean(acc["compared"])),
        "exact_over_normal_half_width": spread(acc["exact"]),
    }


def cheapest(rows: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The K with the lowest mean engine minutes per +-1%, and per K the runs (paired: same run, same phases' seeds)
    in which that K costs less than the cheapest one."""
    best = min(rows, key=lambda k: rows[k]["engine_min_per_pct"]["mean"])
    base = rows[best]["engine_min_per_pct"]
    return {
        "K": best,
        "engine_min_per_pct": base["mean"],
        "runs_cheaper_than_it": {
            str(k): sum(a < b for a, b in zip(row["engine_min_per_pct"]["runs"], base["runs"], strict=True))
            for k, row in rows.items()
        },
        "mean_over_it": {str(k): row["engine_min_per_pct"]["mean"] / base["mean"] for k, row in rows.items()},
    }


def aa_projection(runs: list[Run], k: int, seeds: int) -> dict[str, Any]:
    """The A/A steps re-paired at block length ``k``: per run and seed, ratio of sums and log-ratio figures."""
    acc: dict[str, list[float]] = {key: [] for key in ("sd", "min", "exact", "lsd", "lmin", "asd", "amin", "beta")}
    pairs, totals = [], []
    for run in runs:
        steps = run.seconds[run.full]
        n = steps.size // (2 * k)
        blocks = steps[: 2 * k * n].reshape(n, 2, k).sum(axis=-1)  # (pair, first/second in time)
        total, amount = float(blocks.sum()), np.full(n, float(k))
        totals.append(total)
        d = np.log(blocks[:, 1]) - np.log(blocks[:, 0])
        c = np.log(blocks[2:, 0]) - np.log(blocks[:-2, 1])  # next block minus previous block, interior pairs
        beta = slope(d[1:-1], c)
        acc["beta"].append(beta)
        pairs.append(n)
        for seed in range(seeds):
            s = np.random.default_rng([seed, k]).choice([-1.0, 1.0], n)  # +1: B second
            b_time = np.where(s > 0, blocks[:, 1], blocks[:, 0])
            a_time = np.where(s > 0, blocks[:, 0], blocks[:, 1])
            est = paired_ratio_of_sums(amount, b_time, amount, a_time, higher_is_better=False, seed=seed)
            normal = Z * est.log_sd / math.sqrt(n)
            acc["sd"].append(est.log_sd)
            acc["min"].append(minutes(total, normal))
            acc["exact"].append((math.log(est.ci_high) - math.log(est.ci_low)) / 2 / normal)
            plain, adjusted = s * d, (s * d)[1:-1] - s[1:-1] * beta * c
            for key, values in (("l", plain), ("a", adjusted)):
                sd = float(np.std(values, ddof=1))
                acc[f"{key}sd"].append(sd)
                acc[f"{key}min"].append(minutes(total, Z * sd / math.sqrt(values.size)))
    return {
        "pairs": sum(pairs),
        "pairs_per_run": [min(pairs), max(pairs)],
        "log_sd": [min(acc["sd"]), max(acc["sd"])],
        "engine_min_per_pct": over_runs(acc["min"], len(runs), weights=totals),
        "exact_over_normal_half_width": spread(acc["exact"]),
        "log_ratio_sd": [min(acc["lsd"]), max(acc["lsd"])],
        "log_ratio_engine_min_per_pct": over_runs(acc["lmin"], len(runs), detail=False),
        "adjusted_log_sd": [min(acc["asd"]), max(acc["asd"])],
        "adjusted_engine_min_per_pct": over_runs(acc["amin"], len(runs), detail=False),
        "beta": [min(acc["beta"]), max(acc["beta"])],
    }


# --------------------------------------------------------------------------
# benchmarks.step_adjust: neighbour-drift adjusted ratio of sums, and randomization units other than pairs


@dataclass(frozen=True)
class Layout:
    """One run cut for one seed: steps (units' blocks, then one context block each side) and the design."""

    steps: Floats  # (blocks, k) step seconds, in time order
    is_trial: npt.NDArray[np.bool_]
    unit: npt.NDArray[np.int64]  # -1: context block outside every unit


def layout(steps: Floats, k: int, pattern: str, seed: int, run_index: int, fixed_phase: bool = False) -> Layout:
    """The run's full-batch steps after a random 0-15 step offset (the same for every design of this run and seed),
    in blocks of ``k``, with a leading and a trailing context block around consecutive randomized units. With
    ``fixed_phase`` the units start at the run's first step (per_K's phase) and only the trailing block is context."""
    offset = 0 if fixed_phase else int(np.random.default_rng([seed, run_index, k, 7]).integers(0, OFFSET_SPAN))
    lead = 0 if fixed_phase else 1
    x = steps[offset:]
    n_units = (x.size // k - lead - 1) // len(pattern)
    x = x[: (n_units * len(pattern) + lead + 1) * k].reshape(-1, k)
    is_trial, unit = random_units(n_units, pattern, np.random.default_rng([seed, run_index, k, len(pattern), 11]))
    context = np.random.default_rng([seed, run_index, k, 13]).random(2) < 0.5
    return Layout(
        steps=x,
        is_trial=np.r_[context[:lead], is_trial, context[1]],
        unit=np.r_[np.full(lead, -1), unit, -1].astype(np.int64),
    )


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


def design_projection(runs: list[Run], k: int, pattern: str, seeds: int) -> dict[str, Any]:
    """Per run and seed, the whole run as one comparison: engine minutes per +-1% from the exact inverted CI (10,000
    flips) for the plain ratio of sums (lags=0) and the neighbour-drift adjusted one (lags=1), the normal
    approximation against it, and the point estimate when each B block spills 1% of its time into the next block."""
    acc: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        acc.setdefault(key, []).append(value)

    for index, run in enumerate(runs):
        steps = run.seconds[run.full]
        for seed in range(seeds):
            fixed = layout(steps, k, pattern, seed, index, fixed_phase=True)
            blocks = fixed.steps.sum(axis=1)
            total = float(blocks[fixed.unit >= 0].sum())
            for name, lags in (("plain", 0), ("adjusted", 1)):
                fit = adjusted_step_fit(
                    blocks, np.full(blocks.size, float(k)), fixed.is_trial, fixed.unit, lags=lags, seed=seed
                )
                half = (math.log(fit.estimate.ci_high) - math.log(fit.estimate.ci_low)) / 2
                add(f"fixed_{name}_min", minutes(total, half))
            lay = layout(steps, k, pattern, seed, index)
            blocks = lay.steps.sum(axis=1)
            used = lay.unit >= 0
            total = float(blocks[used].sum())
            spilled = blocks + 0.01 * np.r_[0.0, (blocks * lay.is_trial)[:-1]]
            amount = np.full(blocks.size, float(k))
            minutes_of = {}
            for name, lags in (("plain", 0), ("adjusted", 1)):
                fit = adjusted_step_fit(
                    blocks, amount, lay.is_trial, lay.unit, lags=lags, n_permutations=FLIPS, seed=seed
                )
                half = (math.log(fit.estimate.ci_high) - math.log(fit.estimate.ci_low)) / 2
                minutes_of[name] = minutes(total, half)
                add(f"{name}_min", minutes_of[name])
                add(f"{name}_exact_over_normal", half / fit.normal_half_width)
                spill = adjusted_step_fit(spilled, amount, lay.is_trial, lay.unit, lags=lags, n_permutations=100)
                add(f"{name}_spill", math.log(spill.estimate.ratio / fit.estimate.ratio) / math.log(1.01))
                if lags:
                    add("beta", fit.beta[0])
                    add("sd_ratio", fit.sd_ratio)
            add("adjusted_over_plain", minutes_of["adjusted"] / minutes_of["plain"])
            add("units", float(int(used.sum()) // len(pattern)))
    return {
        "units_per_run": [min(acc["units"]), max(acc["units"])],
        "plain_engine_min_per_pct": over_runs(acc["plain_min"], len(runs), detail=False),
        "adjusted_engine_min_per_pct": over_runs(acc["adjusted_min"], len(runs), detail=False),
        "adjusted_over_plain_minutes": spread(acc["adjusted_over_plain"]),
        "fixed_phase_engine_min_per_pct": {
            "plain": over_runs(acc["fixed_plain_min"], len(runs), detail=False),
            "adjusted": over_runs(acc["fixed_adjusted_min"], len(runs), detail=False),
        },
        "plain_exact_over_normal": spread(acc["plain_exact_over_normal"]),
        "adjusted_exact_over_normal": spread(acc["adjusted_exact_over_normal"]),
        "beta": [min(acc["beta"]), max(acc["beta"])],
        "sign_flip_sd_ratio": spread(acc["sd_ratio"]),
        "spill_1pct_measured_share": {
            "plain": float(np.mean(acc["plain_spill"])),
            "adjusted": float(np.mean(acc["adjusted_spill"])),
        },
    }


def calibration(runs: list[Run], k: int, pattern: str, seeds: int, stats_seeds: int) -> dict[str, Any]:
    """Sub-comparisons of CHUNK_STEPS steps of consecutive units (plus one context block each side), per run and
    seed: A/A false-positive rate (p < 0.05) and coverage of a known injected effect, for the plain ratio of sums
    (lags=0) and the adjusted one (lags=1) on the same chunks and the same sign patterns. For the first
    ``stats_seeds`` seeds tuner.stats.ratio_of_sums_estimates runs on the same chunks (units' summed seconds) too,
    counting the chunks where its decision (rejects 1 / covers the truth) differs from lags=0's."""
    per_chunk = max(2, CHUNK_STEPS // (k * len(pattern)))
    width = per_chunk * len(pattern)
    counts = {kind: {"plain": [0, 0], "adjusted": [0, 0]} for kind in INJECTIONS}
    errors: dict[str, dict[str, list[float]]] = {kind: {"plain": [], "adjusted": []} for kind in INJECTIONS}
    stats_differs = [0, 0]
    for index, run in enumerate(runs):
        steps = run.seconds[run.full]
        for seed in range(seeds):
            lay = layout(steps, k, pattern, seed, index)
            n_chunks = (lay.unit.size - 2) // width
            for kind in INJECTIONS:
                observed, as_b = inject(lay.steps, lay.is_trial, kind)
                blocks, truth_blocks, reference_blocks = observed.sum(axis=1), as_b.sum(axis=1), lay.steps.sum(axis=1)
                plain_decisions, columns, truths = [], [], []
                for c in range(n_chunks):
                    sl = slice(c * width, c * width + width + 2)  # the chunk's units and one block each side
                    inner = slice(c * width + 1, c * width + width + 1)
                    truths.append(float(truth_blocks[inner].sum() / reference_blocks[inner].sum()))
                    unit = lay.unit[sl].copy()
                    unit[0], unit[-1] = -1, -1
                    for name, lags in (("plain", 0), ("adjusted", 1)):
                        est = adjusted_step_fit(
                            blocks[sl],
                            np.full(width + 2, float(k)),
                            lay.is_trial[sl],
                            unit,
                            lags=lags,
                            n_permutations=CALIBRATION_FLIPS,
                            seed=seed * 1000 + c,
                        ).estimate
                        decision = tally(counts[kind][name], errors[kind][name], est, truths[-1], kind)
                        if lags == 0:
                            plain_decisions.append(decision)
                    b = lay.is_trial[inner].reshape(per_chunk, len(pattern))
                    x = blocks[inner].reshape(per_chunk, len(pattern))
                    columns.append((k * b.sum(axis=1), (x * b).sum(axis=1), k * (~b).sum(axis=1), (x * ~b).sum(axis=1)))
                if seed < stats_seeds and n_chunks:
                    ta, tt, ra, rt = (np.array([col[i] for col in columns], dtype=np.float64) for i in range(4))
                    plain = ratio_of_sums_estimates(
                        ta, tt, ra, rt, higher_is_better=False, n_permutations=CALIBRATION_FLIPS, seed=seed
                    )
                    for est, truth, mine in zip(plain, truths, plain_decisions, strict=True):
                        stats_differs[0] += int(tally([0, 0], [], est, truth, kind) != mine)
                        stats_differs[1] += 1
    out: dict[str, Any] = {
        "units_per_chunk": per_chunk,
        "tuner_stats_decisions_differing": {"chunks": stats_differs[1], "differing": stats_differs[0]},
    }
    for kind in INJECTIONS:
        out[kind] = {}
        for name in ("plain", "adjusted"):
            hits, n = counts[kind][name]
            err = np.array(errors[kind][name])
            out[kind][name] = {
                ("false_positive" if kind == "aa" else "coverage"): proportion(hits, n),
                "mean_log_error": float(err.mean()),
                "log_error_se": float(err.std(ddof=1) / math.sqrt(err.size)),
                "log_error_sd": float(err.std(ddof=1)),
            }
    return out


def tally(count: list[int], errors: list[float], est: RatioEstimate, truth: float, kind: str) -> bool:
    """Count a rejection (A/A: p < 0.05) or a covered truth, keep the estimate's log error; return the decision."""
    decision = est.p_value < 0.05 if kind == "aa" else est.ci_low <= truth <= est.ci_high
    count[0] += int(decision)
    count[1] += 1
    errors.append(math.log(est.ratio / truth))
    return decision


def ab_check(run: Run) -> dict[str, Any]:
    """The recorded A/B pairs (blocks 2j, 2j+1; arm 1 = trial): ratio of sums without and with settle time, and the
    log-ratio effect unadjusted vs neighbour-slope adjusted on the pairs whose neighbouring blocks are full too."""
    ids = np.unique(run.block)
    k = int(np.bincount(run.block).max())
    full = {int(b) for b in ids if run.full[run.block == b].sum() == k}
    sums = {b: float(run.seconds[run.block == b].sum()) for b in full}
    arm = {int(b): int(run.arm[run.block == b][0]) for b in ids}
    pairs = [j for j in range(0, int(ids.max()), 2) if j in full and j + 1 in full]
    trial = [j + 1 if arm[j + 1] == 1 else j for j in pairs]
    ref = [j if arm[j + 1] == 1 else j + 1 for j in pairs]
    amount = np.full(len(pairs), float(k))

    def ratio(settled: bool) -> dict[str, Any]:
        def t(blocks: list[int]) -> Floats:
            return np.array([sums[b] + (run.settle.get(b, 0.0) if settled else 0.0) for b in blocks])

        est = paired_ratio_of_sums(amount, t(trial), amount, t(ref), higher_is_better=False)
        return {"ratio": est.ratio, "ci": [est.ci_low, est.ci_high], "p": est.p_value, "log_sd": est.log_sd}

    inner = [j for j in pairs if j - 1 in full and j + 2 in full]
    d = np.array([math.log(sums[j + 1] / sums[j]) for j in inner])
    c = np.array([math.log(sums[j + 2] / sums[j - 1]) for j in inner])
    s = np.array([1.0 if arm[j + 1] == 1 else -1.0 for j in inner])
    beta = slope(d, c)
    total = sum(sums[b] for j in inner for b in (j, j + 1))
    effects: dict[str, dict[str, Any]] = {}
    for key, values in (("unadjusted", s * d), ("adjusted", s * (d - beta * c))):
        low, high = sign_flip_ci(values)
        effects[key] = {"ratio": math.exp(values.mean()), "ci": [math.exp(low), math.exp(high)]}
        effects[key]["engine_min_per_pct"] = minutes(total, Z * float(np.std(values, ddof=1)) / len(d) ** 0.5)
    lo, hi = effects["unadjusted"]["ci"]
    # benchmarks.step_adjust on the same pairs: the full blocks in time order, a gap (a partial-batch block) starts
    # a new segment, blocks of incomplete pairs serve only as neighbours.
    in_order = sorted(full)
    paired = {b for j in pairs for b in (j, j + 1)}
    fit = adjusted_step_fit(
        [sums[b] for b in in_order],
        np.full(len(in_order), float(k)),
        np.array([arm[b] == 1 for b in in_order]),
        np.array([b // 2 if b in paired else -1 for b in in_order], dtype=np.int64),
        lags=1,
        segment=np.cumsum(np.r_[0, np.diff(in_order) != 1]).astype(np.int64),
    )
    step_adjusted = {
        "ratio": fit.estimate.ratio,
        "ci": [fit.estimate.ci_low, fit.estimate.ci_high],
        "p": fit.estimate.p_value,
        "beta": fit.beta[0],
        "plain_ratio": fit.plain_ratio,
        "sd_ratio": fit.sd_ratio,
        # A fixed order (the aliased file: every pair B first) is no randomized design: the neighbours' drift then
        # carries the effect (N - P = B - A) and the sign-flip test has no randomization to rest on.
        "randomized_order": len({arm[j] for j in pairs}) == 2,
    }
    return {
        "K": k,
        "pairs": len(pairs),
        "ratio_of_sums": ratio(settled=False),
        "ratio_of_sums_with_settle": ratio(settled=True),
        "step_adjusted": step_adjusted,
        "log_ratio": {
            "pairs": len(inner),
            "beta": beta,
            **effects,
            "adjusted_inside_ci": lo <= effects["adjusted"]["ratio"] <= hi,
        },
    }


def rounded(value: Any) -> Any:
    """``value`` with every float cut to 4 significant digits (a small, readable JSON)."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


def mean_cell(m: dict[str, Any]) -> str:
    """Engine minutes as printed: mean over runs [min-max of the per-run figures]."""
    return f"{m['mean']:.3g} [{m['runs_range'][0]:.3g}-{m['runs_range'][1]:.3g}]"


def median_cell(m: dict[str, Any]) -> str:
    """A secondary ratio as printed: median [min-max] over runs x seeds."""
    return f"{m['median']:.3g} [{m['range'][0]:.3g}-{m['range'][1]:.3g}]"


def headline_table(headline: dict[str, Any], runs: int, seeds: int) -> Table:
    """Engine minutes per +-1% per K, synchronous and asynchronous (one washout step per block)."""
    table = Table(
        title=escape(
            f"H100 A/A steps re-paired at random phases: engine minutes for a 95% CI of +-1%, mean over {runs} runs "
            f"[min-max of per-run figures] (t 95% CI over runs), each run the mean of {seeds} random arm assignments"
        )
    )
    for column in ("K", "sync pairs/run", "sync min/+-1%", "sync CI", "async pairs/run", "async min/+-1%", "async CI"):
        table.add_column(column, justify="right")
    table.add_column("async/sync", justify="right")
    table.add_column("exact/normal s/a", justify="right")
    for key in headline["sync"]:
        sync, asyn = headline["sync"][key], headline["async"][key]
        cells = []
        for row in (sync, asyn):
            m = row["engine_min_per_pct"]
            cells += [
                "{}-{}".format(*row["pairs_per_run"]),
                mean_cell(m),
                "{:.3g}-{:.3g}".format(*m["ci95_over_runs"]),
            ]
        table.add_row(
            key,
            *cells,
            f"{asyn['engine_min_per_pct']['mean'] / sync['engine_min_per_pct']['mean']:.2f}",
            "{:.3f}/{:.3f}".format(*(r["exact_over_normal_half_width"]["median"] for r in (sync, asyn))),
        )
    return table


def adjusted_table(adjusted: dict[str, dict[str, Any]], seeds: int, calibration_seeds: int) -> Table:
    """Plain vs neighbour-drift adjusted ratio of sums per K and randomization unit."""
    table = Table(
        title=escape(
            "Ratio of sums, plain vs adjusted (benchmarks.step_adjust), A/A re-paired with random offsets: engine "
            f"minutes per +-1% (exact inverted CI), mean over runs [min-max per run] ({seeds} seeds/run); A/A FPR and "
            f"coverage over chunks of {CHUNK_STEPS} steps ({calibration_seeds} seeds/run)"
        )
    )
    for column in (
        "K",
        "unit",
        "min plain",
        "min adjusted",
        "adj/plain means",
        "phase 0 p/a",
        "FPR plain",
        "FPR adj.",
        "cov. x1.01 p/a",
        "cov. +1% p/a",
        "cov. halve p/a",
        "spill share p/a",
    ):
        table.add_column(column, justify="right")

    def rate(m: dict[str, Any]) -> str:
        return f"{100 * m['rate']:.1f}% [{100 * m['ci'][0]:.1f}-{100 * m['ci'][1]:.1f}]"

    for key, row in adjusted.items():
        k, pattern = key.split("/")
        cal = row["calibration"]
        coverage = [
            f"{100 * cal[kind]['plain']['coverage']['rate']:.1f}/{100 * cal[kind]['adjusted']['coverage']['rate']:.1f}"
            for kind in ("mult", "add", "halve")
        ]
        spill = row["spill_1pct_measured_share"]
        table.add_row(
            k[1:],
            pattern,
            mean_cell(row["plain_engine_min_per_pct"]),
            mean_cell(row["adjusted_engine_min_per_pct"]),
            f"{row['adjusted_engine_min_per_pct']['mean'] / row['plain_engine_min_per_pct']['mean']:.3g}",
            "{:.3g}/{:.3g}".format(*(row["fixed_phase_engine_min_per_pct"][n]["mean"] for n in ("plain", "adjusted"))),
            rate(cal["aa"]["plain"]["false_positive"]),
            rate(cal["aa"]["adjusted"]["false_positive"]),
            *coverage,
            f"{spill['plain']:+.2f}/{spill['adjusted']:+.2f}",
        )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "h100-steps")
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
    topologies = {
        name: {k: topology_projection(aa, k, args.seeds, washout) for k in K_VALUES}
        for name, washout in TOPOLOGIES.items()
    }
    plain: dict[str, Any] = {
        "what": HEADLINE_NOTE,
        "runs": [name for name, run in runs.items() if run.name.startswith("AA")],
        **{name: {str(k): row for k, row in rows.items()} for name, rows in topologies.items()},
        "cheapest": {name: cheapest(rows) for name, rows in topologies.items()},
    }
    from benchmarks.body_projection import body_headline, calibration_lines  # it reads this module's names

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
    adjusted: dict[str, dict[str, Any]] = {}
    for k in ADJUSTED_K:
        for pattern in DESIGNS:
            started = time.perf_counter()
            row = design_projection(aa, k, pattern, args.seeds)
            row["calibration"] = calibration(aa, k, pattern, args.calibration_seeds, args.stats_seeds)
            row["seconds"] = time.perf_counter() - started
            adjusted[f"K{k}/{pattern}"] = row

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
    table = Table(
        title=escape(
            "H100 A/A steps re-paired at the recording's phase (sync): engine minutes for a 95% CI of +-1%, mean "
            f"over {len(aa)} runs [min-max per run] ({args.seeds} seeds/run); ratios: median [range] over runs x seeds"
        )
    )
    for column in (
        "K",
        "pairs/run",
        "log SD",
        "min/+-1% (RoS)",
        "exact/normal",
        "log-ratio SD",
        "min (log ratio)",
        "adj. SD",
        "min (adjusted)",
    ):
        table.add_column(column, justify="right")
    for k, row in per_k.items():
        table.add_row(
            str(k),
            "{}-{}".format(*row["pairs_per_run"]),
            "{:.2f}-{:.2f}".format(*row["log_sd"]),
            mean_cell(row["engine_min_per_pct"]),
            median_cell(row["exact_over_normal_half_width"]),
            "{:.2f}-{:.2f}".format(*row["log_ratio_sd"]),
            mean_cell(row["log_ratio_engine_min_per_pct"]),
            "{:.2f}-{:.2f}".format(*row["adjusted_log_sd"]),
            mean_cell(row["adjusted_engine_min_per_pct"]),
        )
    console.print(table)
    for name, res in ab.items():
        plain, settled, lr = res["ratio_of_sums"], res["ratio_of_sums_with_settle"], res["log_ratio"]
        console.print(
            f"{name} K={res['K']} {res['pairs']} pairs: step time B/A {plain['ratio']:.4f} "
            f"[{plain['ci'][0]:.4f}, {plain['ci'][1]:.4f}], with settle {settled['ratio']:.4f} "
            f"[{settled['ci'][0]:.4f}, {settled['ci'][1]:.4f}]; log ratio ({lr['pairs']} pairs) "
            f"{lr['unadjusted']['ratio']:.4f} [{lr['unadjusted']['ci'][0]:.4f}, {lr['unadjusted']['ci'][1]:.4f}], "
            f"adjusted {lr['adjusted']['ratio']:.4f} [{lr['adjusted']['ci'][0]:.4f}, {lr['adjusted']['ci'][1]:.4f}] "
            f"(beta {lr['beta']:.2f}, inside: {lr['adjusted_inside_ci']}); step_adjust "
            f"{res['step_adjusted']['ratio']:.4f} [{res['step_adjusted']['ci'][0]:.4f}, "
            f"{res['step_adjusted']['ci'][1]:.4f}]"
        )
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


DEFAULT_ESTIMATOR_NOTE = (
    "headline.cheapest and headline.calibration are the sweep's default step estimator (search.step_estimand: "
    "body): each step capped at twice the running median of the 64 steps before it, guarded by the whole time "
    "(benchmarks.body_projection's method: the same runs, phases and seeds); cheapest: per topology the K of 1, 2, 4 "
    "with the lowest mean engine minutes per +-1%; calibration at K = 1 in chunks of 256 steps: A/A false "
    "positives, the coverage of known mult, add and halve effects, and a stall never called better. headline.body: "
    "every K's row; headline.plain: the plain ratio of sums (search.step_estimand: mean), every K 1-32."
)
HEADLINE_NOTE = (
    "Engine minutes for a 95% CI of +-1% per K (compared steps per block), from the full-batch steps of the 6 A/A runs "
    "(order: runs) re-paired at a random 0-15 step phase per run and seed, arms at random within each pair, through "
    "tuner.stats.paired_ratio_of_sums: per run and seed C * v * tau / 60, C = (1.96 / log 1.01)^2, v = log_sd^2 "
    "(per-pair variance of log R), tau = engine seconds per pair (the normal half-width; exact_over_normal_half_width "
    "compares the inverted sign-flip CI, 10,000 flips: ~1 at K 1-4, wider at K 16-32 where a run holds 7-31 pairs). "
    "engine_min_per_pct.mean, the headline: the mean over runs of the per-run means over seeds (runs: those per-run "
    "figures; run_pair_log_var and run_engine_seconds_per_pair are their v and tau, averaged over seeds). The mean, "
    "not a median, because variance adds over engine time: after engine time E in host state i the variance of log R "
    "is v_i tau_i / E, so a comparison spending equal time in each run's state has variance mean(v_i tau_i) / E and "
    "costs the mean of the per-run costs. Runs weigh equally (each one draw of the host's state; their lengths, 504 or "
    "~1016 full steps, are the recording's choice); time_weighted_mean is the cost of one comparison pooling every "
    "run's pairs. ci95_over_runs: t interval over the 6 runs (5 df); runs_range: min-max of the per-run figures; "
    "median_run_seed: secondary. sync: synchronous scheduling, as recorded (a block of K compared steps costs K "
    "steps). async: vLLM's GPU default (async scheduling, batch queue): the first step of every block finishes the "
    "other arm's batch and is run but not compared, modelled by cutting K + 1 consecutive recorded steps per block, "
    "the first (the step at the washout's position) charged as engine time and not compared. It costs more than (K + "
    "1) / K: the compared blocks of a pair are a step further apart and the steps' autocorrelation falls with the lag, "
    "so v rises too. The same phases and per-run seeds serve both topologies. cheapest: per topology the K with the "
    "lowest mean, runs_cheaper_than_it = the runs (of 6) in which another K costs less (paired by run), mean_over_it = "
    "each K's mean over the cheapest's."
)

NOTES = (
    "per_K: the full-batch steps of the 6 A/A runs re-paired at K at the recording's phase (synchronous); engine "
    "minutes as in headline (mean over runs of per-run means over seeds, t CI over runs, min-max of per-run figures; "
    "the figures in runs for engine_min_per_pct only), other figures medians and ranges over runs x seeds. "
    "engine_min_per_pct (the table) is the ratio of sums of tuner.stats.paired_ratio_of_sums with the normal "
    "half-width 1.96*log_sd/sqrt(n); exact_over_normal_half_width is the inverted sign-flip CI of the same call "
    "(10,000 flips, every pattern up to 13 pairs) over it: ~1 where runs hold many pairs, wider at K 16-32 where a run "
    "holds 7-31 pairs (small-sample discreteness that the thousands of pairs +-1% needs do not have). Time is the "
    "pairs' summed step seconds (not wall). log_ratio_* and adjusted_* are on the log-ratio scale (per pair log mean B "
    "- log mean A): unadjusted on all pairs, neighbour-slope adjusted on the interior pairs (n - 2, both charged all "
    "pairs' time). Caveat: the covariate's blocks belong to neighbouring pairs; their arms are random and independent "
    "of this pair's, so it carries no treatment signal on average only under random order. Under a fixed (aliased) "
    "order c = -effect + drift and the adjusted estimate is effect * (1 + beta). beta is fitted on the observed d "
    "(which holds the effect), so the sign-flip test of no difference is exact and the CI inverts it with beta held "
    "fixed. ab: recorded arms, trial = arm 1 (scaled gen0 threshold) over reference = arm 0 (700), mean step time "
    "ratio; only pairs whose two blocks are all full-batch steps; with_settle charges each block its closing "
    "gc.collect(0)."
)

ADJUSTED_NOTES = (
    "adjusted: benchmarks.step_adjust.adjusted_step_fit, the same estimand (ratio of sums of step seconds per step) "
    "with each unit's time-ordered contrast d_u = sum_j r_j (theta t_j[B] - a_j m(theta)) regressed on the drift "
    "across the unit, c_u = block after minus block before (blocks of other units, random arms), beta by least squares "
    "of sum (d - beta c)^2 = the statistic's sign-flip variance, all on the data de-treated at the tested ratio, so "
    "the sign-flip test of every ratio is exact and the CI inverts it. plain = the same with no covariate (lags=0: "
    "tuner.stats' ratio of sums, estimate and p-value identical; the CI de-treats time rather than scaling amounts). "
    "Units (randomization units, orientation a fair coin each): AB = the interleaver's pairs, ABBA = mirrored "
    "quadruples, ABAB / ABABABAB = runs of 2 / 4 alternating pairs; the test flips whole units. Per run and seed a "
    "random 0-15 step offset is dropped first (same for every design), because the recorded runs switched arms every "
    "8/16 steps with a gc.collect(0) in between, which left a position profile (the step after a switch ~3-5% faster, "
    "the next 1-4 steps 4-19% slower): at the fixed phase of per_K (offset 0) one-step pairs straddle that profile in "
    "the same way every time (fixed_phase_engine_min_per_pct: units from the run's first step, as per_K; AB plain "
    "there is per_K's column up to the last pair, a neighbour here). Engine minutes per +-1%: the units' step seconds "
    "x (half-width of the exact inverted CI, 10,000 flips, in log units / log 1.01)^2, reported as in headline (mean "
    "over the 6 runs of per-run means over seeds, t CI over runs, min-max of the per-run figures; the figures "
    "themselves left out for size); adjusted_over_plain (median [range]) pairs the two on the same run, seed and "
    "signs; *_exact_over_normal compares the inverted CI with z * sign-flip SD / slope. calibration: non-overlapping "
    "chunks of 256 steps of consecutive units (plus one neighbour block each side) per run and seed, 2000 flips: aa = "
    "A/A false-positive rate (p < 0.05) with a Clopper-Pearson 95% CI; mult (B's steps x 1.01), add (B's steps + 1% of "
    "the run's median step) and halve (B's steps above twice the median lose half their excess: an effect that lives "
    "in the heavy tail) = coverage of the chunk's true ratio (every block's steps as B over as A), mean_log_error = "
    "mean log(estimate / truth) with its SE (unbiasedness). mult coverage equals 1 - aa FPR by construction (an exact "
    "multiplicative null). tuner_stats_decisions_differing: tuner.stats.ratio_of_sums_estimates on the same chunks "
    "(units' sums) vs lags=0, decisions that differ (its Monte-Carlo flips are drawn differently). "
    "spill_1pct_measured_share: each B block adds 1% of its time to the next block (a carry-over; the effect of "
    "running B everywhere is +1%); mean over runs and seeds of log(estimate with spill / estimate without) / log 1.01: "
    "the share of that effect the design reports. Pairs report -0.5 (the trial is followed by the reference 3/4 of "
    "the time), the adjustment adds beta/2 (the block after a pair enters its covariate), alternating runs -(1 - "
    "1/(2m)), mirrored quadruples -0.25: short blocks misattribute carry-over in every design, alternating ones most."
)

if __name__ == "__main__":
    main()
