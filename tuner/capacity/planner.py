"""Where the knee search (:class:`tuner.capacity.search.KneeSearch`) measures next: a small, deterministic state
machine, no engine.

The command asks :meth:`KneePlanner.next_probe` for a load and a number of rounds, runs both arms there (each round
one run per arm, in the mirrored order it keeps), and hands the level back to :meth:`KneePlanner.record`; nothing
here is random or measured. Crossings are read as :func:`tuner.stats.tier_crossings` reads them, on each arm's
isotonic fits over every level measured so far. Every SLO tier the search serves (``target`` and ``tiers``) has its
own crossings, and each is bracketed and gridded as an arm's is: one search, the runs shared, a capacity per tier.

Phase 1 ("bracket"), ``rounds`` rounds per probe: from the start load, up by the growth factor while A meets the
target at the highest load measured, down while it misses it at the lowest, then the same for B, so that each arm
has a load that meets the target below one that misses it (within the optional load limits: an arm that meets it
up to the highest allowed load, or misses it down to the lowest, is left censored); then each crossing whose two
loads lie more than ``span`` apart is halved (a probe at their geometric midpoint) until they do not. Restart pairs
(:mod:`tuner.capacity.restart`) bracket each arm on its own engine by the same rule (:func:`bracket_load`).

Phase 2 ("grid"): a grid around each arm's crossing (from the load it last meets the target to the one it first misses
it, joined where the two overlap; two knees far apart get two small grids, not one across both), at most ``resolution``
apart, measured in passes: one round at every grid load (loads new to the search first, then lowest first), then the
next pass. Rounds of one pass are measured together, so the host's drift moves every load of a pass alike; the search
tags them with the pass (:attr:`tuner.stats.capacity.LevelResult.passes`), the estimate resamples passes whole, and a
workload seeded by :attr:`Probe.passes` replays the same requests at every load of a pass, which pairs the loads as the
arms are paired. Close loads leave little to the interpolation, which on a sharp knee (an attainment of 1 at one load,
0.4 at the next 26% up) can only guess where the curve bends. After ``pilot`` passes the search plans, from the
estimate's SD (:func:`tuner.stats.capacity.rounds_needed`), the passes the ``precision`` asked for needs, and then runs
exactly those, and more while a grid load has fewer than two rounds (a load the last pass added has one or none: an A/A
search on the CPU engine stopped so, its upper side open). Stopping at the first pass whose interval happened to be
narrow enough covered the true ratio in 80% of the 146 of 400 simulated searches that stopped so (an exploratory run:
Poisson arrivals, B's steps 10% shorter), against 98% of those that ran to their budget. After every pass it adds a load
beyond the grid where an arm's capacity lies beyond it or is censored on that side, and the two loads around it where it
has moved into the gap between the arms' grids, and the next load into that gap from the arm's side where an end of its
interval lies there (a crossing resampled there is interpolated across the gap); where an arm bracketed once is no
longer bracketed by every level measured (its later rounds miss the target at every load, or meet it at every one), a
load a growth step beyond the measured range, as bracketing would (and no step of ``resolution`` that way): one step of
``resolution`` per pass crept towards a knee 25% lower and spent the CPU engine's budget before it reached it. It also
stops when the next probe would overrun the budget, when a grid load has ``max_rounds``, or when neither arm has a
crossing within the load limits.

The budget is in the caller's units: runs by default (each round costs two), or any cost per run of a load given
as ``run_cost`` (seconds, when the caller knows how long a run at that load takes).
:func:`tuner.capacity.forecast.forecast` says what the rest of it is expected to resolve: the passes it buys and the
precision :func:`tuner.stats.capacity.resolvable` expects at those rounds from a pilot SD (given, or the current
estimate's).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from tuner.stats import (
    LEAST_ROUNDS,
    Capacity,
    CapacityEstimate,
    Crossing,
    LevelResult,
    Target,
    capacity_ratio,
    rounds_needed,
    tier,
    tier_crossings,
)

Phase = Literal["bracket", "grid"]
StopReason = Literal["planned", "budget", "max_rounds", "censored"]
"""Why the search ended: the passes planned after the pilot are done; the next probe would overrun the budget; a
grid load has ``max_rounds``; or no arm has a crossing within the load limits."""


@dataclass(frozen=True)
class Probe:
    """Measure both arms at ``load`` for ``rounds`` more rounds, the i-th in pass ``passes[i]``."""

    load: float
    rounds: int
    phase: Phase
    passes: tuple[int, ...]


class KneePlanner:
    """The search described in the module docstring; the caller reads :attr:`levels` and :meth:`estimate`."""

    def __init__(
        self,
        start: float,
        target: Target,
        *,
        tiers: tuple[Target, ...] = (),
        budget: float,
        growth: float = 2.0,
        rounds: int = 3,
        span: float = 1.26,
        resolution: float = 1.1,
        precision: float = 0.05,
        pilot: int = 2,
        min_load: float | None = None,
        max_load: float | None = None,
        integer: bool = False,
        run_cost: Callable[[float], float] | None = None,
        max_rounds: int = 50,
        confidence: float = 0.95,
    ) -> None:
        if not (growth > span > 1 and resolution > 1 and rounds >= 2 and pilot >= 1):
            raise ValueError("need growth > span > 1, resolution > 1, rounds >= 2 and pilot >= 1")
        if not budget > 0:
            raise ValueError(f"need a positive budget, got {budget}")
        self.targets = tuple(tier(t) for t in (target, *tiers))  # each refused unless its shares lie in (0, 1)
        self.budget, self.growth, self.rounds = budget, growth, rounds
        self.span, self.resolution, self.precision, self.confidence = span, resolution, precision, confidence
        self.min_load, self.max_load, self.integer = min_load, max_load, integer
        self.max_rounds = max(max_rounds, rounds)
        self.run_cost = run_cost or (lambda load: 1.0)
        self._levels: dict[float, LevelResult] = {}
        self.start = self._clamp(start)
        self.spent = 0.0
        self.grid: tuple[float, ...] | None = None  # None while bracketing
        self.pilot = pilot
        self.planned: int | None = None  # grid passes in all, once the pilot has said what the precision needs
        self.done = 0  # grid passes completed
        self._tag = 0  # the next unused pass
        self._pass = -1  # the grid's current pass

    @property
    def levels(self) -> tuple[LevelResult, ...]:
        return tuple(self._levels[load] for load in sorted(self._levels))

    @property
    def phase(self) -> Phase:
        return "bracket" if self.grid is None else "grid"

    def estimate(self) -> CapacityEstimate | None:
        """The estimate at ``target`` (the first tier)."""
        return capacity_ratio(self.levels, self.targets[0], confidence=self.confidence) if self._levels else None

    def estimates(self) -> list[CapacityEstimate]:
        """The estimate at every tier, ``target``'s first (none before a level is measured)."""
        return [capacity_ratio(self.levels, t, confidence=self.confidence) for t in self.targets if self._levels]

    def rounds_at(self, load: float) -> int:
        level = self._levels.get(load)
        return level.rounds if level else 0

    def cost(self, load: float, rounds: int) -> float:
        return 2 * rounds * self.run_cost(load)  # one run per arm per round

    def next_probe(self) -> Probe | None:
        """The next load to measure and its rounds, or None when the search is over (:attr:`stop_reason`)."""
        probe = self._wanted()
        return probe if probe is not None and self.spent + self.cost(probe.load, probe.rounds) <= self.budget else None

    @property
    def stop_reason(self) -> StopReason | None:
        """Why :meth:`next_probe` returns None (None while it does not)."""
        if self._plan_done():
            return "planned"
        probe = self._wanted()
        if probe is None:
            return "censored" if not self.grid else "max_rounds"
        return "budget" if self.spent + self.cost(probe.load, probe.rounds) > self.budget else None

    def record(self, level: LevelResult, cost: float | None = None) -> None:
        """Add a measured level, merged with earlier rounds at its load; its rounds are put in the passes of the
        probe that asked for them (in new passes of their own if none did). ``cost`` defaults to its runs'."""
        rounds, probe = level.rounds, self._wanted()
        if probe is not None and (probe.load, probe.rounds) == (level.load, rounds):
            passes = probe.passes
        else:
            passes = tuple(range(self._tag, self._tag + rounds))
        self.spent += self.cost(level.load, rounds) if cost is None else cost
        self._add(LevelResult(level.load, level.checks, passes))
        self._advance()

    def take(self, levels: list[LevelResult]) -> None:
        """Levels measured without a probe, in their own passes (restart pairs' ladder, whose cost the caller
        keeps); the phase moves on once all are in, as after a probe. None (the budget stopped the ladder before
        both arms ran a load) leaves the search as it was."""
        if not levels:
            return
        for level in levels:
            self._add(level)
        self._advance()

    def _add(self, level: LevelResult) -> None:
        self._tag = max(self._tag, *(tag + 1 for tag in level.passes))
        known = self._levels.get(level.load)
        self._levels[level.load] = known.merged(level) if known else level

    def _advance(self) -> None:
        """The grid once every crossing is bracketed; at the end of a pass, the next."""
        if self.grid is None and _bracket_probe(self) is None:
            self.grid = self._new_grid()
            self._pass, self._tag = self._tag, self._tag + 1
        elif self.grid and not self._due():
            self._after_pass()
            self._pass, self._tag = self._tag, self._tag + 1

    def _wanted(self) -> Probe | None:
        """The probe the search wants next, whatever the budget; None when it wants none."""
        if self._plan_done():
            return None
        if self.grid is None:
            load = _bracket_probe(self) if self._levels else self.start
            fresh = tuple(range(self._tag, self._tag + self.rounds))
            return Probe(load, self.rounds, "bracket", fresh) if load is not None else None
        due = self._due()
        if not due or any(self.rounds_at(x) >= self.max_rounds for x in self.grid):
            return None
        return Probe(due[0], 1, "grid", (self._pass,))

    def _plan_done(self) -> bool:
        """The planned passes are run and every grid load has the rounds a level's variance needs (module docstring)."""
        run = self.planned is not None and self.done >= self.planned
        return run and all(self.rounds_at(x) >= LEAST_ROUNDS for x in self.grid or ())

    def _due(self) -> list[float]:
        """The grid loads the current pass has yet to measure: loads never measured first (a bracket to find again,
        a capacity beyond the grid: a budget that ends mid-pass must not leave them out), then lowest first."""
        assert self.grid is not None
        due = [x for x in self.grid if x not in self._levels or self._pass not in self._levels[x].passes]
        return sorted(due, key=lambda load: (load in self._levels, load))

    def _new_grid(self) -> tuple[float, ...]:
        """Around each arm's crossing, from the load it last meets the target to the one it first misses it (joined
        where they overlap), at most ``resolution`` apart, measured loads kept; empty when no arm has a crossing."""
        exact = [arm for arm in _crossings(self) if arm.bound == "exact"]
        known = sorted({x for x in self._levels for arm in exact if arm.last_met <= x <= arm.first_missed})
        inside = [(a, b) for a, b in pairwise(known) if any(c.last_met <= a and b <= c.first_missed for c in exact)]
        return tuple(sorted({x for a, b in inside for x in self._subdivided(a, b)}))

    def _subdivided(self, low: float, high: float) -> tuple[float, ...]:
        """The loads from ``low`` to ``high`` in equal geometric steps at most ``resolution`` apart (rounded)."""
        steps = max(1, math.ceil(math.log(high / low) / math.log(self.resolution) - 1e-9))
        return tuple(sorted({low, high} | {self._round(low * (high / low) ** (i / steps)) for i in range(1, steps)}))

    def _after_pass(self) -> None:
        """At the end of a pass: after the pilot, plan the passes the precision needs; add a load a growth step
        beyond the measured range where an arm is no longer bracketed, else a load beyond the grid where an arm's
        capacity lies beyond it or is censored on that side, and the two loads around it where it lies in the gap
        between the two arms' grids."""
        self.done += 1
        estimates = self.estimates()
        assert estimates and self.grid
        if self.done == self.pilot:  # the noisiest tier sets the passes: the precision is asked of every tier
            have = min(self.rounds_at(x) for x in self.grid)
            sd = noisiest([e.log_sd for e in estimates])  # nan: rounds_needed says None, the budget decides
            needed = rounds_needed(sd, self.precision, confidence=self.confidence, most=self.max_rounds)
            self.planned = None if needed is None else self.done + max(0, needed - have)
        grid = set(self.grid)
        far = {x for arm in _crossings(self) if arm.bound != "exact" and (x := _beyond(self, arm, self._levels))}
        for arm in (capacity for e in estimates for capacity in (e.capacity_a, e.capacity_b)):
            grid |= _widened(self, grid, arm, far)
            grid |= _around(arm.load, grid, self._subdivided, self.resolution)
            grid |= _toward_ends(self, grid, arm)
        self.grid = tuple(sorted(grid | far))

    def step(self, load: float, factor: float) -> float | None:
        """``load`` times ``factor`` (rounded, at least one unit away when integer, within the limits); None when
        the limits leave no new load that way."""
        new = self._clamp(load * factor)
        if self.integer and new == load:
            new = self._clamp(load + (1 if factor > 1 else -1))
        return new if (new - load) * (factor - 1) > 0 else None

    def _round(self, load: float) -> float:
        """A whole number when integer; a measured load where ``load`` is one but for float rounding (5 and
        3.5355 * 1.0905**4 are one level, not two)."""
        load = float(max(1, round(load))) if self.integer else load
        return next((known for known in self._levels if math.isclose(known, load, rel_tol=1e-9)), load)

    def _clamp(self, load: float) -> float:
        """``load`` rounded and within the limits (an integer limit rounded inwards)."""
        low, high = self.min_load or 0.0, self.max_load or math.inf
        if self.integer:
            low, high = math.ceil(low), math.floor(high) if math.isfinite(high) else high
        return float(min(max(self._round(load), low), high))


