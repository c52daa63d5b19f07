"""The suite's plumbing: its environment, the shared engines and their order, fixtures. Engine tests start the real
vLLM CPU engine (no mocks); what tests share to build their subjects is in :mod:`tests.support`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import STREAMING_ENGINE, TINY_ENGINE

if TYPE_CHECKING:
    from tuner.engine.session import EngineSession

THIRD_PARTY = Path(__file__).parent / "third_party"
"""Test subjects from outside the tuner: a third-party strategy package and the instruments tests inject."""
PLUMBING = Path(__file__).parent / "plumbing"
"""The suite's own plugin for the engine processes it starts (``suite_plumbing``: their fast exit)."""

# Make both discoverable here and in every spawned vLLM process.
sys.path[:0] = [str(THIRD_PARTY), str(PLUMBING)]
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (str(THIRD_PARTY), str(PLUMBING), os.environ.get("PYTHONPATH")) if p
)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
# The engine processes of the suite end without the interpreter's 2-3 s teardown (tests/plumbing/suite_plumbing/
# fast_exit.py); a test that times engine stops asks for ``real_engine_stops``.
os.environ.setdefault("TUNER_TEST_FAST_EXIT", "1")
# pytest-xdist's workers set COLUMNS=80; the CLI's tables are tested at the width they have when piped (160).
os.environ.pop("COLUMNS", None)


def applicable_strategies() -> list[str]:
    """Every registered strategy (built-in and test-only) that applies to the installed vLLM and acts on the tiny
    CPU engine's code path (``event_wait``, for one, needs CUDA)."""
    from strategies.framework.registry import strategy_classes
    from tuner.vllm.arguments import engine_config, resolve_engine_args

    config, refused = engine_config(resolve_engine_args(TINY_ENGINE))
    assert refused is None, refused
    return sorted(
        name for name, cls in strategy_classes().items() if cls().applicable().ok and cls().refuses(config) is None
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``applicable``: one test per strategy of :func:`applicable_strategies`. Finding them builds vLLM's engine
    config (15-25 s here), so a run that deselects the engine tests (the fast loop) gets one placeholder instead."""
    if "applicable" in metafunc.fixturenames:
        wanted = "not engine" not in (metafunc.config.option.markexpr or "")
        metafunc.parametrize("applicable", applicable_strategies() if wanted else ["engine-tests-deselected"])


@pytest.fixture(scope="session")
def engine_session() -> Iterator[EngineSession]:
    """One tiny CPU engine with every applicable strategy installable, shared by the modules that switch in place
    (an engine start costs 25-40 s here)."""
    from tuner.measure.workbench import open_session
    from tuner.plugin.protocol import encode_spec

    session = open_session(TINY_ENGINE, encode_spec({}, applicable_strategies()), streaming=False)
    try:
        yield session
    finally:
        session.close()


SHARED_ENGINES = ("streaming_session", "engine_session")
"""The session-wide engines, in the order their tests run (after every other engine test)."""


@pytest.fixture(scope="session")
def streaming_session() -> Iterator[EngineSession]:
    """One tiny CPU engine streaming requests at their send times (AsyncLLM), with ``known_delay`` installable,
    shared by the trace-replay and capacity tests."""
    from tuner.measure.workbench import open_session
    from tuner.plugin.protocol import encode_spec

    session = open_session(STREAMING_ENGINE, encode_spec({}, ["known_delay"]), streaming=True)
    try:
        yield session
    finally:
        session.close()


def _shared_engine(item: pytest.Item) -> int:
    """Which shared engine ``item`` runs on (1 + its index in :data:`SHARED_ENGINES`), 0 for none."""
    names = getattr(item, "fixturenames", ())
    return next((i + 1 for i, name in enumerate(SHARED_ENGINES) if name in names), 0)


ENGINE_TESTS = Path(__file__).parent / "engine"
"""Where the tests that start a real engine live: each of them is marked ``engine`` by being there."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test in ``tests/engine/`` is an engine test (the fast loop runs the others on both cores); the tests on
    the shared engines run last, grouped by engine, so that each starts once and never idles beside the engines
    other tests start."""
    for item in items:
        if item.path.is_relative_to(ENGINE_TESTS) or _shared_engine(item):
            item.add_marker(pytest.mark.engine)
    items.sort(key=_shared_engine)


@pytest.fixture
def real_engine_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    """Engine processes started in this test end as vLLM ends them (for tests that time engine stops)."""
    monkeypatch.delenv("TUNER_TEST_FAST_EXIT", raising=False)


@pytest.fixture(autouse=True)
def _fresh_registry() -> Iterator[None]:
    from strategies.framework import registry

    registry.strategy_classes.cache_clear()
    yield


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throw-away PostgreSQL server for this session; fails (never skips) when PostgreSQL is not installed."""
    from tests.postgres import PostgresMissing, postgres_server, server_bin_dir

    try:
        server_bin_dir()
    except PostgresMissing as exc:
        pytest.fail(str(exc), pytrace=False)
    with postgres_server() as url:
        yield url
