"""Tail latency explained: which slow tokens overlap a GC pause or a long engine step, by process and generation.

The front-end timestamps every streamed chunk (``time.perf_counter``); each engine process records its GC pauses
and EngineCore its steps (``time.monotonic``). On Linux both are CLOCK_MONOTONIC, one clock for the whole host,
so the intervals of different processes can be joined directly. An inter-token sample is the interval between two
chunks of one request; it *overlaps* a pause when the two intervals intersect. Counts (not shares) are stored so
repetitions pool exactly; the share of *all* samples that overlap is the chance level to compare the tail with.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import NotRequired, TypedDict

import numpy as np

from tuner.metrics.timings import RequestTiming
from tuner.plugin.protocol import Intervals, ProcessReport, tag_generation, tag_hidden

TIMELINE_MARGIN_S = 0.25  # around the slowest token: a few dozen steps on a GPU, a few on this CPU
TIMELINE_TOKENS = 20  # the slowest inter-token samples drawn in the window


class HitRow(TypedDict):
    """Inter-token samples overlapping one process's pauses of one kind, per tail (``all``, ``p99``, ``slo``)."""

    source: str  # the process
    what: str  # the kind of pause (or a long step)
    hits: dict[str, int]


class StepHitRow(TypedDict):
    source: str
    what: str
    hits: int  # long steps overlapping those pauses


class LongSteps(TypedDict):
    threshold_ms: NotRequired[float | None]  # a repetition's p99 step time (pooled: absent)
    count: int
    rows: list[StepHitRow]


class Timeline(TypedDict):
    """One window around the slowest token, in seconds from its start."""

    span_s: float
    steps: list[list[float]]  # [start, end]
    pauses: dict[str, list[list[float]]]  # per process: [start, end, tag]
    tokens: list[list[float]]  # the slowest tokens: [start, end, request]


class Attribution(TypedDict):
    """One repetition's attribution (:func:`attribute`)."""

    samples: dict[str, int]  # per tail
    thresholds_ms: dict[str, float]
    rows: list[HitRow]
    long_steps: LongSteps
    timeline: Timeline


class PooledAttribution(TypedDict):
    """Repetitions' attributions summed (:func:`pooled`)."""

    repetitions: int
    samples: dict[str, int]
    thresholds_ms: dict[str, float]
    rows: list[HitRow]
    long_steps: LongSteps


class TailRecord(TypedDict):
    """What a sweep keeps of a trial's attributions (:func:`tail_record`)."""

    reference: PooledAttribution | None
    trial: PooledAttribution | None
    timeline: Timeline | None


def same_clock() -> bool:
    """Whether the front-end's ``perf_counter`` is the engine processes' ``monotonic`` clock (Linux: both
    CLOCK_MONOTONIC)."""
    return time.get_clock_info("perf_counter").implementation == time.get_clock_info("monotonic").implementation