def bracket_load(search: KneePlanner, crossings: list[Crossing], loads: Collection[float]) -> float | None:
    """The next bracketing load for ``crossings`` read on levels at ``loads``: a growth step beyond them for the first
    crossing censored on a side (unless the load limits stop it there), else the midpoint of the first crossing wider
    than ``span``; None when every crossing is bracketed that closely."""
    for arm in crossings:
        if arm.bound != "exact" and (load := _beyond(search, arm, loads)) is not None:
            return load
    for arm in crossings:
        if arm.bound == "exact" and arm.first_missed / arm.last_met > search.span:
            middle = search._round(math.sqrt(arm.last_met * arm.first_missed))
            if arm.last_met < middle < arm.first_missed:
                return middle
    return None


def _bracket_probe(search: KneePlanner) -> float | None:
    """Phase 1's next load: :func:`bracket_load` for every arm of every tier (each tier's A, then B)."""
    return bracket_load(search, _crossings(search), search._levels)


def _beyond(search: KneePlanner, arm: Crossing, loads: Collection[float]) -> float | None:
    """A growth step past ``loads`` on the side where ``arm``'s crossing is censored (None where the load limits
    stop it)."""
    edge = max(loads) if arm.bound == "at_least" else min(loads)
    return search.step(edge, search.growth if arm.bound == "at_least" else 1 / search.growth)


