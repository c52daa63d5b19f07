"""The sweep's two phases without an engine: a fake workbench with host drift runs the real Sweep, screening
then confirmation on fresh pairs, and the outputs (winner files only for a confirmed winner)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import pytest

from tests import support
from tuner.config import Experiment
from tuner.config.search import Objective, Pairs
from tuner.measure.pairing import paired_runs
from tuner.metrics.pairs import pairs_estimate
from tuner.records.loader import TrialState
from tuner.sweep import study_attrs, trials
from tuner.sweep.confirmation import (
    Candidate,
    restart_pairs_line,
    run_confirmation,
    screening_results,
)
from tuner.sweep.run import confirm_candidates, trials_table
from tuner.sweep.study import enqueue_missing, open_study
from tuner.sweep.summary import summarize_study, write_outputs
from tuner.sweep.trial_attrs import record, state
from tuner.sweep.trials import Sweep

SPACE: dict[str, Any] = {"gc_threshold": [False, True], "gc_freeze": [False, True]}
TOKENS = 4000.0


STOP_S = 4.0  # a fake engine's stop; fast_teardown in force from its start makes it 0.3x


class FakeSession:
    start_s = 20.0

    def __init__(self, stop_s: float = STOP_S) -> None:
        self.stop_s = stop_s

    def close(self) -> None:
        pass


class FakeBench:
    """Repetitions whose throughput is the host's speed (AR(1) drift in log) x the true gains of the strategies and
    of the engine started (``gains`` keys: a strategy, or ``engine.ARG=VALUE`` / ``env.NAME=VALUE``) x noise; each
    engine start adds an offset of its own."""

    def __init__(self, experiment: Experiment, gains: dict[str, float], seed: int = 0) -> None:
        self.experiment = experiment
        self.gains = gains
        self.rng = np.random.default_rng(seed)
        self.start_rng = np.random.default_rng(seed + 1)  # apart, so that repetitions draw as without starts
        self.strategies: dict[str, dict[str, Any]] = {}
        self.log_speed = 0.0
        self.runs: list[tuple[str, ...]] = []
        self.session = FakeSession()
        self.workload: dict[str, Any] = {}
        self.starts: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (engine args, env) of each engine start
        self.started: list[str] = []  # the gain keys of the running engine
        self.started_with: list[tuple[str, ...]] = []  # the strategies in force at each engine start
        self.start_offset = 0.0

    def start(self, engine: dict[str, Any], env: dict[str, Any], strategies: dict[str, Any]) -> FakeBench:
        """What :meth:`tuner.sweep.engines.Engines.start` returns: this bench, as a fresh engine of ``engine`` and
        ``env`` with ``strategies`` in force."""
        self.starts.append((engine, env))
        self.started_with.append(tuple(sorted(strategies)))
        self.started = [f"engine.{k}={v}" for k, v in engine.items()] + [f"env.{k}={v}" for k, v in env.items()]
        self.start_offset = self.start_rng.normal(0, 0.03)
        self.strategies = strategies
        fast = 0.3 if "fast_teardown" in strategies else 1.0
        self.session = FakeSession(STOP_S * fast * math.exp(self.start_rng.normal(0, 0.1)))
        return self

    def switch(self, strategies: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        self.strategies = strategies
        return []

    def repetition(self, label: str = "") -> dict[str, Any]:
        self.log_speed = 0.9 * self.log_speed + self.rng.normal(0, 0.04)
        gain = math.prod(1 + self.gains.get(name, 0.0) for name in [*self.strategies, *self.started])
        rate = 1000 * math.exp(self.log_speed + self.start_offset + self.rng.normal(0, 0.02)) * gain
        self.runs.append(tuple(sorted(self.strategies)))
        metrics = {
            "wall_s": TOKENS / rate,
            "output_tokens_per_s": rate,
            "ttft_ms": {"p99": 100.0},
            "tpot_ms": {},
            "itl_ms": {"p99": 40_000 / rate},
            "e2e_ms": {},
        }
        return {"metrics": metrics, "processes": [], "tail": None, "token_ids": [[1, 2]]}


def experiment(tmp_path: Path, space: dict[str, Any] | None = None, **confirm: Any) -> Experiment:
    search = {
        "space": space or SPACE,
        "method": "runs",
        "pairs": {"min": 6, "max": 6},
        "constraints": [{"metric": "itl_p99_ms", "max": 1000}],
        "confirm": {"budget_s": 480, **confirm},
    }
    return support.experiment(
        "confirm", tmp_path, engine={"model": "builtin:opt-tiny", "max_num_seqs": 16}, search=search
    )


def on_fake_engines(sweep: Sweep, bench: FakeBench) -> None:
    """Every engine the sweep starts is ``bench``."""
    sweep.engines.start = bench.start  # type: ignore[method-assign,assignment]


def swept(
    tmp_path: Path, gains: dict[str, float], space: dict[str, Any] | None = None, **confirm: Any
) -> tuple[Sweep, FakeBench]:
    """A screened and confirmed study on a fake workbench, through the real Sweep and sweep command."""
    exp = experiment(tmp_path, space, **confirm)
    study = open_study(exp, f"sqlite:///{tmp_path / 'study.db'}", resume=False, study_name="confirm")
    remaining = enqueue_missing(study, exp, aa=False)
    sweep = Sweep(exp, study)
    bench = FakeBench(exp, gains)
    on_fake_engines(sweep, bench)
    sweep.run(remaining)
    confirm_candidates(study, exp, sweep, sweep.feedback)
    return sweep, bench


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_real_gain_is_confirmed_on_fresh_pairs_and_written_as_the_winner(tmp_path: Path) -> None:
    sweep, bench = swept(tmp_path, {"gc_threshold": 0.10})
    screened_runs = 2 * 6 * 4  # baseline + 3 trials, 6 pairs each
    assert len(bench.runs) > screened_runs  # confirmation measured fresh pairs
    assert len(bench.starts) == 1  # strategies switch in place: one engine throughout
    summary = summarize_study(sweep.study, sweep.experiment, sweep)
    winner = summary["winner"]
    assert winner["confirmed"] and "gc_threshold" in winner["strategies"]
    effect = winner["effect"]
    assert effect["statistic"] == "ratio_of_sums" and effect["ci_low"] <= 1.10 <= effect["ci_high"]
    rows = {r["trial"]: r for r in summary["confirmation"]["decision"]["rows"]}
    assert rows[winner["trial"]]["screening"] is not None  # both phases side by side
    assert summary["power"]["before_screening"]["lines"] and summary["power"]["before_confirmation"]["lines"]
    checks = summary["trials"][1]["slo_checks"]  # the ITL SLO judged on its CI bound, and which bound it was
    assert len(checks) == 1 and checks[0].startswith("itl_p99_ms: upper CI bound of the value") and "ok" in checks[0]
    paths = {p.name for p in write_outputs(summary, tmp_path / "out")}
    assert {"winner.yaml", "winner.env"} <= paths and "no-confirmed-winner.txt" not in paths
    assert "confirmed" in (tmp_path / "out" / "winner.yaml").read_text()

    # Resumed with nothing new screened: the stored confirmation stands and nothing is measured again.
    before = len(bench.runs)
    confirm_candidates(sweep.study, sweep.experiment, sweep, sweep.feedback)
    assert len(bench.runs) == before


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_without_a_real_gain_no_winner_is_written_and_the_shortfall_is_said(tmp_path: Path) -> None:
    sweep, _ = swept(tmp_path, {}, budget_s=120)
    summary = summarize_study(sweep.study, sweep.experiment, sweep)
    assert not summary["winner"]["confirmed"] and summary["winner"]["strategies"] == {}
    assert summary["winner"]["reason"].startswith("no confirmed winner")
    confirmation = summary["confirmation"]
    # Screened at run level (SD 0.03-0.08 a pair), none of the three can confirm 1% (or its screening's larger
    # point gain) in 120 s with even odds: none is measured, and each one's note says what its budget gives.
    assert confirmation["plan"] == [] and confirmation["pairs_spent"] == {}
    weak = [n for n in confirmation["notes"] if "power to confirm" in n and "under 50%" in n]
    ruled = [n for n in confirmation["notes"] if "rule out" in n]
    assert len(weak) + sum(n.count("trial ") for n in ruled) == 3, confirmation["notes"]
    assert "no screened trial was nominated" in summary["winner"]["reason"]
    out = tmp_path / "out"
    out.mkdir()
    (out / "winner.yaml").write_text("stale")
    paths = {p.name for p in write_outputs(summary, out)}
    assert "no-confirmed-winner.txt" in paths and not (out / "winner.yaml").exists()
    assert "vLLM as installed" in (out / "no-confirmed-winner.txt").read_text()


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_confirmation_is_pending_until_run_and_stale_once_more_is_screened(tmp_path: Path) -> None:
    exp = experiment(tmp_path)
    study = open_study(exp, f"sqlite:///{tmp_path / 'p.db'}", resume=False, study_name="p")
    assert study.metric_names == ["output_tokens_per_s"]  # optuna-dashboard labels its axes
    enqueue_missing(study, exp, aa=False)
    sweep = Sweep(exp, study)
    on_fake_engines(sweep, FakeBench(exp, {}))
    sweep.run(2)
    summary = summarize_study(study, exp, sweep)
    assert summary["confirmation"] is None and "confirmation pending" in summary["winner"]["reason"]
    assert "--resume --storage" in summary["winner"]["reason"]
    study_attrs.record(study, {"confirmation": {"screened": [99], "decision": {"winner": 1}}})
    assert summarize_study(study, exp, sweep)["winner"]["trial"] is None  # not the screening as it stands


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_an_engine_arg_gain_is_screened_and_confirmed_by_restart_pairs(tmp_path: Path) -> None:
    sweep, bench = swept(tmp_path, {"engine.max_num_seqs=32": 0.10}, {"engine.max_num_seqs": [16, 32]})
    summary = summarize_study(sweep.study, sweep.experiment, sweep)
    trial = next(r for r in summary["trials"] if r["engine"] == {"max_num_seqs": 32})
    starts = trial["restart_pairs"]
    assert starts is not None and len(starts["trial"]) == len(starts["reference"]) == trial["pairs"] == 6
    screened = bench.starts[1 : 1 + 12]  # after the baseline trial's one engine: a start per arm of every pair
    assert all({s[0]["max_num_seqs"] for s in screened[i : i + 2]} == {16, 32} for i in range(0, 12, 2))
    assert [s[0]["max_num_seqs"] for s in screened[1:11:2]] == [s[0]["max_num_seqs"] for s in screened[2:12:2]]
    said = summary["power"]["before_screening"]["lines"]
    assert any("engine.max_num_seqs: compared by restart pairs (6-6 start pairs" in line for line in said)
    winner = summary["winner"]
    assert winner["confirmed"] and winner["engine"] == {"max_num_seqs": 32}
    assert winner["effect"] is not None and winner["effect"]["ci_low"] <= 1.10 <= winner["effect"]["ci_high"]
    assert len(bench.starts) > 13  # the confirmation started engines of its own
    write_outputs(summary, tmp_path / "out")
    assert "--max-num-seqs=32" in (tmp_path / "out" / "winner.env").read_text()


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_an_env_dimension_starts_each_arm_with_its_variables_and_no_effect_wins_nothing(tmp_path: Path) -> None:
    sweep, bench = swept(tmp_path, {}, {"env.VLLM_USE_V2_MODEL_RUNNER": [True]})
    summary = summarize_study(sweep.study, sweep.experiment, sweep)
    trial = next(r for r in summary["trials"] if not r["is_baseline"])
    assert trial["env"] == {"VLLM_USE_V2_MODEL_RUNNER": True} and trial["restart_pairs"] is not None
    assert sweep.engines.installable == []  # an env dimension is no strategy for the plugin to install
    screened = [env for _, env in bench.starts[1 : 1 + 2 * trial["pairs"]]]
    assert screened.count({"VLLM_USE_V2_MODEL_RUNNER": True}) == screened.count({}) == trial["pairs"] == 6
    everything = [env for _, env in bench.starts[1:]]  # with the confirmation's (a candidate by chance or not)
    assert everything.count({"VLLM_USE_V2_MODEL_RUNNER": True}) == everything.count({})
    assert not summary["winner"]["confirmed"]


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_restart_only_strategy_is_in_force_from_the_start_of_each_trial_arm_engine(tmp_path: Path) -> None:
    sweep, bench = swept(tmp_path, {"gc_refreeze": 0.05}, {"gc_refreeze": [False, True]})
    summary = summarize_study(sweep.study, sweep.experiment, sweep)
    trial = next(r for r in summary["trials"] if r["strategies"] == {"gc_refreeze": {}})
    assert trial["restart_pairs"] is not None and trial["engine"] == {} and trial["env"] == {}
    screened = bench.started_with[1 : 1 + 2 * trial["pairs"]]
    assert screened.count(("gc_refreeze",)) == screened.count(()) == 6  # never switched on a running engine


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_restart_pairs_time_every_engine_stop_and_estimate_the_stop_time_ratio(tmp_path: Path) -> None:
    # fast_teardown's fake engines stop in 0.3x the time (log SD 0.1 per stop) and run no faster.
    sweep, _ = swept(tmp_path, {}, {"fast_teardown": [False, True]})
    summary = summarize_study(sweep.study, sweep.experiment, sweep)
    trial = next(r for r in summary["trials"] if r["strategies"] == {"fast_teardown": {}})
    stop = trial["stop_time"]
    assert stop is not None and stop["n"] == 6 and stop["ci_low"] <= 0.3 <= stop["ci_high"] < 1, stop
    assert stop["p_value"] < 0.05  # 6 pairs, all one way: the smallest p the sign-flip test has (2/64)
    assert not summary["winner"]["confirmed"]  # throughput did not move
    (row,) = [r for r in trials_table(summary).rows if r[2] == "fast_teardown"]
    assert row[-3].startswith("6 starts, stop 0.")


def test_engine_arg_trials_of_studies_before_restart_pairs_are_left_out_of_confirmation_with_a_note() -> None:
    base = {"state": "COMPLETE", "is_baseline": False, "aa": False, "feasible": True, "ratios": {}}
    rows = [
        {**base, "number": 0, "is_baseline": True, "engine": {}},
        {**base, "number": 1, "engine": {"max_num_seqs": 32}},  # no env on record: paired on its own engine
        {**base, "number": 2, "engine": {}},
        {**base, "number": 3, "engine": {}, "feasible_ci": False},  # feasible at the point, not at the CI bound
        {**base, "number": 4, "engine": {"max_num_seqs": 32}, "env": {}, "restart_pairs": {}},
    ]
    results, notes = screening_results(rows, "output_tokens_per_s")
    assert [(r.trial, r.feasible) for r in results] == [(2, True), (3, False), (4, True)]
    assert len(notes) == 1 and "trial 1" in notes[0] and "leaves out the engine-arg effect" in notes[0]


def test_looks_stop_early_for_a_large_gain_and_estimates_use_exactly_the_planned_pairs(tmp_path: Path) -> None:
    exp = experiment(tmp_path, looks=4)
    assert exp.search is not None
    rng = np.random.default_rng(3)

    def pairs(gain: float, n: int) -> list[tuple[float, float, float, float]]:
        walls = np.exp(rng.normal(0, 0.05, (n, 2)))
        return [(TOKENS, w[0] / (1 + gain), TOKENS, w[1]) for w in walls]

    def screening_row(number: int, gain: float) -> dict[str, Any]:
        est = pairs_estimate(pairs(gain, 12), "output_tokens_per_s")
        reps = [{"metrics": {"wall_s": 4.0}}] * 12
        return {"number": number, "state": "COMPLETE", "is_baseline": False, "aa": False, "feasible": True,
                "engine": {}, "strategies": {f"s{number}": {}}, "ratios": {"output_tokens_per_s": est.to_dict()},
                "repetitions": reps}  # fmt: skip

    asked: list[tuple[int, int, int]] = []

    def measure(candidate: Candidate, done: int, wanted: int, left_s: float) -> list[tuple[float, float, float, float]]:
        asked.append((candidate.trial, done, wanted))
        return pairs(0.20 if candidate.trial == 1 else 0.0, wanted)

    record = run_confirmation([screening_row(1, 0.20), screening_row(2, 0.0)], exp.search, measure)
    decision = record["decision"]
    looks = {p["trial"]: p["looks"] for p in record["plan"]}
    assert decision["winner"] == 1 and decision["look"] < len(looks[1])  # stopped early
    for trial in (1, 2):  # each candidate asked for exactly the pairs its next look needs
        mine = [(done, wanted) for t, done, wanted in asked if t == trial]
        assert all(done + wanted == looks[trial][k] for k, (done, wanted) in enumerate(mine))


def test_paired_runs_go_in_mirrored_order_and_continue_it(tmp_path: Path) -> None:
    bench = FakeBench(experiment(tmp_path), {})
    objective = Objective(metric="output_tokens_per_s")
    paired_runs(bench, {"gc_freeze": {}}, Pairs(min=4, max=4), objective, None, seed=5)  # type: ignore[arg-type]
    paired_runs(bench, {"gc_freeze": {}}, Pairs(min=4, max=4), objective, None, seed=5, first_pair=4)  # type: ignore[arg-type]
    runs = bench.runs
    assert len(runs) == 16
    assert all(runs[i] == runs[i + 1] for i in range(1, 15, 2))  # ABBA...: each pair starts where the last ended
    assert sum(r == ("gc_freeze",) for r in runs[::2]) == 4  # trial first in half the pairs


def test_the_power_statement_says_when_too_few_start_pairs_can_never_call_a_change() -> None:
    assert restart_pairs_line([], Pairs(min=2, max=4)) is None
    few = restart_pairs_line(["env.VLLM_X"], Pairs(min=2, max=4)) or ""
    assert few.startswith("env.VLLM_X: compared by restart pairs") and "4 start pairs can never call a change" in few
    assert "never" not in (restart_pairs_line(["env.VLLM_X"], Pairs(min=6, max=8)) or "")


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_signal_while_a_trial_records_its_configuration_still_marks_it_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C right after Optuna starts a trial, before any measuring (the CPU engine sweep test landed one there):
    the trial is INTERRUPTED, not FAIL, so that a resume queues its point again."""
    exp = experiment(tmp_path)
    study = open_study(exp, f"sqlite:///{tmp_path / 'i.db'}", resume=False, study_name="i")
    enqueue_missing(study, exp, aa=False)
    sweep = Sweep(exp, study)
    on_fake_engines(sweep, FakeBench(exp, {}))

    def signalled(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr("tuner.sweep.trials.trial_config", signalled)
    with pytest.raises(KeyboardInterrupt):
        sweep.run(1)
    assert [state(t) for t in study.get_trials()][:1] == [TrialState.INTERRUPTED]


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_trial_walks_through_few_sweep_modules_and_is_recorded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``Sweep.objective`` a trial passes through at most eight of the sweep's modules (configuration, engine,
    measuring, record), and its Optuna attributes are written in two calls: its configuration when it starts, the
    whole record made by ``trial_record`` when it ends."""
    exp = experiment(tmp_path)
    study = open_study(exp, f"sqlite:///{tmp_path / 'study.db'}", resume=False, study_name="walk")
    enqueue_missing(study, exp, aa=False)
    sweep = Sweep(exp, study)
    on_fake_engines(sweep, FakeBench(exp, {"gc_threshold": 0.1}))
    sweep.run(1)  # the baseline
    trial = study.ask({name: optuna.distributions.CategoricalDistribution([False, True]) for name in SPACE})
    written: list[set[str]] = []
    monkeypatch.setattr(trials, "record", lambda t, attrs: (written.append(set(attrs)), record(t, attrs)))
    entered: set[str] = set()

    def profile(frame: Any, event: str, _: Any) -> None:
        if event == "call" and (module := frame.f_globals.get("__name__", "")).startswith("tuner.sweep."):
            entered.add(module)

    sys.setprofile(profile)
    try:
        sweep.objective(trial)
    finally:
        sys.setprofile(None)
    assert 5 <= len(entered) <= 8, sorted(entered)
    assert {"tuner.sweep.engines", "tuner.sweep.measuring", "tuner.sweep.trial_record"} <= entered
    assert written[0] == {"aa", "strategies", "engine", "env"} and len(written) == 2
    assert {"ratios", "metrics", "arms", "verdict", "strategies"} <= written[1]


def test_a_candidate_whose_body_is_faster_but_whose_pauses_make_it_slower_is_never_the_winner(tmp_path: Path) -> None:
    """Body pairs (steps, body s, steps, body s, whole s, whole s): trial 1's typical steps are 8% faster but its
    pauses make its whole time 10% longer; trial 2's steps are 4% faster, pauses alike. Trial 1's body is
    confirmed, its guard fails, and trial 2 is the winner; a screened trial whose guard was already breached is
    not nominated."""
    exp = experiment(tmp_path)
    assert exp.search is not None
    rng = np.random.default_rng(11)

    def pairs(body: float, whole: float, n: int) -> list[tuple[float, float, float, float, float, float]]:
        noise = np.exp(rng.normal(0, 0.02, (n, 2)))
        return [(1.0, 0.010 * body * t, 1.0, 0.010 * r, 0.012 * whole * t, 0.012 * r) for t, r in noise]

    def screening_row(number: int, body: float, whole: float, guard: dict[str, Any] | None) -> dict[str, Any]:
        est = pairs_estimate(pairs(body, whole, 12), "output_tokens_per_s")
        return {"number": number, "state": "COMPLETE", "is_baseline": False, "aa": False, "feasible": True,
                "engine": {}, "strategies": {f"s{number}": {}}, "ratios": {"output_tokens_per_s": est.to_dict()},
                "repetitions": [{"metrics": {"wall_s": 4.0}}] * 12,
                "step_interleave": {"guard": guard} if guard else None}  # fmt: skip

    truths = {1: (0.92, 1.10), 2: (0.96, 0.96)}

    def measure(candidate: Candidate, done: int, wanted: int, left_s: float) -> list[Any]:
        return pairs(*truths[candidate.trial], wanted)

    breached = {"whole": {"ratio": 1.2, "ci_low": 1.1, "ci_high": 1.3}, "margin": 0.005, "breached": True}
    rows = [
        screening_row(1, *truths[1], None),
        screening_row(2, *truths[2], None),
        screening_row(3, 0.9, 1.2, breached),
    ]
    record = run_confirmation(rows, exp.search, measure)
    statuses = {r["trial"]: r["status"] for r in record["decision"]["rows"]}
    assert record["decision"]["winner"] == 2
    assert statuses[1] == "confirmed, fails whole step time, pauses included"
    assert 3 not in statuses and any("trial 3 is not confirmed" in n and "guard" in n for n in record["notes"])
