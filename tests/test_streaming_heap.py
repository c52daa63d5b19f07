"""An in-process streaming session freezes the front-end's startup heap as vLLM's OpenAI server does
(:func:`tuner.engine.session.freeze_startup_heap`), and gives it back to the collector when the engine stops: left
unfrozen, a full collection of the modules and the engine client loaded at start stalled an in-process run for
0.46-0.52 s, as no deployed server would."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

from tuner.engine.session import StreamingSession


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


class _Engine:
    """Stands in for ``AsyncLLM``: nothing to start, nothing to stop."""

    def shutdown(self) -> None:
        """Nothing runs."""


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    async def create(self: StreamingSession) -> Any:
        return _Engine()

    monkeypatch.setattr(StreamingSession, "_create", create)
    yield
    gc.unfreeze()


def test_the_heap_alive_at_start_is_frozen_while_the_engine_runs_and_collected_after(no_engine: None) -> None:
    """Alive at start, then garbage: not collected while the engine runs (frozen, out of every collection's
    reach), collected once it has stopped; a cycle made while it runs is collected as usual."""
    kept = _Node()
    started = StreamingSession({}, "{}")
    assert gc.get_freeze_count() > 0
    before = weakref.ref(kept)
    del kept
    during = _Node()
    made = weakref.ref(during)
    del during
    gc.collect()
    assert before() is not None
    assert made() is None
    started.close()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert before() is None


def test_the_freeze_is_vllms_own_so_gc_freeze_false_suppresses_it(
    no_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session freezes through ``vllm.utils.gc_utils.freeze_gc_heap``, the function the ``gc_freeze``
    strategy's ``enabled: false`` replaces (:func:`strategies.gc_freeze.rebind`) to suppress the server's freeze:
    with it replaced, the session freezes nothing and the replacement is what ran."""
    from vllm.utils import gc_utils

    calls: list[str] = []
    monkeypatch.setattr(gc_utils, "freeze_gc_heap", lambda: calls.append("suppressed"))
    started = StreamingSession({}, "{}")
    assert gc.get_freeze_count() == 0
    assert calls == ["suppressed"]
    started.close()
