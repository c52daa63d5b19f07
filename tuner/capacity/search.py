"""The knee search of ``tuner capacity`` on a running engine (:class:`KneeSearch`): ask its planner
(:class:`tuner.capacity.planner.KneePlanner`) where to measure, measure both arms there
(:mod:`tuner.capacity.levels`), merge the level into the record and save it, until the search stops; and say what
the budget can resolve before the first run and once the knee is bracketed.
"""

from __future__ import annotations

import functools
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from tuner.capacity.forecast import forecast
from tuner.capacity.levels import MeasuredLevel, measure_level
from tuner.capacity.load import at_load, unloadable, unloadable_words
from tuner.capacity.planner import KneePlanner
from tuner.capacity.slo import CapacitySlo
from tuner.config import CapacitySearch, Experiment, LoadKnob
from tuner.feedback import Feedback, task
from tuner.measure import PreparedTraffic, Workbench, prepare
from tuner.plugin.protocol import StrategySet
from tuner.records import ARMS, CapacityRecord, LevelTierRecord, save_capacity
from tuner.stats import LEAST_ROUNDS, LevelResult, PairedCounts, attainment_difference


def typical_wall(runs: dict[str, list[dict[str, float]]]) -> float:
    """What a run at a load typically takes: the median wall seconds of its ``runs``, both arms. The
    longest, used before, made one stalled run (1.82 s where runs took 0.45) forecast a step down as 4x dearer than
    it was, and stop searches on a budget they had not spent."""
    return statistics.median(r["wall_s"] for arm in ARMS for r in runs[arm])


