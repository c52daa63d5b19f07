"""A known load on the cyclic garbage collector, in EngineCore and/or in the worker: a test and benchmark yardstick.

Not an optimisation. On a CPU engine the engine's own collections are ~0.01-0.03% of a step, too little for a
strategy that changes when or where the collector runs to be seen. This one makes the collector's work a known,
controllable share of the step: each step, in EngineCore before it processes the batch's output
(``Scheduler.update_from_output``) and in a worker before each batch it executes (``Worker.execute_model``; under
the ``uni`` executor that is EngineCore's process too), it makes ``engine_core_objects`` / ``worker_objects``
container objects of ``refs_per_object`` references each, every one a reference cycle (a list holding itself)
that is garbage the moment it is made. Only the cyclic collector frees them, so:

- automatic collections come once per ``gen0 threshold / objects`` steps (each object counts one allocation
  towards gen0; a list subclass, so that CPython's list free list cannot hand out uncounted ones);
- each collection traverses and frees the ``threshold`` objects it finds, ``refs_per_object`` references each;
- nothing survives: on Python 3.11 a collection starts inside the allocation of the next object, before it is
  tracked, and the previous one is already unreachable, so after a collection none of the load is left (the heap,
  and the GC share, are the same at the start and the end of a long run). From 3.12 a collection starts at the next
  eval-breaker check, after the call that made an object: that one object (only) moves to an older generation and is
  freed by that generation's next collection. A process whose collector is off (``gc.disable()``, gen0
  threshold 0) gets no load, since nothing would free it, and :meth:`KnownGcLoad.verify` reports it.

Measured in a plain Python 3.11 process on this 2-core host (thread CPU time; 100 to 10,000 references per
object, gen0 thresholds 700 and 2048): collection costs 8-10 ns per reference and allocation 7-8 ns, so collection
is 52-59% of the load's CPU time and allocation the rest (``tests/test_known_gc_load.py`` checks 40-75%, at 20).
Every object is traversed once, by the collection that frees it, so the load's GC time per step
(~``objects x refs x 9 ns``) does not depend on the gen0 threshold (700 against 2048: within +-25%, either way):
the threshold only splits it into pauses, one every ``threshold / objects`` steps of ~``threshold x refs x 9 ns``
each. A threshold strategy (``gc_threshold``) therefore changes the length and rate of the load's pauses, not
their total; one that moves collections off the step (``gc_in_waits``) can hide it.
The garbage waiting for a collection peaks at ``threshold x refs x 8`` bytes (56 MB at 700 x 10,000).

With ``lifetime_steps`` L > 0 the load is a **pacing yardstick** instead: each side keeps the objects it made for
its own next L steps (request state lives about as long as a request decodes), then drops them, and only then are
they garbage. A gen0 collection every C = threshold / objects steps finds the objects younger than L alive and
promotes them; the older generations trace them again and free them. A larger threshold lets more of them die young
(about a share min(L, C) / C survives gen0), so it changes the collector's total work, not only how it is split: the
effect a ``gc_threshold`` comparison has to find. Its live heap is L x objects at every step, so the load is
stationary over a long run (a full collection frees what died in the oldest generation); a revert drops it.
"""

from __future__ import annotations

import gc
from collections import deque
from functools import lru_cache
from typing import Any

from strategies.framework.base import Param, ProcessContext, Role, Strategy, Upstream
from strategies.framework.patches import Patches, calling_before
from strategies.framework.requirements import TESTED_VLLM, Defined, Params


class CyclicGarbage(list):  # type: ignore[type-arg]
    """One object of the load: a list whose first item is itself. A subclass, so that it is recognisable in
    ``gc.get_objects()`` and never comes from (or goes to) the list free list, whose reuses gen0 does not count."""

    __slots__ = ()


@lru_cache(maxsize=8)
def _filler(refs: int) -> tuple[None, ...]:
    """The items a new object is made from (a tuple of Nones: the collector stops tracking it at its first pass)."""
    return (None,) * refs


def make_cyclic_garbage(objects: int, refs: int) -> None:
    """Make ``objects`` reference cycles of ``refs`` references each, all garbage at once: one step's load."""
    filler = _filler(refs)
    for _ in range(objects):
        garbage = CyclicGarbage(filler)
        garbage[0] = garbage
        del garbage  # unreachable before the next allocation, which may start a collection


def make_cycles(objects: int, refs: int) -> list[CyclicGarbage]:
    """``objects`` reference cycles of ``refs`` references each, alive while the returned list holds them."""
    filler = _filler(refs)
    made = []
    for _ in range(objects):
        cycle = CyclicGarbage(filler)
        cycle[0] = cycle
        made.append(cycle)
    return made


