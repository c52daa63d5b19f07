"""The power statement before screening: what each way of measuring the space's trials will use can detect, from
the noise of that very method (:mod:`tuner.sweep.power_statements`).

Each planned trial (every grid point, or each strategy of a sampled space alone) is measured one of four ways:
restart pairs (it changes the engine start), step blocks at the calibrated grain, a GC-pacing comparison (the
mutator in step blocks at that grain and the collector from each arm alone, :mod:`tuner.measure.gc_pacing`), or
run-level pairs. Their noise comes from where it was measured: the calibration's A/A at that block length and its
collector A/A, the baseline trial's own run-level pairs; restart pairs are measured by their own trials, so their
figures come before confirmation. The run-level noise of the baseline's pairs never stands in for a step-level
comparison (it put "1% needs 2673 pairs (~70 min)" above a sweep whose step comparisons cost ~12 engine-seconds
per +-1%).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import replace

from tuner.config import Search, StartConfig
from tuner.measure import PILOT_SHARE, SKIP_BELOW, Grain, split_share
from tuner.metrics import pairs_estimate, run_pair
from tuner.records import Calibration, ScreeningPowerRecord
from tuner.sweep.confirmation import design_for, restart_pairs_line
from tuner.sweep.plans import Candidate, plan_candidate
from tuner.sweep.power_statements import GroupPower, Noise, group_powers

Method = Callable[[StartConfig], str]
"""How a planned trial is measured: "restarts", "steps" or "runs"."""


def calibrated_noise(calibration: Calibration | None, grain: Grain) -> Noise:
    """Step blocks at ``grain``: the calibration's A/A at that block length, where there is one."""
    label = f"{grain.block_steps}-step blocks"
    if calibration is None:
        return Noise(
            "steps", label, None, 0, None, "no calibration: measured by each trial's screening (run `tuner calibrate`)"
        )
    for p in calibration["precision"]:
        if p["method"] == "steps" and p["block_steps"] == grain.block_steps and p["pairs"] >= 2 and p["elapsed_s"] > 0:
            source = f"the calibration's A/A at this block length ({p['pairs']} pairs, {calibration['created']})"
            guard = p.get("guard_log_sd")  # the body's guard, in calibrations since 2026-11-29
            return Noise("steps", label, p["log_sd"], p["pairs"], p["pairs"] / p["elapsed_s"], source, guard)
    return Noise(
        "steps", label, None, 0, None, "never calibrated at this block length: measured by each trial's screening"
    )


def run_level_noise(arms: dict[str, list[dict[str, float]]], metric: str) -> Noise:
    """Run-level pairs: the baseline trial's own pairs (both arms vLLM as installed)."""
    pairs = [run_pair(metric, t, r) for t, r in zip(arms["trial"], arms["reference"], strict=True)]
    estimate = pairs_estimate(pairs, metric)
    rate = 1 / (2 * statistics.median(r["wall_s"] for r in arms["reference"]))
    return Noise("runs", "run-level pairs", estimate.log_sd, estimate.n, rate, f"the baseline's {estimate.n} pairs")


def noise_of(
    config: StartConfig, method: str, calibration: Calibration | None, grain: Grain, run_level: Noise, search: Search
) -> Noise:
    """The noise of the way ``config`` will be measured."""
    if method == "restarts":
        keys = [f"engine.{k}" for k in config.engine] + [f"env.{k}" for k in config.env]
        line = restart_pairs_line(keys or sorted(config.strategies), search.pairs)
        return Noise("restarts", "restart pairs", None, 0, None, line or "measured by its own trials")
    if method == "steps" and grain.paced:
        return paced_noise(calibration, grain, search.confirm.min_effect)
    return calibrated_noise(calibration, grain) if method == "steps" else run_level


