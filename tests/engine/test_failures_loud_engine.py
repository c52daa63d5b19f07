"""Failures on a real engine end loudly and within seconds: Ctrl-C and a dying process during a start; an A/A sweep
covers the step-level method too."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from tests.support import REPO, SMALL_WORKLOAD, TINY_ENGINE
from tuner.config import Experiment
from tuner.engine.session import EngineSession
from tuner.sweep.study import enqueue_missing, open_study
from tuner.sweep.summary import summarize_study
from tuner.sweep.trials import Sweep


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return [c for c in psutil.Process(pid).children(recursive=True) if "resource_tracker" not in c.cmdline()[-1]]
    except psutil.Error:
        return []


def _start_run(tmp_path: Path) -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    """`tuner run` in a subprocess, returned once its EngineCore process exists (the start-up handshake)."""
    path = tmp_path / "run.yaml"
    path.write_text(
        yaml.safe_dump({"name": "sig", "engine": TINY_ENGINE, "workload": SMALL_WORKLOAD, "output_dir": str(tmp_path)})
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner", "run", str(path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        children = [c for c in _descendants(proc.pid) if "spawn_main" in " ".join(c.cmdline())]
        if children:
            return proc, children
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("no engine process appeared within 120 s")


@pytest.mark.engine
def test_ctrl_c_during_engine_start_ends_the_run_within_seconds(tmp_path: Path) -> None:
    proc, children = _start_run(tmp_path)
    time.sleep(2)  # inside vLLM's start-up: the old run waited in its 600 s handshake poll
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)  # to the tuner only, as a supervisor would; not to its engine
    try:
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert time.monotonic() - sent < 15
    assert proc.returncode == 130, stderr
    assert "error: interrupted" in stderr and "Traceback (most recent call last)" not in stderr.split("error:")[-1]
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive


@pytest.mark.engine
def test_an_engine_process_that_dies_during_start_fails_the_run_within_seconds(tmp_path: Path) -> None:
    proc, children = _start_run(tmp_path)
    died = time.monotonic()
    for child in children:
        child.kill()
    try:
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert time.monotonic() - died < 30  # not VLLM_ENGINE_READY_TIMEOUT_S (600 s)
    assert proc.returncode == 4, stderr
    assert stderr.strip().splitlines()[-1].startswith("error: ")


class _Borrowed:
    """The test session's engine lent to a sweep, which must not close it."""

    def __init__(self, session: EngineSession) -> None:
        self._session = session

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)

    def close(self) -> None:
        """The engine goes back to the test session."""


@pytest.mark.engine
def test_aa_covers_the_step_level_method_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine_session: EngineSession
) -> None:
    monkeypatch.setattr("tuner.measure.workbench.open_session", lambda *a, **k: _Borrowed(engine_session))
    experiment = Experiment.model_validate(
        {
            "name": "aa-steps",
            "engine": TINY_ENGINE,
            "workload": SMALL_WORKLOAD,
            "measure": {"warmup_prompts": 2},
            "search": {
                "space": {"shared_empty_kv_blocks": [False, True]},  # compared step by step when swept
                "pairs": {"min": 2, "max": 2},
                "step_budget_s": 4,
                "sampler": "random",
            },
            "output_dir": str(tmp_path),
        }
    )
    study = open_study(experiment, f"sqlite:///{tmp_path / 'aa.db'}", resume=False, study_name="aa")
    enqueue_missing(study, experiment, aa=True)
    with closing(Sweep(experiment, study, aa=True)) as sweep:
        sweep.run(2)
    summary = summarize_study(study, experiment, sweep)
    assert summary["incomplete"] == []
    assert set(summary["aa"]) == {"runs", "steps"}
    assert summary["aa"]["runs"]["comparisons"] == 1 and summary["aa"]["steps"]["comparisons"] == 1