def _widened(search: KneePlanner, grid: set[float], arm: Capacity, far: set[float]) -> set[float]:
    """A load a ``resolution`` step beyond ``grid`` on each side where ``arm``'s capacity lies beyond it or is
    censored, unless a load of ``far`` (a growth step away: bracketing an arm again) lies that way already."""
    low, high = min(grid), max(grid)
    loads = set()
    if (arm.ci_low == 0 or arm.load < low) and min(far, default=low) >= low:
        loads.add(search.step(low, 1 / search.resolution))
    if (math.isinf(arm.ci_high) or arm.load > high) and max(far, default=high) <= high:
        loads.add(search.step(high, search.resolution))
    return {x for x in loads if x is not None}


def _toward_ends(search: KneePlanner, grid: set[float], arm: Capacity) -> set[float]:
    """For each end of ``arm``'s interval that lies in a gap inside ``grid`` wider than ``resolution`` (between the
    two arms' grids), the next load into the gap from the side nearer the crossing: a resampled crossing there is
    interpolated across the gap, which on a knee that drops at once is a guess, and the interval's end with it. On the
    CPU engine's Mooncake window the slower arm's attainment fell from 94% to 52% across a gap of 41%, and its
    interval reached 20% into it."""
    loads = set()
    for end, outward in ((arm.ci_high, True), (arm.ci_low, False)):
        if gap := _gap(end, grid, search.resolution):
            steps = search._subdivided(*gap)
            loads.add(steps[1] if outward else steps[-2])
    return loads


