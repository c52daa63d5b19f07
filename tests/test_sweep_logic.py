"""The sweep's logic without an engine: search space, queueing, resume, constraints, winner."""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import optuna
import pytest
import yaml
from rich.console import Console

from tests import support
from tuner.cli.tables import render
from tuner.config import Experiment, load_experiment
from tuner.config.start import StartConfig
from tuner.errors import UserError
from tuner.measure.interleave import InterleaveResult
from tuner.measure.pairing import Arms, left_out_of_steps, step_interleavable
from tuner.metrics.table import quantity
from tuner.records.loader import TrialState
from tuner.sweep.measuring import Measured
from tuner.sweep.run import trials_table
from tuner.sweep.space import baseline_params, config_from_params, grid, suggest
from tuner.sweep.study import enqueue_missing, open_study
from tuner.sweep.summary import _best, summarize_study, winner
from tuner.sweep.trial_attrs import INTERRUPTED_FAILURE, read, record, state
from tuner.sweep.trial_record import trial_record

LOGIC_ENGINE = {"model": "builtin:opt-tiny", "max_num_seqs": 16}
SPACE: dict[str, Any] = {
    "gc_threshold": [False, True],
    "gc_threshold.gen0_per_seq": [8, 64],
    "gc_freeze": [False, True],
}


def experiment(tmp_path: Path, **search: Any) -> Experiment:
    return support.experiment("logic", tmp_path, engine=LOGIC_ENGINE, search={"space": SPACE, **search})


def test_grid_collapses_parameters_of_switched_off_strategies() -> None:
    points = grid(SPACE)
    # gc_threshold off (1) or on with 2 values (2), times gc_freeze off/on: 6 distinct configurations.
    assert len(points) == 6
    assert len({repr(sorted(p.items())) for p in points}) == 6
    assert {"gc_threshold": False, "gc_freeze": False} in points
    assert all("gc_threshold.gen0_per_seq" not in p for p in points if not p["gc_threshold"])


def test_params_map_to_strategy_sets_and_engine_args() -> None:
    params = {"gc_threshold": True, "gc_threshold.gen0_per_seq": 64, "gc_freeze": False, "engine.max_num_seqs": 32}
    config = config_from_params(params)
    assert config.strategies == {"gc_threshold": {"gen0_per_seq": 64}}
    assert config.engine == {"max_num_seqs": 32}
    assert baseline_params({**SPACE, "engine.max_num_seqs": [16, 32]}, {"max_num_seqs": 16}) == {
        "gc_threshold": False,
        "gc_freeze": False,
        "engine.max_num_seqs": 16,
    }


def test_suggest_asks_parameters_only_when_the_strategy_is_on() -> None:
    off = suggest(optuna.trial.FixedTrial({"gc_threshold": False, "gc_freeze": True}), SPACE)
    assert off == {"gc_threshold": False, "gc_freeze": True}
    on = suggest(
        optuna.trial.FixedTrial({"gc_threshold": True, "gc_threshold.gen0_per_seq": 8, "gc_freeze": False}), SPACE
    )
    assert on["gc_threshold.gen0_per_seq"] == 8


def fake_run(study: optuna.Study, space: dict[str, Any], n: int, value: float = 1.0) -> None:
    def objective(trial: optuna.Trial) -> float:
        params = suggest(trial, space)
        trial.set_user_attr("metrics", {"output_tokens_per_s": value})
        return value + len(params)

    study.optimize(objective, n_trials=n)


