"""Each arm alone in alternating long blocks: what the collector costs it at its own pace.

The blocks are a step comparison of the two arms in long blocks (:func:`tuner.measure.interleave
.interleaved_comparison`): inside a block every step is the arm's, and the engine collects when the arm's own
thresholds say. What each block holds is read from the engine's own records: EngineCore's steps (start, seconds)
and net allocations per block, every engine process's collections (interval, generation, hidden or not), and per
process each arm's thresholds and its allocations per batch (a worker's allocations are known per arm, not per
block: its triggers in a block are its arm's rate times the block's steps). :mod:`tuner.stats.collector` turns the
blocks into the factor.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from tuner.measure.interleave import InterleaveResult, interleaved_comparison
from tuner.measure.workbench import Workbench
from tuner.measure.worker_gc import ArmPacing, GcPause, overlaps
from tuner.plugin.protocol import BlockRecord, StrategySet
from tuner.stats import Collection, CollectorBlock, ProcessBlock, schedule


def collector_blocks(
    bench: Workbench, reference: StrategySet, trial: StrategySet, *, block_steps: int, budget_s: float, seed: int
) -> tuple[list[CollectorBlock], InterleaveResult]:
    """The reference (A) and the trial (B) alone in blocks of ``block_steps`` for ``budget_s``, and the comparison
    that ran them."""
    result = interleaved_comparison(bench, reference, trial, block_steps=block_steps, budget_s=budget_s, seed=seed)
    return blocks_of(result.blocks, result.gc_pauses, result.paced), result


def _triggers(pacing: ArmPacing, arm: str, block: BlockRecord) -> float:
    """Collections the process's allocations in ``block`` trigger at the arm's gen0 threshold."""
    threshold = pacing.thresholds[arm][0]
    if pacing.engine_core:
        allocated = float(block["allocated"])
    else:
        total, batches = pacing.allocations.get(arm, [0, 0])
        allocated = total / batches * len(block["dt"]) if batches else 0.0
    return max(allocated, 0.0) / (threshold + 1) if threshold > 0 else 0.0


def blocks_of(
    records: Sequence[BlockRecord], pauses: Sequence[GcPause], paced: dict[int, ArmPacing]
) -> list[CollectorBlock]:
    """Each block with the collections that began inside its span, per process: each one's seconds inside the
    block's steps (nothing when hidden) and whether it was that process's first of its generation there."""
    starts = [p.start for p in pauses]
    out = []
    for record in records:
        arm = record["arm"]
        steps = list(zip(record["t0"], record["dt"], strict=True))
        if not steps:
            continue
        begin, end = steps[0][0], steps[-1][0] + steps[-1][1]
        mine = pauses[bisect.bisect_left(starts, begin) : bisect.bisect_right(starts, end)]
        # Each pause's seconds inside the block's steps (sorted, disjoint intervals on the same clock).
        in_steps = overlaps(
            np.array([p.start for p in mine], dtype=np.float64),
            np.array([p.end for p in mine], dtype=np.float64),
            [(t0, t0 + dt) for t0, dt in steps],
        )
        processes = {}
        for pid, pacing in paced.items():
            if arm not in pacing.thresholds:
                continue
            seen: set[int] = set()
            collections = []
            for pause, inside in zip(mine, in_steps, strict=True):
                if pause.pid != pid:
                    continue
                collections.append(
                    Collection(pause.generation, 0.0 if pause.hidden else float(inside), pause.generation not in seen)
                )
                seen.add(pause.generation)
            _, gen1, gen2 = pacing.thresholds[arm]
            processes[pid] = ProcessBlock(_triggers(pacing, arm, record), schedule(gen1, gen2), tuple(collections))
        out.append(CollectorBlock(arm, record["pair"], len(steps), sum(dt for _, dt in steps), processes))
    return out


def renumbered(blocks: Sequence[CollectorBlock], after: Sequence[CollectorBlock]) -> list[CollectorBlock]:
    """``blocks`` with pair numbers that continue ``after``'s (two runs of blocks pooled into one estimate)."""
    offset = 1 + max((b.pair for b in after), default=-1)
    return [replace(b, pair=b.pair + offset) for b in blocks]
