"""How busy the host was while a run measured, whether the tool's clock waited for a CPU, and whether that can bias a
comparison of arms.

A served comparison on a small host runs four busy processes (the client, the API server, EngineCore and a worker)
on few CPUs. Each run is sampled before and after: the share of the host's CPU time in use (all processes,
``psutil.cpu_times``), the CPU seconds of the tool's own process tree (itself, the server and the engine: what the
comparison runs), how long the tool's own threads waited runnable for a CPU (Linux's schedstat) and how long its
process spent in Python's cyclic collector (a pause of its clock, however many CPUs are free). A run is
*saturated* when at least :data:`SATURATED` of the host's CPU time was in use: vLLM's processes spinning while they
wait keep a small host so without harm. A run's clock *waited* when the tool's threads waited for a CPU for at least
:data:`WAITED` of its wall: the tool reads every latency (the client's clock, served), so those latencies include
the wait, and an arm whose runs waited more looks slower than it is. Whether that fell more on one arm's runs is
Fisher's exact test on the arms' waited and other runs (saturated ones where the wait was not measured): a
difference there is the bias a paired comparison cannot remove.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import psutil
from scipy.stats import fisher_exact

SATURATED = 0.95
"""A run whose host had at least this share of its CPU time in use is saturated: its processes queued for CPUs."""
_CPU_TIME_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
WAITED = 0.10
"""A run in which the tool's threads waited runnable for a CPU for at least this share of its wall (summed over the
threads) has a late clock. On the 2-core host at 100 requests/s, served at vLLM's defaults, the client waited 2.6 s in
a 2.3 s run (median) and two thirds of the runs met their TTFT target for under 80% of requests; with the server 10
steps below it, 10 ms (``benchmarks.engine.served_client_wait``)."""
BIAS_ALPHA = 0.05
"""The arms' waited (or saturated) runs are said to differ when Fisher's exact test gives p below this."""
_SCHEDSTAT = Path("/proc/self/task")


@dataclass(frozen=True)
class CpuSample:
    """Cumulative CPU seconds at one instant: the host's busy and total, and the tool's process tree's."""

    wall: float
    busy_s: float
    total_s: float
    tree_s: float
    waited_s: float | None  # the tool's threads' wait for a CPU so far (None: the platform does not say)
    collected_s: float  # the tool's process's time in Python's cyclic collector so far (since the first sample)


class RunLoad(TypedDict):
    """A run's host load: the share of the host's CPU time in use, the tool's processes' CPUs in use, and how long
    the tool's threads waited for a CPU."""

    host_busy: float
    tree_cpus: float  # CPU seconds of the tool, its server and its engine per wall second
    other_cpus: float  # CPU seconds of every other process on the host per wall second (other work)
    tool_wait: float | None  # seconds the tool's threads waited runnable for a CPU per wall second (None: unknown)
    tool_gc_s: float  # seconds the tool's process spent in Python's cyclic collector (its threads all stopped)


class HostRecord(TypedDict):
    """The host load over a comparison's runs, per arm."""

    cpus: int  # logical CPUs this process may run on
    threshold: float  # SATURATED
    runs: dict[str, int]  # per arm: runs with a host load on record
    saturated: dict[str, int]  # per arm: of those, runs at or above the threshold
    waited: dict[str, int] | None  # per arm: runs whose tool_wait reached WAITED (None: the wait was not measured)
    busy_median: float  # the median host_busy over every run
    tree_cpus_median: float  # the median tree_cpus over every run: how much of the host the tool's processes used
    tool_wait_median: float | None  # the median tool_wait over every run (None: not measured)
    bias_p: float | None  # Fisher's exact test of the arms' waited shares, or saturated ones (None: no such run)
    note: str | None  # the warning the summary carries, None where no run's clock waited (or, unmeasured, saturated)


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
    return CpuSample(time.perf_counter(), total - idle, total, tree, tool_waited_s(), _COLLECTOR.seconds())


class _CollectorTime:
    """The time this process has spent in Python's cyclic collector, from a ``gc.callbacks`` entry added at the first
    reading: a collection stops every thread of the process, so a long one is a pause of the tool's clock (served:
    the client's) and, in-process, of vLLM's front-end, which runs in the tool's process."""

    def __init__(self) -> None:
        self._began = 0.0
        self._total = 0.0
        self._added = False

    def _on_collection(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self._total += time.perf_counter() - self._began

    def seconds(self) -> float:
        if not self._added:
            gc.callbacks.append(self._on_collection)  # a method: tuner.interrupts knows its frames as a hook's
            self._added = True
        return self._total


_COLLECTOR = _CollectorTime()


def tool_waited_s() -> float | None:
    """How long this process's live threads have waited runnable for a CPU, in all (Linux's
    ``/proc/self/task/*/schedstat``; None where no thread's can be read, as on kernels without schedstats)."""
    if not _SCHEDSTAT.is_dir():
        return None
    waited, read = 0, False
    for task in _SCHEDSTAT.iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):  # a thread that ended meanwhile, or no schedstat
            waited += int((task / "schedstat").read_text().split()[1])
            read = True
    return waited / 1e9 if read else None


