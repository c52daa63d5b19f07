"""A served run keeps the client's heap from Python's cyclic collector while it is timed
(:func:`tuner.engine.server.heap_kept_from_the_collector`): a full collection of the client's heap had stopped the
client for 0.36-0.40 s inside about one run a capacity search."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import httpx
import pytest

from tuner.config import Sampling
from tuner.engine import server
from tuner.engine.server import EndpointSession, heap_kept_from_the_collector
from tuner.traffic import RequestSpec


class _Node:
    """An object in a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


def test_what_was_alive_before_the_run_is_not_collected_during_it_and_is_after() -> None:
    """A garbage cycle made before the run survives a full collection during it (frozen: not scanned), and the
    next collection after it frees it: nothing is kept from the collector for good."""
    node = _Node()
    gone = weakref.ref(node)
    del node
    with heap_kept_from_the_collector():
        assert gc.get_freeze_count() > 0
        gc.collect()
        assert gone() is not None
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


def test_a_served_run_is_timed_with_the_clients_heap_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    """HttpSession.run through httpx (a mock transport standing in for the server): while the requests are sent,
    the heap that existed before is frozen; after the run, and after a run that fails, nothing is."""
    frozen: list[int] = []

    def serve(request: httpx.Request) -> httpx.Response:
        frozen.append(gc.get_freeze_count())
        return httpx.Response(200, text="data: [DONE]\n\n")

    original = httpx.AsyncClient

    def client(**kwargs: Any) -> httpx.AsyncClient:
        return original(transport=httpx.MockTransport(serve), **kwargs)

    monkeypatch.setattr(server.httpx, "AsyncClient", client)
    session = object.__new__(EndpointSession)  # a server someone else started: nothing to start here
    session.url, session.model_name, session.died, session._run_id = "http://server", "m", threading.Event(), 0
    requests = [RequestSpec(prompt_token_ids=[1, 2, 3], max_tokens=2) for _ in range(3)]
    timings, _ = session.run(requests, [0.0, 0.0, 0.0], Sampling())
    assert len(timings) == 3 and len(frozen) == 3 and min(frozen) > 0
    assert gc.get_freeze_count() == 0

    def refuse(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("the transport broke")

    monkeypatch.setattr(server.httpx, "AsyncClient", lambda **kw: original(transport=httpx.MockTransport(refuse), **kw))
    with pytest.raises(RuntimeError):
        session.run(requests, [0.0, 0.0, 0.0], Sampling())
    assert gc.get_freeze_count() == 0
