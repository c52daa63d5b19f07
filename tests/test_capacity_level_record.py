"""A level's entry in ``capacity.json`` keeps the pass of each of its rounds, in the order of its runs, so the passes
the interval resamples whole can be read back from the record (a search estimated again, or replayed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tuner.capacity import KneePlanner
from tuner.capacity.levels import MeasuredLevel
from tuner.capacity.search import KneeSearch
from tuner.capacity.slo import CapacitySlo
from tuner.config import CapacitySearch, Experiment, LoadKnob
from tuner.feedback import Silent
from tuner.records import ARMS
from tuner.stats import LevelResult, PairedCounts


def _measured(load: float, passes: tuple[int, ...], attainment: float) -> MeasuredLevel:
    """Rounds at ``load`` in ``passes``, each run's attainment tagged so its place in ``runs`` can be told."""
    rounds = len(passes)
    counts = PairedCounts((4,) * rounds, (4,) * rounds, (0,) * rounds, (0,) * rounds)
    runs = {arm: [{"attainment": attainment + i / 100} for i in range(rounds)] for arm in ARMS}
    return MeasuredLevel(
        LevelResult(load, (counts,), passes), {"slo": counts}, offered_rps=load, requests=4, seconds=1.0, runs=runs
    )


def test_a_levels_record_keeps_each_rounds_pass_in_the_order_of_its_runs(tmp_path: Path) -> None:
    experiment = Experiment.model_validate({"name": "x", "workload": {"rate": 8}, "measure": {"slo": {"ttft_ms": 100}}})
    record: Any = {"levels": [], "tiers": [{"estimate": None}], "search": {}}
    knee = KneeSearch(
        None,  # type: ignore[arg-type]  # _keep reads no engine
        experiment,
        LoadKnob.RATE,
        CapacitySearch(),
        CapacitySlo.of(experiment),
        {},
        record,
        tmp_path / "capacity.json",
        Silent(),
    )
    planner = KneePlanner(8.0, 0.9, budget=100)
    for measured in (_measured(8.0, (0, 1, 2), 0.5), _measured(16.0, (3, 4, 5), 0.6), _measured(8.0, (7, 9), 0.7)):
        planner._add(measured.level)
        knee._keep(planner, measured)
    eight, sixteen = record["levels"]
    assert eight["passes"] == [0, 1, 2, 7, 9] and sixteen["passes"] == [3, 4, 5]
    assert [run["attainment"] for run in eight["runs"]["reference"]] == [0.5, 0.51, 0.52, 0.7, 0.71]
    assert eight["rounds"] == len(eight["passes"]) == len(eight["runs"]["configuration"])