def test_grid_is_exhausted_once_and_resume_never_duplicates(tmp_path: Path) -> None:
    exp = experiment(tmp_path, objectives=[{"metric": "output_tokens_per_s"}])
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = open_study(exp, storage, resume=False, study_name="s")
    assert enqueue_missing(study, exp, aa=False) == 6
    first = study.get_trials(states=(optuna.trial.TrialState.WAITING,))[0]
    assert read(first).get("baseline") is True  # the baseline runs first
    fake_run(study, SPACE, 2)  # "interrupted" after two trials
    with pytest.raises(UserError, match="already exists"):
        open_study(exp, storage, resume=False, study_name="s")
    resumed = open_study(exp, storage, resume=True, study_name="s")
    remaining = enqueue_missing(resumed, exp, aa=False)
    assert remaining == 4
    assert len(resumed.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 4  # nothing queued twice
    fake_run(resumed, SPACE, remaining)
    done = resumed.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(done) == 6
    assert sorted(repr(sorted(t.params.items())) for t in done) == sorted(repr(sorted(p.items())) for p in grid(SPACE))
    assert enqueue_missing(resumed, exp, aa=False) == 0  # grid exhausted


def row(number: int, verdict: str | None, feasible: bool, ratio: float, baseline: bool = False) -> dict[str, Any]:
    est = {"ratio": ratio, "ci_low": ratio * 0.99, "ci_high": ratio * 1.01, "verdict": verdict}
    return {
        "number": number,
        "state": "COMPLETE",
        "is_baseline": baseline,
        "feasible": feasible,
        "verdict": verdict,
        "ratios": {} if baseline else {"output_tokens_per_s": est},
        "strategies": {"gc_freeze": {}},
        "engine": {},
        "env": None,
    }


def test_a_trial_stopped_by_a_signal_is_interrupted_and_its_point_is_queued_again(tmp_path: Path) -> None:
    """Optuna fails a trial that raised KeyboardInterrupt; the record tells it apart (INTERRUPTED, not FAIL), and
    like a failed one it is finished but not done, so a resumed sweep queues its point again."""
    exp = Experiment.model_validate({"name": "s", "search": {"space": {"gc_freeze": [False, True]}}})
    study = open_study(exp, f"sqlite:///{tmp_path / 'study.db'}", resume=False, study_name="s")
    assert enqueue_missing(study, exp, aa=False) == 2
    stopped, broken, complete = study.ask(), study.ask(), study.ask()
    record(stopped, {"failure": INTERRUPTED_FAILURE})
    record(broken, {"failure": "RuntimeError: boom"})
    study.tell(stopped, state=optuna.trial.TrialState.FAIL)
    study.tell(broken, state=optuna.trial.TrialState.FAIL)
    study.tell(complete, [1.0])
    states = [state(t) for t in study.get_trials()]
    assert states == [TrialState.INTERRUPTED, TrialState.FAIL, TrialState.COMPLETE]
    assert [(s.is_finished(), s.is_done()) for s in states] == [(True, False), (True, False), (True, True)]
    assert not TrialState.RUNNING.is_finished() and not TrialState.WAITING.is_done()
    assert enqueue_missing(study, exp, aa=False) == 1  # the baseline and the other point again, one done
    assert {t.state for t in study.get_trials()} >= {optuna.trial.TrialState.WAITING}


def test_an_infeasible_trial_is_never_best(tmp_path: Path) -> None:
    search = experiment(tmp_path).search
    assert search is not None
    rows = [
        row(0, None, True, 1.0, baseline=True),
        row(1, "better", False, 1.30),
        row(2, "better", True, 1.05),
        row(3, "no_difference", True, 1.10),
    ]
    assert _best(rows, search) == [2]  # screening's significant trials: candidates, never the winner
    only_infeasible = [rows[0], rows[1], rows[3]]
    assert _best(only_infeasible, search) == []


def test_only_a_confirmed_trial_wins_and_its_effect_is_the_confirmation_estimate() -> None:
    rows = [row(0, None, True, 1.0, baseline=True), row(1, "better", True, 1.30), row(2, "better", True, 1.05)]
    assert winner(rows, None)["trial"] is None  # screening alone names no winner
    effect = {"ratio": 1.04, "ci_low": 1.01, "ci_high": 1.07}
    decision = {
        "winner": 2,
        "reason": "trial 2 confirmed",
        "rows": [{"trial": 1, "confirmation": {"ratio": 1.0}}, {"trial": 2, "confirmation": effect}],
        "repeated_ci": [1.01, None],
    }
    chosen = winner(rows, {"decision": decision})
    assert chosen["trial"] == 2 and chosen["confirmed"] and chosen["effect"] == effect
    assert chosen["repeated_ci"] == [1.01, None]
    no_winner = {"winner": None, "reason": "no confirmed winner among 2 candidate(s)", "rows": [], "repeated_ci": None}
    nothing = winner(rows, {"decision": no_winner})
    assert nothing["trial"] is None and nothing["strategies"] == {} and not nothing["confirmed"]


def test_summary_reads_verdicts_and_constraints_back_from_storage(tmp_path: Path) -> None:
    exp = experiment(tmp_path, constraints=[{"metric": "itl_p99_ms", "max": 50}])
    study = open_study(exp, f"sqlite:///{tmp_path / 'c.db'}", resume=False, study_name="c")
    enqueue_missing(study, exp, aa=False)

    def objective(trial: optuna.Trial) -> float:
        suggest(trial, SPACE)
        baseline = bool(read(trial).get("baseline"))
        feasible = trial.number % 2 == 0
        trial.set_user_attr("feasible", feasible)
        trial.set_user_attr("verdict", None if baseline else "better")
        trial.set_user_attr("ratios", {} if baseline else {"output_tokens_per_s": {"ratio": 1 + trial.number / 100}})
        return 1.0 + trial.number

    study.optimize(objective, n_trials=6)
    summary = summarize_study(study, exp, None)
    assert summary["schema"] == "tuner.sweep/1"
    assert len(summary["trials"]) == 6 and summary["trials"][0]["is_baseline"]
    best = summary["best"]
    assert best and all(summary["trials"][n]["feasible"] for n in best)
    assert best[0] == 4  # the largest feasible ratio
    assert summary["winner"]["trial"] is None and "confirmation pending" in summary["winner"]["reason"]
    assert math.isfinite(summary["trials"][4]["values"][0])


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"no_such": [False, True]}, "unknown strategy"),
        ({"gc_threshold.gen0_per_seq": [8]}, "add `gc_threshold: [false, true]`"),
        ({"gc_threshold": [False, True], "gc_threshold.nope": [1]}, "has no parameter"),
        ({"gc_threshold": [False, True], "gc_threshold.gen0_per_seq": [-5]}, "must be >= 0"),
        ({"gc_threshold": ["yes"]}, "toggle takes a list of true/false"),
        ({"engine.max_num_seq": [16]}, "not a vLLM engine argument"),
        ({"engine.max_num_seqs": [32, 64]}, "baseline value"),
        ({"sampler_copy_elision": [False, True]}, "does not apply"),
    ],
)
def test_bad_search_space_is_refused_with_the_line(tmp_path: Path, space: dict[str, Any], message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        yaml.safe_dump(
            {"name": "bad", "engine": {"model": "builtin:opt-tiny", "max_num_seqs": 16}, "search": {"space": space}},
            sort_keys=False,
        )
    )
    with pytest.raises(UserError) as info:
        load_experiment(path)
    text = str(info.value)
    assert message in text and "search.space." in text and f"{path}:" in text


