"""How busy the host was while a run measured, and whether that can bias a comparison of arms.

A served comparison on a small host runs four busy processes (the client, the API server, EngineCore and a worker)
on few CPUs. Where every CPU is busy, a request's time includes waiting for one, and an arm whose runs fell in
busier spells looks slower than it is. Each run is sampled before and after: the share of the host's CPU time in
use (all processes, ``psutil.cpu_times``) and the CPU seconds of the tool's own process tree (itself, the server
and the engine: what the comparison runs). A run is *saturated* when at least :data:`SATURATED` of the host's CPU
time was in use. Whether saturation fell more on one arm's runs is Fisher's exact test on the arms' saturated and
other runs: a difference there is the bias a paired comparison cannot remove.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

import psutil
from scipy.stats import fisher_exact

SATURATED = 0.95
"""A run whose host had at least this share of its CPU time in use is saturated: its processes queued for CPUs."""
_CPU_TIME_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
BIAS_ALPHA = 0.05
"""Saturation is said to differ between the arms when Fisher's exact test gives p below this."""


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU seconds at one instant: the host's busy and total, and the tool's process tree's."""

    wall: float
    busy_s: float
    total_s: float
    tree_s: float


class RunLoad(TypedDict):
    """A run's host load: the share of the host's CPU time in use, and the tool's processes' CPUs in use."""

    host_busy: float
    tree_cpus: float  # CPU seconds of the tool, its server and its engine per wall second
    other_cpus: float  # CPU seconds of every other process on the host per wall second (other work)


class HostRecord(TypedDict):
    """The host load over a comparison's runs, per arm."""

    cpus: int  # logical CPUs this process may run on
    threshold: float  # SATURATED
    runs: dict[str, int]  # per arm: runs with a host load on record
    saturated: dict[str, int]  # per arm: of those, runs at or above the threshold
    busy_median: float  # the median host_busy over every run
    tree_cpus_median: float  # the median tree_cpus over every run: how much of the host the tool's processes used
    bias_p: float | None  # Fisher's exact test of the arms' saturated shares (None: no run saturated)
    note: str | None  # the warning the summary carries, None where no run was saturated


def cpu_sample() -> CpuSample:
    """The host's and the tool's cumulative CPU seconds now (the tool: this process and its live descendants)."""
    host = psutil.cpu_times()
    idle = host.idle + getattr(host, "iowait", 0.0)
    total = sum(getattr(host, name, 0.0) for name in _CPU_TIME_FIELDS)  # guest time is counted in user already
    own = psutil.Process()
    times = own.cpu_times()  # with the children it has waited for: a process that ends keeps counting
    tree = times.user + times.system + getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
    for child in own.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            tree += sum(child.cpu_times()[:2])
    return CpuSample(time.perf_counter(), total - idle, total, tree)


def run_load(before: CpuSample, after: CpuSample) -> RunLoad:
    """The load between two samples (a grandchild that ended in between takes its CPU time with it: never below
    0)."""
    total = after.total_s - before.total_s
    wall = after.wall - before.wall
    busy = (after.busy_s - before.busy_s) / total if total > 0 else 0.0
    tree = max(after.tree_s - before.tree_s, 0.0)
    other = max(after.busy_s - before.busy_s - tree, 0.0)
    return {
        "host_busy": min(max(busy, 0.0), 1.0),  # the counters tick in 10 ms: a short run's share can overshoot
        "tree_cpus": tree / wall if wall > 0 else 0.0,
        "other_cpus": other / wall if wall > 0 else 0.0,
    }


def available_cpus() -> int:
    """The logical CPUs this process may run on (its affinity where the platform has one)."""
    with contextlib.suppress(AttributeError):
        return len(psutil.Process().cpu_affinity() or [])
    return psutil.cpu_count() or 1


def host_record(loads: Mapping[str, Sequence[Mapping[str, float]]], arms: Sequence[str]) -> HostRecord:
    """The host load over ``loads`` (per arm, each run's :class:`RunLoad`; runs without one are left out), and a
    note when any run was saturated: how many per arm, and whether saturation fell on one arm's runs more."""
    busy = {arm: [run["host_busy"] for run in loads.get(arm, ()) if "host_busy" in run] for arm in arms}
    saturated = {arm: sum(b >= SATURATED for b in values) for arm, values in busy.items()}
    runs = {arm: len(values) for arm, values in busy.items()}
    every = sorted(b for values in busy.values() for b in values)
    tree = sorted(run["tree_cpus"] for arm in arms for run in loads.get(arm, ()) if "tree_cpus" in run)
    cpus = available_cpus()
    record: HostRecord = {
        "cpus": cpus,
        "threshold": SATURATED,
        "runs": runs,
        "saturated": saturated,
        "busy_median": every[len(every) // 2] if every else float("nan"),
        "tree_cpus_median": tree[len(tree) // 2] if tree else float("nan"),
        "bias_p": None,
        "note": None,
    }
    if not sum(saturated.values()):
        return record
    a, b = arms
    table = [[saturated[a], runs[a] - saturated[a]], [saturated[b], runs[b] - saturated[b]]]
    p = float(fisher_exact(table).pvalue)
    record["bias_p"] = p
    shares = ", ".join(f"{arm} {saturated[arm]} of {runs[arm]}" for arm in arms)
    note = (
        f"The host's {cpus} CPUs were at least {SATURATED:.0%} busy in {sum(saturated.values())} of "
        f"{sum(runs.values())} runs ({shares}; the tool, its server and its engine used "
        f"{record['tree_cpus_median']:.1f} CPUs, vLLM's processes spinning while they wait included): there they "
        "shared the CPUs, and latencies can include waiting for one."
    )
    if p < BIAS_ALPHA:
        busier = max(arms, key=lambda arm: saturated[arm] / max(runs[arm], 1))
        note += (
            f" Saturation fell on the {busier}'s runs more (Fisher p = {p:.3f}): the comparison may be biased "
            "against it; measure on a host with more CPUs than busy processes."
        )
    record["note"] = note
    return record
