"""A host delay of known size, in EngineCore and/or in the worker: the yardstick of ``tuner calibrate``.

Not an optimisation: a busy-wait (it costs CPU time like Python overhead does, not an idle sleep) in EngineCore
before it processes each batch's output (``Scheduler.update_from_output``) and before every batch a worker executes
(``Worker.execute_model``; under the ``uni`` executor that is EngineCore's process too). Not in ``schedule``: there
EngineCore's wait overlaps the front-end's processing of the previous step's outputs, and on a 2-core host the two
compete, so a wait of 2 ms cost 2.1-2.3 ms by every method (run level, 16- and 1-step blocks); before
``update_from_output`` the front-end has nothing to process and the wait costs its length (1.096 and 1.102 against
a known 1.096 and 1.106, one-step blocks). A comparison that
measures it must recover 1 + delay / step time, on the side of the pipeline where it waits: the calibration's
check that the step-level estimate is unbiased in each engine process.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Any

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches, calling_before
from strategies.framework.requirements import TESTED_VLLM, Defined, Params


def busy_wait(seconds: float) -> None:
    """Spin for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class KnownDelay(Strategy):
    name = "known_delay"
    description = "Calibration yardstick: busy-wait a known time per batch in EngineCore and/or the worker."
    params = (
        Param("engine_core_ms", "float", 0.0, low=0.0, high=1000.0, help="wait before each batch output is processed"),
        Param("worker_ms", "float", 0.0, low=0.0, high=1000.0, help="wait before each batch a worker executes"),
    )
    roles = frozenset({Role.ENGINE_CORE, Role.WORKER})
    switchable = True
    step_switchable = True
    requires = (
        Defined("v1/core/sched/scheduler.py", "Scheduler.update_from_output"),
        Params("v1/worker/gpu_worker.py", "Worker.execute_model", names=("self", "scheduler_output")),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "a calibration yardstick, not an optimisation")
    paths = "All paths: the scheduler's output update and the worker's execute_model are on every path."

    def __init__(self) -> None:
        super().__init__()
        self.active = False
        self.engine_core_s = 0.0
        self.worker_s = 0.0
        self._patches = Patches()

    def install(self) -> None:
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.worker.gpu_worker import Worker

        self._patches.install(
            (Scheduler, "update_from_output", calling_before(partial(self._delay, "engine_core"))),
            (Worker, "execute_model", calling_before(partial(self._delay, "worker"))),
        )

    def _delay(self, side: str) -> None:
        """Before a batch of ``side`` ("engine_core" or "worker"): wait that side's time while applied."""
        if self.active:
            self.count(f"{side}_steps")
            busy_wait(self.engine_core_s if side == "engine_core" else self.worker_s)

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.active = True
        self.engine_core_s = params["engine_core_ms"] / 1e3
        self.worker_s = params["worker_ms"] / 1e3

    def revert(self, ctx: ProcessContext) -> None:
        self.active, self.engine_core_s, self.worker_s = False, 0.0, 0.0
