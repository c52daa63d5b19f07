"""Per-request timings and the metrics computed from them (plain data, no engine)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, NotRequired, Protocol, TypedDict

import numpy as np

from tuner.metrics.table import LATENCY_FAMILIES
from tuner.stats import percentiles


class LatencyTargets(Protocol):
    """Per-request latency targets in milliseconds, None where not set (:class:`tuner.config.Slo` is one)."""

    @property
    def ttft_ms(self) -> float | None: ...

    @property
    def tpot_ms(self) -> float | None: ...

    @property
    def e2e_ms(self) -> float | None: ...


@dataclass
class RequestTiming:
    """Timestamps (``time.perf_counter`` in the front-end) of one request's life."""

    prompt_tokens: int
    sent: float
    chunk_times: list[float] = field(default_factory=list)  # arrival of each streamed chunk
    chunk_tokens: list[int] = field(default_factory=list)  # new tokens in each chunk
    finished: float | None = None
    token_ids: list[int] = field(default_factory=list)  # for the token-identity guard
    scheduled: float | None = None  # when it was due to be sent (streams), to measure how late it left
    cached_tokens: int | None = None  # prompt tokens vLLM found in its prefix cache (in-process engines)

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_tokens)


class RequestLatency(NamedTuple):
    """One finished request's latencies in ms: time to first token, per output token after the first (0 with one
    token), end to end."""

    ttft_ms: float
    tpot_ms: float
    e2e_ms: float


def latency(timing: RequestTiming) -> RequestLatency:
    """A finished request's latencies (as ``vllm bench serve`` computes them)."""
    assert timing.finished is not None
    later = timing.output_tokens - timing.chunk_tokens[0]
    return RequestLatency(
        ttft_ms=(timing.chunk_times[0] - timing.sent) * 1e3,
        tpot_ms=(timing.chunk_times[-1] - timing.chunk_times[0]) * 1e3 / later if later > 0 else 0.0,
        e2e_ms=(timing.finished - timing.sent) * 1e3,
    )


def meets_slo(timing: RequestTiming, slo: LatencyTargets) -> bool:
    """Whether a finished request met every latency target that is set (as ``vllm bench serve --goodput``)."""
    found = latency(timing)
    targets = ((slo.ttft_ms, found.ttft_ms), (slo.tpot_ms, found.tpot_ms), (slo.e2e_ms, found.e2e_ms))
    return all(target is None or value <= target for target, value in targets)


def completed(timing: RequestTiming) -> bool:
    """The request finished with output (a failed or unfinished one did not)."""
    return timing.finished is not None and bool(timing.chunk_times)


def met_each(timings: list[RequestTiming], slo: LatencyTargets) -> list[bool]:
    """Per request, in order: completed and within every target (an unfinished request missed)."""
    return [completed(t) and meets_slo(t, slo) for t in timings]


def latencies(timings: list[RequestTiming]) -> list[RequestLatency | None]:
    """Per request, in order: its latencies, None where it did not complete (failed or unfinished)."""
    return [latency(t) if completed(t) else None for t in timings]


class RunMetrics(TypedDict):
    """One repetition's metrics as measured (:func:`summarize`; :func:`flat_metrics` gives the names the metric table
    uses): each latency family as ``{mean, p50, p90, p99}`` in ms, and what only some runs measure."""

    wall_s: float
    completed: int
    failed: int
    prompt_tokens: int
    output_tokens: int
    requests_per_s: float
    output_tokens_per_s: float
    total_tokens_per_s: float
    goodput_requests_per_s: float
    slo_attainment: float
    ttft_ms: dict[str, float | None]
    tpot_ms: dict[str, float | None]
    itl_ms: dict[str, float | None]
    e2e_ms: dict[str, float | None]
    longest_pause_ms: NotRequired[float]  # records from before 2026-11-29 lack it
    send_lag_p99_ms: NotRequired[float]  # requests sent on a schedule
    send_lag_max_ms: NotRequired[float]
    prefix_cache_hit_rate: NotRequired[float]  # where vLLM reported cached prompt tokens
    peak_rss_mb: NotRequired[float]  # the engine's processes (none from an endpoint the tuner did not start)
    gc_share_max: NotRequired[float]
    gc_max_pause_ms: NotRequired[float]
    gc_critical_share_max: NotRequired[float]
    gc_critical_max_pause_ms: NotRequired[float]