def paced_noise(calibration: Calibration | None, grain: Grain, min_effect: float) -> Noise:
    """A GC-pacing comparison: the calibration's step noise at the grain for the mutator's pairs, and where GC is
    large enough here for the collector to be measured, its A/A noise too, at the budget's split both noises
    make best (:func:`tuner.measure.gc_pacing.split_share`, as a comparison splits by its pilot's); as one per-pair
    SD at the mutator's pair rate: ``sd^2 = sd_m^2 + sd_c^2 r_m (1 - c) / (r_c c)`` (their variances at a budget
    where the collector takes the share ``c``). Whether the trial's own GC is large enough is its screening's to
    find: the pacing it tests may change it."""
    label = f"GC pacing: {grain.block_steps}-step mutator + collector"
    mutator = calibrated_noise(calibration, grain)
    if calibration is None or not mutator.known or mutator.log_sd is None or mutator.pairs_per_s is None:
        return replace(mutator, grain=label)
    share = calibration["gc"].get("share_of_mutator")
    collector = next((p for p in calibration["precision"] if p["method"] == "collector" and p["pairs"] >= 2), None)
    if share is not None and share < SKIP_BELOW * min_effect:
        source = (
            f"{mutator.source} for the mutator; GC was {share:.3%} of vLLM's step here, below a tenth of min_effect, "
            f"so the collector is only piloted ({PILOT_SHARE:.0%} of the budget) unless the trial's GC is larger"
        )
        return Noise("steps", label, mutator.log_sd, mutator.sd_pairs, mutator.pairs_per_s * (1 - PILOT_SHARE), source)
    if collector is None or not math.isfinite(collector["log_sd"]) or collector["elapsed_s"] <= 0:
        why = "the collector's noise was not calibrated here: measured by each trial's screening"
        return Noise("steps", label, None, 0, None, why)
    r_m, r_c = mutator.pairs_per_s, collector["pairs"] / collector["elapsed_s"]
    c = split_share(collector["log_sd"] ** 2 / r_c, mutator.log_sd**2 / r_m)
    log_sd = math.sqrt(mutator.log_sd**2 + collector["log_sd"] ** 2 * r_m * (1 - c) / (r_c * c))
    source = (
        f"{mutator.source} for the mutator and the calibration's collector A/A ({collector['pairs']} block pairs; "
        f"GC {share or 0:.2%} of vLLM's step here), the collector taking {c:.0%} of the budget"
    )
    return Noise("steps", label, log_sd, min(mutator.sd_pairs, collector["pairs"]), r_m * (1 - c), source)


def power_before_screening(
    configs: Sequence[StartConfig],
    method: Method,
    grain: Callable[[StartConfig], Grain],
    calibration: Calibration | None,
    arms: dict[str, list[dict[str, float]]],
    search: Search,
) -> ScreeningPowerRecord:
    """The statement for the planned trials ``configs``, grouped by how each is measured: lines and figures."""
    design = design_for(search)
    run_level = run_level_noise(arms, search.objectives[0].metric)
    groups: dict[tuple[str, str], tuple[Noise, int]] = {}
    for config in configs:
        noise = noise_of(config, method(config), calibration, grain(config), run_level, search)
        key = (noise.method, noise.grain)
        groups[key] = (noise, groups.get(key, (noise, 0))[1] + 1)
    m = min(design.m, max(len(configs), 1))
    rows = []
    for noise, trials in groups.values():
        screening = _screening_pairs(noise, search)
        plan = None
        if noise.known and noise.log_sd is not None and noise.pairs_per_s is not None:
            candidate = Candidate(-1, {}, noise.method, noise.pairs_per_s, noise.grain, guard_sd=noise.guard_sd)
            plan = plan_candidate(
                candidate, noise.log_sd, noise.sd_pairs, budget_s=search.confirm.budget_s, m=m, design=design
            )
        rows.append((noise, trials, screening, plan))
    powers = group_powers(rows, design)
    lines = [line for g in powers for line in g.lines(_screening_budget(g, search))]
    return {"lines": lines, "groups": [g.to_dict() for g in powers]}


def _screening_pairs(noise: Noise, search: Search) -> int:
    if noise.method == "steps" and noise.pairs_per_s:
        return int(noise.pairs_per_s * search.step_budget_s)
    return search.pairs.max


def _screening_budget(group: GroupPower, search: Search) -> str:
    if group.noise.method == "steps":
        return f"{search.step_budget_s:g} s of steps (~{group.screening_pairs} pairs)"
    return f"{group.screening_pairs} pairs"
