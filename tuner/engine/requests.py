"""Requests as an engine session sends them: each at its offset under a concurrency cap, vLLM's sampling
parameters for them, and each streamed output recorded into its request's timing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tuner.config import Sampling
from tuner.metrics import RequestTiming
from tuner.traffic import RequestSpec

Progress = Callable[[int], None]  # called with the number of requests finished so far


StreamOne = Callable[[str, RequestSpec, RequestTiming], Awaitable[None]]


async def drive_requests(
    ids: list[str],
    requests: list[RequestSpec],
    offsets: list[float],
    stream_one: StreamOne,
    concurrency: int | None,
    progress: Progress | None,
) -> tuple[list[RequestTiming], float]:
    """Send each request at its offset (at most ``concurrency`` in flight) through ``stream_one``.

    ``stream_one`` streams one request and records its chunks into the timing; ``sent`` is set here, when the
    request leaves the queue, so queueing behind the concurrency cap counts towards its latency as in
    ``vllm bench serve``.
    """
    limit = asyncio.Semaphore(concurrency or len(requests))
    timings = [RequestTiming(len(spec.prompt_token_ids), 0.0) for spec in requests]
    finished = 0
    start = time.perf_counter()

    async def one(rid: str, spec: RequestSpec, offset: float, timing: RequestTiming) -> None:
        nonlocal finished
        timing.scheduled = start + offset
        await asyncio.sleep(max(0.0, timing.scheduled - time.perf_counter()))
        async with limit:
            timing.sent = time.perf_counter()
            await stream_one(rid, spec, timing)
        finished += 1
        if progress is not None:
            progress(finished)

    await asyncio.gather(*(one(*item) for item in zip(ids, requests, offsets, timings, strict=True)))
    return timings, time.perf_counter() - start


def engine_input(spec: RequestSpec) -> Any:
    """The request's prompt as vLLM's rendered token input: raw prompt dicts are deprecated in the input processor
    (a warning on every run from 0.32; the type-tagged form is accepted on every supported release, checked in
    :mod:`tuner.plugin.hook_requirements`)."""
    from vllm.inputs.engine import tokens_input

    return tokens_input(list(spec.prompt_token_ids))


def sampling_params(sampling: Sampling, max_tokens: int) -> Any:
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        max_tokens=max_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        top_k=sampling.top_k if sampling.top_k > 0 else -1,
        ignore_eos=sampling.ignore_eos,
        seed=sampling.seed,
        detokenize=False,
        output_kind=RequestOutputKind.DELTA,
    )


def record_output(timing: RequestTiming, output: Any, now: float) -> None:
    new = output.outputs[0].token_ids
    if new:
        timing.chunk_times.append(now)
        timing.chunk_tokens.append(len(new))
        timing.token_ids.extend(new)
    if output.finished:
        timing.finished = now
    cached = getattr(output, "num_cached_tokens", None)
    if isinstance(cached, int):
        timing.cached_tokens = cached
