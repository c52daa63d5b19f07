"""Capacity under an SLO on a simulated server: the attainment test's error rates and the capacity ratio's coverage.

    nice -n 19 python -m benchmarks.simulations.capacity_sim [--out results/reference/capacity-sim.json] [--searches N]
        [--stall-rate R] [--start-at F]

No engine: a queueing model driven through tuner.stats' real attainment test, capacity estimate and KneePlanner.
Requests arrive as a Poisson process at the load (requests/s) or in bursts (geometric sizes, mean ``mean_burst``)
so that misses cluster; the server batches continuously in steps of ``base + per_seq x batch + per_token x prompt
tokens admitted`` s (at most ``max_batch``), admits in arrival order, prefills in the admitting step and decodes a
token per step; a request meets the SLO when its TTFT and TPOT are within target (TPOT loose enough that the host's
speed moves both arms' capacities alike: the true ratio changes < 0.5% over +-10% host speed, where at 38 ms it
jumped from 1.13 to 1.25 at +10%). Host slowness multiplies every step: an AR(1) drift across rounds shared by both
arms of a round, each run's own noise, each step's jitter, and with ``--stall-rate`` a stall in that share of runs (the
host stops once, at a random time, for a quarter of the run's span of arrivals: a served run on the CPU host that
met 40-77% of its requests where the rounds beside met all); B's steps take (1 - effect) of A's. Both arms of a round
replay the same requests, and every round of a search's pass one request set at every load (seeded by the pass).
Each search starts at 0.6-1.2 times the reference's true knee (log-uniform: :func:`planners`; ``--start-at``: fixed).
True capacities: the crossing of each arm's expected attainment (4,000 runs per evaluation, common random numbers,
drift at its stationary spread) with the target, by bisection in log load; also without drift, since a search pools
rounds over its own stretch of the drift, not its whole spread (the truth must not hang on that). Prints and writes
as JSON, every rate with its Wilson 95% interval: (1) under A/A at 3, 5 and 8 rounds, at the knee (bursty, Poisson)
and past it (1.4 x bursty, 1.2 x Poisson), the attainment test's false-positive rate beside request-level McNemar, 10
chunks per round as clusters and rounds as clusters with the normal quantile, and its power; (2) over whole searches,
the ratio's coverage of 1 (A/A) and of the truth (B faster), the shares excluding 1 or open, median precision, the
estimates' SD, bias (log; mean with its standard error, and median) and the intervals' mean half-width over that SD,
rounds and runs, beside the delete-one-pass jackknife of the pooled crossing with t, the bootstrap percentile
interval about that crossing, the same stretched (the tool's rule until 2026-12-01; all three without the floor)
and the tool's rule with other weights of the passes (``benchmarks.resampling``), on the same searches.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from benchmarks.resampling import RULES
from benchmarks.simulations.capacity_model import Host, Server, World, drift_series, rounds_at, true_capacity, workload
from tuner.capacity import KneePlanner
from tuner.records.files import write_json
from tuner.stats import capacity
from tuner.stats.attainment import PairedCounts, attainment_difference, round_design_effect, tango_score
from tuner.stats.capacity import LevelResult
from tuner.stats.pass_bootstrap import pass_bootstrap


def rounded(value: Any) -> Any:
    """``value`` as JSON data with every float cut to 5 significant digits (a small, readable file)."""
    return json.loads(json.dumps(value), parse_float=lambda text: float(f"{float(text):.5g}"))


def rate(hits: int, total: int) -> dict[str, Any]:
    """A proportion with its Wilson 95% interval."""
    ci = stats.binomtest(hits, total).proportion_ci(method="wilson")
    return {"rate": hits / total, "ci": [ci.low, ci.high], "hits": hits, "of": total}


def show(name: str, share: dict[str, Any]) -> str:
    return f"{name} {share['rate']:.1%} [{share['ci'][0]:.1%}, {share['ci'][1]:.1%}]"


def _p_values(counts: PairedCounts, chunked: PairedCounts) -> dict[str, float]:
    """Two-sided p of "no difference" by the tool's test and by the alternatives it was chosen over."""
    only_a, only_b, total = sum(counts.only_a), sum(counts.only_b), sum(counts.requests)
    normal_p = lambda deff: float(2 * stats.norm.sf(abs(tango_score(only_a / deff, only_b / deff, total / deff, 0))))  # noqa: E731
    return {
        "tool": attainment_difference(counts).p_value,
        "request_level_mcnemar": normal_p(1.0),
        "chunks_within_rounds_normal": normal_p(round_design_effect(chunked)),
        "rounds_normal": normal_p(round_design_effect(counts)),
    }


