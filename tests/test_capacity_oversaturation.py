"""A load's remaining rounds are not run once both arms miss every SLO tier whatever those rounds would show
(tuner.capacity.oversaturation), and the saving is kept and said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tuner.capacity.levels
from tests.test_capacity import _record
from tuner.capacity.levels import measure_level
from tuner.capacity.oversaturation import oversaturated
from tuner.capacity.slo import CapacitySlo
from tuner.config import Experiment
from tuner.feedback import SILENT
from tuner.metrics import RequestLatency
from tuner.report.capacity import write_capacity_report

SLO = CapacitySlo.of(
    Experiment.model_validate(
        {"name": "x", "capacity": {"tiers": {"fast": {"ttft_ms": {"p90": 100}}, "loose": {"errors": 0.5}}}}
    )
)
"""Two tiers: 90% of requests within a TTFT of 100 ms (check 0), at most half of them failed (check 1)."""


def _flags(ttft_met: int, completed: int, requests: int = 10) -> list[list[bool]]:
    return [[i < ttft_met for i in range(requests)], [i < completed for i in range(requests)]]


def test_a_miss_is_decided_once_even_perfect_rounds_left_could_not_reach_the_share() -> None:
    """Tier "fast" asks 90% of check 0, "loose" 50% of check 1. After 1 of 3 rounds of 10 requests, a share of 60%
    on check 0 stays below 90% even if the 20 requests left all pass (26 of 30); 70% could reach it (27 of 30). A
    50% share of check 1 is never decided after one round of three."""
    decided = {"reference": [_flags(6, 1)], "configuration": [_flags(5, 0)]}
    assert not oversaturated(SLO, decided, 3)  # "loose" could still be met: 0 + 20 >= 15
    both = {"reference": [_flags(6, 1), _flags(5, 2)], "configuration": [_flags(5, 0), _flags(6, 1)]}
    assert oversaturated(SLO, both, 3)  # after 2 rounds: check 1 at 3 + 10 < 15, check 0 at 11 + 10 < 27
    close = {"reference": [_flags(7, 1), _flags(10, 2)], "configuration": [_flags(5, 0), _flags(6, 1)]}
    assert not oversaturated(SLO, close, 3)  # the reference's check 0 could still reach 27 of 30: fast undecided


class _Engine:
    """Every run of 10 requests has one fast request; the other 9 fail."""

    def __init__(self) -> None:
        self.offsets, self.requests = [0.2 * i for i in range(10)], [object()] * 10

    def switch(self, strategies: dict[str, Any]) -> None:
        pass

    def repetition(self, feedback: Any, label: str) -> dict[str, Any]:
        found = [RequestLatency(50, 10, 900) if i < 1 else None for i in range(10)]
        return {"met": [x is not None for x in found], "latencies": found, "metrics": {"wall_s": 10.0}}


def test_a_bracketing_probe_stops_after_the_round_that_decides_both_arms_miss_every_tier(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    load = {"host_busy": 0.5, "tree_cpus": 1.0, "other_cpus": 0.0, "tool_wait": 0.01, "tool_gc_s": 0.0}
    monkeypatch.setattr(tuner.capacity.levels, "run_load", lambda *_: load)
    engine = _Engine()
    measured = measure_level(
        lambda tag: engine,  # type: ignore[arg-type, return-value]
        8.0,
        {"reference": {}, "configuration": {"known_delay": {}}},
        passes=(4, 5, 6),
        done=0,
        seed=0,
        feedback=SILENT,
        progress=SILENT.task("", None),
        slo=SLO,
    )
    # after the first round the "loose" tier (half completed) could still be met; after the second it could not
    assert measured.level.rounds == 2 and measured.level.passes == (4, 5) and measured.skipped == 1
    assert [len(measured.runs[arm]) for arm in measured.runs] == [2, 2]


def test_the_report_says_which_rounds_over_saturation_saved(tmp_path: Path) -> None:
    record: Any = _record(tmp_path)
    record["search"]["oversaturated"] = {"loads": 1, "rounds": 2, "saved_s": 40.0}
    write_capacity_report(tmp_path, record)
    assert "2 round(s) at 1 over-saturated load(s) not run" in (tmp_path / "report.md").read_text()
    assert "(~40 engine-s saved)" in (tmp_path / "report.md").read_text()
