"""The body of a step comparison's steps and its guard (:mod:`tuner.stats.body`), from the blocks EngineCore timed.

Every counted step of both arms, in the order it ran (its start on the host's shared clock), gets its cap from the
steps before it, washout steps and steps of other batch sizes included, as the engine recorded them: a cap is what
the host's typical step was just then, whichever arm ran. Each pair's blocks then sum the steps the comparison
counts (:func:`tuner.measure.interleave.compared_indices`), their time up to the caps (the body) and above them
(the excess), with the pairs the plain ratio of sums uses (both blocks with enough counted steps).
"""

from __future__ import annotations

from tuner.measure.interleave import InterleaveResult, compared_indices, least_comparable
from tuner.stats import BodyComparison, body_comparison, running_caps
from tuner.stats.body import GUARD_MARGIN

Sums = tuple[int, float, float]  # (counted steps, body seconds, excess seconds) of one block


def body_sums(result: InterleaveResult) -> list[tuple[Sums, Sums]]:
    """(A, B) counted steps, body seconds and excess seconds of every pair whose two blocks both have enough
    counted steps."""
    if result.batch_size is None:
        return []
    every = sorted((t0, dt) for b in result.blocks for t0, dt in zip(b["t0"], b["dt"], strict=True))
    caps = dict(zip((t0 for t0, _ in every), running_caps([dt for _, dt in every]), strict=True))
    least = least_comparable(result.block_steps)
    by_pair: dict[int, dict[str, Sums]] = {}
    for block in result.blocks:
        counted = compared_indices(block, result.batch_size)
        if len(counted) < least:
            continue
        seconds = [block["dt"][i] for i in counted]
        body = sum(min(dt, caps[block["t0"][i]]) for i, dt in zip(counted, seconds, strict=True))
        by_pair.setdefault(block["pair"], {})[block["arm"]] = (len(counted), body, sum(seconds) - body)
    return [(arms["A"], arms["B"]) for arms in by_pair.values() if "A" in arms and "B" in arms]


def body_of(
    result: InterleaveResult, *, margin: float = GUARD_MARGIN, confidence: float = 0.95, seed: int = 0
) -> BodyComparison | None:
    """The comparison's body (B over A, step time) and its guard on the whole time; None below two pairs."""
    sums = body_sums(result)
    if len(sums) < 2:
        return None
    columns = [[s[k] for _, s in sums] for k in range(3)], [[s[k] for s, _ in sums] for k in range(3)]
    trial, reference = ((c[0], c[1], c[2]) for c in columns)
    return body_comparison(trial, reference, margin=margin, confidence=confidence, seed=seed)