def test_unknown_objective_metric_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nsearch:\n  space: {gc_freeze: [false, true]}\n  objectives:\n    - metric: speed\n")
    with pytest.raises(UserError, match=r"bad.yaml:5: search.objectives\[0\].metric: unknown metric 'speed'"):
        load_experiment(path)


def test_every_step_switchable_set_is_compared_per_step_and_its_front_end_part_is_named() -> None:
    for name in ("shared_empty_kv_blocks", "gc_threshold", "gc_in_waits", "ndarray_outputs", "sampler_copy_elision"):
        assert step_interleavable({name: {}}), name  # every engine process switches per batch
    assert not step_interleavable({"gc_freeze": {}})  # not switchable between steps
    assert not step_interleavable({"gc_freeze": {}, "gc_threshold": {}})  # one run-level strategy: the set is
    assert not step_interleavable({})  # nothing to compare
    assert left_out_of_steps({"shared_empty_kv_blocks": {}, "ndarray_outputs": {}}) == []  # engine processes only
    assert left_out_of_steps({"gc_threshold": {}, "gc_in_waits": {}}) == [
        "gc_in_waits in the front-end",
        "gc_threshold in the front-end",
    ]


def test_step_ratios_are_expressed_per_metric() -> None:
    from tuner.measure.interleave import InterleaveResult, step_estimate
    from tuner.stats import paired_ratio

    slower = paired_ratio([1.1] * 8, [1.0] * 8, higher_is_better=False, statistic="geomean")
    result = InterleaveResult(estimate=slower)
    assert step_estimate(result, "itl_mean_ms") == slower and slower.ratio == pytest.approx(1.1)
    with pytest.raises(ValueError, match="not measured at step level"):
        step_estimate(result, "itl_p99_ms")  # percentiles, TTFT, memory and GC come from run-level pairs
    throughput = step_estimate(result, "output_tokens_per_s")
    assert throughput is not None and throughput.ratio == pytest.approx(1 / 1.1) and throughput.verdict == "worse"
    assert step_estimate(InterleaveResult(estimate=None), "tpot_mean_ms") is None


