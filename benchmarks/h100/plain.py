"""The plain ratio of sums on the A/A steps re-paired at K compared steps per block: engine minutes per +-1% per
topology (sync as recorded, async with a washout step per block) at random phases, the cheapest K, and the
recording's own phase with log-ratio figures beside it (``per_K``)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchmarks.h100.recordings import OFFSET_SPAN, Run, Z, minutes, over_runs, slope, spread
from tuner.stats import paired_ratio_of_sums


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
