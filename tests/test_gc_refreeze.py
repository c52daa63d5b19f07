"""``gc_refreeze`` on vLLM's own ``freeze_gc_heap`` (the installed release's, no engine): it freezes once, after
exactly N steps of the role the process counts, through vLLM's freeze (so ``gc_freeze: false`` suppresses it and
the strategy says so), and revert gives the heap back its freeze state. On the engine, ``tests/engine/test_engine.py``
proves it active in EngineCore and the worker."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from strategies.framework.base import ProcessContext, Role
from strategies.gc_freeze import GcFreeze
from strategies.gc_refreeze import GcRefreeze


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """A heap with nothing frozen, and the test's freezes undone after it."""
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_freezes_once_after_n_steps_of_its_own_role_and_revert_unfreezes(unfrozen: None) -> None:
    strategy = GcRefreeze()
    ctx = ProcessContext(Role.WORKER)
    strategy.apply(ctx, GcRefreeze.resolve_params({"after_steps": 3}))
    strategy.step(Role.ENGINE_CORE)  # another role's step (uni: one process), not counted here
    strategy.step(Role.WORKER)
    strategy.step(Role.WORKER)
    assert gc.get_freeze_count() == 0 and strategy.verify(ctx) is None
    assert strategy.counters == {"steps_before_refreeze": 2}

    kept = [[i] for i in range(1000)]  # objects created by "traffic" and alive at the refreeze
    strategy.step(Role.WORKER)
    assert gc.get_freeze_count() >= len(kept)
    strategy.step(Role.WORKER)  # once: later steps neither count nor freeze again
    assert strategy.counters["refreezes"] == 1 and strategy.counters["steps_before_refreeze"] == 3
    assert strategy.verify(ctx) is None and strategy.counters["in_force"] == 1

    strategy.revert(ctx)
    assert gc.get_freeze_count() == 0  # nothing was frozen before the arm


def test_revert_restores_a_freeze_vllm_had_made(unfrozen: None) -> None:
    gc.freeze()  # vLLM's start-up freeze
    strategy = GcRefreeze()
    ctx = ProcessContext(Role.ENGINE_CORE)
    strategy.apply(ctx, GcRefreeze.resolve_params({"after_steps": 1}))
    strategy.step(Role.ENGINE_CORE)
    assert strategy.refrozen
    strategy.revert(ctx)
    assert gc.get_freeze_count() > 0
    strategy.step(Role.ENGINE_CORE)  # reverted: steps are not counted
    assert strategy.counters["steps_before_refreeze"] == 1 and strategy.counters["refreezes"] == 1


def test_never_freeze_suppresses_the_refreeze_and_it_says_so(unfrozen: None) -> None:
    never = GcFreeze()
    never.install()
    never.apply(ProcessContext(Role.WORKER), GcFreeze.resolve_params({"enabled": False}))
    try:
        strategy = GcRefreeze()
        ctx = ProcessContext(Role.WORKER)
        strategy.apply(ctx, GcRefreeze.resolve_params({"after_steps": 1}))
        strategy.step(Role.WORKER)
        assert gc.get_freeze_count() == 0 and "refreezes" not in strategy.counters
        assert strategy.verify(ctx) == "its freeze was suppressed (gc_freeze: {enabled: false} never freezes)"
    finally:
        never.revert(ProcessContext(Role.WORKER))


def test_after_steps_is_a_positive_integer() -> None:
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="after_steps must be"):
            GcRefreeze.resolve_params({"after_steps": bad})
    assert GcRefreeze.resolve_params({}) == {"after_steps": 256}
