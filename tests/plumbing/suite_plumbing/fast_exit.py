"""A test-only vLLM plugin: the test suite's engine processes end without the interpreter's teardown.

A vLLM process that has shut down (its ``atexit`` handlers, weakref finalizers and multiprocessing's exit function
run as always) then spends 2-3 s tearing the interpreter down: module teardown and the last collections of a heap
holding torch and vLLM. EngineCore waits for its worker's, and the front-end for EngineCore's, so an engine stop
took 4.6-5.1 s here against 1.0 s without that teardown, on every one of the suite's ~30 engine stops.

With ``TUNER_TEST_FAST_EXIT`` set, every process multiprocessing spawned (EngineCore, workers) ends with
``os._exit`` at the point where ``multiprocessing.spawn.spawn_main`` would call ``sys.exit``: with the same exit
status, after the ``atexit`` handlers and with standard streams flushed. Any other ``sys.exit`` behaves as before.
Tests that time engine stops (restart pairs, ``fast_teardown``) run without it: ``tests/conftest.py`` sets it for
the rest.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import sys
from typing import Any

ENV_VAR = "TUNER_TEST_FAST_EXIT"


def _exit_status(code: Any) -> int:
    """The status ``sys.exit(code)`` gives the process."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1


def register() -> None:
    """``vllm.general_plugins`` entry point: in a spawned engine process, end the process at ``spawn_main``'s exit."""
    if not os.environ.get(ENV_VAR) or multiprocessing.parent_process() is None:
        return
    real_exit = sys.exit
    if getattr(real_exit, "_fast_exit", False):
        return

    def fast_exit(code: Any = None) -> None:
        if sys._getframe(1).f_code.co_name != "spawn_main":
            real_exit(code)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(_exit_status(code))

    fast_exit._fast_exit = True  # type: ignore[attr-defined]
    sys.exit = fast_exit
