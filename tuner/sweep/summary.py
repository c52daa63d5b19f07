"""A study as plain data: ``summary.json`` (:class:`tuner.records.loader.SweepSummary`) read back from storage,
the winner files, and the one-line verdict."""

from __future__ import annotations

import datetime as dt
import math
import shlex
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import optuna

from tuner.config import Constraint, Experiment, Search
from tuner.errors import UserError
from tuner.plugin.protocol import encode_spec
from tuner.records import (
    SWEEP_SCHEMA,
    AaRecord,
    ConfirmationRecord,
    ConstraintRecord,
    SweepSummary,
    TrialRow,
    TrialState,
    Winner,
)
from tuner.sweep import study_attrs
from tuner.sweep.confirmation import (
    pending,
    screening_results,
)
from tuner.sweep.study import make_storage, require_search
from tuner.sweep.trial_attrs import read, state
from tuner.vllm import cli_flags, env_text, environment_record


class EngineTimings(Protocol):
    """What a summary reads of the sweep that ran in this process (a :class:`tuner.sweep.trials.Sweep` is one)."""

    start_s: list[float]  # each engine start's duration
    switch_s: list[float]  # each in-place strategy switch's duration


def summarize_study(study: optuna.Study, experiment: Experiment, sweep: EngineTimings | None) -> SweepSummary:
    """The study as plain data (schema ``tuner.sweep/1``), read back from storage."""
    search = require_search(experiment)
    trials = study.get_trials(deepcopy=False)
    baseline = next((t for t in trials if read(t)["baseline"] and t.state == optuna.trial.TrialState.COMPLETE), None)
    rows = [_trial_row(t) for t in trials]
    retried_as = _retried_as(trials)
    for row in rows:
        if row["number"] in retried_as and not row["failure"]:
            row["failure"] = f"its worker stopped sending heartbeats; retried as trial {retried_as[row['number']]}"
    complete = [r for r in rows if r["state"] == TrialState.COMPLETE]
    pareto = [t.number for t in study.best_trials if read(t)["feasible"]] if complete else []
    confirmation = current_confirmation(study, rows, search)
    attrs = study_attrs.read(study)
    summary: SweepSummary = {
        "schema": SWEEP_SCHEMA,
        "kind": "sweep",
        "experiment": experiment.name,
        "study": study.study_name,
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "environment": environment_record(),
        "config": experiment.model_dump(mode="json"),
        "objectives": [{"metric": o.metric, "direction": o.resolved_direction} for o in search.objectives],
        "constraints": [_constraint(c) for c in search.constraints],
        "engine_starts": len(sweep.start_s) if sweep else None,
        "start_s": sweep.start_s if sweep else [],
        "switch_s": sweep.switch_s if sweep else [],
        "trials": rows,
        "pareto": pareto,
        "importance": _importance(study),
        "best": _best(rows, search) if baseline is not None else [],  # screening's significant trials
        "confirmation": confirmation,
        "power": {
            "before_screening": attrs["power_before_screening"],
            "before_confirmation": confirmation["power"] if confirmation else None,
        },
        "winner": winner(rows, confirmation),
        "incomplete": incomplete_reasons(rows),
        "workload": attrs["workload"],
        "aa": {},
    }
    if baseline is None:
        summary["winner"]["reason"] = "no verdict: the baseline trial did not complete"
    elif confirmation is None:
        summary["winner"]["reason"] = "A/A sweep: nothing to confirm" if any(r["aa"] for r in rows) else pending(study)
    if any(r["aa"] for r in rows):
        aa = [r for r in complete if r["aa"]]
        by_method = {
            "runs": [r["verdict"] for r in aa if r["verdict"] is not None],
            "steps": [s["verdict"] for r in aa if (s := r["step_interleave"]) and s["estimate"]],
        }
        summary["aa"] = {method: _aa_counts(verdicts) for method, verdicts in by_method.items() if verdicts}
    return summary


def current_confirmation(
    study: optuna.Study, rows: Sequence[Mapping[str, Any]], search: Search
) -> ConfirmationRecord | None:
    """The study's confirmation record if it confirmed the screening as it stands (None when pending or stale:
    trials screened since)."""
    record = study_attrs.read(study)["confirmation"]
    screened, _ = screening_results(rows, search.objectives[0].metric)
    if record is None or record["screened"] != sorted(r.trial for r in screened):
        return None
    return record


def _constraint(constraint: Constraint) -> ConstraintRecord:
    record: ConstraintRecord = {"metric": constraint.metric}
    if constraint.max is not None:
        record["max"] = constraint.max
    if constraint.min is not None:
        record["min"] = constraint.min
    return record


def _aa_counts(verdicts: list[str]) -> AaRecord:
    hits = sum(v in ("better", "worse") for v in verdicts)
    return {"comparisons": len(verdicts), "significant": hits, "false_positive_rate": hits / len(verdicts)}


