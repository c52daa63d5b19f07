"""Engine minutes per +-1% for the body of the steps and its guard, replayed from real H100 per-step times.

    nice -n 19 .venv/bin/python -m benchmarks.h100.body_projection --seeds 20 --calibration-seeds 40 \
        --output results/reference/h100-body.json

The same recordings, re-pairing and topologies as :mod:`benchmarks.h100.projection` (its ``headline``): the
full-batch steps of the 6 A/A runs, a random 0-15 step phase per run and seed, blocks of K compared steps paired in
time order with the arms at random in each pair; ``sync`` as recorded, ``async`` with one washout step before every
block (run, charged as engine time, not compared). Each step is split at its cap, twice the median of the 64
recorded steps before it (:func:`tuner.stats.body.running_caps`, over the run's steps in time order, washout ones
included, as the engine records them), and :func:`tuner.stats.body.body_comparison` compares the blocks' body
seconds and their whole seconds (the guard: pauses included, non-inferiority at a margin), both ratios of sums.
Engine minutes per +-1% are C * v * tau as in the headline (the body's per-pair log variance, the engine seconds per
pair), the mean over runs of per-run means over seeds; the plain ratio of sums on the same pairs and signs (the
guard's estimate) is reported beside it. What a decision costs (``minutes_for_80pct_at_1pct``, normal
approximation per run and seed): the engine minutes for 80% power to call a true 1% gain (one-sided 2.5%) by the
body alone, by the plain mean alone, and by the decision (the body faster and the whole time not worse by a
margin of 0.5% or 1%; the two parts' powers multiplied, which their positive correlation makes conservative).

Calibration (``calibration``): non-overlapping chunks of 256 steps of consecutive pairs at K = 1, per run and seed,
2,000 flips, each with a known effect put into B's steps (the caps then taken from the observed, mixed series):
``aa`` none (the body's false-positive rate, p < 0.05, and the decision's: body and guard together), ``mult`` x 1.01,
``add`` + 1% of the run's median step, ``halve`` (steps above twice the median lose half their excess: an effect in
the tail, which the body should not see and the guard should credit), each with the coverage of the body's true
ratio in the chunk (every compared step's body had it run B, over as recorded, at the same caps); ``stall`` (B holds
an added pause of 5 median steps in 2% of its steps): how often it is called better (never, by the guard's design).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from benchmarks import ROOT
from benchmarks.h100.recordings import (
    CHUNK_STEPS,
    DATA,
    OFFSET_SPAN,
    TOPOLOGIES,
    Floats,
    Run,
    Z,
    inject,
    load,
    minutes,
    over_runs,
    proportion,
    spread,
)
from tuner.records.files import write_json
from tuner.stats import body_comparison, running_caps, split_at_caps

COMMAND = (
    "nice -n 19 .venv/bin/python -m benchmarks.h100.body_projection --seeds 20 --calibration-seeds 40 "
    "--output results/reference/h100-body.json"
)
K_VALUES = (1, 2, 4)
KINDS = ("aa", "mult", "add", "halve", "stall")
CALIBRATION_FLIPS = 2000
STALL_RATE, STALL_STEPS = 0.02, 5.0


def cut(run: Run, k: int, washout: int, seed: int, index: int) -> tuple[Floats, int]:
    """The run's full-batch steps after the seed's phase, as (pair, first/second, washout + compared steps)."""
    offset = int(np.random.default_rng([seed, index, k, 7]).integers(0, OFFSET_SPAN))
    x = run.seconds[run.full][offset:]
    span = k + washout
    n = x.size // (2 * span)
    return x[: 2 * span * n].reshape(n, 2, span), n


def arm_sums(body: Floats, excess: Floats, b_second: np.ndarray, washout: int) -> dict[str, tuple[Floats, Floats]]:
    """Per pair and arm the compared steps' body and excess seconds."""
    sums = {}
    for arm, second in (("B", b_second), ("A", ~b_second)):
        pick = np.where(second, 1, 0)
        rows = np.arange(body.shape[0])
        sums[arm] = (body[rows, pick, washout:].sum(axis=-1), excess[rows, pick, washout:].sum(axis=-1))
    return sums


