"""Fault injection on the real CPU engine: killed engines, failed starts, time limits, bad storage.

A sweep must lose at most the trial in progress, record why it failed, restart the engine, go on, and
leave no engine process behind.
"""

from __future__ import annotations

import random
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import optuna
import psutil
import pytest
import yaml
from typer.testing import CliRunner

from tests import support
from tests.support import SMALL_WORKLOAD, TINY_ENGINE, is_engine_core
from tuner.cli.main import app
from tuner.config import Experiment
from tuner.engine.session import EngineSession
from tuner.sweep.study import enqueue_missing, open_study
from tuner.sweep.summary import summarize_study
from tuner.sweep.trials import Sweep


def experiment(tmp_path: Path, search: dict[str, Any]) -> Experiment:
    return support.experiment("faults", tmp_path, workload=SMALL_WORKLOAD, measure={"warmup_prompts": 2}, search=search)


def engine_core_processes(session: EngineSession) -> list[psutil.Process]:
    """The live EngineCore process(es) of this engine session (and of no other engine in the test process)."""
    return [child for child in session.processes if is_engine_core(child)]


def descendants() -> dict[int, str]:
    """Live child processes, but multiprocessing's resource tracker (it serves the test process itself)."""
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "resource_tracker" not in cmdline:
            found[child.pid] = cmdline
    return found


def strays(before: dict[int, str]) -> dict[int, str]:
    time.sleep(1)
    return {pid: cmd for pid, cmd in descendants().items() if pid not in before}


@pytest.mark.engine
def test_engine_kills_lose_no_finished_trial_and_leave_no_process(tmp_path: Path) -> None:
    before = descendants()
    exp = experiment(
        tmp_path,
        {
            "space": {"gc_threshold": [False, True]},
            "pairs": {"min": 2, "max": 2},
            "sampler": "random",
            "method": "runs",
        },
    )
    study = open_study(exp, f"sqlite:///{tmp_path / 'kill.db'}", resume=False, study_name="kill")
    enqueue_missing(study, exp, aa=True)
    sweep = Sweep(exp, study, aa=True)
    stop = threading.Event()
    kills: list[float] = []
    finished_at_kill: list[set[int]] = []
    rng = random.Random(7)

    def killer() -> None:  # SIGKILL a running EngineCore at a random point, twice
        killed_sessions: list[Any] = []
        while not stop.is_set() and len(kills) < 2:
            session = sweep.engines.session
            if session is None or any(session is s for s in killed_sessions):
                time.sleep(0.2)
                continue
            time.sleep(rng.uniform(0.5, 6))
            victims = engine_core_processes(session)
            if victims and not stop.is_set():
                killed_sessions.append(session)
                done = {t.number for t in study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))}
                finished_at_kill.append(done)
                for victim in victims:
                    victim.kill()
                kills.append(time.monotonic())

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        sweep.run(10)
    finally:
        stop.set()
        thread.join(timeout=30)
        sweep.close()
    trials = study.get_trials()
    assert len(trials) == 10 and len(kills) >= 1
    complete = {t.number for t in trials if t.state == optuna.trial.TrialState.COMPLETE}
    for done in finished_at_kill:
        assert done <= complete  # no finished trial was lost to a later kill
    failed = [t for t in trials if t.state == optuna.trial.TrialState.FAIL]
    assert all(t.user_attrs.get("failure") for t in failed)  # each failure says why
    assert len(failed) == len(kills)  # a kill costs the trial in progress, nothing more
    summary = summarize_study(study, exp, sweep)
    assert summary["engine_starts"] == len(kills) + 1  # and one engine restart; the study went on
    assert strays(before) == {}


@pytest.mark.engine
def test_a_trial_over_its_time_limit_is_failed_and_the_study_goes_on(tmp_path: Path) -> None:
    before = descendants()
    exp = experiment(
        tmp_path,
        {
            "space": {"step_delay": [False, True], "step_delay.delay_ms": [400.0]},
            "pairs": {"min": 2, "max": 2},
            "trial_timeout_s": 10,
            "method": "runs",
        },
    )
    study = open_study(exp, f"sqlite:///{tmp_path / 'slow.db'}", resume=False, study_name="slow")
    with closing(Sweep(exp, study)) as sweep:
        sweep.run(enqueue_missing(study, exp, aa=False))
    by_delay = {bool(t.user_attrs.get("strategies")): t for t in study.get_trials()}
    assert by_delay[False].state == optuna.trial.TrialState.COMPLETE
    slow = by_delay[True]
    assert slow.state == optuna.trial.TrialState.FAIL
    assert "time limit of 10 s" in slow.user_attrs["failure"]
    assert strays(before) == {}


@pytest.mark.engine
def test_an_engine_that_cannot_start_exits_cleanly(tmp_path: Path) -> None:
    before = descendants()
    path = tmp_path / "nokv.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "nokv",
                "engine": {**TINY_ENGINE, "kv_cache_memory_bytes": 4096},
                "workload": SMALL_WORKLOAD,
                "output_dir": str(tmp_path),
            }
        )
    )
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 4, result.output[-2000:]
    assert "the vLLM engine failed to start" in result.stderr
    assert "Traceback" not in result.stderr.split("error:")[-1]
    assert strays(before) == {}