def _fake_arms(tokens_per_s: tuple[float, float], itl_ms: tuple[float, float]) -> Arms:
    """Six pairs, both arms moving with the host; (reference, trial) rates and ITLs, 1000 tokens per repetition."""
    measured = Arms()
    for w in [1.0, 1.01, 0.99, 1.02, 0.98, 1.0]:
        for arm, i in ((measured.reference, 0), (measured.trial, 1)):
            arm.append({"output_tokens_per_s": tokens_per_s[i] * w, "wall_s": 1000 / (tokens_per_s[i] * w),
                        "itl_p99_ms": itl_ms[i] * w})  # fmt: skip
    return measured


def test_a_trial_record_is_made_in_one_call_from_its_configuration_and_arms(tmp_path: Path) -> None:
    """No engine and no study: the pure function gives the whole record, each ratio naming its quantity."""
    constraints = [{"metric": "itl_p99_ms", "max": 50}]
    search = experiment(tmp_path, objectives=[{"metric": "output_tokens_per_s"}], constraints=constraints).search
    assert search is not None
    config = StartConfig(strategies={"gc_threshold": {"gen0_per_seq": 8}})
    anchor = {"output_tokens_per_s": 100.0, "itl_p99_ms": 40.0}
    measured = Measured(_fake_arms((100, 102), (40, 30)))
    attrs, values = trial_record(config, measured, search, is_baseline=False, aa=False, baseline_metrics=anchor)
    assert attrs["strategies"] == config.strategies and attrs["engine"] == {} and attrs["aa"] is False
    assert values == [pytest.approx(102)] and attrs["anchored"]["itl_p99_ms"] == pytest.approx(30)
    ratio = attrs["ratios"]["output_tokens_per_s"]
    assert ratio["ratio"] == pytest.approx(1.02) and ratio["verdict"] == "better"
    assert ratio["quantity"] == quantity("output_tokens_per_s", "runs")
    assert attrs["feasible"] and attrs["feasible_ci"] and attrs["verdict"] == "better"
    assert len(attrs["arms"]["trial"]) == 6 and "restart_pairs" not in attrs and "step_interleave" not in attrs
    measured = Measured(_fake_arms((100, 100), (40, 40)))
    baseline, _ = trial_record(StartConfig(), measured, search, is_baseline=True, aa=False, baseline_metrics=None)
    assert baseline["ratios"] == {} and baseline["verdict"] is None
    # Steps that estimated nothing: the step-measured ratio is stored as not significant, the rest stay run-level.
    stepped, _ = trial_record(
        config,
        replace(measured, steps=InterleaveResult(estimate=None)),
        search,
        is_baseline=False,
        aa=False,
        baseline_metrics=anchor,
    )
    throughput = stepped["ratios"]["output_tokens_per_s"]
    assert (
        throughput["verdict"] == "not_significant" and throughput["source"] == "steps" and throughput["ratio"] is None
    )
    assert stepped["ratios"]["itl_p99_ms"]["source"] == "runs" and stepped["step_interleave"]["estimate"] is None
    assert baseline["metrics"]["output_tokens_per_s"] == pytest.approx(100)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # trials asked by hand, not through optimize()
