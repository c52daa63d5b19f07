"""The loader's guarantee: after :func:`tuner.records.loader.load`, every field of a record type is present, whatever
version wrote the file (the fixtures predate many fields), so readers index records instead of guessing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tuner.errors import UserError
from tuner.records import ConfirmationRecord, DecisionRecord
from tuner.records.loader import EngineRecord, Repetition, RunRecord, SweepSummary, TrialRow, Winner, load

FIXTURES = Path(__file__).parent / "fixtures"
ENVIRONMENT = {"python", "platform", "cpu_count", "cpu_model", "device", "versions", "git_sha", "hostname"}


def fields(record: type) -> set[str]:
    return set(record.__required_keys__) | set(record.__optional_keys__)  # type: ignore[attr-defined]


def write_summary(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "sweep" / "summary.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return path


def test_an_old_run_loads_with_every_field(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "run", tmp_path / "run")
    on_disk = (tmp_path / "run" / "run.json").read_text()
    raw = json.loads(on_disk)
    assert "memory" not in raw and "tail" not in raw["repetitions"][0]  # the fixture predates both
    run = load(tmp_path / "run").run
    assert fields(RunRecord) <= set(run) and fields(EngineRecord) <= set(run["engine"])
    assert all(fields(Repetition) <= set(rep) for rep in run["repetitions"])
    assert set(run["environment"]) >= ENVIRONMENT
    assert run["memory"] == {} and run["workload"] is None and run["repetitions"][1]["tail"] is None
    assert (tmp_path / "run" / "run.json").read_text() == on_disk  # upgraded in memory only


def test_an_old_sweep_loads_with_every_field() -> None:
    summary = load(FIXTURES / "sweep-exp").sweep
    assert fields(SweepSummary) - {"aa"} <= set(summary)  # `aa`: A/A sweeps only
    assert fields(Winner) <= set(summary["winner"]) and "yaml" not in summary["winner"]
    assert all(fields(TrialRow) <= set(trial) for trial in summary["trials"])
    assert set(summary["environment"]) >= ENVIRONMENT
    first = summary["trials"][1]
    assert first["anchored"] == first["metrics"] and first["telemetry"] == first["repetitions"][-1]["processes"]


def test_a_bare_summary_reads_as_one_with_nothing_in_it(tmp_path: Path) -> None:
    """Only what the loader requires: every field else gets its empty value, the confirmation's included (an old
    plan of all the candidates together is none of them)."""
    path = write_summary(
        tmp_path,
        {
            "schema": "tuner.sweep/1",
            "objectives": [{"metric": "output_tokens_per_s"}],
            "trials": [{"number": 0, "state": "COMPLETE", "repetitions": 3}],
            "confirmation": {"decision": {"rows": [], "reason": "none"}, "plan": {"pairs": 8}},
        },
    )
    summary = load(path).sweep
    assert fields(SweepSummary) - {"aa"} <= set(summary)
    assert summary["objectives"] == [{"metric": "output_tokens_per_s", "direction": "maximize"}]
    (trial,) = summary["trials"]
    assert fields(TrialRow) <= set(trial) and trial["repetitions"] == [] and trial["pairs"] == 0
    confirmation = summary["confirmation"]
    assert confirmation is not None and fields(ConfirmationRecord) == set(confirmation)
    assert fields(DecisionRecord) == set(confirmation["decision"]) and confirmation["decision"]["reason"] == "none"
    assert confirmation["plan"] == [] and confirmation["mde_spent"] == {}  # an older one-object plan names no candidate
    assert summary["power"] == {"before_screening": None, "before_confirmation": None}


def test_an_objective_without_a_metric_is_refused(tmp_path: Path) -> None:
    path = write_summary(tmp_path, {"schema": "tuner.sweep/1", "objectives": [{"direction": "maximize"}], "trials": []})
    with pytest.raises(UserError, match="every objective needs a `metric`"):
        load(path)