def attainment_test(rng: np.random.Generator, world: World, load: float, rounds: int, reps: int) -> dict[str, Any]:
    """Share of ``reps`` comparisons at ``load`` each test calls different at 5% (B better, for the tool's power)."""
    drifts = drift_series(rng, world.host, world.host.drift_sd * rng.standard_normal(reps), rounds)
    met_a, met_b = rounds_at(
        rng, world, np.full(reps * rounds, load), drifts.ravel(), workload(rng, reps * rounds, world)
    )
    n = world.server.requests
    calls: Counter[str] = Counter()
    seen = []
    for a, b in zip(met_a.reshape(reps, rounds, n), met_b.reshape(reps, rounds, n), strict=True):
        counts = PairedCounts.from_rounds(a, b)
        chunked = PairedCounts.from_rounds(a.reshape(rounds * 10, -1), b.reshape(rounds * 10, -1))
        for name, p in _p_values(counts, chunked).items():
            calls[name] += p < 0.05
        tool = attainment_difference(counts)
        calls["tool_b_better"] += tool.flagged and tool.difference > 0
        seen.append((tool.attainment_a, tool.difference, sum(tool.discordant) / tool.requests, tool.design_effect))
    attainment, difference, discordant, deff = np.array(seen).T
    return {
        "load": load,
        "rounds": rounds,
        "attainment_a": float(np.mean(attainment)),
        "difference_mean": float(np.mean(difference)),
        "discordant_share": float(np.mean(discordant)),
        "design_effect_median": float(np.median(deff)),
        "called_different": {name: rate(calls[name], reps) for name in sorted(calls)},
    }


GROWTH = 2.0
"""The simulated searches' bracketing step (the planner's default), over which their starts are drawn."""


def planners(
    rng: np.random.Generator, knee: float, target: float, *, budget: float, precision: float, at: float | None = None
) -> Callable[[], KneePlanner]:
    """The tool's planner, each search started at 0.6-1.2 times the reference's true knee, log-uniform over one
    growth step (:data:`GROWTH`, which the planner is given), or at ``at`` times it: an operator's start lies anywhere
    relative to the knee, so where the grid falls beside each arm's knee (which sets the crossing's small-sample error
    there) varies between searches as between operators. With every search started at 0.6 times the knee
    (``--start-at 0.6``, the figures before 2026-12-01) both knees lay at one place on every grid, and the bursty
    10%-faster ratio's mean error was that alignment's (docs/capacity.md), not the estimate's over where a grid may
    fall."""

    def make() -> KneePlanner:
        start = knee * at if at is not None else 0.6 * knee * GROWTH ** rng.uniform()
        return KneePlanner(start, target, budget=budget, precision=precision, growth=GROWTH)

    return make


