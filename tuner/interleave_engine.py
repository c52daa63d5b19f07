"""In-engine A/B measurement (the EngineCore side): alternate two strategy sets every K engine steps.

Blocks of model-executing steps come in pairs in mirrored order (AB BA AB ..., the first drawn at random;
:func:`tuner.stats.mirrored_order`): both blocks of a pair follow the same arm, so residue an arm leaves behind
(garbage, caches) hits both alike and cancels. Mirrored order repeats every four blocks, and an offline batch
has a fixed number of steps whose cost grows with the context: with fixed-length blocks an arm can sit at the
same phase of every batch (16 prompts x 160 tokens is exactly five such periods of 8-step blocks, and an A/A
then drifted from 1). So each pair draws its block length at random around ``block_steps`` (both blocks of a
pair alike), which spreads the arms over all phases. At every block end a gen0 collection settles the garbage
the ending block deferred, and its time is charged to that block. Per step it records the wall time, the
running requests, the scheduled tokens and the GC time; the front-end (:mod:`tuner.interleave`) drains complete
pairs and does the statistics.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.plugin import ProcessState


class StepInterleaver:
    """Runs inside EngineCore; ``around_step`` wraps every engine step."""

    def __init__(self, state: ProcessState) -> None:
        self.state = state
        self.active = False

    def start(self, arms: dict[str, dict[str, dict[str, Any]]], block_steps: int, seed: int) -> None:
        self.arms = arms  # {"A": strategy set, "B": strategy set}
        self.block_steps = block_steps
        self.seed = seed
        self._lengths = random.Random(seed)
        self.blocks: list[dict[str, Any]] = []
        self.pair = 0
        self._new_pair()
        self.active = True

    def stop(self) -> dict[str, Any]:
        drained = self.drain()
        self.active = False
        self.state.switch({})
        return drained

    def _new_pair(self) -> None:
        from tuner.stats import mirrored_order  # scipy is imported on the first comparison, not at engine start

        trial_first = mirrored_order(self.pair + 1, seed=self.seed)[-1]
        self.order = ["B", "A"] if trial_first else ["A", "B"]
        self.length = pair_block_length(self.block_steps, self._lengths)
        self.position = 0
        self._open_block()

    def _open_block(self) -> None:
        arm = self.order[self.position]
        self.state.switch(self.arms[arm])
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
        gc_before = sum(self.state.probe.seconds)
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
        block["gc_s"].append(sum(self.state.probe.seconds) - gc_before)
        if len(block["dt"]) >= self.length:
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


def pair_block_length(block_steps: int, rng: random.Random) -> int:
    """A pair's block length: uniform on [block_steps / 2, 3 * block_steps / 2] (mean ``block_steps``), at least 2."""
    low = max(2, (block_steps + 1) // 2)
    return rng.randint(low, max(low, block_steps + block_steps // 2))
