"""A sweep trial's record, made in one call from its configuration and measured arms (a pure function: no engine,
no study), and the values Optuna is told.

Every ratio names its quantity; step-level ratios stand in for throughput and mean per-token latency, run-level
ratios for the rest (and stay beside the steps', since they see the front-end that steps leave out). What Optuna
sees is each ratio times the baseline's median, so that host drift between trials, each measured at another time,
cancels; the absolute medians stay in ``metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tuner.config import Search, StartConfig
from tuner.measure import Arms, step_estimate
from tuner.metrics import HIGHER_IS_BETTER, STEP_LEVEL_METRICS, quantity, tail_record
from tuner.plugin.protocol import ProcessReport
from tuner.records import StoredRatio
from tuner.stats import RatioEstimate, not_estimated
from tuner.sweep.measuring import Measured
from tuner.sweep.slo_checks import slo
from tuner.sweep.trial_attrs import TrialAttrs


def configuration(config: StartConfig, *, aa: bool) -> TrialAttrs:
    """What a trial runs, recorded when it starts (so a failed or running trial shows it too)."""
    return {"aa": aa, "strategies": config.strategies, "engine": config.engine, "env": config.env}


def trial_record(
    config: StartConfig,
    measured: Measured,
    search: Search,
    *,
    is_baseline: bool,
    aa: bool,
    baseline_metrics: dict[str, float] | None,
) -> tuple[TrialAttrs, list[float]]:
    """The trial's whole record and its objective values. ``baseline_metrics`` anchors the ratios (the baseline
    trial's medians; None: this trial's own reference arm, e.g. before the baseline finished on another worker)."""
    arms = measured.arms
    medians = arms.medians("trial")
    metrics = {o.metric for o in search.objectives} | {c.metric for c in search.constraints}
    run_level = {} if is_baseline else {m: arms.ratio(m, search.confirm.min_effect) for m in metrics}
    steps = measured.steps
    by_steps = {m for m in run_level if steps is not None and not aa and m in STEP_LEVEL_METRICS}
    # A/A keeps both methods' verdicts apart (see summarize_study): its ratios stay run-level.
    estimates = {m: step_estimate(steps, m) if steps and m in by_steps else e for m, e in run_level.items()}
    method = "restarts" if arms.start_s["trial"] else "runs"
    ratios = {m: _stored(est, m, "steps" if m in by_steps else method) for m, est in estimates.items()}
    usable = {m: est for m, est in estimates.items() if est is not None and math.isfinite(est.ratio)}
    anchor = medians if is_baseline else baseline_metrics or arms.medians("reference")
    scaled = {m: anchor[m] * est.ratio for m, est in usable.items() if m in anchor}
    values = {**medians, **scaled}
    violations = [c.violation(values[c.metric]) for c in search.constraints]
    # For candidacy each SLO is judged on the CI bound on its bad side (anchor x ratio CI), not the point.
    checks = [
        slo(c.metric, est, anchor[c.metric], max=c.max, min=c.min)
        for c in search.constraints
        if c.metric in anchor and (est := usable.get(c.metric)) is not None
    ]
    record: TrialAttrs = {
        **configuration(config, aa=aa and not is_baseline),
        "slo_checks": [c.describe() for c in checks],
        "feasible_ci": all(c.passed for c in checks),
        "metrics": medians,
        "anchored": values,
        "arms": {"reference": arms.reference, "trial": arms.trial},
        "ratios": ratios,
        "constraints": violations or [0.0],
        "feasible": all(v <= 0 for v in violations),
        "verdict": ratios[search.objectives[0].metric]["verdict"] if ratios else None,
        "switch_s": arms.switch_s,
        "token_ids_match": arms.token_ids_match,
        "telemetry": _compact(arms.telemetry),
        "tail": tail_record(arms.tails),
        **_restarts(arms),
    }
    if steps is not None:
        run_level_ratios = {m: _stored(est, m, method) for m, est in run_level.items()}
        record["step_interleave"] = {**steps.to_dict(), "run_level": run_level_ratios}
    if measured.gc_pacing is not None:
        record["gc_pacing"] = measured.gc_pacing
    return record, [values[o.metric] for o in search.objectives]


def _stored(estimate: RatioEstimate | None, metric: str, method: str) -> StoredRatio:
    """A ratio as the record keeps it, naming what it is a ratio of and (for steps) that steps measured it; one the
    measurement could not estimate (steps with no comparable batch) has no numbers."""
    data = estimate.to_dict() if estimate is not None else not_estimated(metric in HIGHER_IS_BETTER)
    return {**data, "quantity": quantity(metric, method), "source": method}


def _restarts(arms: Arms) -> TrialAttrs:
    """A restart trial's engine starts and stops per arm, and the paired ratio of mean stop time."""
    if not arms.start_s["trial"]:
        return {}
    stop_time = arms.stop_time()
    return {
        "restart_pairs": arms.start_s,
        "engine_stops": arms.stop_s,
        "stop_time": stop_time.to_dict() if stop_time else None,
    }


def _compact(processes: Sequence[ProcessReport]) -> list[ProcessReport]:
    """Each process's report without its steps: what a trial keeps of its telemetry."""
    return [
        {
            "pid": p["pid"],
            "process_name": p["process_name"],
            "roles": p["roles"],
            "forked": p["forked"],
            "active": p["active"],
            "errors": p["errors"],
            "counters": p["counters"],
            "gc": p["gc"],
        }
        for p in processes
    ]