def run_load(before: CpuSample, after: CpuSample) -> RunLoad:
    """The load between two samples (a grandchild that ended in between takes its CPU time with it: never below
    0)."""
    total = after.total_s - before.total_s
    wall = after.wall - before.wall
    busy = (after.busy_s - before.busy_s) / total if total > 0 else 0.0
    tree = max(after.tree_s - before.tree_s, 0.0)
    other = max(after.busy_s - before.busy_s - tree, 0.0)
    waited = None
    if before.waited_s is not None and after.waited_s is not None and wall > 0:
        waited = max(after.waited_s - before.waited_s, 0.0) / wall  # a thread that ended takes its wait with it
    return {
        "host_busy": min(max(busy, 0.0), 1.0),  # the counters tick in 10 ms: a short run's share can overshoot
        "tree_cpus": tree / wall if wall > 0 else 0.0,
        "other_cpus": other / wall if wall > 0 else 0.0,
        "tool_wait": waited,
        "tool_gc_s": max(after.collected_s - before.collected_s, 0.0),
    }


def available_cpus() -> int:
    """The logical CPUs this process may run on (its affinity where the platform has one)."""
    with contextlib.suppress(AttributeError):
        return len(psutil.Process().cpu_affinity() or [])
    return psutil.cpu_count() or 1


def host_record(loads: Mapping[str, Sequence[Mapping[str, float | None]]], arms: Sequence[str]) -> HostRecord:
    """The host load over ``loads`` (per arm, each run's :class:`RunLoad`; runs without one are left out), and a
    note when any run's clock waited (where the wait was not measured: when any run was saturated): how many per
    arm, and whether that fell on one arm's runs more."""
    sampled = {arm: [run for run in loads.get(arm, ()) if run.get("host_busy") is not None] for arm in arms}
    saturated = {arm: sum(float(run["host_busy"] or 0.0) >= SATURATED for run in runs) for arm, runs in sampled.items()}
    runs = {arm: len(values) for arm, values in sampled.items()}
    waits = {arm: [w for run in values if (w := run.get("tool_wait")) is not None] for arm, values in sampled.items()}
    measured = all(len(waits[arm]) == runs[arm] for arm in arms) and sum(runs.values()) > 0
    waited = {arm: sum(w >= WAITED for w in values) for arm, values in waits.items()} if measured else None
    cpus = available_cpus()
    record: HostRecord = {
        "cpus": cpus,
        "threshold": SATURATED,
        "runs": runs,
        "saturated": saturated,
        "waited": waited,
        "busy_median": _median([float(run["host_busy"] or 0.0) for values in sampled.values() for run in values]),
        "tree_cpus_median": _median([float(r["tree_cpus"] or 0.0) for v in sampled.values() for r in v]),
        "tool_wait_median": _median([w for values in waits.values() for w in values]) if measured else None,
        "bias_p": None,
        "note": None,
    }
    flagged = waited if waited is not None else saturated
    if not sum(flagged.values()):
        return record
    a, b = arms
    p = float(fisher_exact([[flagged[a], runs[a] - flagged[a]], [flagged[b], runs[b] - flagged[b]]]).pvalue)
    record["bias_p"] = p
    shares = ", ".join(f"{arm} {flagged[arm]} of {runs[arm]}" for arm in arms)
    tree = f"the tool, its server and its engine used {record['tree_cpus_median']:.1f} CPUs"
    if waited is not None:
        note = (
            f"The tool's clock waited for a CPU for at least {WAITED:.0%} of the run in {sum(waited.values())} of "
            f"{sum(runs.values())} runs ({shares}; the host's {cpus} CPUs were at least {SATURATED:.0%} busy in "
            f"{sum(saturated.values())}, {tree}): those runs' latencies include that wait."
        )
    else:
        note = (
            f"The host's {cpus} CPUs were at least {SATURATED:.0%} busy in {sum(saturated.values())} of "
            f"{sum(runs.values())} runs ({shares}; {tree}, vLLM's processes spinning while they wait included): "
            "there they shared the CPUs, and latencies can include waiting for one."
        )
    if p < BIAS_ALPHA:
        worse = max(arms, key=lambda arm: flagged[arm] / max(runs[arm], 1))
        note += (
            f" That fell on the {worse}'s runs more (Fisher p = {p:.3f}): the comparison may be biased against it; "
            "measure on a host with more CPUs than busy processes."
        )
    record["note"] = note
    return record


def _median(values: list[float]) -> float:
    """The median of ``values`` (its upper middle; nan when empty)."""
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")
