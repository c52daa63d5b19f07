"""Engine switches compared by capacity: restart pairs inside the knee search (:class:`RestartSearch`).

A configuration that changes engine arguments or vLLM variables (``max_num_seqs``, async scheduling,
``VLLM_USE_RUST_FRONTEND``) cannot be switched in place: each arm needs an engine of its own. Two starts per load
(27-182 s each on an H100) would spend the budget on starts, so each engine runs every load of a pass before the
next one starts:

- pass 0, the ladder: the reference's engine steps from the start load by the growth factor, ``rounds`` runs a
  load, until its crossing of every tier is bracketed, then halves each bracket until it spans at most ``span``, as
  the in-place search brackets (:func:`tuner.capacity.planner.bracket_load`; the load limits may stop it); the
  configuration's engine replays those loads highest first, then brackets its own crossings the same way; the
  reference's engine starts again for the loads it added. The planner
  (:class:`tuner.capacity.planner.KneePlanner`) takes the ladder as one pass and grids each knee at ``resolution``
  from there (a bracket that the two arms' runs together leave wider, it measures first on both engines).
- then the grid passes the planner asks for, each starting both arms' engines anew: the reference's first in odd
  passes, the configuration's in even ones; the first runs the pass's loads lowest first, the second highest first,
  so that a fresh engine's first runs fall on every load in turn.

A pass is the bootstrap's cluster (:mod:`tuner.stats.capacity`), so the spread between engine starts (runs vary by
+-12% across engine starts on an H100) lands between passes, where the interval sees it. Engine starts and stops
count against the budget, as they take an operator's engine time, and are kept apart in the record
(``search.restarts``); the ladder's runs at a load that never became a level, the budget or Ctrl-C having stopped
the search before the other arm's engine ran its rounds there, are kept there too (``search.unpaired``), in no
estimate. A pass begins only if the budget holds it: two starts and stops at the mean so far, and a run
per arm at each load's typical wall. A budget that cannot hold the ladder's two engines and one grid pass (four
starts at the first one's time) is refused once that start is timed, with the arithmetic. Rounds are not run again
after other work took the host (a round's two runs are an engine start apart), and over-saturated loads are not cut
short (a grid pass runs each load once).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass, field

from tuner.capacity.levels import MeasuredLevel, arm_run, level_of
from tuner.capacity.planner import KneePlanner, Probe, bracket_load
from tuner.capacity.search import KneeSearch, typical_wall
from tuner.config import StartConfig
from tuner.errors import UserError
from tuner.feedback import task
from tuner.measure import Workbench
from tuner.plugin.protocol import encode_spec
from tuner.records import ARMS, UnpairedRuns, restart_seconds
from tuner.stats import tier_crossings

_Runs = dict[str, list[tuple[list[list[bool]], dict[str, float]]]]
"""At one load of one pass, per arm: each run's flags per check and request, and its figures."""

LEAST_STARTS = 4
"""The ladder's two engines and one grid pass's two: fewer leave no interval."""


