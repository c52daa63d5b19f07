"""Synthetic requests: random token-id prompts, length distributions and arrival times.

Deterministic for a seed and independent of the engine (only the vocabulary size is needed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np

from tuner.config import FixedLen, LengthDist, NormalLen, UniformLen, Workload

# Low token ids are often special (pad/bos/eos/unk); prompts draw above them.
FIRST_ORDINARY_TOKEN = 10


@dataclass(frozen=True)
class RequestSpec:
    prompt_token_ids: list[int]
    max_tokens: int


def sample_lengths(dist: LengthDist, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` lengths drawn from ``dist`` (integers >= 1)."""
    if isinstance(dist, FixedLen):
        return np.full(n, dist.value, dtype=np.int64)
    if isinstance(dist, UniformLen):
        return rng.integers(dist.low, dist.high + 1, size=n, dtype=np.int64)
    assert isinstance(dist, NormalLen)
    values = np.rint(rng.normal(dist.mean, dist.std, size=n)).astype(np.int64)
    return np.clip(values, dist.low, dist.high if dist.high is not None else None)


def build_requests(
    workload: Workload, vocab_size: int, *, count: int | None = None, seed_offset: int = 0
) -> list[RequestSpec]:
    """The prompts of one batch (``count`` overrides ``num_prompts``, e.g. for warm-up)."""
    n = workload.num_prompts if count is None else count
    rng = np.random.default_rng(workload.seed + seed_offset)
    inputs = sample_lengths(workload.input_len, n, rng)
    outputs = sample_lengths(workload.output_len, n, rng)
    high = max(vocab_size - 1, FIRST_ORDINARY_TOKEN + 1)
    return [
        RequestSpec(cast(list[int], rng.integers(FIRST_ORDINARY_TOKEN, high, size=int(i)).tolist()), int(o))
        for i, o in zip(inputs, outputs, strict=True)
    ]


def arrival_offsets(workload: Workload, n: int) -> np.ndarray:
    """Seconds after the start at which each of ``n`` requests is sent (all zero for ``rate: inf``)."""
    if math.isinf(workload.rate):
        return np.zeros(n)
    if workload.arrival == "fixed":
        return np.arange(n) / workload.rate
    rng = np.random.default_rng(workload.seed + 1_000_003)
    gaps = rng.exponential(1.0 / workload.rate, size=n)
    gaps[0] = 0.0
    return np.cumsum(gaps)
