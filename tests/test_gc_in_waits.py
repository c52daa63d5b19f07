"""gc_in_waits without an engine: automatic GC held back to the ceiling, collections at wait entries, paths."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from strategies import Role
from strategies.framework import wait_points
from strategies.framework.base import ProcessContext
from strategies.gc_in_waits import GcInWaits
from tuner.plugin.gc_probe import GcProbe


def config(backend: str = "mp", async_scheduling: bool = False, max_num_seqs: int = 16) -> Any:
    return SimpleNamespace(
        parallel_config=SimpleNamespace(distributed_executor_backend=backend),
        scheduler_config=SimpleNamespace(async_scheduling=async_scheduling, max_num_seqs=max_num_seqs),
    )


@pytest.fixture
def strategy() -> Iterator[GcInWaits]:
    saved = gc.get_threshold()
    strategy = GcInWaits()
    yield strategy
    strategy.revert(ProcessContext(Role.ENGINE_CORE))
    assert gc.get_threshold() == saved and not wait_points.on_wait


def test_automatic_gc_waits_for_the_ceiling_and_waits_collect(strategy: GcInWaits) -> None:
    ctx = ProcessContext(Role.ENGINE_CORE, vllm_config=config(max_num_seqs=16))
    saved = gc.get_threshold()
    params = strategy.resolve_params({"min_count": 500, "ceiling_per_seq": 1000})
    strategy.apply(ctx, params)
    strategy.apply(ProcessContext(Role.WORKER, vllm_config=ctx.vllm_config), params)  # uni: both roles, one process
    assert gc.get_threshold() == (16_000, *saved[1:]) and strategy.verify(ctx) is None
    assert wait_points.on_wait == [strategy._at_wait]
    probe = GcProbe()
    probe.install()
    try:
        gc.collect()
        probe.reset()
        keep = [[] for _ in range(5_000)]  # 5000 young objects: past min_count, below the ceiling
        assert probe.snapshot()["collections"] == [0, 0, 0]  # no automatic collection
        with wait_points.waiting():
            pass
        snap = probe.snapshot()
    finally:
        probe.uninstall()
    del keep
    assert sum(snap["hidden"]["collections"]) == 1 and sum(snap["critical"]["collections"]) == 0
    assert strategy.counters["waits"] == 1 and sum(v for k, v in strategy.counters.items() if "collected" in k) == 1


def test_below_min_count_a_wait_does_not_collect(strategy: GcInWaits) -> None:
    strategy.apply(
        ProcessContext(Role.ENGINE_CORE, vllm_config=config()), strategy.resolve_params({"min_count": 10**6})
    )
    gc.collect()
    with wait_points.waiting():
        pass
    assert strategy.counters == {"waits": 1}


def test_the_generation_escalates_as_cpython_would_from_the_floor_up(strategy: GcInWaits) -> None:
    ctx = ProcessContext(Role.ENGINE_CORE, vllm_config=config())
    strategy.apply(ctx, strategy.resolve_params({"min_count": 1}))
    for _ in range(40):
        keep = [[] for _ in range(10)]
        with wait_points.waiting():
            pass
    assert strategy.counters["collected_gen0"] > strategy.counters["collected_gen1"] > 0
    strategy.counters.clear()
    strategy.apply(ctx, strategy.resolve_params({"min_count": 1, "min_generation": 1}))
    for _ in range(40):
        keep = [[] for _ in range(10)]
        with wait_points.waiting():
            pass
    del keep
    assert strategy.counters["collected_gen1"] > 0 and "collected_gen0" not in strategy.counters


def test_no_full_collection_until_a_quarter_of_the_old_heap_was_promoted(strategy: GcInWaits) -> None:
    old = [[] for _ in range(200_000)]  # a large long-lived heap
    gc.collect()
    strategy.apply(ProcessContext(Role.ENGINE_CORE, vllm_config=config()), strategy.resolve_params({"min_count": 1}))
    survivors = []
    for _ in range(300):  # young garbage, and a little that survives into gen2
        survivors.append([[] for _ in range(20)])
        with wait_points.waiting():
            pass
    assert strategy.counters["collected_gen1"] > 10 and "collected_gen2" not in strategy.counters
    per_wait = len(gc.get_objects(2)) // 400 + 1  # a quarter of the old heap (of this process) in 100 waits
    for _ in range(300):  # now promote more than that
        survivors.append([[] for _ in range(per_wait)])
        with wait_points.waiting():
            pass
    assert strategy.counters["collected_gen2"] >= 1
    del old, survivors


@pytest.mark.parametrize(
    ("backend", "async_scheduling", "refused"),
    [
        ("mp", False, None),
        ("mp", True, None),
        ("uni", True, None),
        ("uni", False, "sync scheduling"),
        ("ray", True, "ray"),
    ],
)
def test_refused_where_there_is_no_wait_to_hide_in(backend: str, async_scheduling: bool, refused: str | None) -> None:
    reason = GcInWaits().refuses(config(backend, async_scheduling))
    assert reason is None if refused is None else refused in (reason or "")


def test_an_asyncio_front_end_is_refused_it_never_blocks_on_engine_output(strategy: GcInWaits) -> None:
    ctx = ProcessContext(Role.FRONTEND, vllm_config=config(), owner=SimpleNamespace(engine_core=object()))
    with pytest.raises(RuntimeError, match="no wait to collect in"):
        strategy.apply(ctx, strategy.resolve_params({}))


def test_without_an_engine_config_it_says_what_it_needs(strategy: GcInWaits) -> None:
    """A process with no vLLM config (as gc_threshold: a clear error, not an AttributeError on None)."""
    with pytest.raises(RuntimeError, match="gc_in_waits needs the engine's max_num_seqs"):
        strategy.apply(ProcessContext(Role.ENGINE_CORE, vllm_config=None), strategy.resolve_params({}))
