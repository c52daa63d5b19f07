"""Where a vLLM process blocks on another process or the device: the points where a collection is free.

A thread is *in a wait* from the moment it enters one of these points until what it waits for is there:

- ``MessageQueue.acquire_read`` (shared-memory ring of the ``mp`` executor), up to the moment a block is readable:
  EngineCore waiting for its workers' output, and a worker waiting for EngineCore's next command;
- ``AsyncOutputFuture.result`` (``uni`` executor with async scheduling): EngineCore waiting for batch N's device
  results after it scheduled batch N+1 (the host copy that follows the device sync is inside this window);
- ``SyncMPClient.get_output`` (an offline ``LLMEngine`` front-end): waiting on the queue its socket thread fills.

The GC probe asks :func:`in_wait` from its ``gc.callbacks`` hook to call a collection *hidden* (it ran on a thread
that was blocked anyway) or *critical*; :data:`on_wait` callbacks run at each wait entry (``gc_in_waits``
collects there). A hidden pause after which the wait returned at once (within :data:`OVERRUN_GAP_S`) probably
outlasted what it waited for, so part of it was on the critical path: :data:`on_overrun` callbacks hear of it.
This module imports vLLM only in :func:`install`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from strategies.framework.requirements import Defined, Requirement

_SHM = "distributed/device_communicators/shm_broadcast.py"
_UNIPROC = "v1/executor/uniproc_executor.py"
_CLIENT = "v1/engine/core_client.py"

REQUIRES: tuple[Requirement, ...] = (
    Defined(_SHM, "MessageQueue.acquire_read"),
    Defined(_UNIPROC, "AsyncOutputFuture.result"),
    Defined(_CLIENT, "SyncMPClient.get_output"),
)
"""The wait points on every supported release (checked statically like a strategy's requirements)."""

OVERRUN_GAP_S = 50e-6  # a wait that returns this soon after a pause did not block after it

_depth: dict[int, int] = {}  # thread ident -> nesting depth of the waits it is in
_pause_end: dict[int, float] = {}  # thread ident -> end of the last hidden pause in its current wait
on_wait: list[Callable[[], None]] = []
"""Called (no arguments) on the waiting thread as it enters a wait, before it blocks."""
on_overrun: list[Callable[[], None]] = []
"""Called on the waiting thread when its wait returns at once after a hidden pause (the pause probably overran)."""


def pause_ended(end: float) -> None:
    """The GC probe: a hidden pause of the calling thread ended at ``end`` (``time.monotonic``)."""
    _pause_end[threading.get_ident()] = end


def in_wait() -> bool:
    """Whether the calling thread is blocked at a wait point (the GC probe asks from inside a collection)."""
    return _depth.get(threading.get_ident(), 0) > 0


class waiting:
    """Mark the calling thread as in a wait for the ``with`` block, after running the :data:`on_wait` callbacks."""

    __slots__ = ("_ident",)

    def __enter__(self) -> None:
        self._ident = threading.get_ident()
        _depth[self._ident] = _depth.get(self._ident, 0) + 1
        for callback in on_wait:
            callback()

    def __exit__(self, *exc: object) -> None:
        end = _pause_end.pop(self._ident, None)
        if end is not None and time.monotonic() - end < OVERRUN_GAP_S:
            for callback in on_overrun:
                callback()
        left = _depth[self._ident] - 1
        if left:
            _depth[self._ident] = left
        else:
            del _depth[self._ident]


class _ReadyWhenEntered:
    """A context manager whose ``__enter__`` (blocking until the block is readable) counts as a wait."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __enter__(self) -> Any:
        with waiting():
            return self._inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._inner.__exit__(*exc)


def _wrap(cls: type, method: str, wrapper: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = cls.__dict__[method]
    if getattr(original, "_tuner_wait", False):
        return
    wrapped = wrapper(original)
    wrapped._tuner_wait = True  # type: ignore[attr-defined]
    wrapped.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(cls, method, wrapped)


def _blocking(original: Callable[..., Any]) -> Callable[..., Any]:
    def blocked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with waiting():
            return original(self, *args, **kwargs)

    return blocked


def _entering(original: Callable[..., Any]) -> Callable[..., Any]:
    def acquire_read(self: Any, *args: Any, **kwargs: Any) -> Any:
        return _ReadyWhenEntered(original(self, *args, **kwargs))

    return acquire_read


def install() -> list[str]:
    """Wrap every wait point vLLM has here (idempotent); return the ones that could not be wrapped, with why."""
    missing = []
    points: tuple[tuple[str, str, str, Callable[[Callable[..., Any]], Callable[..., Any]]], ...] = (
        ("vllm.distributed.device_communicators.shm_broadcast", "MessageQueue", "acquire_read", _entering),
        ("vllm.v1.executor.uniproc_executor", "AsyncOutputFuture", "result", _blocking),
        ("vllm.v1.engine.core_client", "SyncMPClient", "get_output", _blocking),
    )
    for module, cls_name, method, wrapper in points:
        try:
            cls = getattr(__import__(module, fromlist=[cls_name]), cls_name)
            _wrap(cls, method, wrapper)
        except Exception as exc:  # reported, never into vLLM's start-up
            missing.append(f"{cls_name}.{method}: {type(exc).__name__}: {exc}")
    return missing