GAIN = math.log(1.01)
MARGINS = (0.005, 0.01)
Z_ONE_SIDED = 1.959963984540054  # one-sided 2.5%, as a confirmation's level
Z_POWER = 0.8416212335729143  # 80%


def minutes_for_power(total_s: float, pairs: int, body_sd: float, whole_sd: float | None, margin: float) -> float:
    """Engine minutes for 80% power at a 1% gain: the body alone (``whole_sd`` None) or the body and the guard at
    ``margin`` together (powers multiplied), from per-pair log SDs and the engine seconds ``pairs`` pairs took."""

    def power(n: float) -> float:
        found = float(NormalDist().cdf(GAIN * math.sqrt(n) / body_sd - Z_ONE_SIDED))
        if whole_sd is None:
            return found
        return found * float(NormalDist().cdf((GAIN + math.log1p(margin)) * math.sqrt(n) / whole_sd - Z_ONE_SIDED))

    low, high = 1.0, 1e9
    for _ in range(100):
        middle = math.sqrt(low * high)
        low, high = (middle, high) if power(middle) < 1 - NormalDist().cdf(-Z_POWER) else (low, middle)
    return total_s / pairs * high / 60


def projection(runs: list[Run], k: int, washout: int, seeds: int) -> dict[str, Any]:
    """Engine minutes per +-1% for the body and the plain ratio of sums on the same pairs, and the engine minutes
    each way of deciding needs for 80% power at a 1% gain."""
    keys = ("body", "plain", "ratio", "body_80", "plain_80", *(f"decision_80_{m}" for m in MARGINS))
    acc: dict[str, list[float]] = {key: [] for key in keys}
    for index, run in enumerate(runs):
        for seed in range(seeds):
            steps, n = cut(run, k, washout, seed, index)
            body, excess = (x.reshape(steps.shape) for x in split_at_caps(steps.ravel(), running_caps(steps.ravel())))
            b_second = np.random.default_rng([seed, index, k, 17]).random(n) < 0.5
            sums = arm_sums(body, excess, b_second, washout)
            total, amount = float(steps.sum()), np.full(n, float(k))
            found = body_comparison((amount, *sums["B"]), (amount, *sums["A"]), n_permutations=200, seed=seed)
            plain = found.guard.whole  # the whole step time's ratio of sums on the same pairs and signs
            body_half, plain_half = (Z * e.log_sd / math.sqrt(n) for e in (found.body, plain))
            acc["body"].append(minutes(total, body_half))
            acc["plain"].append(minutes(total, plain_half))
            acc["ratio"].append(acc["body"][-1] / acc["plain"][-1])
            sd_b, sd_w = found.body.log_sd, found.guard.whole.log_sd
            acc["body_80"].append(minutes_for_power(total, n, sd_b, None, 0.0))
            acc["plain_80"].append(minutes_for_power(total, n, sd_w, None, 0.0))
            for m in MARGINS:
                acc[f"decision_80_{m}"].append(minutes_for_power(total, n, sd_b, sd_w, m))
    return {
        "engine_min_per_pct": over_runs(acc["body"], len(runs)),
        "plain_engine_min_per_pct": over_runs(acc["plain"], len(runs), detail=False),
        "body_over_plain_minutes": spread(acc["ratio"]),
        "minutes_for_80pct_at_1pct": {
            "body": over_runs(acc["body_80"], len(runs), detail=False),
            "plain": over_runs(acc["plain_80"], len(runs), detail=False),
            **{
                f"decision_margin_{m:.1%}": over_runs(acc[f"decision_80_{m}"], len(runs), detail=False) for m in MARGINS
            },
        },
    }


