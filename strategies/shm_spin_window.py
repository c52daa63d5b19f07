"""The spin window of the multiprocess executor's shared-memory queues.

A reader of vLLM's ``MessageQueue`` (each worker reading EngineCore's batch broadcast, EngineCore reading the
workers' responses) waits for the next message in ``SpinCondition.wait``: for ``busy_loop_s`` seconds after its
last read it spins (``sched_yield`` and look again), then it sleeps on a ZeroMQ notification. vLLM hard-codes the
window at 1 s, so a reader burns a core as long as messages come at least once a second (#52814 reports 333% CPU
on a GB10). A shorter window gives that core back to the other processes, which matters where processes outnumber
cores; too short, and every message pays a wake-up. Measured here (2 cores, unpaired runs): 0 made some repetitions
six times slower, 10 ms looked no worse than 1 s.

``window_s`` sets the window of every reader in the processes it runs in (1.0 is vLLM's own), read by vLLM's wait
itself each time; reverting restores each reader's own value.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches
from strategies.framework.requirements import TESTED_VLLM, AssignedIn, Params, Snippet

_SHM = "distributed/device_communicators/shm_broadcast.py"
_NATIVE = "_tuner_native_busy_loop_s"  # a reader's own window, kept on it the first time it waits


class ShmSpinWindow(Strategy):
    name = "shm_spin_window"
    description = "Spin window of the mp executor's shared-memory queue readers (vLLM: 1 s)."
    params = (
        Param(
            "window_s",
            "float",
            1.0,
            low=0.0,
            high=1.0,
            help="seconds a reader spins after its last read before it sleeps (vLLM: 1; search it on a log scale)",
        ),
    )
    roles = frozenset({Role.ENGINE_CORE, Role.WORKER})
    switchable = True
    run_level_reason = (
        "a worker waits for the next batch before it learns that batch's arm, so at step level each block's first "
        "step would be charged the other arm's wait; the window also changes how the processes share the cores "
        "between steps, which per-step blocks cannot separate"
    )
    requires = (
        # The window vLLM's own wait reads, on the reader's instance, and the wait's signature the wrapper keeps.
        AssignedIn(_SHM, "SpinCondition.__init__", attribute="busy_loop_s"),
        Snippet(_SHM, "SpinCondition.wait", text="if current_time <= self.last_read + self.busy_loop_s:"),
        Params(_SHM, "SpinCondition.wait", names=("self", "timeout_ms")),
        # Every MessageQueue reader waits through it (in acquire_read up to 0.32, _wait_until_readable in 0.33).
        Snippet(_SHM, "MessageQueue", text="self._spin_condition.wait("),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "vLLM hard-codes a 1 s window; #52814")
    paths = (
        "The mp executor (the CPU default; on GPUs tensor or pipeline parallelism, or "
        "distributed_executor_backend=mp): its batch broadcast and response queues. Refused under the uni executor "
        "(one GPU's default), which has no shared-memory queue between EngineCore and its worker."
    )

    def __init__(self) -> None:
        super().__init__()
        self.window_s: float | None = None  # None: each reader keeps its own window
        self._patches = Patches()

    def install(self) -> None:
        from vllm.distributed.device_communicators import shm_broadcast

        self._patches.install((shm_broadcast.SpinCondition, "wait", lambda wait: windowed(wait, self)))

    def refuses(self, vllm_config: Any) -> str | None:
        backend = vllm_config.parallel_config.distributed_executor_backend
        if backend == "mp":
            return None
        return f"the {backend!r} executor has no shared-memory queue between EngineCore and its workers"

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.window_s = params["window_s"]

    def revert(self, ctx: ProcessContext) -> None:
        self.window_s = None


def windowed(original: Callable[..., Any], strategy: ShmSpinWindow) -> Callable[..., Any]:
    """``SpinCondition.wait`` that sets the reader's window before vLLM's own wait reads it, and counts whether the
    wait spun or slept (the proof the setting was in force: a reader in a busy engine waits every step)."""

    def wait(condition: Any, timeout_ms: int | None = None) -> None:
        if condition.is_reader:
            native = condition.__dict__.setdefault(_NATIVE, condition.busy_loop_s)
            window = native if strategy.window_s is None else strategy.window_s
            condition.busy_loop_s = window
            if strategy.window_s is not None:
                spinning = time.monotonic() <= condition.last_read + window
                strategy.count("spin_waits" if spinning else "sleeping_waits")
        return original(condition, timeout_ms)

    return wait
