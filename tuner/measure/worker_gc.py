"""The engine processes' GC pauses on the critical path, and a worker's placed inside the engine steps they delayed.

Under the ``mp`` executor (every worker on the CPU engine, tensor or pipeline parallel on a GPU) a worker collects
in its own process, and EngineCore's step waits for it: the pause is in the step's wall time but not in EngineCore's
own GC clock. Each process's GC probe keeps its pauses' intervals on ``time.monotonic`` (one clock for every process
of the host) and EngineCore each compared step's start, so a critical worker pause counts in a step for the time
the two overlap. Pauses of workers running side by side count once (their union): the step waits for the slowest.
A pause hidden at a wait point (:mod:`tuner.plugin.gc_probe`) delayed nothing and counts nowhere.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from tuner.plugin.protocol import HIDDEN_TAG, BlockRecord, ProcessReport, tag_generation


class GcPause(NamedTuple):
    """One collection in an engine process: its interval on ``time.monotonic``, generation, process and whether it
    was hidden at a wait point (off the critical path)."""

    start: float
    end: float
    generation: int
    pid: int
    hidden: bool


class ArmPacing(NamedTuple):
    """What paced one engine process's collections in a step comparison: each arm's thresholds there, and its net
    GC-tracked allocations and batches while the arm was in force."""

    engine_core: bool
    thresholds: dict[str, list[int]]
    allocations: dict[str, list[int]]


def arm_pacing(reports: list[ProcessReport]) -> dict[int, ArmPacing]:
    """Per engine process (by pid), what paced its collections under each arm."""
    return {
        r["pid"]: ArmPacing("engine_core" in r["roles"], r.get("arm_thresholds") or {}, r.get("arm_allocations") or {})
        for r in reports
        if is_engine_process(r)
    }


def is_engine_process(report: ProcessReport) -> bool:
    """EngineCore's process or a worker's (not the front-end's)."""
    return bool({"engine_core", "worker"} & set(report["roles"]))


def is_worker_only(report: ProcessReport) -> bool:
    """A worker in a process of its own (under ``uni`` the worker's collections are EngineCore's own)."""
    return "worker" in report["roles"] and "engine_core" not in report["roles"]


def _pauses(report: ProcessReport) -> list[GcPause]:
    pauses = report["gc"]["pauses"]
    rows = zip(pauses["start"], pauses["end"], pauses["tag"], strict=True)
    return [GcPause(start, end, tag_generation(tag), report["pid"], tag >= HIDDEN_TAG) for start, end, tag in rows]


def engine_pauses(reports: list[ProcessReport]) -> list[GcPause]:
    """Every collection of the engine's processes (EngineCore and its workers) since the last reset, in time order."""
    return sorted(p for r in reports if is_engine_process(r) for p in _pauses(r))


def worker_pauses(reports: list[ProcessReport]) -> list[tuple[float, float]]:
    """The union of the critical pauses of every worker in a process of its own, as sorted disjoint (start, end)."""
    critical = sorted(p for r in reports if is_worker_only(r) for p in _pauses(r) if not p.hidden)
    merged: list[tuple[float, float]] = []
    for start, end, *_ in critical:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlaps(
    starts: npt.NDArray[np.float64], ends: npt.NDArray[np.float64], intervals: list[tuple[float, float]]
) -> npt.NDArray[np.float64]:
    """Seconds of ``intervals`` (sorted, disjoint: pauses, or a block's steps) inside each [starts[i], ends[i]]."""
    out = np.zeros(len(starts))
    if not intervals or not len(starts):
        return out
    p = np.asarray(intervals, dtype=np.float64)
    first = np.searchsorted(p[:, 1], starts, side="right")  # the first pause that ends after the interval starts
    last = np.searchsorted(p[:, 0], ends, side="left")  # past the last pause that starts before it ends
    for i in np.flatnonzero(last > first):
        window = p[first[i] : last[i]]
        out[i] = float(np.sum(np.minimum(window[:, 1], ends[i]) - np.maximum(window[:, 0], starts[i])))
    return out


def with_worker_gc(blocks: list[BlockRecord], pauses: list[tuple[float, float]]) -> list[BlockRecord]:
    """``blocks`` with each step's GC seconds raised by the worker pauses inside it."""
    if not pauses:
        return blocks
    joined: list[BlockRecord] = []
    for block in blocks:
        starts = np.asarray(block["t0"], dtype=np.float64)
        ends = np.asarray(np.add(block["t0"], block["dt"]), dtype=np.float64)
        inside = overlaps(starts, ends, pauses)
        gc_s = [g + float(w) for g, w in zip(block["gc_s"], inside, strict=True)]
        joined.append({**block, "gc_s": gc_s})
    return joined
