"""Shared fixtures. Engine tests start the real vLLM CPU engine (no mocks)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

if TYPE_CHECKING:
    from tuner.engine.session import EngineSession
    from tuner.measure.workbench import Workbench

THIRD_PARTY = Path(__file__).parent / "third_party"

# Make the test-only third-party strategy package discoverable here and in every spawned vLLM process.
sys.path.insert(0, str(THIRD_PARTY))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(THIRD_PARTY), os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
# The engine processes of the suite end without the interpreter's 2-3 s teardown (tests/third_party/tuner_test_plugin/
# fast_exit.py); a test that times engine stops asks for ``real_engine_stops``.
os.environ.setdefault("TUNER_TEST_FAST_EXIT", "1")
# pytest-xdist's workers set COLUMNS=80; the CLI's tables are tested at the width they have when piped (160).
os.environ.pop("COLUMNS", None)

TINY_ENGINE = {
    "model": "builtin:opt-tiny",
    "max_num_seqs": 16,
    "max_model_len": 256,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 64 << 20,  # ~16 MiB needed; reserving 20% of RAM costs 3 s per start
    "dtype": "float32",  # 3x faster than bf16 on CPUs without bf16 units (62 -> 20 ms per step here)
}


def fixed_workload(num_prompts: int, output_len: int, input_len: int = 8) -> dict[str, object]:
    """An offline workload of equal requests: every batch decodes at one batch size (step-level comparisons)."""
    return {
        "num_prompts": num_prompts,
        "input_len": {"dist": "fixed", "value": input_len},
        "output_len": {"dist": "fixed", "value": output_len},
    }


def decode_step_s(bench: Workbench, engine: dict[str, object]) -> float:
    """The engine's mean decode step with its full batch running (an A/A of vLLM as installed, offline, for 3 s):
    the unit the capacity tests size their targets, loads and budgets in, so that a slower or busier host changes
    their figures and not their verdict. ``bench``'s workload must fill ``engine``'s ``max_num_seqs``."""
    from tuner.measure.interleave import interleaved_comparison

    steps = interleaved_comparison(bench, {}, {}, block_steps=1, budget_s=3.0, seed=0)
    step_s = steps.mean_step_s["A"]
    assert step_s is not None and steps.batch_size == engine["max_num_seqs"], steps.to_dict()
    return step_s


def is_engine_core(process: psutil.Process) -> bool:
    """Whether ``process`` is a vLLM EngineCore (it renames itself; a name may be cut to 15 characters)."""
    try:
        return "EngineCore" in process.name() or any("EngineCore" in part for part in process.cmdline())
    except psutil.Error:
        return False


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


STREAMING_ENGINE = {**TINY_ENGINE, "enable_prefix_caching": True, "block_size": 32}
"""The shared streaming engine: KV blocks of 32 tokens, so a trace's hash ids (32 tokens each) are its blocks."""
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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the tests on the shared engines last, grouped by engine, so that each starts once and never idles beside
    the engines other tests start; a test on one is an engine test whatever its module says (the fast loop runs
    the others on both cores)."""
    for item in items:
        if _shared_engine(item):
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