def itl_samples(timings: list[RequestTiming]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, end and request index of every inter-token sample."""
    starts, ends, owners = [], [], []
    for index, timing in enumerate(timings):
        times = np.asarray(timing.chunk_times, dtype=float)
        if len(times) > 1:
            starts.append(times[:-1])
            ends.append(times[1:])
            owners.append(np.full(len(times) - 1, index))
    if not starts:
        return np.empty(0), np.empty(0), np.empty(0, dtype=int)
    return np.concatenate(starts), np.concatenate(ends), np.concatenate(owners)


def overlaps(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each sample [starts, ends], whether it intersects one of the intervals [lo, hi] (sorted, disjoint, as the
    pauses or steps of one thread are)."""
    if len(lo) == 0:
        return np.zeros(len(starts), dtype=bool)
    last = np.searchsorted(lo, ends, side="left") - 1  # the last interval starting before the sample ends
    valid = last >= 0
    return valid & (hi[np.clip(last, 0, None)] > starts)


def _intervals(record: Intervals | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    if not record or not record["start"]:
        return np.empty(0), np.empty(0), np.empty(0, dtype=int)
    start = np.asarray(record["start"], dtype=float)
    order = np.argsort(start, kind="stable")
    return start[order], np.asarray(record["end"], dtype=float)[order], np.asarray(record["tag"], dtype=int)[order]


def _pause_groups(process: ProcessReport) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, starts, ends) per generation and class of one process's pauses, plus all its critical ones."""
    start, end, tag = _intervals(process["gc"].get("pauses"))
    critical = np.array([not tag_hidden(t) for t in tag], dtype=bool)
    groups = [("GC critical, any gen", start[critical], end[critical])]
    for hidden in (False, True):
        for generation in range(3):
            keep = np.array([tag_generation(t) == generation and tag_hidden(t) == hidden for t in tag], dtype=bool)
            if keep.any():
                kind = "hidden" if hidden else "critical"
                groups.append((f"GC gen{generation} {kind}", start[keep], end[keep]))
    return groups


def attribute(
    timings: list[RequestTiming], processes: list[ProcessReport], slo_token_ms: float | None = None
) -> Attribution | None:
    """The attribution of one repetition (None without a shared clock or inter-token samples)."""
    starts, ends, owners = itl_samples(timings)
    if not same_clock() or len(starts) == 0:
        return None
    itl_ms = (ends - starts) * 1e3
    thresholds = {"p99": float(np.percentile(itl_ms, 99))}
    if slo_token_ms is not None:
        thresholds["slo"] = slo_token_ms
    # At or above p99: the samples of one engine step share its gap, so the slowest step's samples tie, and with
    # a tie larger than 1% of the samples none is strictly above p99. Above the SLO is strict.
    tails = {"all": np.ones(len(itl_ms), dtype=bool)} | {
        k: itl_ms >= v if k == "p99" else itl_ms > v for k, v in thresholds.items()
    }
    rows: list[HitRow] = []

    def row(source: str, what: str, hit: np.ndarray) -> None:
        rows.append({"source": source, "what": what, "hits": {k: int((hit & t).sum()) for k, t in tails.items()}})

    step_record = next((p["steps"] for p in processes if p.get("steps")), None)
    step_start, step_end, _ = _intervals(step_record)
    step_ms = (step_end - step_start) * 1e3
    long_step = step_ms > np.percentile(step_ms, 99) if len(step_ms) else np.zeros(0, dtype=bool)
    long_steps: LongSteps = {
        "threshold_ms": float(np.percentile(step_ms, 99)) if len(step_ms) else None,
        "count": int(long_step.sum()),
        "rows": [],
    }
    for process in processes:
        for what, lo, hi in _pause_groups(process):
            row(process["process_name"], what, overlaps(starts, ends, lo, hi))
            if long_step.any():
                hit = overlaps(step_start[long_step], step_end[long_step], lo, hi)
                long_steps["rows"].append({"source": process["process_name"], "what": what, "hits": int(hit.sum())})
    if long_step.any():
        row("EngineCore", "step above its p99", overlaps(starts, ends, step_start[long_step], step_end[long_step]))
    return {
        "samples": {k: int(t.sum()) for k, t in tails.items()},
        "thresholds_ms": thresholds,
        "rows": rows,
        "long_steps": long_steps,
        "timeline": _timeline(starts, ends, owners, itl_ms, processes, (step_start, step_end)),
    }


def _timeline(
    starts: np.ndarray,
    ends: np.ndarray,
    owners: np.ndarray,
    itl_ms: np.ndarray,
    processes: list[ProcessReport],
    steps: tuple[np.ndarray, np.ndarray],
) -> Timeline:
    """One window around the slowest token: its steps, every process's pauses and its slowest tokens (seconds from
    the window's start)."""
    slowest = int(np.argmax(itl_ms))
    lo, hi = starts[slowest] - TIMELINE_MARGIN_S, ends[slowest] + TIMELINE_MARGIN_S

    def clip(a: np.ndarray, b: np.ndarray) -> list[list[float]]:
        keep = (b > lo) & (a < hi)
        return [[float(x - lo), float(y - lo)] for x, y in zip(a[keep], b[keep], strict=True)]

    in_window = np.flatnonzero((ends > lo) & (starts < hi))
    top = in_window[np.argsort(itl_ms[in_window])[::-1][:TIMELINE_TOKENS]]
    pauses = {}
    for process in processes:
        start, end, tag = _intervals(process["gc"].get("pauses"))
        keep = (end > lo) & (start < hi)
        pauses[process["process_name"]] = [
            [float(s - lo), float(e - lo), int(t)] for s, e, t in zip(start[keep], end[keep], tag[keep], strict=True)
        ]
    return {
        "span_s": float(hi - lo),
        "steps": clip(*steps),
        "pauses": pauses,
        "tokens": [[float(starts[i] - lo), float(ends[i] - lo), int(owners[i])] for i in top],
    }


def pooled(attributions: Sequence[Attribution | None]) -> PooledAttribution | None:
    """Repetitions' attributions summed: samples and hits per (source, what)."""
    found = [a for a in attributions if a is not None]
    if not found:
        return None
    samples: dict[str, int] = {}
    hits: dict[tuple[str, str], dict[str, int]] = {}
    step_hits: dict[tuple[str, str], int] = {}
    for one in found:
        for key, n in one["samples"].items():
            samples[key] = samples.get(key, 0) + n
        for row in one["rows"]:
            into = hits.setdefault((row["source"], row["what"]), {})
            for key, n in row["hits"].items():
                into[key] = into.get(key, 0) + n
        for step_row in one["long_steps"]["rows"]:
            key2 = (step_row["source"], step_row["what"])
            step_hits[key2] = step_hits.get(key2, 0) + step_row["hits"]
    return {
        "repetitions": len(found),
        "samples": samples,
        "thresholds_ms": found[-1]["thresholds_ms"],
        "rows": [{"source": s, "what": w, "hits": h} for (s, w), h in hits.items()],
        "long_steps": {
            "count": sum(one["long_steps"]["count"] for one in found),
            "rows": [{"source": s, "what": w, "hits": n} for (s, w), n in step_hits.items()],
        },
    }


def tail_record(tails: Mapping[str, Sequence[Attribution | None]]) -> TailRecord:
    """What a sweep keeps of a trial's attributions: each arm pooled, and the trial arm's last timeline."""
    trial = [t for t in tails.get("trial", []) if t]
    return {
        "reference": pooled(tails.get("reference", [])),
        "trial": pooled(trial),
        "timeline": trial[-1]["timeline"] if trial else None,
    }