def run_searches(
    rng: np.random.Generator,
    world: World,
    count: int,
    make: Callable[[], KneePlanner],
    scales: Sequence[float] | None = None,
) -> list[KneePlanner]:
    """``count`` searches advanced in lockstep, each round of probes simulated as one batch; every round of one pass
    of a search replays one request set (scaled to its load), as a workload seeded by the pass would. With
    ``scales``, search i runs B at each load times ``scales[i]`` (:func:`rounds_at`)."""
    searches = [make() for _ in range(count)]
    drift = world.host.drift_sd * rng.standard_normal(count)
    seed = int(rng.integers(2**32))
    while True:
        probes = [(i, p) for i, s in enumerate(searches) if (p := s.next_probe()) is not None]
        if not probes:
            return searches
        rounds = [(i, p, tag) for i, p in probes for tag in p.passes]
        drifts = np.empty(len(rounds))
        for j, (i, _, _) in enumerate(rounds):  # the search's drift moves on by one round per round it runs
            step = math.sqrt(1 - world.host.drift_rho**2) * world.host.drift_sd * rng.standard_normal()
            drift[i] = drift[i] * world.host.drift_rho + step
            drifts[j] = drift[i]
        sets = [workload(np.random.default_rng((seed, i, r)), 1, world) for i, _, r in rounds]
        requests = (np.concatenate([a for a, _ in sets]), np.concatenate([p for _, p in sets]))
        loads = np.array([p.load for _, p, _ in rounds])
        per_round = None if scales is None else np.array([scales[i] for i, _, _ in rounds])
        met_a, met_b = rounds_at(rng, world, loads, drifts, requests, per_round)
        at = 0
        for i, p in probes:
            part = slice(at, at + p.rounds)
            searches[i].record(LevelResult.measured(p.load, met_a[part], met_b[part]))
            at += p.rounds


def rejected_intervals(levels: tuple[LevelResult, ...], target: float, confidence: float = 0.95) -> dict[str, Any]:
    """The log-ratio intervals the tool's was chosen over, on its own pieces (without the floor): the delete-one-pass
    jackknife of the crossing with the t quantile, the bootstrap percentile interval about the crossing, the same
    stretched by sqrt(p / (p - 1)) t(p - 1) / z at the p passes beside the crossings (the tool's rule until
    2026-12-01), and the tool's rule with the passes weighted otherwise (``benchmarks.resampling``)."""
    loads, _, table = capacity._table(levels)
    passes, shares = table.shape[1], capacity.tier(target)
    full = capacity._arms(loads, table.sum(axis=1)[None], shares)
    point = float(full[1].log_load[0] - full[0].log_load[0])
    left_out = capacity._arms(loads, table.sum(axis=1)[None] - np.moveaxis(table, 1, 0), shares)
    with np.errstate(invalid="ignore"):
        replicates = capacity.signed_log(left_out[1]) - capacity.signed_log(left_out[0])
    finite = bool(np.all(np.isfinite(replicates)))
    se = math.sqrt((passes - 1) / passes * float(np.sum((replicates - replicates.mean()) ** 2))) if finite else math.inf
    half = float(stats.t.ppf((1 + confidence) / 2, passes - 1)) * se
    boot = capacity._resampled(loads, table, shares, pass_bootstrap(2000, 0)(table))
    with np.errstate(invalid="ignore"):
        values = boot[1] - boot[0]
    tail = (1 - confidence) / 2
    low = float(np.sort(np.where(np.isnan(values), -np.inf, values))[math.floor(tail * len(values))])
    high = float(np.sort(np.where(np.isnan(values), np.inf, values))[math.ceil((1 - tail) * len(values)) - 1])
    p = max(capacity.passes_beside(full, table), 2)
    c = math.sqrt(p / (p - 1)) * float(stats.t.ppf(1 - tail, p - 1) / stats.norm.ppf(1 - tail))
    others = {name: log_interval(capacity.estimate_with(levels, target, draws)) for name, draws in RULES.items()}
    return {
        "jackknife_t": (point - half, point + half),
        "bootstrap_percentile": (low, high),
        "stretched_percentile": (point - c * max(point - low, 0.0), point + c * max(high - point, 0.0)),
    } | others


def log_interval(estimate: capacity.CapacityEstimate) -> tuple[float, float]:
    """The estimate's interval on the log scale (an open lower side: -inf)."""
    return math.log(estimate.ci_low) if estimate.ci_low > 0 else -math.inf, math.log(estimate.ci_high)


