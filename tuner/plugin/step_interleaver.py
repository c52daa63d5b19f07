"""Step-level A/B inside one engine: each scheduled batch carries its arm to every process that executes it.

EngineCore's :class:`StepInterleaver` alternates two strategy sets in blocks of ``block_steps`` model-executing
steps. Blocks come in pairs, each pair in a random order (AB or BA). Not the mirrored order (AB BA ...) of
run-level pairs, which was tried here and measured: its period of four blocks aliased with a batch of 160 steps
(five periods of 8-step blocks; the engine's A/A drifted to 0.983 [0.954, 1.006]), and with a random spacer that
broke the period it still put the same arm on both sides of every pair boundary, so a burst of host noise a few
blocks long moved neighbouring pairs the same way and the A/A CI came out too narrow (1.016 [1.001, 1.035] over
316 pairs). Random order leaves no period and makes neighbouring pairs' errors cancel on average.

Every batch EngineCore schedules gets a :class:`~tuner.plugin.protocol.StepTag` with its arm; each process that
works on the batch (EngineCore itself, each worker in its own process under the ``mp`` executor, the in-process
worker under ``uni``) puts that arm's strategy set in force first (:class:`StepArms`). So a strategy that acts in
a worker switches with the batch, not with EngineCore's clock.

What a step's time belongs to: the wall time of one engine step call. With synchronous scheduling a call
schedules a batch, waits for every worker to execute it and processes its output: all of it under one arm.
With a batch queue (async scheduling, pipeline parallelism) a call schedules batch N+1 and finishes batch N, so
the first call of a block finishes the other arm's last batch; it runs under the new arm but is not compared (a
*washout* step, recorded as such). The remaining calls of the block hold only the block's own batches.

Garbage is the one state that outlives a step, and where a collection falls depends on both arms' allocations:
per step the interleaver records its start, wall time, running requests, scheduled tokens and EngineCore's GC time
on the critical path, and per block EngineCore's net GC-tracked allocations, so that a comparison of strategies
that pace the collector can take the collector apart (:mod:`tuner.measure.gc_pacing`). The front-end
(:mod:`tuner.measure.interleave`) drains complete pairs and does the statistics.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from typing import Any

from tuner.plugin.protocol import (
    STEP_TAG_ATTRIBUTE,
    Arm,
    BlockRecord,
    InterleaveBlocks,
    InterleaveStart,
    StepTag,
    StrategySet,
)


class StepArms:
    """The two arms of a comparison in one process, which one is in force here, and what each put in force of the
    collector: its thresholds, and the net allocations made under it."""

    def __init__(self, switch: Callable[[StrategySet], None], allocated: Callable[[], int]) -> None:
        """``switch`` puts a strategy set in force in this process; ``allocated`` is its net GC-tracked
        allocations so far."""
        self.switch = switch
        self.allocated = allocated
        self.arms: dict[Arm, StrategySet] | None = None
        self.current: Arm | None = None
        self.thresholds: dict[str, list[int]] = {}  # the GC thresholds each arm put in force here
        self.allocations: dict[str, list[int]] = {}  # per arm: net allocations while it was in force, its batches
        self._since = 0

    def start(self, a: StrategySet, b: StrategySet) -> None:
        self.arms = {"A": a, "B": b}
        self.current = None
        self.thresholds = {}
        self.allocations = {"A": [0, 0], "B": [0, 0]}

    def stop(self) -> None:
        if self.arms is not None:
            self._book()
            self.arms, self.current = None, None
            self.switch({})

    def enter(self, arm: Arm) -> None:
        """Put ``arm`` in force here (a no-op while it already is, or when no comparison runs)."""
        if self.arms is not None and arm != self.current:
            self._book()
            self.switch(self.arms[arm])
            self.current = arm
            self.thresholds.setdefault(arm, list(gc.get_threshold()))

    def _book(self) -> None:
        """Charge the allocations since the last switch to the arm that was in force."""
        now = self.allocated()
        if self.current is not None:
            self.allocations[self.current][0] += now - self._since
        self._since = now

    def batch(self, tag: StepTag) -> None:
        """A worker is about to execute a batch tagged ``tag``."""
        self.enter(tag.arm)
        self.allocations[tag.arm][1] += 1


class StepInterleaver:
    """Runs inside EngineCore; ``around_step`` wraps every engine step, ``tag`` every scheduled batch."""

    def __init__(self, arms: StepArms, gc_clock: Callable[[], float]) -> None:
        """``arms`` switches this process (and counts its allocations); ``gc_clock`` is its critical GC seconds so
        far."""
        self.arms = arms
        self.gc_clock = gc_clock
        self.active = False
        self.scheduled_tokens = 0  # tokens the batch scheduled in the current engine step (0: none scheduled)

    def start(self, request: InterleaveStart, *, batch_queue: bool) -> None:
        """Begin alternating ``request``'s arms; ``batch_queue``: EngineCore finishes each batch one step later."""
        if request["block_steps"] < 1:
            raise ValueError(f"block_steps must be >= 1, got {request['block_steps']}")
        self.block_steps = request["block_steps"]
        self.washout = 1 if batch_queue else 0
        self.rng = random.Random(request["seed"])
        self.blocks: list[BlockRecord] = []
        self._opened_at = 0  # net allocations when the open block's first step began
        self.pair = 0
        self._new_pair()
        self.active = True

    def stop(self) -> InterleaveBlocks:
        drained = self.drain()
        self.active = False
        self.arms.stop()
        return drained

    def _new_pair(self) -> None:
        self.order: list[Arm] = ["A", "B"] if self.rng.random() < 0.5 else ["B", "A"]
        self.position = 0
        self._open_block()

    def _open_block(self) -> None:
        arm = self.order[self.position]
        self.arms.enter(arm)
        self.block: BlockRecord = {
            "pair": self.pair,
            "arm": arm,
            "t0": [],
            "dt": [],
            "running": [],
            "tokens": [],
            "gc_s": [],
            "allocated": 0,
            "washout": self.washout,
        }

    @property
    def _steps_per_block(self) -> int:
        return self.washout + self.block_steps

    def tag(self, scheduler_output: Any) -> None:
        """Attach the block's arm to a batch just scheduled."""
        self.scheduled_tokens = int(scheduler_output.total_num_scheduled_tokens)
        if self.active:
            setattr(scheduler_output, STEP_TAG_ATTRIBUTE, StepTag(self.block["arm"]))

    def around_step(self, engine_core: Any, step: Callable[[], Any]) -> Any:
        self.scheduled_tokens = 0
        if not self.active:
            return step()
        running = len(getattr(engine_core.scheduler, "running", ()))
        gc_before = self.gc_clock()
        allocated = self.arms.allocated()
        started = time.monotonic()
        result = step()
        elapsed = time.monotonic() - started
        if self.scheduled_tokens == 0:  # an idle poll, or a call that only finished a queued batch
            return result
        gc_after = self.gc_clock()
        block = self.block
        if not block["dt"]:
            self._opened_at = allocated
        block["allocated"] = self.arms.allocated() - self._opened_at
        block["t0"].append(started)
        block["dt"].append(elapsed)
        block["running"].append(running)
        block["tokens"].append(self.scheduled_tokens)
        block["gc_s"].append(gc_after - gc_before)
        if len(block["dt"]) >= self._steps_per_block:
            self._close_block()
        return result

    def _close_block(self) -> None:
        self.blocks.append(self.block)
        self.position += 1
        if self.position == 2:
            self.pair += 1
            self._new_pair()
        else:
            self._open_block()

    def drain(self) -> InterleaveBlocks:
        """Hand over complete pairs (both blocks closed); keep a half-finished pair for later."""
        complete = [b for b in self.blocks if b["pair"] < self.pair]
        self.blocks = [b for b in self.blocks if b["pair"] >= self.pair]
        return {"blocks": complete, "block_steps": self.block_steps}
