"""`tuner strategies list`: how each strategy can be compared on a running engine."""

from __future__ import annotations

from typing import Any

import pytest
from packaging.version import Version
from rich.table import Table
from typer.testing import CliRunner

from strategies import strategy_classes
from strategies.event_wait import EventWait
from strategies.fast_teardown import FastTeardown
from strategies.gc_freeze import GcFreeze
from strategies.gc_refreeze import GcRefreeze
from strategies.sampler_copy_elision import SamplerCopyElision
from strategies.shm_spin_window import ShmSpinWindow
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


RUN_LEVEL = {"gc_freeze": GcFreeze, "shm_spin_window": ShmSpinWindow, "event_wait": EventWait}
RESTART = {"gc_refreeze": GcRefreeze, "fast_teardown": FastTeardown}


def test_every_builtin_is_switched_per_step_but_those_that_say_why_not(monkeypatch: pytest.MonkeyPatch) -> None:
    """The list says how each is switched; `show` says why a strategy is not switched per step."""
    rows = _listed(monkeypatch)
    builtin = [name for name, cls in strategy_classes().items() if cls.__module__.startswith("strategies.")]
    assert set(RUN_LEVEL) | set(RESTART) < set(builtin)
    assert set(builtin) <= set(rows)
    for name in builtin:
        kind, reason = "per step", None
        if name in RUN_LEVEL:
            kind, reason = "between runs", RUN_LEVEL[name].run_level_reason
        if name in RESTART:
            kind, reason = "restart", RESTART[name].run_level_reason
        assert rows[name]["switchable"] == kind, name
        shown = _shown(monkeypatch, name)["switchable"]
        assert shown == (f"{kind}: {reason}" if reason else kind), name


def _shown(monkeypatch: pytest.MonkeyPatch, name: str) -> dict[str, str]:
    """The fields `tuner strategies show NAME` prints."""
    printed: list[Any] = []
    monkeypatch.setattr(console, "print", lambda *objects, **_: printed.extend(objects))
    result = CliRunner().invoke(app, ["strategies", "show", name])
    assert result.exit_code == 0, result.output
    (table,) = [p for p in printed if isinstance(p, Table)]
    fields, values = ([str(cell) for cell in column.cells] for column in table.columns)
    return dict(zip(fields, values, strict=True))


def test_the_list_fits_a_terminal_one_line_per_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 120 columns: a title, the header in three lines, one line per strategy, the bottom border."""
    monkeypatch.setattr(console, "width", 120)
    result = CliRunner().invoke(app, ["strategies", "list"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("Triton")]
    assert len(lines) == 1 + 3 + len(strategy_classes()) + 1, result.output
    assert max(len(line) for line in lines) <= 120
    for name in strategy_classes():
        assert sum(line.startswith(f"│ {name} ") for line in lines) == 1, name


def test_show_gives_the_whole_strategy_and_refuses_an_unknown_name(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = _shown(monkeypatch, "gc_threshold")
    assert shown["parameters"].splitlines()[0] == "gen0_per_seq: int = 8 [0, 4096]"
    assert shown["processes"] == "engine_core, frontend, worker"
    assert shown["upstream"].startswith("not in vLLM (")
    result = CliRunner().invoke(app, ["strategies", "show", "gc_magic"])
    assert result.exit_code == 2 and "unknown strategy 'gc_magic' (known: gc_threshold" in result.output


def test_each_builtin_says_where_vllm_stands_on_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.32 here: its defaults are measured by the `false` arm, the rest are not in vLLM."""
    rows = _listed(monkeypatch)
    upstream = {name: rows[name]["upstream"] for name in ("gc_freeze", "shared_empty_kv_blocks", "gc_threshold")}
    assert upstream["gc_freeze"].startswith("vLLM default since 0.23 (")
    assert upstream["shared_empty_kv_blocks"].startswith("vLLM default in every supported release (#24964)")
    assert all(u.endswith("the `false` arm measures its worth") for n, u in upstream.items() if n != "gc_threshold")
    assert upstream["gc_threshold"].startswith("not in vLLM (")
    assert rows["shm_spin_window"]["upstream"] == "not in vLLM (vLLM hard-codes a 1 s window; #52814)"


def test_a_default_newer_than_the_installed_release_is_not_claimed() -> None:
    copy = SamplerCopyElision.upstream
    assert copy.status(Version("0.26.0")).startswith("not in vLLM 0.26.0 (its default since 0.27)")
    assert copy.status(Version("0.33.0")).startswith("vLLM default since 0.27")
    assert copy.status(None).startswith("vLLM default since 0.27")
