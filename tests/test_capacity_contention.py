"""Rounds run again after other work took the host (tuner.capacity.contention): which, how often, and the record."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import tuner.capacity.levels
from tuner.capacity.contention import contended, contention_record
from tuner.capacity.levels import MeasuredLevel, measure_level
from tuner.capacity.slo import CapacitySlo
from tuner.config import CapacitySearch, Contention, Experiment
from tuner.feedback import SILENT
from tuner.records import ARMS, LevelRecord

RULE = Contention()  # other processes used at least 0.25 CPUs during one of the runs, the host saturated


def _runs(a: float, b: float, busy: float = 1.0) -> dict[str, dict[str, float]]:
    return {"reference": {"other_cpus": a, "host_busy": busy}, "configuration": {"other_cpus": b, "host_busy": busy}}


def test_other_work_during_one_arms_run_on_a_saturated_host_is_contention() -> None:
    assert contended(RULE, _runs(0.02, 1.1)) == "configuration" and contended(RULE, _runs(0.6, 0.05)) == "reference"
    assert contended(RULE, _runs(0.5, 0.6)) == "configuration"  # a burst across the switch: neither run is clean
    assert contended(RULE, _runs(0.0, 0.2)) is None  # under the threshold
    assert contended(RULE, _runs(0.0, 3.0, busy=0.6)) is None  # CPUs to spare: the other work took none of ours
    assert CapacitySearch().contention == RULE and CapacitySearch(contention=None).contention is None


class _Engine:
    """An engine whose runs meet the requests they are told to: per run, each request met or not."""

    def __init__(self, met: list[list[bool]]) -> None:
        self.offsets, self.requests = [0.0, 0.5], [object(), object()]
        self._met: Iterator[list[bool]] = iter(met)
        self.switched: list[dict[str, Any]] = []

    def switch(self, strategies: dict[str, Any]) -> None:
        self.switched.append(strategies)

    def repetition(self, feedback: Any, label: str) -> dict[str, Any]:
        metrics = {"wall_s": 1.0, "longest_pause_ms": 20.0}
        met = next(self._met)
        return {"met": met, "latencies": [None] * len(met), "metrics": metrics}


def _measure(
    monkeypatch: pytest.MonkeyPatch, runs: list[tuple[list[bool], float]], rule: Contention | None, rounds: int
) -> tuple[MeasuredLevel, _Engine]:
    """Measure ``rounds`` rounds where each run, in turn, meets what it is told with other work taking the CPUs it
    is told; the first round runs the reference first, the second the configuration (seed 0)."""
    taken = iter(cpus for _, cpus in runs)
    monkeypatch.setattr(
        tuner.capacity.levels,
        "run_load",
        lambda before, after: {
            "host_busy": 1.0,
            "tree_cpus": 2.0,
            "other_cpus": next(taken),
            "tool_wait": None,
            "tool_gc_s": 0.0,
        },
    )
    engine = _Engine([met for met, _ in runs])
    arms: dict[str, Any] = {"reference": {}, "configuration": {"known_delay": {}}}
    measured = measure_level(
        lambda tag: engine,  # type: ignore[arg-type, return-value]
        4.0,
        arms,
        passes=tuple(range(rounds)),
        done=0,
        seed=0,
        feedback=SILENT,
        progress=SILENT.task("", None),
        slo=CapacitySlo.of(Experiment(name="x", measure={"slo": {"ttft_ms": 100}})),
        contention=rule,
    )
    return measured, engine


def test_a_round_other_work_took_is_set_aside_and_run_again_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Other work took 1.2 CPUs during the configuration's first run (half its requests missed): the round is run
    again and the level holds the second round's requests; in the next round other work comes back when it is run
    again, and that round is kept as it came."""
    good, bad = [True, True], [True, False]
    first = [(good, 0.0), (bad, 1.2), (good, 0.0), (good, 0.05)]  # reference first, then run again
    second = [(bad, 1.3), (good, 0.0), (bad, 1.1), (good, 0.0)]  # configuration first, then run again
    measured, engine = _measure(monkeypatch, first + second, RULE, rounds=2)
    assert measured.level.rounds == 2 and [len(measured.set_aside[arm]) for arm in ARMS] == [2, 2]
    assert [r["other_cpus"] for r in measured.set_aside["configuration"]] == pytest.approx([1.2, 1.3])
    assert [r["other_cpus"] for r in measured.runs["configuration"]] == pytest.approx([0.05, 1.1])
    assert sum(measured.level.checks[0].met_b) == 3 and sum(measured.level.checks[0].met_a) == 4
    assert len(engine.switched) == 8  # two rounds, each run twice


def test_without_the_rule_a_round_other_work_took_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    measured, _ = _measure(monkeypatch, [([True, True], 0.0), ([True, False], 1.2)], None, rounds=1)
    assert measured.set_aside == {arm: [] for arm in ARMS} and sum(measured.level.checks[0].met_b) == 1


def _level(rounds: int, aside: list[tuple[float, float]]) -> LevelRecord:
    runs = {arm: [{"attainment": 1.0, "wall_s": 1.0, "other_cpus": 0.0}] * rounds for arm in ARMS}
    set_aside = {
        arm: [{"attainment": 0.5, "wall_s": 1.5, "other_cpus": pair[i]} for pair in aside] for i, arm in enumerate(ARMS)
    }
    return {
        "load": 1.0,
        "offered_rps": 1.0,
        "rounds": rounds,
        "requests": 2,
        "attainment": {arm: 1.0 for arm in ARMS},
        "difference": None,
        "runs": runs,
        "set_aside": set_aside,
    }


def test_the_record_counts_the_rounds_run_again_and_whose_run_other_work_took() -> None:
    record = contention_record([_level(20, [(1.2, 0.0), (0.0, 0.9), (0.0, 1.5)])], RULE)
    assert record["rerun"] == 3 and record["rounds"] == 20
    assert record["contended"] == {"reference": 1, "configuration": 2}
    assert record["note"] is not None and record["note"].startswith("3 of 23 rounds were run again")
    assert "(the more so: reference 1, configuration 2)" in record["note"]
    quiet = contention_record([_level(20, [])], RULE)
    assert quiet["rerun"] == 0 and quiet["note"] is None
