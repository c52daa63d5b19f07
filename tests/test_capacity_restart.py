"""Capacity by restart pairs (``tuner.capacity.restart``) on a simulated engine: which engines start in which order,
what the budget holds, and the ratio found (the CPU engine's max_num_seqs 8 against 32:
``tests/engine/test_capacity_engine.py``)."""

from __future__ import annotations

import math
import types
from pathlib import Path
from typing import Any

import pytest

from tests import support
from tuner.capacity import restart
from tuner.capacity.run import capacity_on
from tuner.capacity.slo import CapacitySlo
from tuner.config import StartConfig
from tuner.errors import UserError
from tuner.measure import Workbench
from tuner.records import load_capacity

KNEES = {8: 10.0, 32: 25.0}
"""The simulated engine's capacity (requests/s) at each max_num_seqs."""


class _Session:
    """A started engine as the search reads it: its arm (by max_num_seqs), start and stop times."""

    def __init__(self, seqs: int, start_s: float) -> None:
        self.seqs, self.start_s, self.stop_s = seqs, start_s, None

    def vocab_size(self) -> int:
        return 1000

    def close(self) -> None:
        self.stop_s = self.stop_s or 2.0


class _Engines:
    """Workbench.start for the search: a simulated engine per start, each start kept in order."""

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.started: list[int] = []
        self.sessions: list[_Session] = []

    def start(self, experiment: Any, spec: str, engine: dict[str, Any], env: dict[str, Any]) -> Workbench:
        self.started.append(engine["max_num_seqs"])
        self.sessions.append(_Session(engine["max_num_seqs"], self.start_s))
        return Workbench(self.sessions[-1], experiment)  # type: ignore[arg-type]


def _run(at: Workbench, slo: CapacitySlo, label: str, feedback: Any, position: int = 0) -> Any:
    """A run on the simulated engine: every request meets the TTFT target below the knee, 40% of them above it."""
    seqs: int = at.session.seqs  # type: ignore[attr-defined]
    load, count = at.experiment.workload.rate, len(at.requests)
    met = count if load <= KNEES[seqs] else int(0.4 * count)
    flags = [[index < met for index in range(count)]]
    return flags, {"attainment": met / count, "wall_s": 1.0, "host_busy": 0.5, "tree_cpus": 1.0,
                   "other_cpus": 0.0, "position": 0.0, "pause_s": 0.0}  # fmt: skip


def _search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engines: _Engines, budget_s: float, run: Any = _run
) -> Any:
    engine = {**support.STREAMING_ENGINE, "max_num_seqs": 8}
    exp = support.experiment(
        "restart",
        tmp_path,
        engine=engine,
        workload={"num_prompts": 20, "rate": 8.0},
        measure={"slo": {"ttft_ms": 100}, "warmup_prompts": 0},
        capacity={"attainment": 0.9, "budget_s": budget_s, "resolution": 1.25, "engine": {"max_num_seqs": 32}},
    )
    monkeypatch.setattr(restart, "Workbench", types.SimpleNamespace(start=engines.start))
    monkeypatch.setattr(restart, "arm_run", run)
    engines.sessions.append(_Session(8, engines.start_s))
    engines.started.append(8)
    first = Workbench(engines.sessions[0], exp)  # type: ignore[arg-type]
    return capacity_on(first, exp, StartConfig(engine={"max_num_seqs": 32}))[1]


