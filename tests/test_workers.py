"""Many ``tuner worker`` processes on one study in a real PostgreSQL server, without an engine: the grid queued once,
the study lock, bad storage refused (workers on the real CPU engine: ``tests/engine/test_workers_engine.py``)."""

from __future__ import annotations

import threading
from pathlib import Path

import optuna
from typer.testing import CliRunner

from tests.support import (
    TINY_ENGINE,
    WORKER_SPACE,
    params_key,
    study_trials,
    write_worker_experiment,
)
from tuner.config import Experiment
from tuner.sweep.space import grid
from tuner.sweep.trial_attrs import read
from tuner.sweep.worker import join_study, study_lock


def test_workers_arriving_together_queue_each_grid_point_once(postgres_url: str) -> None:
    exp = Experiment.model_validate({"name": "arrive", "engine": TINY_ENGINE, "search": {"space": WORKER_SPACE}})
    arrived = threading.Barrier(4)
    errors: list[BaseException] = []

    def arrive() -> None:
        try:
            arrived.wait(timeout=30)
            join_study(exp, postgres_url, "arrive")
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=arrive, daemon=True) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    queued = study_trials(postgres_url, "arrive")
    assert all(t.state == optuna.trial.TrialState.WAITING for t in queued)
    assert sorted(params_key(t.system_attrs["fixed_params"]) for t in queued) == sorted(
        params_key(p) for p in grid(WORKER_SPACE)
    )
    assert read(queued[0]).get("baseline") and sum(bool(read(t).get("baseline")) for t in queued) == 1


def test_the_study_lock_excludes_other_connections(postgres_url: str) -> None:
    first, second = study_lock(postgres_url, "lock"), study_lock(postgres_url, "lock")
    first.acquire()
    waiter = threading.Thread(target=second.acquire)
    waiter.start()
    waiter.join(timeout=1)
    assert waiter.is_alive()  # blocked while the first holds the lock
    first.release()
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    second.release()


def test_bad_storage_exits_2_without_a_traceback(tmp_path: Path, postgres_url: str) -> None:
    from tuner.cli.main import app

    path = write_worker_experiment(tmp_path, "bad")
    cases = [
        (["worker", str(path), "--storage", "postgresql://nobody@127.0.0.1:1/none"], "cannot open the study storage"),
        (["report", str(path), "--storage", postgres_url, "--study-name", "nope"], "no study named 'nope'"),
    ]
    for argv, message in cases:
        result = CliRunner().invoke(app, argv)
        assert result.exit_code == 2, result.output
        assert message in result.stderr and "Traceback" not in result.output