def summarize_searches(searches: list[KneePlanner], truth: float) -> dict[str, Any]:
    """Coverage of ``truth``, calls, precision and runs of finished searches, beside the rejected intervals."""
    done = [(s, e) for s in searches if (e := s.estimate()) is not None]
    covered: Counter[str] = Counter()
    halves: dict[str, list[float]] = {}
    for search, e in done:
        intervals = {"tool": log_interval(e)}
        intervals |= rejected_intervals(search.levels, e.target) if e.passes > 1 else {}
        for name, (low, high) in intervals.items():
            covered[name] += low <= math.log(truth) <= high
            halves.setdefault(name, []).append((high - low) / 2)
    bounded = [e for _, e in done if e.ci_low > 0 and math.isfinite(e.ci_high)]
    log_ratios = np.log([e.ratio for _, e in done if 0 < e.ratio < math.inf])
    return {
        "truth": truth,
        "searches": len(searches),
        "covered": {name: rate(covered[name], len(done)) for name in sorted(covered)},
        "median_half_width_log": {name: float(np.median(v)) for name, v in sorted(halves.items())},
        "sd_log_ratio": (sd := float(np.std(log_ratios, ddof=1))),  # a calibrated 95% CI's half-width: ~2 SDs
        "mean_half_width_over_sd": {k: float(np.mean([x for x in v if x < math.inf]) / sd) for k, v in halves.items()},
        "bias_log": float(np.mean(log_ratios) - math.log(truth)),
        "bias_log_se": sd / math.sqrt(len(log_ratios)),
        "median_bias_log": float(np.median(log_ratios) - math.log(truth)),
        "excludes_1": rate(sum(e.flagged for _, e in done), len(done)),
        "open_interval": rate(len(done) - len(bounded), len(done)),
        "median_precision": float(np.median([e.precision for e in bounded])) if bounded else None,
        "median_ratio": float(np.median([e.ratio for _, e in done])),
        "runs": {"mean": float(np.mean([s.spent for s in searches])), "max": float(max(s.spent for s in searches))},
        "rounds_per_level_median": float(np.median([e.rounds for _, e in done])),
        "passes_median": float(np.median([e.passes for _, e in done])),
        "levels_median": float(np.median([e.levels for _, e in done])),
        "stop_reasons": dict(Counter(str(s.stop_reason) for s in searches)),
        "bounds": dict(Counter(f"{e.capacity_a.bound}/{e.capacity_b.bound}" for _, e in done)),
    }


