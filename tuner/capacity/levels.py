"""One load level of ``tuner capacity``: rounds of both arms on the running engine, and each request met or missed.

A round runs the reference arm and the configuration once each at the level's load, switched in place on the same
engine, in mirrored order across rounds (AB BA AB ...; the first arm drawn from the level's seed), so that drift
and carry-over hit both arms alike. Both arms replay the same requests at the same send times, so each request is
met or missed in both: the paired per-request comparison of :mod:`tuner.stats.attainment`. Each round belongs to a
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
from tuner.config import Contention
from tuner.feedback import Feedback, Task
from tuner.measure import Workbench
from tuner.metrics import cpu_sample, run_load
from tuner.plugin.protocol import StrategySet
from tuner.records import ARMS
from tuner.stats import LevelResult, mirrored_order


@dataclass
class MeasuredLevel:
    """Rounds measured at one load: the paired per-request outcomes, and each run's attainment, wall time, longest
    pause, the host's load while it ran (:class:`tuner.metrics.host_load.RunLoad`) and its position in its round;
    ``set_aside``: the runs of rounds run again after other work took the host."""

    level: LevelResult
    offered_rps: float
    requests: int
    seconds: float  # engine time spent on these rounds (both arms, switches and rounds run again included)
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
    contention: Contention | None = None,
) -> MeasuredLevel:
    """One round at ``load`` per pass in ``passes`` (``bench_for(pass)``: the running engine with that pass's
    requests at this load's send times), continuing the mirrored order after the ``done`` rounds there before; a
    round in which ``contention`` says other work took one arm's run is run again, once."""
    met: dict[str, list[list[bool]]] = {arm: [] for arm in ARMS}
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    set_aside: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    started = time.perf_counter()
    order = mirrored_order(done + len(passes), seed=seed)[done:]
    for index, (tag, configuration_first) in enumerate(zip(passes, order, strict=True)):
        at = bench_for(tag)
        label = f"load {load:g}, round {done + index + 1}"
        outcome = _round(at, arms, configuration_first, label, feedback, progress)
        if contention is not None and (arm := contended(contention, {a: run for a, (_, run) in outcome.items()})):
            taken = outcome[arm][1]["other_cpus"]
            feedback.note(f"{label}: other work used {taken:.2f} CPUs during the {arm}'s run; the round runs again")
            for a, (_, run) in outcome.items():
                set_aside[a].append(run)
            outcome = _round(at, arms, configuration_first, f"{label} again", feedback, progress)
        for a, (flags, run) in outcome.items():
            met[a].append(flags)
            runs[a].append(run)
    level = LevelResult.measured(load, met["reference"], met["configuration"], passes)
    seconds = time.perf_counter() - started
    return MeasuredLevel(level, offered_rps(at.offsets), len(at.requests), seconds, runs, set_aside)


def _round(
    at: Workbench,
    arms: dict[str, StrategySet],
    configuration_first: bool,
    label: str,
    feedback: Feedback,
    progress: Task,
) -> dict[str, tuple[list[bool], dict[str, float]]]:
    """One run of each arm on ``at``'s requests, in the round's order: per arm, each request met or not, and the
    run's figures."""
    outcome = {}
    for position, arm in enumerate(reversed(ARMS) if configuration_first else ARMS):
        at.switch(arms[arm])
        before = cpu_sample()
        rep = at.repetition(feedback, label=f"{label}: {arm}")
        host = run_load(before, cpu_sample())
        metrics = rep["metrics"]
        outcome[arm] = (
            rep["met"],
            {
                "attainment": statistics.fmean(rep["met"]),
                "wall_s": metrics["wall_s"],
                "host_busy": host["host_busy"],
                "tree_cpus": host["tree_cpus"],
                "other_cpus": host["other_cpus"],
                "position": float(position),  # 0: the round's first run, 1: its second
                "pause_s": metrics.get("longest_pause_ms", 0.0) / 1e3,
            },
        )
        progress.advance()
    return outcome
