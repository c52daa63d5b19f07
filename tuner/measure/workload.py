"""The requests of an experiment and when each is sent: synthetic (seeded random token-id prompts, length
distributions, arrival processes) or from a dataset file, with the record of what they were.

Deterministic for a seed and independent of the engine (only the vocabulary size is needed), so every arm of a
comparison gets the identical request sequence and schedule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from tuner.config import (
    Experiment,
    FixedLen,
    LengthDist,
    NormalLen,
    UniformLen,
    Workload,
    context_limit,
    load_experiment,
)
from tuner.errors import UserError
from tuner.traffic import (
    FIRST_ORDINARY_TOKEN,
    DatasetRequests,
    RequestSpec,
    ShapeBuilder,
    WorkloadRecord,
    dataset_shape,
    engine_requests,
    read_dataset,
    trace_offsets,
)


@dataclass(frozen=True)
class Traffic:
    requests: list[RequestSpec]
    offsets: list[float]  # seconds after the start at which each request is sent
    record: WorkloadRecord


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
    """The synthetic prompts of one batch (``count`` overrides ``num_prompts``, e.g. for warm-up)."""
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


def replay_line(workload: Workload) -> str:
    """How the requests are sent, in words."""
    dataset = workload.dataset
    if dataset is not None and dataset.schedule == "trace":
        how = f"at their recorded times x {dataset.time_scale:g}"
    elif math.isfinite(workload.rate):
        how = f"{workload.arrival} arrivals at {workload.rate:g} requests/s"
    else:
        how = "all at once"
    return how + (f", at most {workload.concurrency} in flight" if workload.concurrency else "")


@dataclass(frozen=True)
class PreparedTraffic:
    """An experiment's requests, read (a dataset's) and built once: sent at another load (another rate, trace speed
    or concurrency, :meth:`at`), only their send times and record change. A capacity search prepares its trace
    once and re-times it per load."""

    requests: list[RequestSpec]
    dataset: DatasetRequests | None  # None: synthetic requests

    def at(self, experiment: Experiment) -> Traffic:
        """The requests with ``experiment``'s send times (its workload's timing; its requests must be these)."""
        workload = experiment.workload
        if self.dataset is None:
            offsets = [float(t) for t in arrival_offsets(workload, len(self.requests))]
            builder = ShapeBuilder()
            for request, offset in zip(self.requests, offsets, strict=True):
                builder.add(len(request.prompt_token_ids), request.max_tokens, offset)
            record: WorkloadRecord = {
                "source": "synthetic",
                "dataset": None,
                "replay": replay_line(workload),
                "shape": builder.shape(),
            }
            return Traffic(self.requests, offsets, record)
        offsets, record = _timed(self.dataset, experiment)
        return Traffic(self.requests, offsets, record)


def prepare(experiment: Experiment, vocab_size: int) -> PreparedTraffic:
    """The experiment's requests, ready to be sent at any load (:meth:`PreparedTraffic.at`)."""
    workload = experiment.workload
    if workload.dataset is None:
        return PreparedTraffic(build_requests(workload, vocab_size), None)
    dataset = _read(experiment)
    return PreparedTraffic(engine_requests(dataset, workload.dataset.block_size, workload.seed, vocab_size), dataset)


def dataset_plan(experiment: Experiment) -> tuple[DatasetRequests, list[float], WorkloadRecord]:
    """A dataset experiment's requests as read, their send times and their record (no engine needed)."""
    dataset = _read(experiment)
    return (dataset, *_timed(dataset, experiment))


def _read(experiment: Experiment) -> DatasetRequests:
    spec = experiment.workload.dataset
    assert spec is not None
    return read_dataset(
        spec, seed=experiment.workload.seed, engine=experiment.engine, max_model_len=context_limit(experiment)
    )


def _timed(dataset: DatasetRequests, experiment: Experiment) -> tuple[list[float], WorkloadRecord]:
    """The dataset's send times at ``experiment``'s timing (the trace's times scaled, or an arrival process) and
    the record of the workload so sent."""
    workload = experiment.workload
    spec = workload.dataset
    assert spec is not None
    if spec.schedule == "trace":
        offsets = trace_offsets(dataset.requests, spec.time_scale)
    else:
        offsets = [float(t) for t in arrival_offsets(workload, len(dataset.requests))]
    shape = dataset_shape(dataset, offsets if any(offsets) else None)
    record: WorkloadRecord = {
        "source": "dataset",
        "dataset": {**dataset.record, "schedule": spec.schedule, "time_scale": spec.time_scale},  # as sent here
        "replay": replay_line(workload),
        "shape": shape,
    }
    return offsets, record


def experiment_workload(path: Path) -> tuple[WorkloadRecord, Path, str]:
    """What ``tuner workload inspect EXPERIMENT`` reports: the record of exactly the requests the experiment's
    ``workload.dataset`` replays, where its files go by default, and its title."""
    experiment = load_experiment(path)
    if experiment.workload.dataset is None:
        raise UserError.single(str(path), "no workload.dataset: its requests are synthetic", "workload")
    _, _, record = dataset_plan(experiment)
    return record, experiment.output_dir / experiment.name / "workload", experiment.name
