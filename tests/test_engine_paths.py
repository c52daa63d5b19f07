"""Strategies are refused on a code path they cannot act on: before any engine starts, from the ``VllmConfig``
vLLM resolves for the experiment (here the CPU build's: V1 model runner, sync scheduling, mp executor), and again
when a process is ready, from the config it really runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from strategies import ProcessContext, Role, Strategy
from strategies.framework import registry
from tests.support import TINY_ENGINE
from tuner.cli.main import app
from tuner.plugin import process as plugin
from tuner.plugin.protocol import ENV_VAR, encode_spec


class NeedsV2Runner(Strategy):
    """Acts only in Model Runner V2 (like sampler_copy_elision), but applicable to the installed vLLM."""

    name = "needs_v2_runner"
    description = "test: a strategy bound to the V2 model runner"
    roles = frozenset({Role.WORKER})

    def refuses(self, vllm_config: Any) -> str | None:
        return None if getattr(vllm_config, "use_v2_model_runner", False) else "it acts in the V2 model runner only"

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.count("applied")

    def revert(self, ctx: ProcessContext) -> None:
        """Nothing to undo."""


@pytest.fixture
def with_v2_strategy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    builtin = registry._builtin
    monkeypatch.setattr(registry, "_builtin", lambda: [*builtin(), NeedsV2Runner])
    registry.strategy_classes.cache_clear()
    registry.get.cache_clear()
    yield
    registry.strategy_classes.cache_clear()
    registry.get.cache_clear()


def test_refused_before_any_engine_starts_from_the_resolved_config(tmp_path: Path, with_v2_strategy: None) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"name": "paths", "engine": TINY_ENGINE, "strategies": {"needs_v2_runner": {}}}))
    result = CliRunner().invoke(app, ["run", str(path)])
    assert result.exit_code == 2, result.output
    line = path.read_text().splitlines().index("strategies:") + 2
    assert result.stderr.splitlines() == [
        f"error: {path}:{line}: strategies.needs_v2_runner: does not act on this engine's code path: "
        "it acts in the V2 model runner only"
    ]


class _Config:
    def __init__(self, v2: bool) -> None:
        self.use_v2_model_runner = v2


def test_refused_again_when_a_process_is_ready(monkeypatch: pytest.MonkeyPatch, with_v2_strategy: None) -> None:
    monkeypatch.setattr(plugin, "_state", None)
    monkeypatch.setenv(ENV_VAR, encode_spec({"needs_v2_runner": {}}))
    plugin.register()
    state = plugin.state()
    assert state is not None
    try:
        state.on_ready(Role.WORKER, _Config(v2=False), object())
        assert state.active == {} and state.errors["needs_v2_runner"] == "it acts in the V2 model runner only"
        state.on_ready(Role.WORKER, _Config(v2=True), object())  # a later engine on the V2 runner
        assert state.active == {"needs_v2_runner": {}}
    finally:
        state.retire()
