"""The neighbour-drift adjusted ratio of sums (:mod:`benchmarks.h100.step_adjust`) against the plain one, for pairs
and other randomization units: engine minutes per design, calibration over 256-step chunks with known injected
effects, and the recorded A/B runs checked both ways (``adjusted`` and ``ab`` in the projection's JSON)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.h100.recordings import (
    CALIBRATION_FLIPS,
    CHUNK_STEPS,
    FLIPS,
    INJECTIONS,
    OFFSET_SPAN,
    Floats,
    Run,
    Z,
    inject,
    minutes,
    over_runs,
    proportion,
    sign_flip_ci,
    slope,
    spread,
)
from benchmarks.h100.step_adjust import adjusted_step_fit, random_units
from tuner.stats import RatioEstimate, paired_ratio_of_sums, ratio_of_sums_estimates


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
    # benchmarks.h100.step_adjust on the same pairs: the full blocks in time order, a gap (a partial-batch block) starts
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
