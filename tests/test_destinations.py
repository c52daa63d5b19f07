"""A result's destination is checked before any engine starts, and a record that cannot be written where asked
after measuring goes to the default location instead: a measured result is never lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tuner.run.run
from tuner.cli.main import app
from tuner.config import Experiment
from tuner.errors import ResultRelocated
from tuner.metrics.timings import RequestTiming, summarize
from tuner.records.files import destination_problem, write_json_keeping

REPO = Path(__file__).parent.parent
EXPERIMENT = REPO / "experiments" / "quickstart.yaml"


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("an engine would start")

    monkeypatch.setattr(tuner.run.run.Workbench, "start", refuse)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (lambda tmp: tmp, "--output: is a directory: give a file name"),
        (lambda tmp: Path("/proc/version"), "--output: cannot write in /proc"),
        (lambda tmp: (tmp / "file").write_text("x") and tmp / "file" / "run.json", "is not a directory"),
    ],
)
def test_a_destination_that_cannot_be_written_is_refused_before_the_engine_starts(
    make: Any, expected: str, tmp_path: Path, no_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the default run directory goes here
    output = make(tmp_path)
    result = CliRunner().invoke(app, ["run", str(EXPERIMENT), "--output", str(output)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert expected in result.stderr and "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_an_output_that_cannot_be_written_is_refused_before_the_experiment_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the experiment imports vLLM and builds its engine arguments (~10 s here): `--output` is checked
    first, so its refusal is immediate."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the experiment was loaded before --output was checked")

    monkeypatch.setattr("tuner.config.load_experiment", refuse)
    result = CliRunner().invoke(app, ["run", str(EXPERIMENT), "--output", str(tmp_path)])
    assert result.exit_code == 2 and "--output: is a directory" in result.stderr, result.output


def test_a_writable_destination_passes_the_check(tmp_path: Path) -> None:
    assert destination_problem(tmp_path / "new" / "deeper" / "run.json") is None
    assert not (tmp_path / "new").exists()  # the check creates nothing


def test_a_write_that_fails_goes_to_the_fallback(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file where a directory was expected")
    written, why = write_json_keeping(
        tmp_path / "taken" / "run.json", {"a": 1}, lambda: tmp_path / "fallback" / "run.json"
    )
    assert written == tmp_path / "fallback" / "run.json" and json.loads(written.read_text()) == {"a": 1}
    assert why is not None and "could not write" in why


class _Session:
    start_s = 0.0
    mode = "offline"

    def __init__(self) -> None:
        self.engine_args: dict[str, Any] = {}
        self.env: dict[str, str] = {}

    def close(self) -> None:
        pass


class _Bench:
    """An engine's measurements without the engine: enough to drive ``run_experiment``'s writing."""

    def __init__(self, spoil: Path) -> None:
        self.session = _Session()
        self.workload = None
        self.spoil = spoil

    def switch(self, strategies: dict[str, Any]) -> list[Any]:
        return []

    def repetition(self, feedback: Any, label: str) -> dict[str, Any]:
        self.spoil.write_text("appeared while measuring")  # the destination's directory is now a file
        timing = RequestTiming(4, sent=0.0, chunk_times=[0.1, 0.2], chunk_tokens=[1, 9], finished=0.2)
        return {"metrics": summarize([timing], wall_s=1.0), "processes": [], "tail": None}


def test_a_record_that_cannot_be_written_after_measuring_is_kept_and_the_run_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spoil = tmp_path / "out"
    monkeypatch.setattr(tuner.run.run.Workbench, "start", lambda *a, **k: _Bench(spoil))
    experiment = Experiment.model_validate(
        {"name": "kept", "measure": {"repetitions": 1}, "output_dir": str(tmp_path / "results")}
    )
    with pytest.raises(ResultRelocated) as caught:
        tuner.run.run.run_experiment(experiment, output=spoil / "run.json")
    kept = Path(caught.value.path)
    assert kept.parent.parent == tmp_path / "results" / "kept"
    assert json.loads(kept.read_text())["repetitions"][0]["metrics"]["output_tokens_per_s"] == 10.0
    assert f"could not write {spoil / 'run.json'}" in str(caught.value) and str(kept) in str(caught.value)


def test_the_cli_exits_2_naming_both_places_when_the_record_was_relocated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tuner.run.run.Workbench, "start", lambda *a, **k: _Bench(tmp_path / "out"))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["run", str(EXPERIMENT), "--output", str(tmp_path / "out" / "run.json")])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert "the record is in results/quickstart/" in result.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["report", str(REPO / "tests" / "fixtures" / "run"), "--out", "/proc/version"],
        ["workload", "inspect", str(REPO / "tests" / "fixtures" / "traces" / "mooncake-good.jsonl"), "-o", "/proc/x"],
    ],
)
def test_commands_that_write_files_say_where_they_could_not(args: list[str]) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert "/proc/" in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("command", ["run", "sweep", "calibrate"])
def test_an_unwritable_results_directory_is_refused_before_the_engine_starts(
    command: str, tmp_path: Path, no_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tuner.sweep.run

    monkeypatch.setattr(tuner.sweep.run.Sweep, "__init__", lambda *a, **k: pytest.fail("a sweep would start"))
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT.read_text() + "output_dir: /proc/tuner-results\n")
    result = CliRunner().invoke(app, [command, str(path)])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), result.output
    assert result.stderr.startswith("error: /proc/tuner-results: output_dir: cannot write in /proc"), result.stderr