class LivingLoad:
    """One side's objects that live ``lifetime`` of its steps: each step adds a batch and drops the oldest."""

    def __init__(self) -> None:
        self.alive: deque[list[CyclicGarbage]] = deque()

    def step(self, objects: int, refs: int, lifetime: int) -> None:
        self.alive.append(make_cycles(objects, refs))
        while len(self.alive) > lifetime:
            self.alive.popleft()  # garbage from here on: the cycles keep it until a collection frees it

    def clear(self) -> None:
        self.alive.clear()


def collector_runs() -> bool:
    """Whether automatic collections run in this process (the load would otherwise only grow the heap)."""
    return gc.isenabled() and gc.get_threshold()[0] > 0


class KnownGcLoad(Strategy):
    name = "known_gc_load"
    description = (
        "GC yardstick: make a known number of cyclic garbage objects (refs_per_object references each) per batch "
        "in EngineCore and/or the worker, garbage at once or after lifetime_steps steps."
    )
    params = (
        Param(
            "engine_core_objects",
            "int",
            0,
            low=0,
            high=1_000_000,
            help="cyclic garbage objects EngineCore makes before it processes each batch's output",
        ),
        Param(
            "worker_objects",
            "int",
            0,
            low=0,
            high=1_000_000,
            help="cyclic garbage objects made before each batch a worker executes",
        ),
        Param(
            "refs_per_object",
            "int",
            100,
            low=1,
            high=100_000,
            help="references each object holds: the collector's work per object (garbage peaks at gen0 x refs x 8 B)",
        ),
        Param(
            "lifetime_steps",
            "int",
            0,
            low=0,
            high=10_000,
            help="steps of its side each object stays alive before it is garbage (0: garbage at once)",
        ),
    )
    roles = frozenset({Role.ENGINE_CORE, Role.WORKER})
    switchable = True
    step_switchable = True
    paces_gc = False  # it makes garbage; when the collector runs is left to the process's thresholds
    requires = (
        Defined("v1/core/sched/scheduler.py", "Scheduler.update_from_output"),
        Params("v1/worker/gpu_worker.py", "Worker.execute_model", names=("self", "scheduler_output")),
    )
    vllm_versions = TESTED_VLLM
    upstream = Upstream(None, "a test and benchmark yardstick, not an optimisation")
    paths = (
        "All paths: the scheduler's output update and the worker's execute_model are on every path (under the uni "
        "executor both sides load EngineCore's process)."
    )

    def __init__(self) -> None:
        super().__init__()
        self.active = False
        self.engine_core_objects = 0
        self.worker_objects = 0
        self.refs = 1
        self.lifetime = 0
        self.living = {"engine_core": LivingLoad(), "worker": LivingLoad()}
        self._patches = Patches()

    def install(self) -> None:
        from vllm.v1.core.sched.scheduler import Scheduler
        from vllm.v1.worker.gpu_worker import Worker

        self._patches.install(
            (Scheduler, "update_from_output", calling_before(self.engine_core_step)),
            (Worker, "execute_model", calling_before(self.worker_step)),
        )

    def engine_core_step(self) -> None:
        """EngineCore's load for one batch (the patched ``update_from_output`` calls it while applied)."""
        self._step("engine_core", self.engine_core_objects)

    def worker_step(self) -> None:
        """A worker's load for one batch (the patched ``execute_model`` calls it while applied)."""
        self._step("worker", self.worker_objects)

    def _step(self, side: str, objects: int) -> None:
        if not self.active or not collector_runs():  # nothing would free it: no load, and no counter moves
            return
        self.count(f"{side}_steps")  # also at 0 objects: the patched path ran in this process (as known_delay)
        if objects and self.lifetime:
            self.living[side].step(objects, self.refs, self.lifetime)
            self.count(f"{side}_objects", objects)
        elif objects:
            make_cyclic_garbage(objects, self.refs)
            self.count(f"{side}_objects", objects)

    def apply(self, ctx: ProcessContext, params: dict[str, Any]) -> None:
        self.engine_core_objects = params["engine_core_objects"]
        self.worker_objects = params["worker_objects"]
        self.refs = params["refs_per_object"]
        self.lifetime = params["lifetime_steps"]
        self.active = True

    def revert(self, ctx: ProcessContext) -> None:
        self.active, self.engine_core_objects, self.worker_objects = False, 0, 0
        for living in self.living.values():
            living.clear()

    def verify(self, ctx: ProcessContext) -> str | None:
        if not collector_runs():
            return (
                f"the collector does not run here (enabled: {gc.isenabled()}, thresholds {gc.get_threshold()}): "
                "its garbage would never be freed"
            )
        return None
