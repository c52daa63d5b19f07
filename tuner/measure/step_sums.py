"""From the blocks EngineCore timed to each pair's sums (pure functions): which steps a comparison counts, and per
pair and arm their steps and seconds, whole (the plain ratio of sums) or split at running caps into the body and
the excess (:mod:`tuner.stats.body`).

Offline, only steps of like composition count: pure decode steps (one token per running request) at the most common
batch size, after the block's washout steps. Driven by arrivals, every step that did work counts
(:data:`ANY_WORK`). A pair counts when both its blocks hold at least :func:`least_comparable` counted steps.

The body's caps come from every step of both arms in the order it ran (its start on the host's shared clock),
washout steps and steps of other batch sizes included, as the engine recorded them: a cap is what the host's typical
step was just then, whichever arm ran.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from tuner.plugin.protocol import BlockRecord
from tuner.stats import running_caps

BlockSum = tuple[int, float]
"""A block's counted steps and their seconds."""
BodySum = tuple[int, float, float]
"""A block's counted steps, their body seconds (each up to its cap) and their excess seconds (above it)."""

S = TypeVar("S")

ANY_WORK = 0
"""The comparable "batch size" of a comparison driven by arrivals: every step that scheduled tokens counts."""


def _compared(block: BlockRecord) -> list[tuple[float, int, int, float]]:
    """(seconds, running, tokens, GC seconds) of the block's steps after its washout."""
    start = block["washout"]
    columns = (block["dt"], block["running"], block["tokens"], block["gc_s"])
    return list(zip(*(column[start:] for column in columns), strict=True))


def comparable_batch_size(blocks: list[BlockRecord]) -> int | None:
    """The most common running-request count among pure decode steps (tokens == running)."""
    sizes = Counter(r for b in blocks for _, r, t, _ in _compared(b) if r and t == r)
    return sizes.most_common(1)[0][0] if sizes else None


def compared_indices(block: BlockRecord, batch_size: int) -> list[int]:
    """Positions in the block of the steps that the comparison counts: after the washout, pure decode at
    ``batch_size``, or every step that scheduled tokens at :data:`ANY_WORK`."""
    start = block["washout"]
    counted = zip(block["running"][start:], block["tokens"][start:], strict=True)
    if batch_size == ANY_WORK:
        return [start + i for i, (_, t) in enumerate(counted) if t > 0]
    return [start + i for i, (r, t) in enumerate(counted) if r == batch_size and t == r]


def compared_steps(block: BlockRecord, batch_size: int) -> list[tuple[float, float]]:
    """(seconds, GC seconds) of the block's steps that the comparison counts (:func:`compared_indices`)."""
    return [(block["dt"][i], block["gc_s"][i]) for i in compared_indices(block, batch_size)]


def least_comparable(block_steps: int) -> int:
    """Comparable steps a block needs to count: half of its steps (one at one-step blocks)."""
    return max(1, (block_steps + 1) // 2)


def block_sum(block: BlockRecord, batch_size: int, min_steps: int, exclude_gc: bool = False) -> BlockSum | None:
    """The block's comparable steps and their summed time (None when too few); with ``exclude_gc`` the mutator's
    time: each step's without its GC."""
    steps = compared_steps(block, batch_size)
    if len(steps) < min_steps:
        return None
    return len(steps), sum(dt - gc_s if exclude_gc else dt for dt, gc_s in steps)


def block_mean(block: BlockRecord, batch_size: int, min_steps: int) -> float | None:
    """Mean step time of the block's comparable steps."""
    summed = block_sum(block, batch_size, min_steps)
    return summed[1] / summed[0] if summed else None


def _paired(blocks: list[BlockRecord], of_block: Callable[[BlockRecord], S | None]) -> list[tuple[S, S]]:
    """(A, B) of every pair whose two blocks both give a sum, in the order the pairs' blocks came."""
    by_pair: dict[int, dict[str, S | None]] = {}
    for block in blocks:
        by_pair.setdefault(block["pair"], {})[block["arm"]] = of_block(block)
    pairs = []
    for arms in by_pair.values():
        a, b = arms.get("A"), arms.get("B")
        if a is not None and b is not None:
            pairs.append((a, b))
    return pairs


def pair_sums(
    blocks: list[BlockRecord], batch_size: int, min_steps: int, exclude_gc: bool = False
) -> list[tuple[BlockSum, BlockSum]]:
    """(A, B) steps and seconds of every pair whose two blocks both have enough comparable steps (``exclude_gc``:
    the mutator's seconds, :func:`block_sum`)."""
    return _paired(blocks, lambda block: block_sum(block, batch_size, min_steps, exclude_gc))


def body_pair_sums(blocks: list[BlockRecord], batch_size: int, min_steps: int) -> list[tuple[BodySum, BodySum]]:
    """(A, B) counted steps, body seconds and excess seconds of the pairs :func:`pair_sums` gives, in its order."""
    every = sorted((t0, dt) for b in blocks for t0, dt in zip(b["t0"], b["dt"], strict=True))
    caps = dict(zip((t0 for t0, _ in every), running_caps([dt for _, dt in every]), strict=True))

    def of_block(block: BlockRecord) -> BodySum | None:
        counted = compared_indices(block, batch_size)
        if len(counted) < min_steps:
            return None
        seconds = [block["dt"][i] for i in counted]
        body = float(sum(min(dt, caps[block["t0"][i]]) for i, dt in zip(counted, seconds, strict=True)))
        return len(counted), body, sum(seconds) - body

    return _paired(blocks, of_block)


def pair_means(blocks: list[BlockRecord], batch_size: int, min_steps: int) -> list[tuple[float, float]]:
    """(A, B) mean step time of every pair whose two blocks both have enough comparable steps."""
    return means_of(pair_sums(blocks, batch_size, min_steps))


def means_of(sums: list[tuple[BlockSum, BlockSum]]) -> list[tuple[float, float]]:
    """(A, B) mean step time of each pair's sums."""
    return [(a[1] / a[0], b[1] / b[0]) for a, b in sums]


def log_ratio_influence(sums: list[tuple[BlockSum, BlockSum]]) -> np.ndarray:
    """Each pair's influence on the log of B's mean step time over A's (ratio of sums), from per-pair (steps,
    seconds)."""
    a = np.array([(x[0], x[1], y[0], y[1]) for x, y in sums], dtype=np.float64)
    totals = a.sum(axis=0)
    return np.asarray(a[:, 3] / totals[3] - a[:, 2] / totals[2] - a[:, 1] / totals[1] + a[:, 0] / totals[0])


def log_ratio_variance(sums: list[tuple[BlockSum, BlockSum]]) -> float:
    """The delta-method variance of that log ratio: the sum of the pairs' squared influence values."""
    return float(np.sum(log_ratio_influence(sums) ** 2))