def with_effect(steps: Floats, is_b: np.ndarray, kind: str, rng: np.random.Generator) -> tuple[Floats, Floats]:
    """B's steps with a known effect (``inject``'s kinds, or ``stall``), and every step's seconds had it run B."""
    if kind != "stall":
        observed, as_b = inject(steps[:, None], is_b, kind)
        return observed[:, 0], as_b[:, 0]
    as_b = steps + (rng.random(steps.size) < STALL_RATE) * STALL_STEPS * float(np.median(steps))
    return np.where(is_b, as_b, steps), as_b


def calibration(runs: list[Run], washout: int, seeds: int) -> dict[str, Any]:
    """Chunks of :data:`CHUNK_STEPS` steps at K = 1: per kind the body's false positives or coverage, the decision's
    calls and the guard."""
    span = 1 + washout
    per_chunk = CHUNK_STEPS // (2 * span)
    tallies: dict[str, dict[str, list[int]]] = {kind: {} for kind in KINDS}
    errors: dict[str, list[float]] = {kind: [] for kind in KINDS}
    guard: dict[str, list[float]] = {kind: [] for kind in KINDS}

    def count(kind: str, key: str, hit: bool) -> None:
        slot = tallies[kind].setdefault(key, [0, 0])
        slot[0] += int(hit)
        slot[1] += 1

    for index, run in enumerate(runs):
        for seed in range(seeds):
            steps, n = cut(run, 1, washout, seed, index)
            rng = np.random.default_rng([seed, index, 23])
            b_second = rng.random(n) < 0.5
            is_b = np.zeros(steps.shape, dtype=bool)
            is_b[b_second, 1, :] = True
            is_b[~b_second, 0, :] = True
            for kind in KINDS:
                observed, as_b = with_effect(steps.ravel(), is_b.ravel(), kind, rng)
                caps = running_caps(observed)
                body, excess = (x.reshape(steps.shape) for x in split_at_caps(observed, caps))
                truth_b = np.minimum(as_b, caps).reshape(steps.shape)[..., washout:]
                truth_a = np.minimum(steps.ravel(), caps).reshape(steps.shape)[..., washout:]
                for c in range(n // per_chunk):
                    rows = slice(c * per_chunk, (c + 1) * per_chunk)
                    sums = arm_sums(body[rows], excess[rows], b_second[rows], washout)
                    ones = np.ones(per_chunk)
                    found = body_comparison(
                        (ones, *sums["B"]), (ones, *sums["A"]), n_permutations=CALIBRATION_FLIPS, seed=seed * 1000 + c
                    )
                    truth = float(truth_b[rows].sum() / truth_a[rows].sum())
                    if kind == "aa":
                        count(kind, "body_false_positive", found.body.p_value < 0.05)
                        count(kind, "decision_called", found.verdict != "not_significant")
                    else:
                        count(kind, "body_coverage", found.body.ci_low <= truth <= found.body.ci_high)
                    count(kind, "called_better", found.verdict == "better")
                    count(kind, "guard_holds", found.guard.holds)
                    errors[kind].append(math.log(found.body.ratio / truth))
                    guard[kind].append(math.log(found.guard.whole.ratio))
    out: dict[str, Any] = {"pairs_per_chunk": per_chunk}
    for kind in KINDS:
        err = np.asarray(errors[kind])
        out[kind] = {key: proportion(*hits) for key, hits in tallies[kind].items()}
        out[kind]["body_mean_log_error"] = float(err.mean())
        out[kind]["body_log_error_se"] = float(err.std(ddof=1) / math.sqrt(err.size))
        out[kind]["whole_mean_log_ratio"] = float(np.mean(guard[kind]))
    return out


def table(rows: dict[str, dict[int, dict[str, Any]]]) -> Table:
    out = Table(title="Engine minutes per +-1% (H100 A/A recordings, mean over 6 runs)")
    columns = ("topology", "K", "body", "plain", "body / plain", "80% at 1%: body", "plain", "decision 0.5%", "1%")
    for column in columns:
        out.add_column(column, justify="right")
    for name, per_k in rows.items():
        for k, row in per_k.items():
            body, plain = row["engine_min_per_pct"], row["plain_engine_min_per_pct"]
            power = row["minutes_for_80pct_at_1pct"]
            out.add_row(
                name, str(k),
                f"{body['mean']:.2f} [{body['ci95_over_runs'][0]:.2f}, {body['ci95_over_runs'][1]:.2f}]",
                f"{plain['mean']:.2f}", f"{row['body_over_plain_minutes']['median']:.2f}",
                *(f"{power[key]['mean']:.2f}" for key in power),
            )  # fmt: skip
    return out


def body_headline(
    runs: list[Run], seeds: int, calibration_seeds: int, progress: Callable[[str], None]
) -> dict[str, Any]:
    """Per topology the body's engine minutes per +-1% at each K, the cheapest K, and its calibration at K = 1;
    ``rows`` holds the per-K rows keyed by int (for :func:`table`), the topologies' keys the same keyed by str."""
    rows = {}
    for name, washout in TOPOLOGIES.items():
        rows[name] = {k: projection(runs, k, washout, seeds) for k in K_VALUES}
        progress(f"{name}: projected")
    checks = {}
    for name, washout in TOPOLOGIES.items():
        checks[name] = calibration(runs, washout, calibration_seeds)
        progress(f"{name}: calibrated")
    cheapest = {
        name: min(((k, row["engine_min_per_pct"]["mean"]) for k, row in per_k.items()), key=lambda kv: kv[1])
        for name, per_k in rows.items()
    }
    return {
        "cheapest": {name: {"K": k, "engine_min_per_pct": v} for name, (k, v) in cheapest.items()},
        **{name: {str(k): row for k, row in per_k.items()} for name, per_k in rows.items()},
        "calibration": checks,
        "rows": rows,
    }


def calibration_lines(checks: dict[str, Any]) -> list[str]:
    """Per topology the A/A false positives, the known effects' coverage and how often a stall was called better."""
    lines = []
    for name, check in checks.items():
        aa_fp, stall = check["aa"]["body_false_positive"], check["stall"]["called_better"]
        coverage = ", ".join(f"{kind} {check[kind]['body_coverage']['rate']:.1%}" for kind in ("mult", "add", "halve"))
        lines.append(
            f"{name}: A/A body false positives {aa_fp['rate']:.1%} [{aa_fp['ci'][0]:.1%}, {aa_fp['ci'][1]:.1%}] of "
            f"{aa_fp['n']} chunks; coverage {coverage}; stall called better {stall['rate']:.1%}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DATA, help="the H100 per-step recordings")
    parser.add_argument("--seeds", type=int, default=20, help="random arm assignments per run and K")
    parser.add_argument("--calibration-seeds", type=int, default=40, help="random assignments per run for the chunks")
    parser.add_argument("--output", type=Path, default=ROOT / "results" / "reference" / "h100-body.json")
    args = parser.parse_args()
    began = time.perf_counter()
    runs, _ = load(sorted(args.data.glob("*.json")))
    aa = [run for run in runs.values() if run.name.startswith("AA")]
    console = Console()
    found = body_headline(
        aa,
        args.seeds,
        args.calibration_seeds,
        lambda done: console.print(f"{done} ({time.perf_counter() - began:.0f} s)"),
    )
    rows, checks = found.pop("rows"), found["calibration"]
    result = {
        "command": COMMAND,
        "runs": [name for name, run in runs.items() if run.name.startswith("AA")],
        "seeds": args.seeds,
        "calibration_seeds": args.calibration_seeds,
        **found,
        "seconds": time.perf_counter() - began,
    }
    write_json(args.output, result)
    console.print(table(rows))
    for line in calibration_lines(checks):
        console.print(line)
    console.print(f"written {args.output} in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