@dataclass
class KneeSearch:
    """One capacity search: the engine, what it compares (``arms``: the reference's and the configuration's
    strategies) against which SLO and its tiers, the record it fills and where it is saved after every level."""

    bench: Workbench
    experiment: Experiment
    knob: LoadKnob
    settings: CapacitySearch
    slo: CapacitySlo
    arms: dict[str, StrategySet]
    record: CapacityRecord
    path: Path
    feedback: Feedback
    _walls: dict[float, float] = field(default_factory=dict)  # load -> a typical run's seconds there (typical_wall)
    _benches: dict[tuple[float, int], Workbench] = field(default_factory=dict)
    _prepared: dict[int, PreparedTraffic] = field(default_factory=dict)  # per workload seed: read and built once
    _tiers: dict[tuple[float, str], PairedCounts] = field(default_factory=dict)  # (load, tier): its checks together

    def run(self, start: float, span_s: float) -> None:
        """Search from ``start``; ``span_s``, the start load's send span, is the first guess of a run's length
        (measured from then on)."""
        self._walls[start] = span_s + 1.0
        settings = self.settings
        search = self._planner(start, settings.budget_s)
        self._say_forecast(search, bracketed=False)
        seeds: dict[float, int] = {}
        while (probe := search.next_probe()) is not None:
            seed = seeds.setdefault(probe.load, self.experiment.workload.seed + 7919 * len(seeds))
            label = f"load {probe.load:g} {self.knob.unit} ({probe.phase})"
            with task(self.feedback, label, 2 * probe.rounds) as progress:
                measured = measure_level(
                    functools.partial(self._bench_at, probe.load),
                    probe.load,
                    self.arms,
                    passes=probe.passes,
                    done=search.rounds_at(probe.load),
                    seed=seed,
                    feedback=self.feedback,
                    progress=progress,
                    slo=self.slo,
                    contention=settings.contention,
                )
            bracketing = search.phase == "bracket"
            search.record(measured.level, cost=measured.seconds)
            self._walls[probe.load] = typical_wall(measured.runs)
            if measured.skipped:
                self._skipped(measured)
            if probe.load == max(level.load for level in search.levels):  # the most loaded run reads it best
                self._cap(search, measured)
            self.record["search"]["spent_s"] = search.spent
            self._keep(search, measured)
            if bracketing and search.phase == "grid":
                self._say_forecast(search, bracketed=True)
        self.record["search"]["stop"] = search.stop_reason

    def _planner(self, start: float, budget: float) -> KneePlanner:
        """The planner of this search's settings and tiers, from ``start``, with ``budget`` engine-s for runs."""
        settings = self.settings
        first, *others = self.slo.tiers.values()
        return KneePlanner(
            start,
            first,
            tiers=tuple(others),
            budget=budget,
            growth=settings.growth,
            rounds=settings.rounds,
            resolution=settings.resolution,
            precision=settings.precision,
            min_load=settings.min_load,
            max_load=settings.max_load,
            integer=self.knob is LoadKnob.CONCURRENCY,
            run_cost=self._run_seconds,
            max_rounds=settings.max_rounds,
        )

    def _keep(self, search: KneePlanner, measured: MeasuredLevel) -> None:
        """A level the planner has: into the record, with every tier's estimate so far, and saved."""
        self._merge_level(search.levels, measured)
        for entry, estimate in zip(self.record["tiers"], search.estimates(), strict=True):
            entry["estimate"] = estimate.to_dict()
        self.record["estimate"] = self.record["tiers"][0]["estimate"]
        save_capacity(self.path, self.record)

    def _merge_level(self, levels: tuple[LevelResult, ...], measured: MeasuredLevel) -> None:
        """The level's entry with these rounds added: each check's and each tier's attainment, and the paired
        difference of each tier's checks together, over every round there; the first tier's also as the level's
        ``attainment`` and ``difference``."""
        level = next(lv for lv in levels if lv.load == measured.level.load)
        record = self.record
        entry = next((lv for lv in record["levels"] if lv["load"] == level.load), None)
        if entry is None:
            entry = {
                "load": level.load,
                "offered_rps": measured.offered_rps,
                "rounds": 0,
                "passes": [],
                "requests": measured.requests,
                "attainment": {},
                "difference": None,
                "checks": [],
                "tiers": {},
                "runs": {arm: [] for arm in ARMS},
                "set_aside": {arm: [] for arm in ARMS},
            }
            record["levels"].append(entry)
            record["levels"].sort(key=lambda lv: lv["load"])
        for arm in ARMS:
            entry["runs"][arm] += measured.runs[arm]
            entry["set_aside"][arm] += measured.set_aside[arm]
        for name, counts in measured.tiers.items():
            known = self._tiers.get((level.load, name))
            self._tiers[level.load, name] = known.merged(counts) if known else counts
        tiers = {name: _paired(self._tiers[level.load, name]) for name in self.slo.tiers}
        first = tiers[next(iter(self.slo.tiers))]
        entry.update(
            {
                "rounds": level.rounds,
                "passes": list(level.passes),
                "attainment": first["attainment"],
                "difference": first["difference"],
                "checks": [_shares(counts) for counts in level.checks],
                "tiers": tiers,
            }
        )

    def _cap(self, search: KneePlanner, measured: MeasuredLevel) -> None:
        """Probe no higher than this level, the highest so far, where raising the knob no longer loads the engine
        more (:func:`tuner.capacity.load.unloadable`): said at once, and kept for the closing sentence."""
        load, rps = measured.level.load, measured.offered_rps
        span = (measured.requests - 1) / rps if math.isfinite(rps) and rps > 0 else 0.0
        known = self.record["search"]["unloadable_from"] is not None
        if known or not unloadable(self.knob, load, span, self._walls[load], measured.requests):
            return
        self.feedback.note(
            f"at {load:.4g} {self.knob.unit}, {unloadable_words(self.knob, measured.requests)}: a higher load would "
            "not load the engine more, so the search probes no higher"
        )
        self.record["search"]["unloadable_from"] = load
        search.max_load = min(load, search.max_load or math.inf)

    def _skipped(self, measured: MeasuredLevel) -> None:
        """Say and keep the rounds not run at an over-saturated load, and the engine time that saved (each round: a
        run of each arm, as long as a typical run there)."""
        load = measured.level.load
        saved = 2 * measured.skipped * self._walls[load]
        self.feedback.note(
            f"load {load:g}: both arms miss every SLO tier there whatever more rounds would show; its other "
            f"{measured.skipped} round(s) are not run (~{saved:.0f} engine-s saved)"
        )
        skipped = self.record["search"]["oversaturated"]
        skipped["loads"] += 1
        skipped["rounds"] += measured.skipped
        skipped["saved_s"] += saved

    def prepared(self, seed: int, traffic: PreparedTraffic) -> None:
        """Use ``traffic`` (already read and built) for the workload of ``seed`` instead of reading it again."""
        self._prepared[seed] = traffic

    def _bench_at(self, load: float, tag: int) -> Workbench:
        """The engine with pass ``tag``'s requests at ``load``: a synthetic workload seeded by the pass (every load
        of a pass replays the same requests), a dataset's as they are."""
        workload = self.experiment.workload
        seed = workload.seed + (tag if workload.dataset is None else 0)
        key = (load, seed)
        if key not in self._benches:
            seeded = self.experiment.model_copy(update={"workload": workload.model_copy(update={"seed": seed})})
            if seed not in self._prepared:  # a trace is read and its requests built once, then re-timed per load
                self._prepared[seed] = prepare(seeded, self.bench.session.vocab_size())
            self._benches[key] = Workbench(self.bench.session, at_load(seeded, self.knob, load), self._prepared[seed])
        return self._benches[key]

    def _run_seconds(self, load: float) -> float:
        """What a run at ``load`` is expected to take: the nearest measured load's, scaled by the load for a knob
        that sets the send times (a run lasts about its send span)."""
        nearest = min(self._walls, key=lambda known: abs(math.log(known / load)))
        return self._walls[nearest] * (nearest / load if self.knob is not LoadKnob.CONCURRENCY else 1.0)

    def _say_forecast(self, search: KneePlanner, *, bracketed: bool) -> None:
        """What the budget can resolve: said before the run (the grid guessed around the start, no noise known) and
        once the knee is bracketed (the grid as it is, the noise of the rounds so far)."""
        expected = forecast(search)
        loads = f"{len(expected.grid)} loads from {min(expected.grid):.4g} to {max(expected.grid):.4g}"
        if math.isfinite(expected.precision):
            low, high = (f"{100 * x:.1f}%" if math.isfinite(x) else "unbounded" for x in expected.precision_range)
            words = (
                f"the capacity ratio's 95% CI is expected within +-{100 * expected.precision:.1f}% "
                f"(+-{low} to +-{high} as the noise may stand)"
            )
        else:
            words = "its precision is stated once the rounds so far have a spread"
        when = "knee bracketed" if bracketed else "before the first run, the grid guessed around the start"
        line = (
            f"capacity budget {search.budget:g} engine-s ({when}): {search.budget - search.spent:.0f} s left buy "
            f"~{expected.rounds} rounds at each of {loads}; {words} (asked: +-{100 * search.precision:.1f}%)"
        )
        self.record["search"]["forecast"].append(line)
        self.feedback.note(line)


def _shares(counts: PairedCounts) -> dict[str, float]:
    """Each arm's share of the requests that passed, over the rounds of ``counts``."""
    requests = sum(counts.requests)
    return dict(zip(ARMS, (sum(counts.met_a) / requests, sum(counts.met_b) / requests), strict=True))


def _paired(counts: PairedCounts) -> LevelTierRecord:
    """Each arm's pooled attainment of ``counts``, its attainment per round, and their paired difference (None below
    two rounds)."""
    rounds = {arm: [met / n for met, n in zip(column, counts.requests, strict=True)]
              for arm, column in zip(ARMS, (counts.met_a, counts.met_b), strict=True)}  # fmt: skip
    enough = counts.rounds >= LEAST_ROUNDS
    difference = attainment_difference(counts).to_dict() if enough else None
    return {"attainment": _shares(counts), "rounds": rounds, "difference": difference}
