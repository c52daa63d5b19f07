"""What the rest of a knee search's budget is expected to buy (:func:`forecast`): the grid, the rounds per grid load,
and the precision those rounds are expected to reach, with its range as the noise read so far may stand. The search
says it before the first run and once the knee is bracketed."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tuner.capacity.planner import KneePlanner, noisiest
from tuner.stats import LevelResult, Target, capacity_ratio, predict_sd, resolvable


@dataclass(frozen=True)
class Forecast:
    """What the rest of the budget is expected to buy: the grid (or, before it exists, a guess of it), rounds per
    grid load, and the precision expected at those rounds (inf when no pilot SD is known), with its range as the
    noise, read from the few rounds so far, may stand then (:func:`tuner.stats.predict_sd`)."""

    grid: tuple[float, ...]
    rounds: int
    precision: float
    precision_range: tuple[float, float] = (math.inf, math.inf)  # as the noise may stand at those rounds


def forecast(search: KneePlanner, log_sd: float | None = None) -> Forecast:
    """Rounds per grid load the rest of ``search``'s budget buys, and the precision expected there from ``log_sd``
    (default: the levels' so far, :func:`_noise`). Before the grid exists it is guessed as ``span`` around the
    start, after two more bracketing probes."""
    grid = search.grid or search._subdivided(
        search.start / math.sqrt(search.span), search.start * math.sqrt(search.span)
    )
    left = search.budget - search.spent - (0 if search.grid else 2 * search.cost(search.start, search.rounds))
    passes = max(0, math.floor(left / sum(search.cost(load, 1) for load in grid))) if grid else 0
    rounds = min(search.rounds_at(load) for load in grid) + passes
    sd = (
        log_sd
        if log_sd is not None
        else noisiest([_noise(search.levels, t, search.confidence) for t in search.targets])
    )
    measured = max((level.rounds for level in search.levels), default=0)
    return Forecast(grid, rounds, *_expected(sd, measured, rounds, search.confidence))


def _expected(sd: float, measured: int, rounds: int, confidence: float) -> tuple[float, tuple[float, float]]:
    """The precision ``rounds`` per load are expected to reach at the noise ``sd`` read from ``measured`` rounds,
    and its range as that noise may stand then (inf without a finite noise)."""
    if not math.isfinite(sd):
        return math.inf, (math.inf, math.inf)
    predicted = predict_sd(sd, measured, next_pairs=rounds)
    low, high = (resolvable(x, rounds, confidence=confidence) for x in (predicted.low, predicted.high))
    return resolvable(sd, rounds, confidence=confidence), (low, high)


def _noise(levels: tuple[LevelResult, ...], target: Target, confidence: float) -> float:
    """The capacity ratio's log SD so far; while no pass spans the loads (bracketing gives each probe passes of its
    own, so every resampled curve lacks some), that of the rounds taken as passes in their order at every load: a
    forecast's rough noise, never an interval."""
    if not levels:
        return math.nan
    sd = capacity_ratio(levels, target, confidence=confidence).log_sd
    if math.isfinite(sd):
        return sd
    by_order = [LevelResult(level.load, level.checks, tuple(range(level.rounds))) for level in levels]
    return capacity_ratio(by_order, target, confidence=confidence).log_sd
