"""A study database that is not one (corrupt, foreign, unreachable) is refused and left untouched; the faults of a
real engine are in ``tests/engine/test_faults_engine.py``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tuner.config import Experiment, load_experiment
from tuner.errors import UserError
from tuner.sweep.study import open_study


def test_corrupt_and_foreign_study_databases_are_refused_untouched(tmp_path: Path) -> None:
    exp = load_experiment_text(tmp_path)
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(UserError, match="not a readable SQLite database"):
        open_study(exp, f"sqlite:///{corrupt}", resume=True, study_name="x")
    assert corrupt.read_bytes() == b"this is not sqlite" * 100
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE invoices (id INTEGER)")
    size = foreign.stat().st_size
    with pytest.raises(UserError, match="not an Optuna study database"):
        open_study(exp, f"sqlite:///{foreign}", resume=True, study_name="x")
    assert foreign.stat().st_size == size
    with pytest.raises(UserError, match="cannot open the study storage"):
        open_study(exp, "postgresql://nobody@127.0.0.1:1/none", resume=True, study_name="x")


def load_experiment_text(tmp_path: Path) -> Experiment:
    path = tmp_path / "e.yaml"
    path.write_text("name: e\nsearch:\n  space: {gc_freeze: [false, true]}\n")
    return load_experiment(path)