def _crossings(search: KneePlanner) -> list[Crossing]:
    """Each tier's crossings (A's, then B's) on the arms' isotonic fits over every level measured so far."""
    return [arm for target in search.targets for arm in tier_crossings(search.levels, target)]


def _around(
    load: float, grid: set[float], subdivided: Callable[[float, float], tuple[float, ...]], resolution: float
) -> set[float]:
    """The loads of ``subdivided`` either side of ``load`` when it lies in a gap of ``grid`` wider than
    ``resolution`` (between the two arms' grids), else none."""
    if not (gap := _gap(load, grid, resolution)):
        return set()
    steps = subdivided(*gap)
    return {max(x for x in steps if x <= load), min(x for x in steps if x >= load)}


def _gap(load: float, grid: set[float], resolution: float) -> tuple[float, float] | None:
    """The grid loads either side of ``load`` when they lie more than ``resolution`` apart, else None (also where
    ``load`` lies beyond the grid)."""
    below = max((x for x in grid if x <= load), default=0.0)
    above = min((x for x in grid if x >= load), default=math.inf)
    return (below, above) if 0 < below < above < math.inf and above / below > resolution * (1 + 1e-9) else None


def noisiest(sds: list[float]) -> float:
    """The largest of the tiers' log SDs; nan when any is (its interval open: no noise to plan by)."""
    return math.nan if any(math.isnan(x) for x in sds) else max(sds)