def incomplete_reasons(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why a study's result is not the one asked for: a baseline that did not complete, no completed trial, or
    failed trials (a failed trial that a later retry completed does not count)."""
    reasons = []
    retried = {r["number"] for r in rows if r["failure"] and "retried as trial" in r["failure"]}
    base = [r for r in rows if r["is_baseline"]]
    if base and not any(r["state"] == TrialState.COMPLETE for r in base):
        why = next((r["failure"] for r in reversed(base) if r["failure"]), None) or base[-1]["state"]
        reasons.append(f"the baseline trial did not complete ({why})")
    others = [r for r in rows if not r["is_baseline"]]
    if others and not any(TrialState(r["state"]).is_done() for r in others):
        reasons.append("no trial other than the baseline completed")
    failed = [r for r in others if r["state"] == TrialState.FAIL and r["number"] not in retried]
    if failed:
        listed = "; ".join(f"#{r['number']}: {r['failure'] or 'no reason recorded'}" for r in failed[:3])
        more = f" (and {len(failed) - 3} more)" if len(failed) > 3 else ""
        reasons.append(f"{len(failed)} trial(s) failed: {listed}{more}")
    return reasons


def _retried_as(trials: Sequence[optuna.trial.FrozenTrial]) -> dict[int, int]:
    """For each trial whose worker died, the trial that ran it again (Optuna's ``RetryFailedTrialCallback``)."""
    with warnings.catch_warnings():  # retry_history is marked experimental since Optuna 3.0
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        histories = {t.number: optuna.storages.RetryFailedTrialCallback.retry_history(t) for t in trials}
    return {history[-1]: number for number, history in histories.items() if history}


def _trial_row(trial: optuna.trial.FrozenTrial) -> TrialRow:
    attrs = read(trial)
    return {
        "number": trial.number,
        "state": state(trial),
        "is_baseline": attrs["baseline"],
        "aa": attrs["aa"],
        "strategies": attrs["strategies"],
        "engine": attrs["engine"],
        "env": attrs["env"],  # None: a study written before env dimensions
        "restart_pairs": attrs["restart_pairs"],
        "engine_stops": attrs["engine_stops"],
        "stop_time": attrs["stop_time"],
        "params": trial.params,
        "values": trial.values,
        "metrics": attrs["metrics"],
        "anchored": attrs["anchored"] or attrs["metrics"],  # what Optuna saw; see Sweep._record
        "ratios": attrs["ratios"],
        "feasible": attrs["feasible"],
        "feasible_ci": attrs["feasible_ci"],
        "slo_checks": attrs["slo_checks"],
        "verdict": attrs["verdict"],
        "pairs": len(attrs["arms"]["trial"]),
        "switch_s": attrs["switch_s"],
        "token_ids_match": attrs["token_ids_match"],
        "repetitions": [{"metrics": m} for m in attrs["arms"]["trial"]],
        "telemetry": attrs["telemetry"],
        "tail": attrs["tail"],
        "failure": attrs["failure"],
        "worker": attrs["worker"],
        "step_interleave": attrs["step_interleave"],
        "gc_pacing": attrs["gc_pacing"],
    }


def _best(rows: Sequence[TrialRow], search: Search) -> list[int]:
    """Feasible trials that significantly beat the baseline, best first by the first objective's ratio."""
    first = search.objectives[0]
    winners = [
        r
        for r in rows
        if r["state"] == TrialState.COMPLETE and r["feasible"] and r["verdict"] == "better" and not r["is_baseline"]
    ]
    sign = -1 if first.resolved_direction == "maximize" else 1
    winners.sort(key=lambda r: sign * (r["ratios"][first.metric]["ratio"] or 1.0))  # "better": it has a ratio
    return [r["number"] for r in winners]


def _importance(study: optuna.Study) -> dict[str, float]:
    try:
        complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if len(complete) < 3:
            return {}
        evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
        return dict(optuna.importance.get_param_importances(study, evaluator=evaluator, target=lambda t: t.values[0]))
    except Exception:  # too few or too uniform trials for an importance estimate
        return {}


def winner(rows: Sequence[TrialRow], confirmation: ConfirmationRecord | None) -> Winner:
    """The configuration to deploy: the confirmed winner with its confirmation estimate as the effect, or vLLM
    as installed when confirmation found none (or has not run)."""
    decision = confirmation["decision"] if confirmation else None
    number = decision["winner"] if decision else None
    row = next((r for r in rows if r["number"] == number), None) if number is not None else None
    strategies = row["strategies"] if row else {}
    engine = row["engine"] if row else {}
    variables = (row["env"] or {}) if row else {}
    return {
        "trial": row["number"] if row else None,
        "confirmed": row is not None,
        "reason": decision["reason"] if decision else "no confirmed winner",
        "effect": next((r["confirmation"] for r in decision["rows"] if r["trial"] == number), None)
        if decision
        else None,
        "repeated_ci": decision["repeated_ci"] if decision else None,
        "strategies": strategies,
        "engine": engine,
        "env": f"TUNER_PLUGIN='{encode_spec({name: dict(params) for name, params in strategies.items()})}'",
        "vllm_env": {name: env_text(value) for name, value in variables.items()},
    }


def write_outputs(summary: SweepSummary, out_dir: Path) -> list[Path]:
    """``summary.json``, and ``winner.yaml`` / ``winner.env`` for a confirmed winner only; without one,
    ``no-confirmed-winner.txt`` says so (and any older winner files are removed). Atomic writes."""
    import yaml

    from tuner.records import write_json, write_text

    best = summary["winner"]
    written = [write_json(out_dir / "summary.json", summary)]
    stale = ("no-confirmed-winner.txt",) if best["confirmed"] else ("winner.yaml", "winner.env")
    for name in stale:
        (out_dir / name).unlink(missing_ok=True)
    if not best["confirmed"]:
        text = f"{best['reason']}\nDeploy vLLM as installed (no TUNER_PLUGIN, no engine-arg changes).\n"
        return [*written, write_text(out_dir / "no-confirmed-winner.txt", text)]
    flags = shlex.join(cli_flags(best["engine"]))
    assignments = [best["env"], *(f"{k}={shlex.quote(v)}" for k, v in best["vllm_env"].items())]
    env = (
        f"# {best['reason']}\n"
        f"# Enable in production: pip install vllm-hosttune, then\n"
        f"#   {' '.join(assignments)} vllm serve MODEL {flags}\n" + "".join(f"{a}\n" for a in assignments)
    )
    deploy = {"strategies": best["strategies"], "engine": best["engine"], "env": best["vllm_env"]}
    body = yaml.safe_dump(deploy, sort_keys=True)
    return [
        *written,
        write_text(out_dir / "winner.yaml", f"# {best['reason']}\n{body}"),
        write_text(out_dir / "winner.env", env),
    ]


def verdict_line(summary: SweepSummary) -> str:
    aa = summary["aa"]
    if aa:
        return "A/A: " + "; ".join(
            f"{method}: {c['significant']} of {c['comparisons']} comparisons called significant "
            f"({c['false_positive_rate']:.0%})"
            for method, c in aa.items()
        )
    trials = summary["trials"]
    starts = summary["engine_starts"]
    switches = [s for t in trials for s in t["switch_s"]]
    median_switch = sorted(switches)[len(switches) // 2] if switches else math.nan
    return (
        f"{len(trials)} trials, {starts} engine start(s), median switch {median_switch * 1e3:.1f} ms; "
        f"{detectable(summary)}; winner: {summary['winner']['reason']}"
    )


def detectable(summary: SweepSummary) -> str:
    """The smallest gain the sweep could confirm: at the pairs each candidate spent, else at its planned
    confirmation, else at the plan the noise before screening promised (the best candidate's, or way of
    measuring's)."""
    confirmation, power = summary["confirmation"], summary["power"]
    spent = {t: v for t, v in (confirmation["mde_spent"] if confirmation else {}).items() if v is not None}
    if spent:
        trial, value = min(spent.items(), key=lambda item: item[1])
        return f"minimum detectable effect {value:.2%} at the confirmation pairs spent (trial {trial})"
    before_confirmation, before_screening = power["before_confirmation"], power["before_screening"]
    planned = [c["mde"] for c in before_confirmation["candidates"]] if before_confirmation else []
    planned += (
        [g["confirmation"]["mde"] for g in before_screening["groups"] if g["confirmation"]] if before_screening else []
    )
    finite = [v for v in planned if v is not None]
    if finite:
        return f"minimum detectable effect {min(finite):.2%} at the planned confirmation"
    return "minimum detectable effect not estimated"


def shared_dir(experiment: Experiment) -> Path:
    """Where the results of a shared study go: ``<results>/<experiment>/workers/``."""
    return experiment.output_dir / experiment.name / "workers"


def summarize_shared_study(experiment: Experiment, storage: str, study_name: str | None = None) -> Path:
    """Summarise a shared study into ``shared_dir`` (summary.json, winner files) for ``tuner report``."""
    name = study_name or experiment.name
    try:
        study = optuna.load_study(study_name=name, storage=make_storage(storage, require_search(experiment)))
    except KeyError:
        raise UserError.single(storage, f"no study named {name!r} in this storage") from None
    out_dir = shared_dir(experiment)
    write_outputs(summarize_study(study, experiment, None), out_dir)
    return out_dir
