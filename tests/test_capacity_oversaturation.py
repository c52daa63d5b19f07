"""A load's remaining rounds are not run once both arms are over-saturated and miss every SLO tier
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


def test_both_arms_behind_the_offered_load_and_missing_every_tier_are_over_saturated() -> None:
    """10 requests offered at 5/s: a run of 10 s completed them at 1/s, behind; one of 2.5 s at 4/s kept up."""
    behind = [{"wall_s": 10.0}]
    missed = {"reference": [_flags(3, 4)], "configuration": [_flags(2, 4)]}  # fast: 30%, 20%; loose: 40% failed 60%
    assert oversaturated(SLO, missed, {"reference": behind, "configuration": behind}, 5.0)
    assert not oversaturated(SLO, missed, {"reference": behind, "configuration": [{"wall_s": 2.5}]}, 5.0)
    looser = {"reference": [_flags(3, 4)], "configuration": [_flags(2, 6)]}  # the configuration meets "loose"
    assert not oversaturated(SLO, looser, {"reference": behind, "configuration": behind}, 5.0)
    assert not oversaturated(SLO, missed, {"reference": behind, "configuration": behind}, float("inf"))  # at once


class _Engine:
    """Every run takes 10 s for 10 requests offered at 5/s over 1.8 s; 3 of them are fast, 6 fail."""

    def __init__(self) -> None:
        self.offsets, self.requests = [0.2 * i for i in range(10)], [object()] * 10

    def switch(self, strategies: dict[str, Any]) -> None:
        pass

    def repetition(self, feedback: Any, label: str) -> dict[str, Any]:
        found = [RequestLatency(50, 10, 900) if i < 3 else RequestLatency(500, 10, 900) if i < 4 else None
                 for i in range(10)]  # fmt: skip
        return {"met": [x is not None for x in found], "latencies": found, "metrics": {"wall_s": 10.0}}


def test_a_bracketing_probe_stops_after_the_round_that_shows_both_arms_over_saturated(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tuner.capacity.levels, "run_load", lambda *_: {"host_busy": 0.5, "tree_cpus": 1.0,
                                                                       "other_cpus": 0.0})  # fmt: skip
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
    assert measured.level.rounds == 1 and measured.level.passes == (4,) and measured.skipped == 2
    assert [len(measured.runs[arm]) for arm in measured.runs] == [1, 1]


def test_the_report_says_which_rounds_over_saturation_saved(tmp_path: Path) -> None:
    record: Any = _record(tmp_path)
    record["search"]["oversaturated"] = {"loads": 1, "rounds": 2, "saved_s": 40.0}
    write_capacity_report(tmp_path, record)
    assert "2 round(s) at 1 over-saturated load(s) not run" in (tmp_path / "report.md").read_text()
    assert "(~40 engine-s saved)" in (tmp_path / "report.md").read_text()
