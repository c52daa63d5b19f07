"""In-engine A/B measurement (the EngineCore side): alternate two strategy sets every K engine steps.

Blocks of ``block_steps`` model-executing steps come in pairs, each pair in a random order (AB or BA). Not the
mirrored order (AB BA ...) of run-level pairs, which was tried here and measured: its period of four blocks
aliased with a batch of 160 steps (five periods of 8-step blocks; the engine's A/A drifted to 0.983 [0.954,
1.006]), and with a random spacer that broke the period it still put the same arm on both sides of every pair
boundary, so a burst of host noise a few blocks long moved neighbouring pairs the same way and the A/A CI came
out too narrow (1.016 [1.001, 1.035] over 316 pairs). Random order leaves no period and makes neighbouring
pairs' errors cancel on average. Carry-over between blocks is mostly deferred garbage, settled below. At every
block end a gen0 collection settles the garbage the ending block deferred, and its time is charged to that
block. Per step it records the wall time, the running requests, the scheduled tokens and the GC time; the
front-end (:mod:`tuner.interleave`) drains complete pairs and does the statistics.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from typing import Any


class StepInterleaver:
    """Runs inside EngineCore; ``around_step`` wraps every engine step."""

    def __init__(self, switch: Callable[[dict[str, dict[str, Any]]], None], gc_seconds: Callable[[], float]) -> None:
        """``switch`` puts a strategy set in force in this process; ``gc_seconds`` is its GC time so far."""
        self.switch = switch
        self.gc_seconds = gc_seconds
        self.active = False

    def start(self, arms: dict[str, dict[str, dict[str, Any]]], block_steps: int, seed: int) -> None:
        self.arms = arms  # {"A": strategy set, "B": strategy set}
        self.block_steps = block_steps
        self.rng = random.Random(seed)
        self.blocks: list[dict[str, Any]] = []
        self.pair = 0
        self._new_pair()
        self.active = True

    def stop(self) -> dict[str, Any]:
        drained = self.drain()
        self.active = False
        self.switch({})
        return drained

    def _new_pair(self) -> None:
        self.order = ["A", "B"] if self.rng.random() < 0.5 else ["B", "A"]
        self.position = 0
        self._open_block()

    def _open_block(self) -> None:
        arm = self.order[self.position]
        self.switch(self.arms[arm])
        self.block: dict[str, Any] = {
            "pair": self.pair,
            "arm": arm,
            "dt": [],
            "running": [],
            "tokens": [],
            "gc_s": [],
            "settle_s": 0.0,
        }

    def around_step(self, engine_core: Any, step: Callable[[], Any]) -> Any:
        if not self.active:
            return step()
        scheduler = engine_core.scheduler
        running = len(getattr(scheduler, "running", ()))
        gc_before = self.gc_seconds()
        started = time.perf_counter()
        result = step()
        elapsed = time.perf_counter() - started
        tokens = int(getattr(scheduler, "_tuner_scheduled_tokens", 0))
        if tokens == 0:  # an idle poll, not an engine step
            return result
        block = self.block
        block["dt"].append(elapsed)
        block["running"].append(running)
        block["tokens"].append(tokens)
        block["gc_s"].append(self.gc_seconds() - gc_before)
        if len(block["dt"]) >= self.block_steps:
            self._close_block()
        return result

    def _close_block(self) -> None:
        started = time.perf_counter()
        gc.collect(0)  # settle: the ending block pays for the garbage it deferred
        self.block["settle_s"] = time.perf_counter() - started
        self.blocks.append(self.block)
        self.position += 1
        if self.position == 2:
            self.pair += 1
            self._new_pair()
        else:
            self._open_block()

    def drain(self) -> dict[str, Any]:
        """Hand over complete pairs (both blocks closed); keep a half-finished pair for later."""
        complete = [b for b in self.blocks if b["pair"] < self.pair]
        self.blocks = [b for b in self.blocks if b["pair"] >= self.pair]
        return {"blocks": complete, "block_steps": self.block_steps}