def summarize(timings: list[RequestTiming], wall_s: float, slo: LatencyTargets | None = None) -> RunMetrics:
    """Throughput, goodput under ``slo`` and latency distributions (ms) of one repetition."""
    done = [t for t in timings if completed(t)]
    good = sum(meets_slo(t, slo) for t in done) if slo is not None else len(done)
    output_tokens = sum(t.output_tokens for t in done)
    prompt_tokens = sum(t.prompt_tokens for t in done)
    ttft = [(t.chunk_times[0] - t.sent) * 1e3 for t in done]
    e2e = [(t.finished - t.sent) * 1e3 for t in done if t.finished is not None]
    tpot = [
        (t.chunk_times[-1] - t.chunk_times[0]) * 1e3 / (t.output_tokens - t.chunk_tokens[0])
        for t in done
        if t.output_tokens > t.chunk_tokens[0]
    ]
    itl = np.concatenate([np.diff(t.chunk_times) * 1e3 for t in done]) if done else np.empty(0)
    metrics: RunMetrics = {
        "wall_s": wall_s,
        "completed": len(done),
        "failed": len(timings) - len(done),
        "prompt_tokens": prompt_tokens,
        "output_tokens": output_tokens,
        "requests_per_s": len(done) / wall_s,
        "output_tokens_per_s": output_tokens / wall_s,
        "total_tokens_per_s": (output_tokens + prompt_tokens) / wall_s,
        "goodput_requests_per_s": good / wall_s,
        "slo_attainment": good / len(timings) if timings else 0.0,
        "ttft_ms": percentiles(ttft),
        "tpot_ms": percentiles(tpot),
        "itl_ms": percentiles(itl.tolist()),
        "e2e_ms": percentiles(e2e),
        "longest_pause_ms": 1e3 * longest_pause(timings),
    }
    return _with_replay(metrics, timings, done)


def longest_pause(timings: list[RequestTiming]) -> float:
    """The longest time (s) in which nothing happened while a request was in flight: the largest gap between
    consecutive events (a request sent, a chunk streamed, a request finished) while some request was sent and not yet
    finished. Every step streams a chunk to each running request, so on a healthy run it is about the longest step
    (or a prefill); a process stopped whole for a while (the engine or the client) shows as one gap many steps long
    (0 when no two events fall in one request's life). A host merely shared with other work does not: it time-slices
    the processes, and steps run slower instead (runs a burst of other work slowed on the CPU engine paused 26-33 ms,
    where steps took 10)."""
    sent = np.sort([t.sent for t in timings])
    ended = np.sort([t.finished or max(t.chunk_times, default=t.sent) for t in timings])
    chunks = [time for t in timings for time in t.chunk_times]
    events = np.sort(np.concatenate([sent, ended, np.asarray(chunks, dtype=np.float64)]))
    in_flight = np.searchsorted(sent, events, side="right") - np.searchsorted(ended, events, side="right")
    gaps = np.diff(events)[in_flight[:-1] > 0]
    return float(gaps.max()) if gaps.size else 0.0


def _with_replay(metrics: RunMetrics, timings: list[RequestTiming], done: list[RequestTiming]) -> RunMetrics:
    """``metrics`` with how faithfully requests left on schedule (``send_lag_*``: after their due time, queueing
    behind a concurrency cap included) and the share of prompt tokens vLLM served from its prefix cache, where known."""
    lags = [(t.sent - t.scheduled) * 1e3 for t in timings if t.scheduled is not None]
    if lags:
        metrics["send_lag_p99_ms"] = float(np.percentile(lags, 99))
        metrics["send_lag_max_ms"] = max(lags)
    cached = [t for t in done if t.cached_tokens is not None]
    prompts = sum(t.prompt_tokens for t in cached)
    if cached and prompts:
        metrics["prefix_cache_hit_rate"] = sum(t.cached_tokens or 0 for t in cached) / prompts
    return metrics


def flat_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """The names objectives, constraints and reports use (:mod:`tuner.metrics.table`): ``ttft_ms.p99`` ->
    ``ttft_p99_ms``."""
    flat = {k: float(v) for k, v in summary.items() if isinstance(v, (int, float))}
    for family in LATENCY_FAMILIES:
        for stat, value in summary[f"{family}_ms"].items():
            if value is not None:
                flat[f"{family}_{stat}_ms"] = float(value)
    return flat
