"""The sweep's two phases without an engine: a fake workbench with host drift runs the real Sweep, screening
then confirmation on fresh pairs, and the outputs (winner files only for a confirmed winner)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tuner.config import Experiment
from tuner.config.search import Objective, Pairs
from tuner.paired_estimate import pairs_estimate
from tuner.pairing import paired_runs
from tuner.sweep.confirmation import CONFIRMATION_ATTR, Candidate, run_confirmation, screening_results
from tuner.sweep.run import confirm_candidates
from tuner.sweep.study import enqueue_missing, open_study
from tuner.sweep.summary import summarize_study, write_outputs
from tuner.sweep.trials import Sweep

SPACE: dict[str, Any] = {"gc_threshold": [False, True], "gc_freeze": [False, True]}
TOKENS = 4000.0


class FakeBench:
    """Repetitions whose throughput is the host's speed (AR(1) drift in log) x the strategies' true gains x noise."""

    def __init__(self, experiment: Experiment, gains: dict[str, float], seed: int = 0) -> None:
        self.experiment = experiment
        self.gains = gains
        self.rng = np.random.default_rng(seed)
        self.strategies: dict[str, dict[str, Any]] = {}
        self.log_speed = 0.0
        self.runs: list[tuple[str, ...]] = []

    def switch(self, strategies: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        self.strategies = strategies
        return []

    def repetition(self, label: str = "") -> dict[str, Any]:
        self.log_speed = 0.9 * self.log_speed + self.rng.normal(0, 0.04)
        gain = math.prod(1 + self.gains.get(name, 0.0) for name in self.strategies)
        rate = 1000 * math.exp(self.log_speed + self.rng.normal(0, 0.02)) * gain
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


def experiment(tmp_path: Path, **confirm: Any) -> Experiment:
    return Experiment.model_validate(
        {
            "name": "confirm",
            "engine": {"model": "builtin:opt-tiny", "max_num_seqs": 16},
            "search": {
                "space": SPACE,
                "method": "runs",
                "pairs": {"min": 6, "max": 6},
                "constraints": [{"metric": "itl_p99_ms", "max": 1000}],
                "confirm": {"budget_s": 480, **confirm},
            },
            "output_dir": str(tmp_path),
        }
    )


def swept(tmp_path: Path, gains: dict[str, float], **confirm: Any) -> tuple[Sweep, FakeBench]:
    """A screened and confirmed study on a fake workbench, through the real Sweep and sweep command."""
    exp = experiment(tmp_path, **confirm)
    study = open_study(exp, f"sqlite:///{tmp_path / 'study.db'}", resume=False, study_name="confirm")
    remaining = enqueue_missing(study, exp, aa=False)
    sweep = Sweep(exp, study)
    bench = FakeBench(exp, gains)
    sweep.bench, sweep.engine_args = bench, dict(exp.engine)  # type: ignore[assignment]
    sweep.run(remaining)
    confirm_candidates(study, exp, sweep, sweep.feedback)
    return sweep, bench


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_real_gain_is_confirmed_on_fresh_pairs_and_written_as_the_winner(tmp_path: Path) -> None:
    sweep, bench = swept(tmp_path, {"gc_threshold": 0.10})
    screened_runs = 2 * 6 * 4  # baseline + 3 trials, 6 pairs each
    assert len(bench.runs) > screened_runs  # confirmation measured fresh pairs
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
    sweep, _ = swept(tmp_path, {}, budget_s=60)
    summary = summarize_study(sweep.study, sweep.experiment, sweep)
    assert not summary["winner"]["confirmed"] and summary["winner"]["strategies"] == {}
    assert summary["winner"]["reason"].startswith("no confirmed winner")
    confirmation = summary["confirmation"]
    assert any("cannot reach min_effect" in line for line in confirmation["power"]["lines"])
    assert confirmation["mde_spent"] > 0.01 and "could detect" in confirmation["mde_note"]
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
    sweep.bench, sweep.engine_args = FakeBench(exp, {}), dict(exp.engine)  # type: ignore[assignment]
    sweep.run(2)
    summary = summarize_study(study, exp, sweep)
    assert summary["confirmation"] is None and "confirmation pending" in summary["winner"]["reason"]
    assert "--resume --storage" in summary["winner"]["reason"]
    study.set_user_attr(CONFIRMATION_ATTR, {"screened": [99], "decision": {"winner": 1}})
    assert summarize_study(study, exp, sweep)["winner"]["trial"] is None  # not the screening as it stands


def test_engine_arg_trials_are_left_out_of_confirmation_with_a_note() -> None:
    base = {"state": "COMPLETE", "is_baseline": False, "aa": False, "feasible": True, "ratios": {}}
    rows = [
        {**base, "number": 0, "is_baseline": True, "engine": {}},
        {**base, "number": 1, "engine": {"max_num_seqs": 32}},
        {**base, "number": 2, "engine": {}},
        {**base, "number": 3, "engine": {}, "feasible_ci": False},  # feasible at the point, not at the CI bound
    ]
    results, notes = screening_results(rows, "output_tokens_per_s")
    assert [(r.trial, r.feasible) for r in results] == [(2, True), (3, False)]
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
    assert decision["winner"] == 1 and decision["look"] < len(record["plan"]["looks"])  # stopped early
    looks = record["plan"]["looks"]
    assert all(done + wanted == looks[k] for k, (_, done, wanted) in enumerate(asked[::2]))


def test_paired_runs_go_in_mirrored_order_and_continue_it(tmp_path: Path) -> None:
    bench = FakeBench(experiment(tmp_path), {})
    objective = Objective(metric="output_tokens_per_s")
    paired_runs(bench, {"gc_freeze": {}}, Pairs(min=4, max=4), objective, 1e-9, seed=5)  # type: ignore[arg-type]
    paired_runs(bench, {"gc_freeze": {}}, Pairs(min=4, max=4), objective, 1e-9, seed=5, first_pair=4)  # type: ignore[arg-type]
    runs = bench.runs
    assert len(runs) == 16
    assert all(runs[i] == runs[i + 1] for i in range(1, 15, 2))  # ABBA...: each pair starts where the last ended
    assert sum(r == ("gc_freeze",) for r in runs[::2]) == 4  # trial first in half the pairs
