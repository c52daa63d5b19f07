"""`tuner strategies list`: how each strategy can be compared on a running engine."""

from __future__ import annotations

from typing import Any

import pytest
from rich.table import Table
from typer.testing import CliRunner

from strategies import strategy_classes
from strategies.gc_freeze import GcFreeze
from tuner.cli.main import app
from tuner.cli.output import console


def _listed(monkeypatch: pytest.MonkeyPatch) -> dict[str, dict[str, str]]:
    """The rows of the table `tuner strategies list` prints, by strategy name and column header."""
    printed: list[Any] = []
    monkeypatch.setattr(console, "print", lambda *objects, **_: printed.extend(objects))
    result = CliRunner().invoke(app, ["strategies", "list"])
    assert result.exit_code == 0, result.output
    (table,) = [p for p in printed if isinstance(p, Table)]
    columns = {str(column.header): [str(cell) for cell in column.cells] for column in table.columns}
    return {name: {h: cells[i] for h, cells in columns.items()} for i, name in enumerate(columns["name"])}


def test_every_builtin_but_gc_freeze_is_switched_per_step_and_gc_freeze_says_why_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = _listed(monkeypatch)
    builtin = [name for name, cls in strategy_classes().items() if cls.__module__.startswith("strategies.")]
    assert "gc_freeze" in builtin and len(builtin) > 1
    assert set(builtin) <= set(rows)
    for name in builtin:
        expected = f"between runs: {GcFreeze.run_level_reason}" if name == "gc_freeze" else "per step"
        assert rows[name]["switchable"] == expected, name
