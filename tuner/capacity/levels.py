"""One load level of ``tuner capacity``: rounds of both arms on the running engine, and each request met or missed.

A round runs the reference arm and the configuration once each at the level's load, switched in place on the same
engine, in mirrored order across rounds (AB BA AB ...; the first arm drawn from the level's seed), so that drift
and carry-over hit both arms alike. Both arms replay the same requests at the same send times, so each request is
met or missed in both: the paired per-request comparison of :mod:`tuner.stats.attainment`, on every check of the SLO
(:class:`tuner.capacity.slo.CapacitySlo`) and on each tier's checks together. Each round belongs to a
pass of the search (:class:`tuner.capacity.search.KneeSearch`), and the caller gives the requests of each pass
(``bench_for``): a synthetic workload is seeded by its pass, so every load of a pass replays the same requests, as
the arms of a round do. A round in which other work on the host took CPUs from one arm's run is set aside and run
again, once (:mod:`tuner.capacity.contention`).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.capacity.contention import contended
from tuner.capacity.load import offered_rps
from tuner.capacity.oversaturation import oversaturated
from tuner.capacity.slo import CapacitySlo
from tuner.config import Contention
from tuner.feedback import Feedback, Task
from tuner.measure import Workbench
from tuner.metrics import cpu_sample, run_load
from tuner.plugin.protocol import StrategySet
from tuner.records import ARMS
from tuner.stats import LevelResult, PairedCounts, mirrored_order

_Outcome = dict[str, tuple[list[list[bool]], dict[str, float]]]
"""A round's per arm: each check's flags per request, and the run's figures."""


@dataclass
class MeasuredLevel:
    """Rounds measured at one load: the paired per-request outcomes of every check (``level``) and of each tier's
    checks together (``tiers``), and each run's attainment (of the first tier), wall time, longest pause, the host's
    load while it ran (:class:`tuner.metrics.host_load.RunLoad`) and its position in its round; ``set_aside``: the
    runs of rounds run again after other work took the host."""

    level: LevelResult
    tiers: dict[str, PairedCounts]
    offered_rps: float
    requests: int
    seconds: float  # engine time spent on these rounds (both arms, switches and rounds run again included)
    skipped: int = 0  # rounds asked for and not run: both arms missed every tier whatever they would have shown
    runs: dict[str, list[dict[str, float]]] = field(default_factory=lambda: {arm: [] for arm in ARMS})
    set_aside: dict[str, list[dict[str, float]]] = field(default_factory=lambda: {arm: [] for arm in ARMS})


def measure_level(
    bench_for: Callable[[int], Workbench],
    load: float,
    arms: dict[str, StrategySet],
    *,
    passes: tuple[int, ...],
    done: int,
    seed: int,
    feedback: Feedback,
    progress: Task,
    slo: CapacitySlo,
    contention: Contention | None = None,
) -> MeasuredLevel:
    """One round at ``load`` per pass in ``passes`` (``bench_for(pass)``: the running engine with that pass's
    requests at this load's send times), each request scored on every check of ``slo``, continuing the mirrored
    order after the ``done`` rounds there before; a round in which ``contention`` says other work took one arm's run
    is run again, once; the rounds left are not run once both arms miss every tier there whatever they would show
    (:mod:`tuner.capacity.oversaturation`)."""
    met: dict[str, list[list[list[bool]]]] = {arm: [] for arm in ARMS}  # per arm, round, check: each request
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    set_aside: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    started, asked = time.perf_counter(), len(passes)
    order = mirrored_order(done + len(passes), seed=seed)[done:]
    for index, (tag, configuration_first) in enumerate(zip(passes, order, strict=True)):
        at = bench_for(tag)
        label = f"load {load:g}, round {done + index + 1}"
        outcome = _round(at, arms, slo, configuration_first, label, feedback, progress)
        if contention is not None and (arm := contended(contention, {a: run for a, (_, run) in outcome.items()})):
            taken = outcome[arm][1]["other_cpus"]
            feedback.note(f"{label}: other work used {taken:.2f} CPUs during the {arm}'s run; the round runs again")
            for a, (_, run) in outcome.items():
                set_aside[a].append(run)
            outcome = _round(at, arms, slo, configuration_first, f"{label} again", feedback, progress)
        for a, (flags, run) in outcome.items():
            met[a].append(flags)
            runs[a].append(run)
        if index + 1 < len(passes) and oversaturated(slo, met, len(passes)):
            passes = passes[: index + 1]
            break
    return level_of(load, met, runs, passes, slo, at, time.perf_counter() - started, asked - len(passes), set_aside)


def level_of(
    load: float,
    met: dict[str, list[list[list[bool]]]],
    runs: dict[str, list[dict[str, float]]],
    passes: tuple[int, ...],
    slo: CapacitySlo,
    at: Workbench,
    seconds: float,
    skipped: int = 0,
    set_aside: dict[str, list[dict[str, float]]] | None = None,
) -> MeasuredLevel:
    """The level of these rounds at ``load`` (``met``: per arm, round and check, each request's flag; ``runs``: per
    arm, each run's figures; round i in pass ``passes[i]``), on ``at``'s requests, ``seconds`` of engine time."""
    per_check = {arm: [[each[check] for each in met[arm]] for check in range(len(slo.checks))] for arm in ARMS}
    level = LevelResult.of_checks(load, per_check["reference"], per_check["configuration"], passes)
    tiers = {
        name: PairedCounts.from_rounds(*([slo.joint(name, flags) for flags in met[arm]] for arm in ARMS))
        for name in slo.tiers
    }
    aside = set_aside if set_aside is not None else {arm: [] for arm in ARMS}
    return MeasuredLevel(
        level, tiers, offered_rps(at.offsets), len(at.requests), seconds, skipped, runs=runs, set_aside=aside
    )


def _round(
    at: Workbench,
    arms: dict[str, StrategySet],
    slo: CapacitySlo,
    configuration_first: bool,
    label: str,
    feedback: Feedback,
    progress: Task,
) -> _Outcome:
    """One run of each arm on ``at``'s requests, in the round's order: per arm, each check's flags per request, and
    the run's figures (its attainment: the share of requests that passed every check of the first tier)."""
    outcome: _Outcome = {}
    for position, arm in enumerate(reversed(ARMS) if configuration_first else ARMS):
        at.switch(arms[arm])
        outcome[arm] = arm_run(at, slo, f"{label}: {arm}", feedback, position)
        progress.advance()
    return outcome


def arm_run(
    at: Workbench, slo: CapacitySlo, label: str, feedback: Feedback, position: int = 0
) -> tuple[list[list[bool]], dict[str, float]]:
    """One run of the arm in force on ``at``: each check's flags per request, and the run's figures (its attainment:
    the share of requests that passed every check of the first tier; ``position``: its place in its round)."""
    before = cpu_sample()
    rep = at.repetition(feedback, label=label)
    host = run_load(before, cpu_sample())
    metrics = rep["metrics"]
    flags = slo.flags(rep)
    return flags, {
        "attainment": statistics.fmean(slo.joint(next(iter(slo.tiers)), flags)),
        "wall_s": metrics["wall_s"],
        "host_busy": host["host_busy"],
        "tree_cpus": host["tree_cpus"],
        "other_cpus": host["other_cpus"],
        **({} if host["tool_wait"] is None else {"tool_wait": host["tool_wait"]}),  # Linux only
        "tool_gc_s": host["tool_gc_s"],
        "position": float(position),  # 0: the round's first run, 1: its second
        "pause_s": metrics.get("longest_pause_ms", 0.0) / 1e3,
    }