def test_objectives_are_anchored_to_the_baseline_so_drift_between_trials_cancels(tmp_path: Path) -> None:
    exp = experiment(
        tmp_path,
        objectives=[{"metric": "output_tokens_per_s"}],
        constraints=[{"metric": "itl_p99_ms", "max": 50}],
    )
    assert exp.search is not None
    study = open_study(exp, f"sqlite:///{tmp_path / 'anchor.db'}", resume=False, study_name="anchor")

    def told(trial: optuna.Trial, arms: Arms, baseline: dict[str, float] | None) -> list[float]:
        attrs, values = trial_record(StartConfig(), Measured(arms), exp.search, is_baseline=baseline is None,  # type: ignore[arg-type]
                                     aa=False, baseline_metrics=baseline)  # fmt: skip
        record(trial, attrs)
        study.tell(trial, values)
        return values

    base = study.ask()
    record(base, {"baseline": True})
    told(base, _fake_arms((100, 100), (40, 40)), None)
    # The host runs twice as fast during the next trial; against its own reference arm the trial is 2% faster
    # and its ITL 50% longer. Optuna must see 102 tok/s and an ITL of 60 ms (infeasible), not 204 and 30 ms.
    values = told(study.ask(), _fake_arms((200, 204), (20, 30)), study.trials[0].user_attrs["metrics"])
    assert values == [pytest.approx(102)]
    row = summarize_study(study, exp, None)["trials"][1]
    assert row["metrics"]["output_tokens_per_s"] == pytest.approx(204)  # the absolute median is kept too
    assert row["anchored"]["itl_p99_ms"] == pytest.approx(60) and row["feasible"] is False

    # The terminal table shows Optuna's anchored value, not the drifted median.
    console = Console(record=True, width=200)
    console.print(render(trials_table(summarize_study(study, exp, None))))
    row_text = next(line for line in console.export_text().splitlines() if line.startswith("│ 1 "))
    assert "102.00" in row_text and "204" not in row_text


def test_a_storage_whose_schema_a_concurrent_process_is_creating_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers started together race to create a new storage's schema; the loser's IntegrityError (as seen in the
    suite: UNIQUE constraint failed: alembic_version.version_num) is retried, a persistent one is a clear error."""
    import sqlalchemy.exc

    from tuner.sweep import study

    search = Experiment.model_validate({"name": "s", "search": {"space": {"gc_freeze": [False, True]}}}).search
    assert search is not None
    real = optuna.storages.RDBStorage
    failures = {"left": 2}

    @functools.wraps(real)  # the real signature: make_storage picks the callback argument this Optuna accepts
    def racing(*args: Any, **kwargs: Any) -> optuna.storages.RDBStorage:
        if failures["left"]:
            failures["left"] -= 1
            raise sqlalchemy.exc.IntegrityError("INSERT INTO alembic_version", {}, Exception("UNIQUE constraint"))
        return real(*args, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", racing)
    monkeypatch.setattr(study.time, "sleep", lambda s: None)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    assert isinstance(study.make_storage(url, search), real)
    assert failures["left"] == 0
    failures["left"] = study.SCHEMA_RACE_ATTEMPTS
    with pytest.raises(UserError, match=r"cannot open the study storage: .*UNIQUE constraint"):
        study.make_storage(url, search)


def test_the_trials_table_shows_a_step_comparison_that_estimated_nothing() -> None:
    """A step-level comparison with fewer than two comparable pairs stores a ratio without a p-value: the table says
    "-" (it raised KeyError on the quickstart when GC-pacing blocks outgrew the step budget)."""
    from tuner.sweep.run import trials_table

    row = {
        "number": 1, "state": "COMPLETE", "is_baseline": False, "strategies": {"gc_threshold": {}}, "engine": {},
        "anchored": {}, "pairs": 6, "feasible": True, "verdict": "inconclusive", "restart_pairs": None,
        "step_interleave": None,
        "ratios": {"output_tokens_per_s": {"ratio": None, "ci_low": None, "ci_high": None, "verdict": "inconclusive",
                                           "source": "steps"}},
    }  # fmt: skip
    summary = cast(
        Any, {"experiment": "x", "config": {}, "objectives": [{"metric": "output_tokens_per_s"}], "trials": [row]}
    )
    table = trials_table(summary)
    assert table.rows[0][table.columns.index("p")] == "-"
