"""What a workload looks like: length distributions, arrivals over time and prefix reuse, as a small record
(``run.json``, the sweep summary, ``tuner workload inspect``) from which the report draws its plot.

Built streaming: a request costs 16 bytes, plus 8 per distinct hash id, whatever its text.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from typing import TypedDict

import numpy as np

HISTOGRAM_BINS = 40
MERGE_IDS = 1 << 20  # hash ids buffered before they are merged into the sorted distinct ones
ARRIVAL_BINS = 60
MIN_PER_BIN = 5
NICE_STEPS = (1, 2, 5)


class Distribution(TypedDict):
    min: int
    p50: float
    p90: float
    p99: float
    max: int
    mean: float
    total: int


class Histogram(TypedDict):
    edges: list[float]  # len(counts) + 1
    counts: list[int]


class Arrivals(TypedDict):
    duration_s: float  # from the first request sent to the last
    mean_rate: float  # requests/s over the duration
    peak_rate: float  # requests/s in the busiest bin
    bin_s: float
    counts: list[int]  # requests sent in each bin


class WorkloadShape(TypedDict):
    requests: int
    input_tokens: Distribution
    output_tokens: Distribution
    input_histogram: Histogram
    output_histogram: Histogram
    arrivals: Arrivals | None  # None when everything is sent at once
    prefix_reuse: float | None  # share of hash-id blocks an earlier request already had (traces with hash ids)


class ShapeBuilder:
    """Add requests one at a time; :meth:`shape` summarises them."""

    def __init__(self) -> None:
        self._inputs = array("i")
        self._outputs = array("i")
        self._arrivals = array("d")
        self._pending_ids = array("q")
        self._distinct_ids: np.ndarray = np.zeros(0, dtype=np.int64)
        self._hash_ids = 0

    def add(self, input_tokens: int, output_tokens: int, arrival_s: float | None, hash_ids: Sequence[int] = ()) -> None:
        self._inputs.append(input_tokens)
        self._outputs.append(output_tokens)
        if arrival_s is not None:
            self._arrivals.append(arrival_s)
        self._pending_ids.extend(hash_ids)
        self._hash_ids += len(hash_ids)
        if len(self._pending_ids) >= MERGE_IDS:
            self._merge_ids()

    def _merge_ids(self) -> None:
        pending = np.frombuffer(self._pending_ids, dtype=np.int64) if self._pending_ids else np.zeros(0, np.int64)
        self._distinct_ids = np.union1d(self._distinct_ids, pending)
        self._pending_ids = array("q")

    def shape(self) -> WorkloadShape:
        self._merge_ids()
        inputs = np.asarray(self._inputs, dtype=np.int64)
        outputs = np.asarray(self._outputs, dtype=np.int64)
        arrivals = np.frombuffer(self._arrivals, dtype=np.float64) if self._arrivals else None
        reuse = 1.0 - len(self._distinct_ids) / self._hash_ids if self._hash_ids else None
        return {
            "requests": len(inputs),
            "input_tokens": distribution(inputs),
            "output_tokens": distribution(outputs),
            "input_histogram": histogram(inputs),
            "output_histogram": histogram(outputs),
            "arrivals": arrival_counts(arrivals) if arrivals is not None and len(arrivals) == len(inputs) else None,
            "prefix_reuse": reuse,
        }


def distribution(values: np.ndarray) -> Distribution:
    if not len(values):
        return {"min": 0, "p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0, "mean": 0.0, "total": 0}
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "min": int(values.min()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": int(values.max()),
        "mean": float(values.mean()),
        "total": int(values.sum()),
    }


def histogram(values: np.ndarray) -> Histogram:
    if not len(values):
        return {"edges": [0.0, 1.0], "counts": [0]}
    low, high = int(values.min()), int(values.max())
    bins = max(1, min(HISTOGRAM_BINS, 2 * math.isqrt(len(values)), high - low + 1))  # few requests, fewer bins
    counts, edges = np.histogram(values, bins=bins, range=(low, high + 1))
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


def nice_bin(duration_s: float, requests: int) -> float:
    """A round bin width (1, 2 or 5 times a power of ten) giving at most about :data:`ARRIVAL_BINS` bins and about
    :data:`MIN_PER_BIN` requests per bin on average (fewer would draw noise)."""
    raw = max(duration_s / ARRIVAL_BINS, MIN_PER_BIN * duration_s / max(requests, 1), 1e-3)
    power = 10 ** math.floor(math.log10(raw))
    return next((step * power for step in NICE_STEPS if step * power >= raw), 10 * power)


def arrival_counts(arrivals_s: np.ndarray) -> Arrivals | None:
    """Requests sent per bin from the first to the last; None when all are sent at once."""
    if not len(arrivals_s):
        return None
    start, end = float(arrivals_s.min()), float(arrivals_s.max())
    duration = end - start
    if duration <= 0:
        return None
    width = nice_bin(duration, len(arrivals_s))
    bins = int(duration // width) + 1
    counts = np.bincount(((arrivals_s - start) // width).astype(np.int64), minlength=bins)
    return {
        "duration_s": duration,
        "mean_rate": (len(arrivals_s) - 1) / duration,
        "peak_rate": float(counts.max()) / width,
        "bin_s": width,
        "counts": [int(c) for c in counts],
    }