SEARCHES = (  # name, arrivals, B's effect, budget in runs
    ("aa_bursty", True, 0.0, 160),
    ("b_faster_bursty", True, 0.1, 160),
    ("aa_bursty_small_budget", True, 0.0, 48),
    ("b_faster_bursty_small_budget", True, 0.1, 48),
    ("aa_poisson", False, 0.0, 160),
    ("b_faster_poisson", False, 0.1, 160),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--searches", type=int, default=1000, help="simulated searches per scenario")
    parser.add_argument("--tests", type=int, default=2000, help="simulated comparisons per attainment scenario")
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--precision", type=float, default=0.03)
    parser.add_argument("--stall-rate", type=float, default=0.0, help="share of runs in which the host stops once")
    parser.add_argument(
        "--start-at", type=float, help="start every search at this many times the knee (default: 0.6-1.2, drawn)"
    )
    parser.add_argument("--out", type=Path, default=Path("results/reference/capacity-sim.json"))
    args = parser.parse_args()
    began = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    if not 0 <= args.stall_rate < 1:
        parser.error(f"--stall-rate must be in [0, 1), got {args.stall_rate}")
    if args.start_at is not None and not (math.isfinite(args.start_at) and args.start_at > 0):
        parser.error(f"--start-at must be a positive number, got {args.start_at}")
    server, host = Server(), Host(stall_rate=args.stall_rate)
    worlds = {bursty: World(server, host, bursty=bursty, effect=0.0) for bursty in (True, False)}
    config = {**vars(args), "out": str(args.out), "server": asdict(server), "host": asdict(host)}
    result: dict[str, Any] = {"config": config | {"searches_run": SEARCHES}, "truth": {}}
    knees: dict[tuple[bool, float], float] = {}
    for bursty, effect in ((True, 0.0), (True, 0.1), (False, 0.0), (False, 0.1)):
        knees[bursty, effect] = true_capacity(worlds[bursty], args.target, effect)
        arrivals = "bursty" if bursty else "poisson"
        result["truth"][f"{arrivals}_knee_effect_{effect}"] = knees[bursty, effect]
        still = true_capacity(replace(worlds[bursty], host=replace(host, drift_sd=0.0)), args.target, effect)
        result["truth"][f"{arrivals}_knee_effect_{effect}_no_drift"] = still
        print(f"true knee, {arrivals}, B's steps x{1 - effect:.2f}: {knees[bursty, effect]:.3f} ({still:.3f} without "
              "drift)", flush=True)  # fmt: skip

    tests: dict[str, Any] = {}
    places = (("bursty", True, 1.0), ("poisson", False, 1.0), ("bursty_x1.4", True, 1.4), ("poisson_x1.2", False, 1.2))
    for where, bursty, past in places:
        for rounds in (3, 5, 8):
            found = attainment_test(rng, worlds[bursty], past * knees[bursty, 0.0], rounds, args.tests)
            tests[f"aa_{where}_{rounds}_rounds"] = found
            calls = ", ".join(show(k, v) for k, v in found["called_different"].items() if k != "tool_b_better")
            print(f"A/A {where}, {rounds} rounds (attainment {found['attainment_a']:.3f}): {calls}", flush=True)
    for effect, rounds in ((0.05, 5), (0.05, 8), (0.1, 5)):
        found = attainment_test(rng, replace(worlds[True], effect=effect), knees[True, 0.0], rounds, args.tests)
        tests[f"power_bursty_{rounds}_rounds_effect_{effect}"] = found
        called = show("B called better", found["called_different"]["tool_b_better"])
        print(f"B's steps x{1 - effect:.2f}, bursty, {rounds} rounds: {called}, "
              f"mean difference {found['difference_mean']:+.4f}")  # fmt: skip
    result["attainment"] = tests

    searches: dict[str, Any] = {}
    starts = np.random.default_rng((args.seed, 1))  # its own stream: the searches' draws are as without it
    for name, bursty, effect, budget in SEARCHES:
        make = planners(
            starts, knees[bursty, 0.0], args.target, budget=budget, precision=args.precision, at=args.start_at
        )
        finished = run_searches(rng, replace(worlds[bursty], effect=effect), args.searches, make)
        truth = knees[bursty, effect] / knees[bursty, 0.0] if effect else 1.0
        searches[name] = summary = summarize_searches(finished, truth)
        covered = ", ".join(show(k, v) for k, v in summary["covered"].items())
        shares = f"{show('excludes 1', summary['excludes_1'])}, {show('open', summary['open_interval'])}"
        print(f"{name}: covered {covered}; {shares}; median precision {summary['median_precision']:.2%}; half-width "
              f"/ SD {summary['mean_half_width_over_sd']['tool']:.2f}, bias {summary['bias_log']:+.4f} (SE "
              f"{summary['bias_log_se']:.4f}); runs {summary['runs']['mean']:.0f} "
              f"({time.perf_counter() - began:.0f} s)", flush=True)  # fmt: skip
    result["capacity"] = searches
    result["seconds"] = round(time.perf_counter() - began, 1)
    write_json(args.out, rounded(result))
    print(f"wrote {args.out} ({result['seconds']:.0f} s)")


if __name__ == "__main__":
    main()
