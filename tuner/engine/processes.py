"""An engine's processes seen from the tuner: which children are vLLM's, whether they live, and a watch that ends a
start at once when one of them dies (vLLM would otherwise wait for it until its own timeout)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import psutil

from tuner import interrupts
from tuner.errors import EngineError


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def children_since(wall: float) -> list[psutil.Process]:
    """This process's descendants started at or after ``wall``: the engine's EngineCore and workers.

    multiprocessing's shared resource tracker is left out: it serves the whole Python process, not the engine.
    """
    found = []
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.create_time() >= wall - 1.0 and not any("resource_tracker" in a for a in child.cmdline()):
                found.append(child)
    return found


ENGINE_PROCESS_MARKS = ("spawn_main", "EngineCore", "VLLM", "Worker")
"""How an engine process shows in its name or command line (spawned, or renamed by vLLM after a fork)."""


def _is_engine_process(process: psutil.Process) -> bool:
    try:
        text = " ".join([process.name(), *process.cmdline()])
    except psutil.Error:
        return False
    return any(mark in text for mark in ENGINE_PROCESS_MARKS)


class StartWatch:
    """While an engine starts, an engine process that dies aborts the start in the main thread.

    vLLM's client would wait for it up to ``VLLM_ENGINE_READY_TIMEOUT_S`` (600 s) in one poll; the watch after
    start-up (:meth:`EngineSession._watch`) covers the rest of the engine's life.
    """

    def __init__(self, wall: float, poll_s: float = 0.5) -> None:
        self._wall = wall
        self._poll_s = poll_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tuner-start-watch", daemon=True)

    def __enter__(self) -> StartWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        seen: dict[int, psutil.Process] = {}
        while not self._done.wait(self._poll_s):
            for child in children_since(self._wall):
                if child.pid not in seen and _is_engine_process(child):
                    seen[child.pid] = child
            dead = next((p for p in seen.values() if not alive(p)), None)
            if dead is not None and not self._done.is_set():
                message = f"an engine process (pid {dead.pid}) died while the engine was starting: see vLLM's log above"
                interrupts.interrupt_main(EngineError(message))
                return


def fail_utility_calls(core: Any, error: EngineError) -> None:
    """Fail the futures of utility calls in flight to a dead engine (vLLM leaves them pending)."""
    for future in list(getattr(core, "utility_results", {}).values()):
        with contextlib.suppress(Exception):  # already resolved
            if not future.done():
                future.set_exception(error)
