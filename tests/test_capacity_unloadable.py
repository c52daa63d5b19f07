"""Where the load knob stops loading the engine: the search probes no higher than where every request already leaves
at once (tuner.capacity.load.unloadable), its sentence says what to change, and ``capacity.start: auto`` starts
where the engine stops keeping up with the sends (tuner.capacity.load.saturation_load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.test_capacity import _record
from tuner.capacity import KneePlanner
from tuner.capacity.levels import MeasuredLevel
from tuner.capacity.load import saturation_load, unloadable
from tuner.capacity.run import _saturated_start, conclude
from tuner.capacity.search import KneeSearch
from tuner.capacity.slo import CapacitySlo
from tuner.config import CapacitySearch, Experiment, LoadKnob
from tuner.feedback import Level, Silent
from tuner.stats import LevelResult, PairedCounts


def test_a_load_at_which_every_request_leaves_at_once_cannot_be_loaded_more() -> None:
    """25 requests sent over 3 s: a run of 40 s sent them all within its first 10%, one of 20 s did not; a
    concurrency of all the requests keeps every one in flight."""
    assert unloadable(LoadKnob.RATE, 8.0, 3.0, 40.0, 25) and not unloadable(LoadKnob.SPEED, 8.0, 3.0, 20.0, 25)
    assert unloadable(LoadKnob.RATE, 8.0, 0.0, 1.0, 25)  # sent at once
    assert unloadable(LoadKnob.CONCURRENCY, 25.0, 0.0, 4.0, 25) and not unloadable(LoadKnob.CONCURRENCY, 24, 0, 4, 25)


class _Notes(Silent):
    """Feedback that keeps its notes."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def note(self, text: str, level: Level = "info") -> None:
        self.said.append(text)


def _search(tmp_path: Path, max_load: float | None) -> tuple[KneeSearch, KneePlanner, _Notes]:
    experiment = Experiment.model_validate(
        {"name": "x", "workload": {"rate": 8}, "measure": {"slo": {"ttft_ms": 100}}, "capacity": {"max_load": max_load}}
    )
    record: Any = {"search": {"unloadable_from": None}}
    notes = _Notes()
    settings = experiment.capacity or CapacitySearch()
    knee = KneeSearch(
        None,  # type: ignore[arg-type]  # _cap reads no engine
        experiment,
        LoadKnob.RATE,
        settings,
        CapacitySlo.of(experiment),
        {},
        record,
        tmp_path / "capacity.json",
        notes,
    )
    return knee, KneePlanner(8.0, 0.99, budget=100, max_load=max_load), notes


def _measured(load: float, wall_s: float) -> MeasuredLevel:
    """A level of 25 requests sent over 3 s (8 requests/s), each run ``wall_s`` long."""
    counts = PairedCounts((25, 25), (25, 25), (0, 0), (0, 0))
    return MeasuredLevel(LevelResult(load, (counts,), (0, 1)), {}, offered_rps=8.0, requests=25, seconds=2 * wall_s)


def test_a_search_probes_no_higher_than_where_the_knob_stopped_loading_the_engine_and_says_so_once(
    tmp_path: Path,
) -> None:
    knee, planner, notes = _search(tmp_path, max_load=None)
    knee._walls[8.0] = 20.0  # 25 requests sent over 3 s: 15% of the run
    knee._cap(planner, _measured(8.0, 20.0))
    assert planner.max_load is None and knee.record["search"]["unloadable_from"] is None and not notes.said
    knee._walls[8.0] = 40.0  # 7.5% of the run
    knee._cap(planner, _measured(8.0, 40.0))
    assert planner.max_load == 8.0 and knee.record["search"]["unloadable_from"] == 8.0
    assert notes.said == [
        "at 8 requests/s, every one of the 25 requests was sent within the first 10% of a run: a higher load would "
        "not load the engine more, so the search probes no higher"
    ]
    knee._cap(planner, _measured(8.0, 40.0))  # measured again there: said once
    assert len(notes.said) == 1
    capped, planner, _ = _search(tmp_path, max_load=5.0)
    capped._walls[8.0] = 40.0
    capped._cap(planner, _measured(8.0, 40.0))
    assert planner.max_load == 5.0  # a lower limit of the file's stays


def test_the_sentence_says_what_to_change_when_an_arm_met_the_slo_up_to_where_the_knob_ran_out(
    tmp_path: Path,
) -> None:
    record: Any = _record(tmp_path)
    at_least = {"load": 8.0, "bound": "at_least", "ci_low": 8.0, "ci_high": None}
    for estimate in (record["estimate"], record["tiers"][0]["estimate"]):
        estimate["capacity_b"] = at_least
    record["search"]["unloadable_from"] = 8.0  # the highest load, 8, sent every request at once
    conclude(record, LoadKnob.RATE)
    said = "The configuration met the SLO at every load up to 8 requests/s, where every one of the 20 requests was "
    assert said in record["summary"] and "raise the budget" not in record["summary"]
    assert "Give the search more requests (workload.num_prompts, or a longer trace window)" in record["summary"]
    record["search"]["unloadable_from"] = None  # the knob could still load it: the budget or max_load stopped it
    conclude(record, LoadKnob.RATE)
    assert "Give the search more requests" not in record["summary"] and "raise the budget" in record["summary"]


def test_start_auto_begins_where_the_sends_would_span_the_time_all_requests_take_at_once(tmp_path: Path) -> None:
    """25 requests sent over 3 s at 8 requests/s took 1.5 s when sent at once: the engine keeps up to about
    8 * 3 / 1.5 = 16 requests/s, where the search starts (10 when max_load is 10)."""
    assert saturation_load(8.0, 3.0, 1.5) == pytest.approx(16.0) and saturation_load(8.0, 0.0, 1.5) == 8.0

    class Session:
        def run(self, requests: list[Any], offsets: list[float], sampling: Any) -> tuple[list[Any], float]:
            assert offsets == [0.0] * 25  # every request at once
            return [], 1.5

    first: Any = type("Bench", (), {"session": Session(), "requests": [object()] * 25,
                                    "offsets": [0.125 * i for i in range(25)]})()  # fmt: skip
    first.experiment = Experiment.model_validate({"name": "x", "workload": {"rate": 8}})
    notes = _Notes()
    placed = _saturated_start(first, 8.0, CapacitySearch(start="auto"), notes)
    assert placed["predicted"] == pytest.approx(16.0) and placed["start"] == pytest.approx(16.0)
    assert (
        "all 25 requests at once took 1.5 s, sent over 3 s at load 8: the engine keeps up to about 16" in notes.said[0]
    )
    limited = _saturated_start(first, 8.0, CapacitySearch(start="auto", max_load=10), notes)
    assert limited["start"] == 10.0 and "(10 within the load limits)" in notes.said[1]
    assert CapacitySearch.model_validate({"start": "auto"}).start == "auto"


def test_a_start_that_is_no_load_is_refused() -> None:
    for bad in (0.0, -2.0):
        with pytest.raises(ValueError, match="must be a positive load, or auto"):
            CapacitySearch.model_validate({"start": bad})
    with pytest.raises(ValueError, match="start"):
        CapacitySearch.model_validate({"start": "soon"})