@dataclass
class RestartSearch(KneeSearch):
    """The search of the module docstring; ``engines``: what each arm's engine changes on top of the experiment's
    (engine arguments, vLLM variables, strategies in force from its start). ``bench`` is the reference's engine,
    started; the search stops and starts engines from there and closes the last one it started."""

    engines: dict[str, StartConfig] = field(default_factory=dict)
    _ladder: dict[float, _Runs] = field(default_factory=dict)
    _arm: str = "reference"  # the arm whose engine runs
    _out: bool = False  # the budget stopped the ladder

    def run(self, start: float, span_s: float) -> None:
        self._walls[start] = span_s + 1.0
        search = self.record["search"]
        search["restarts"] = [{"arm": "reference", "tag": 0, "start_s": self.bench.session.start_s, "stop_s": None}]
        search["spent_s"] += self.bench.session.start_s
        self._refuse_a_short_budget()
        try:
            self._search(start)
        finally:  # also on Ctrl-C or an engine error: no engine this search started is left running
            search["unpaired"] = self._unpaired()
            self._close()

    def _search(self, start: float) -> None:
        planner = self._planner(start, math.inf)  # the budget is kept here, engine starts included
        self._climb("reference", planner, [planner.start])
        self._engine("configuration")
        self._climb("configuration", planner, sorted(self._ladder, reverse=True))
        if missing := sorted(load for load, runs in self._ladder.items() if not runs["reference"]):
            self._engine("reference")
            self._climb("reference", planner, missing, step=False)
        self._take(planner, [load for load, runs in sorted(self._ladder.items()) if all(runs.values())])
        while not self._out and (probe := planner.next_probe()) is not None and probe.phase == "bracket":
            other = "reference" if self._arm == "configuration" else "configuration"  # a load read by both arms
            self._climb(self._arm, planner, [probe.load], step=False)
            self._engine(other)
            self._climb(other, planner, [probe.load], step=False)
            self._take(planner, [probe.load])
        self._say_passes(planner)
        while not self._out and (probe := planner.next_probe()) is not None and self._grid_pass(planner, probe):
            pass
        self.record["search"]["stop"] = "budget" if self._out else planner.stop_reason

    def _refuse_a_short_budget(self) -> None:
        """Refuse a budget that cannot hold :data:`LEAST_STARTS` engine starts at the first one's time."""
        first, budget = self.bench.session.start_s, self.settings.budget_s
        if LEAST_STARTS * first > budget:
            raise UserError.single(
                self.experiment.name,
                f"restart pairs need at least {LEAST_STARTS} engine starts (the ladder's two engines and one grid "
                f"pass's two): at the {first:.0f} s the reference's engine took to start, {LEAST_STARTS} x {first:.0f}"
                f" = {LEAST_STARTS * first:.0f} s, more than the budget of {budget:.0f} engine-s: raise "
                "capacity.budget_s",
                "capacity.budget_s",
            )

    def _climb(self, arm: str, planner: KneePlanner, loads: list[float], *, step: bool = True) -> None:
        """Pass 0 on ``arm``'s running engine: ``rounds`` runs at each of ``loads``, then (``step``) the loads that
        bracket its crossings (:meth:`_beyond`), until none is wanted or the budget stops it."""
        todo = list(loads)
        while todo and not self._out:
            load = todo.pop(0)
            if (
                self.record["search"]["spent_s"] + self.settings.rounds * self._run_seconds(load)
                > self.settings.budget_s
            ):
                self._out = True
                break
            with task(self.feedback, f"load {load:g} {self.knob.unit} (ladder, {arm})", self.settings.rounds) as bar:
                for index in range(self.settings.rounds):
                    runs = self._ladder.setdefault(load, {a: [] for a in ARMS})[arm]
                    runs.append(self._run(load, 0, f"load {load:g}, ladder run {index + 1}: {arm}"))
                    bar.advance()
            if not todo and step and (beyond := self._beyond(arm, planner)) is not None:
                todo.append(beyond)

    def _beyond(self, arm: str, planner: KneePlanner) -> float | None:
        """The next load bracketing ``arm``'s crossings of every tier on its ladder loads, its runs read as an arm
        against itself (:func:`tuner.capacity.planner.bracket_load`; None: bracketed within ``span``)."""
        levels = [self._measured(load, {a: runs[arm] for a in ARMS}).level
                  for load, runs in sorted(self._ladder.items()) if runs[arm]]  # fmt: skip
        crossings = [tier_crossings(levels, target)[0] for target in planner.targets]
        return bracket_load(planner, crossings, [level.load for level in levels])

    def _take(self, planner: KneePlanner, loads: list[float]) -> None:
        """The ladder's levels at ``loads`` into the planner (pass 0) and the record."""
        measured = [self._measured(load, self._ladder[load]) for load in loads]
        planner.take([m.level for m in measured])
        for each in measured:
            self._walls[each.level.load] = typical_wall(each.runs)
            self._keep(planner, each)

    def _unpaired(self) -> list[UnpairedRuns]:
        """The ladder's runs at loads that never became a level (the other arm's engine did not run its rounds
        there): measured, so kept, though no estimate has them."""
        levels = {level["load"] for level in self.record["levels"]}
        return [
            {"load": load, "arm": arm, "runs": [figures for _, figures in runs[arm]]}
            for load, runs in sorted(self._ladder.items())
            if load not in levels
            for arm in ARMS
            if runs[arm]
        ]

    def _grid_pass(self, planner: KneePlanner, probe: Probe) -> bool:
        """The grid pass ``probe`` begins: both engines started anew, each over every grid load (module docstring),
        the levels recorded in the order the planner asks for them; False, without running it, where the budget
        cannot hold it."""
        tag, loads = probe.passes[0], sorted(planner.grid or ())
        cost = self._pass_cost(loads)
        if self.record["search"]["spent_s"] + cost > self.settings.budget_s:
            self._out = True
            return False
        self.feedback.note(f"pass {tag}: {len(loads)} loads, both engines started anew (~{cost:.0f} engine-s)")
        measured: dict[float, _Runs] = {load: {a: [] for a in ARMS} for load in loads}
        for arm, ascending in zip(ARMS if tag % 2 else ARMS[::-1], (True, False), strict=True):
            self._engine(arm, tag)
            for load in loads if ascending else reversed(loads):
                measured[load][arm].append(self._run(load, tag, f"load {load:g}, pass {tag}: {arm}"))
        while (asked := planner.next_probe()) is not None and asked.passes == (tag,):
            level = self._measured(asked.load, measured[asked.load], tag)
            planner.record(level.level, cost=0.0)
            self._walls[level.level.load] = typical_wall(level.runs)
            self._keep(planner, level)
        return True

    def _pass_cost(self, loads: list[float]) -> float:
        """A grid pass's expected engine-s: two starts and stops at the mean so far, a typical run per arm a load."""
        starts = self.record["search"]["restarts"] or []
        restart = statistics.fmean(restart_seconds(r) for r in starts)
        return 2 * restart + sum(2 * self._run_seconds(load) for load in loads)

    def _say_passes(self, planner: KneePlanner) -> None:
        """What the rest of the budget buys once the ladder is done: grid passes at their expected cost."""
        loads = sorted(planner.grid or ())
        if not loads:
            return
        cost, left = self._pass_cost(loads), self.settings.budget_s - self.record["search"]["spent_s"]
        line = (
            f"capacity budget {self.settings.budget_s:g} engine-s (restart pairs, ladder done): {max(left, 0):.0f} s "
            f"left buy ~{max(0, math.floor(left / cost))} grid passes of {len(loads)} loads from {loads[0]:.4g} to "
            f"{loads[-1]:.4g}, ~{cost:.0f} engine-s each with both engines' starts"
        )
        self.record["search"]["forecast"].append(line)
        self.feedback.note(line)

    def _run(self, load: float, tag: int, label: str) -> tuple[list[list[bool]], dict[str, float]]:
        """One run of the running engine's arm at ``load`` on pass ``tag``'s requests, its time spent."""
        began = time.perf_counter()
        flags, run = arm_run(self._bench_at(load, tag), self.slo, label, self.feedback)
        self.record["search"]["spent_s"] += time.perf_counter() - began
        return flags, run

    def _measured(self, load: float, runs: _Runs, tag: int = 0) -> MeasuredLevel:
        """The level of ``runs`` at ``load`` (every run in pass ``tag``), its engine time already counted."""
        met = {arm: [flags for flags, _ in runs[arm]] for arm in ARMS}
        figures = {arm: [figure for _, figure in runs[arm]] for arm in ARMS}
        passes = (tag,) * len(runs["reference"])
        return level_of(load, met, figures, passes, self.slo, self._bench_at(load, tag), 0.0)

    def _engine(self, arm: str, tag: int = 0) -> None:
        """Stop the running engine and start ``arm``'s (for pass ``tag``), both timed into the budget and the
        record."""
        self._close()
        start, experiment = self.engines[arm], self.experiment
        with task(self.feedback, f"starting the {arm}'s engine (pass {tag})", None):
            self.bench = Workbench.start(
                experiment,
                encode_spec(start.strategies, sorted(start.strategies)),
                {**experiment.engine, **start.engine},
                {**experiment.env, **start.env},
            )
        self._benches.clear()
        started = self.bench.session.start_s
        (self.record["search"]["restarts"] or []).append({"arm": arm, "tag": tag, "start_s": started, "stop_s": None})
        self.record["search"]["spent_s"] += started
        self._arm = arm

    def _close(self) -> None:
        """Stop the running engine, its stop timed into the budget and its start's record."""
        self.bench.session.close()
        restarts = self.record["search"]["restarts"] or []
        if restarts and restarts[-1]["stop_s"] is None:
            restarts[-1]["stop_s"] = stop = self.bench.session.stop_s or 0.0
            self.record["search"]["spent_s"] += stop