def test_each_pass_starts_both_engines_once_and_the_ratio_is_the_knees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ladder: the reference's engine (8 seqs) climbs from 8 to 16 requests/s, where it misses, and halves the
    bracket to 9.51-11.31; the configuration's (32 seqs) replays those loads, climbs to 32 and halves to 22.63-26.91;
    the reference's engine starts again for the three loads it lacks. Then each grid pass starts both engines, the
    reference's first in odd passes. The knees, 10 and 25 requests/s, give a ratio of 2.5, found within the grid's
    resolution."""
    engines = _Engines(start_s=5.0)
    record = _search(tmp_path, monkeypatch, engines, budget_s=600)
    search, started = record["search"], engines.started
    assert started[:3] == [8, 32, 8]
    grid = started[3:]
    assert grid and len(grid) % 2 == 0
    assert grid == [seqs for tag in range(1, len(grid) // 2 + 1) for seqs in ((8, 32) if tag % 2 else (32, 8))]
    assert [r["tag"] for r in search["restarts"]] == [0, 0, 0, *(t for t in range(1, len(grid) // 2 + 1) for _ in "ab")]
    assert all(r["start_s"] == 5.0 and r["stop_s"] == 2.0 for r in search["restarts"])
    assert search["spent_s"] >= 7.0 * len(started) and search["spent_s"] <= 600
    assert search["contention"] is None and record["configuration"]["engine"] == {"max_num_seqs": 32}
    estimate = record["estimate"]
    assert estimate["capacity_a"]["bound"] == estimate["capacity_b"]["bound"] == "exact"
    assert 10.0 / 1.25 <= estimate["capacity_a"]["load"] <= 10.0 * 1.25
    assert 25.0 / 1.25 <= estimate["capacity_b"]["load"] <= 25.0 * 1.25
    assert estimate["ci_low"] > 1 and 2.5 / 1.25**2 <= estimate["ratio"] <= 2.5 * 1.25**2
    assert search["stop"] in {"planned", "budget"}
    (said,) = search["forecast"]
    assert said.startswith("capacity budget 600 engine-s (restart pairs, ladder done): ")
    assert "left buy ~28 grid passes of 4 loads from 9.514 to 26.91, ~21 engine-s each" in said


def test_a_budget_that_cannot_hold_four_engine_starts_is_refused_with_the_arithmetic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(UserError) as refused:
        _search(tmp_path, monkeypatch, _Engines(start_s=30.0), budget_s=100)
    assert "4 x 30 = 120 s, more than the budget of 100 engine-s" in str(refused.value)


def test_a_pass_the_rest_of_the_budget_cannot_hold_is_not_begun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines = _Engines(start_s=10.0)
    record = _search(tmp_path, monkeypatch, engines, budget_s=70)
    assert record["search"]["stop"] == "budget" and record["search"]["spent_s"] <= 70
    assert len(engines.started) % 2 == 1 and math.isfinite(record["search"]["spent_s"])  # the ladder's 3, whole passes
    assert all(session.stop_s is not None for session in engines.sessions)


def test_an_interrupted_search_keeps_its_record_and_leaves_no_engine_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C during the configuration's ladder: the record is saved as interrupted and every engine the search
    started is stopped, the one running then included."""
    runs: list[int] = []

    def interrupted(at: Workbench, slo: CapacitySlo, label: str, feedback: Any, position: int = 0) -> Any:
        runs.append(1)
        if len(runs) == 14:  # the reference's ladder is 12 runs (4 loads, 3 rounds)
            raise KeyboardInterrupt
        return _run(at, slo, label, feedback, position)

    engines = _Engines(start_s=5.0)
    with pytest.raises(KeyboardInterrupt):
        _search(tmp_path, monkeypatch, engines, budget_s=600, run=interrupted)
    record = load_capacity(tmp_path / "restart" / "capacity" / "capacity.json")
    assert record["search"]["stop"] == "interrupted" and engines.started == [8, 32]
    assert all(session.stop_s is not None for session in engines.sessions)
    kept = [(u["arm"], u["load"], len(u["runs"])) for u in record["search"]["unpaired"] or []]
    assert kept == [("reference", 8.0, 3), ("reference", 9.513656920021768, 3), ("reference", 11.313708498984761, 3),
                    ("reference", 16.0, 3), ("configuration", 16.0, 1)]  # fmt: skip
    assert record["levels"] == []


def _timed(monkeypatch: pytest.MonkeyPatch) -> Any:
    """:func:`_run` on a clock of the search's own (``restart.time``) that each run moves on by 1 s."""
    now = [0.0]

    def run(at: Workbench, slo: CapacitySlo, label: str, feedback: Any, position: int = 0) -> Any:
        now[0] += 1.0
        return _run(at, slo, label, feedback, position)

    monkeypatch.setattr(restart, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    return run


def test_ladder_runs_the_budget_left_without_the_other_arm_are_kept_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs of 1 s and engines that start in 4 s: at 20 engine-s the budget ends during the configuration's ladder,
    before its engine ran any load; at 44, before it came down to the reference's loads. Either way the ladder's
    runs in no level are kept in the record, and the closing sentence says where."""
    run = _timed(monkeypatch)
    none = _search(tmp_path / "20", monkeypatch, _Engines(start_s=4.0), budget_s=20, run=run)
    assert none["levels"] == [] and none["estimate"] is None and none["search"]["stop"] == "budget"
    assert [(u["arm"], len(u["runs"])) for u in none["search"]["unpaired"]] == [("reference", 3)] * 3
    assert none["summary"].startswith("no capacity estimate: no load level was measured by both arms")
    assert "the runs at 8 (reference), 11.31 (reference), 16 (reference) have none" in none["summary"]

    some = _search(tmp_path / "44", monkeypatch, _Engines(start_s=4.0), budget_s=44, run=run)
    kept = {u["load"]: u for u in some["search"]["unpaired"]}
    assert {u["arm"] for u in kept.values()} == {"configuration"} and len(kept) == 3
    assert not kept.keys() & {level["load"] for level in some["levels"]}
    assert all(len(u["runs"]) == 3 and u["runs"][0]["wall_s"] == 1.0 for u in kept.values())
    assert "(search.unpaired), in no estimate" in some["summary"]

    enough = _search(tmp_path / "600", monkeypatch, _Engines(start_s=4.0), budget_s=600, run=run)
    assert enough["search"]["unpaired"] == [] and "unpaired" not in enough["summary"]
