"""Many ``tuner worker`` processes on one study in a real PostgreSQL server, with the real CPU engine.

Each worker runs in its own session, as on its own machine: killing its process group with SIGKILL is a
machine dying, engine processes included.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import optuna
import psutil
import pytest
from typer.testing import CliRunner

from tests.support import (
    GRACE_S,
    WORKER_SPACE,
    is_engine_core,
    params_key,
    study_trials,
    write_worker_experiment,
)
from tuner.sweep.space import grid
from tuner.sweep.trial_attrs import read

COMPLETE = optuna.trial.TrialState.COMPLETE


Workers = list[subprocess.Popen[bytes]]


@pytest.fixture
def workers() -> Iterator[Workers]:
    """Started workers (append to the list); whatever is left of their process groups is killed afterwards."""
    started: Workers = []
    yield started
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start_worker(path: Path, url: str, log: Path, core: int) -> subprocess.Popen[bytes]:
    """``tuner worker`` in a new session, as on a machine of its own: its pid is its process group (which its
    engine processes join), and its engine's OpenMP threads keep to one core of their own."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tuner", "worker", str(path), "--storage", url],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "VLLM_CPU_OMP_THREADS_BIND": str(core % (os.cpu_count() or 1))},
        )


def worker_name(proc: subprocess.Popen[bytes]) -> str:
    return f"{socket.gethostname()}-{proc.pid}"


def group_members(*groups: int) -> list[psutil.Process]:
    """Live (not zombie) processes in these process groups, on the whole machine."""
    found = []
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) in groups and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process)
        except (psutil.Error, ProcessLookupError):
            continue
    return found


def left_behind(*groups: int) -> list[psutil.Process]:
    """What is still alive of these process groups after giving exiting processes 10 s."""
    deadline = time.monotonic() + 10
    while (alive := group_members(*groups)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return alive


def log_tail(*logs: Path) -> str:
    return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in logs)


def assert_grid_complete_once(found: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    complete = [t for t in found if t.state == COMPLETE]
    assert sorted(params_key(t.params) for t in complete) == sorted(params_key(p) for p in grid(WORKER_SPACE))
    baseline = [t for t in complete if read(t).get("baseline")]
    assert [params_key(t.params) for t in baseline] == [
        params_key({"gc_threshold": False, "shared_empty_kv_blocks": False})
    ]
    return complete


@pytest.mark.engine
def test_two_workers_share_the_grid(tmp_path: Path, postgres_url: str, workers: Workers) -> None:
    from tuner.cli.main import app

    path = write_worker_experiment(tmp_path, "pair")
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    workers += [start_worker(path, postgres_url, log, core) for core, log in enumerate(logs)]
    codes = [proc.wait(timeout=300) for proc in workers]
    assert codes == [0, 0], log_tail(*logs)
    complete = assert_grid_complete_once(study_trials(postgres_url, "pair"))
    assert len(study_trials(postgres_url, "pair")) == len(complete)  # nothing failed, nothing extra was sampled
    names = [worker_name(proc) for proc in workers]
    assert {read(t).get("worker") for t in complete} == set(names)  # both did some of the work
    results = tmp_path / "results" / "pair" / "workers"
    for name in names:  # each worker summarised the whole study from the shared storage
        summary = json.loads((results / name / "summary.json").read_text())
        assert sum(row["state"] == "COMPLETE" for row in summary["trials"]) == len(complete)
        assert summary["engine_starts"] == 1
    report = CliRunner().invoke(app, ["report", str(path), "--storage", postgres_url])
    assert report.exit_code == 0, report.output
    assert "trials: 6 (COMPLETE 6)" in (results / "report" / "report.md").read_text()
    assert left_behind(*(proc.pid for proc in workers)) == []


@pytest.mark.engine
def test_a_dead_workers_trial_is_retried_by_the_other(tmp_path: Path, postgres_url: str, workers: Workers) -> None:
    path = write_worker_experiment(tmp_path, "kill")
    logs = [tmp_path / "victim.log", tmp_path / "survivor.log"]
    workers += [start_worker(path, postgres_url, log, core) for core, log in enumerate(logs)]
    victim, survivor = workers
    deadline = time.monotonic() + 180
    while True:  # the victim has claimed a trial and its engine is up (or starting): kill the whole machine
        claimed = [
            t
            for t in study_trials(postgres_url, "kill")
            if read(t).get("worker") == worker_name(victim) and t.state == optuna.trial.TrialState.RUNNING
        ]
        engine = [p for p in group_members(victim.pid) if is_engine_core(p)]
        if claimed and engine:
            break
        assert time.monotonic() < deadline and victim.poll() is None, log_tail(*logs)
        time.sleep(0.5)
    os.killpg(victim.pid, signal.SIGKILL)
    killed_at = dt.datetime.now()
    victim.wait()
    assert survivor.wait(timeout=300) == 0, log_tail(*logs)
    found = study_trials(postgres_url, "kill")
    complete = assert_grid_complete_once(found)
    [dead] = [t for t in found if t.state == optuna.trial.TrialState.FAIL]
    assert dead.number == claimed[0].number  # the trial the victim was running, and nothing else, failed
    retry = next(t for t in found if t.system_attrs.get("failed_trial") == dead.number)
    assert retry in complete and retry.params == dead.params
    assert read(retry).get("baseline") == read(dead).get("baseline")
    assert read(retry).get("worker") == worker_name(survivor)
    assert retry.datetime_start is not None
    delay = (retry.datetime_start - killed_at).total_seconds()
    assert GRACE_S <= delay < 120
    print(f"trial {dead.number} retried as {retry.number} {delay:.1f} s after its worker was killed")
    summary = json.loads((tmp_path / "results/kill/workers" / worker_name(survivor) / "summary.json").read_text())
    row = next(r for r in summary["trials"] if r["number"] == dead.number)
    assert row["failure"].endswith(f"retried as trial {retry.number}")
    assert left_behind(victim.pid, survivor.pid) == []  # the orphaned engine died with its machine
