"""One load level of ``tuner capacity``: rounds of both arms on the running engine, and each request met or missed.

A round runs the reference arm and the configuration once each at the level's load, switched in place on the same
engine, in mirrored order across rounds (AB BA AB ...; the first arm drawn from the level's seed), so that drift
and carry-over hit both arms alike. Both arms replay the same requests at the same send times, so each request is
met or missed in both: the paired per-request comparison of :mod:`tuner.stats.attainment`. Each round belongs to a
pass of the search (:class:`tuner.capacity.search.KneeSearch`), and the caller gives the requests of each pass
(``bench_for``): a synthetic workload is seeded by its pass, so every load of a pass replays the same requests, as
the arms of a round do.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.capacity.load import offered_rps
from tuner.feedback import Feedback, Task
from tuner.measure import Workbench
from tuner.metrics import cpu_sample, run_load
from tuner.plugin.protocol import StrategySet
from tuner.records import ARMS
from tuner.stats import LevelResult, mirrored_order


@dataclass
class MeasuredLevel:
    """Rounds measured at one load: the paired per-request outcomes, and each run's attainment, wall time, the
    host's load while it ran (:class:`tuner.metrics.host_load.RunLoad`) and its position in its round."""

    level: LevelResult
    offered_rps: float
    requests: int
    seconds: float  # engine time spent on these rounds (both arms, switches included)
    runs: dict[str, list[dict[str, float]]] = field(default_factory=lambda: {arm: [] for arm in ARMS})


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
) -> MeasuredLevel:
    """One round at ``load`` per pass in ``passes`` (``bench_for(pass)``: the running engine with that pass's
    requests at this load's send times), continuing the mirrored order after the ``done`` rounds there before."""
    met: dict[str, list[list[bool]]] = {arm: [] for arm in ARMS}
    runs: dict[str, list[dict[str, float]]] = {arm: [] for arm in ARMS}
    started = time.perf_counter()
    order = mirrored_order(done + len(passes), seed=seed)[done:]
    for index, (tag, configuration_first) in enumerate(zip(passes, order, strict=True)):
        at = bench_for(tag)
        for position, arm in enumerate(reversed(ARMS) if configuration_first else ARMS):
            at.switch(arms[arm])
            before = cpu_sample()
            rep = at.repetition(feedback, label=f"load {load:g}, round {done + index + 1}: {arm}")
            host = run_load(before, cpu_sample())
            met[arm].append(rep["met"])
            runs[arm].append(
                {
                    "attainment": statistics.fmean(rep["met"]),
                    "wall_s": rep["metrics"]["wall_s"],
                    "host_busy": host["host_busy"],
                    "tree_cpus": host["tree_cpus"],
                    "position": float(position),  # 0: the round's first run, 1: its second
                }
            )
            progress.advance()
    level = LevelResult.measured(load, met["reference"], met["configuration"], passes)
    return MeasuredLevel(level, offered_rps(at.offsets), len(at.requests), time.perf_counter() - started, runs)
