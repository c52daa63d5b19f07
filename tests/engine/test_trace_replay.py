"""A Mooncake trace replayed on the CPU engine at its recorded times: requests leave on schedule, shared hash ids
become shared prefixes that vLLM's own prefix cache finds, every replay starts from an empty cache, and a step-level
comparison driven by those arrivals recovers a known delay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import support
from tests.support import STREAMING_ENGINE
from tuner.config import Experiment
from tuner.engine.session import EngineSession
from tuner.measure.interleave import interleaved_comparison
from tuner.measure.step_sums import ANY_WORK
from tuner.measure.workbench import Workbench

pytestmark = pytest.mark.engine

BLOCK = STREAMING_ENGINE["block_size"]  # tokens per hash id, and vLLM's KV block size here (CPU default: 128)
GROUPS = 4
REQUESTS = 40
GAP_MS = 50
SEND_TOLERANCE_MS = 50
"""Each request leaves within this of its scheduled time (the front-end's event loop also streams the outputs)."""


def write_trace(path: Path, *, shared: bool) -> Path:
    """Requests of four groups, each a two-block group prefix, one block of its own and a few tokens beyond it;
    without ``shared``, every block is a request's own."""
    lines = []
    for i in range(REQUESTS):
        ids = [2 * (i % GROUPS), 2 * (i % GROUPS) + 1] if shared else [1000 + 3 * i, 1001 + 3 * i]
        ids.append(2000 + i)
        record = {"timestamp": i * GAP_MS, "input_length": 3 * BLOCK + 8 - i % 7, "output_length": 8, "hash_ids": ids}
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n")
    return path


def experiment(trace: Path, tmp_path: Path) -> Experiment:
    dataset = {"path": str(trace), "format": "mooncake", "block_size": BLOCK, "schedule": "trace"}
    return support.experiment(
        "trace-replay",
        tmp_path,
        engine=STREAMING_ENGINE,
        workload={"dataset": dataset, "sampling": {"temperature": 0.0, "ignore_eos": True}},
        measure={"warmup_prompts": 4},
    )


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, streaming_session: EngineSession) -> Workbench:
    tmp = tmp_path_factory.mktemp("trace")
    bench = Workbench(streaming_session, experiment(write_trace(tmp / "shared.jsonl", shared=True), tmp))
    bench.warm_up()
    return bench


def test_requests_leave_at_their_recorded_times(bench: Workbench) -> None:
    assert bench.session.mode == "streaming"
    assert bench.offsets == pytest.approx([i * GAP_MS / 1000 for i in range(REQUESTS)])
    timings, wall = bench.session.run(bench.requests, bench.offsets, bench.experiment.workload.sampling)
    scheduled = [t.scheduled for t in timings]
    assert all(s is not None for s in scheduled)
    start = scheduled[0]
    assert start is not None
    assert [s - start for s in scheduled if s is not None] == pytest.approx(bench.offsets, abs=1e-9)
    lateness_ms = [(t.sent - s) * 1e3 for t, s in zip(timings, scheduled, strict=True) if s is not None]
    assert min(lateness_ms) >= 0 and max(lateness_ms) < SEND_TOLERANCE_MS, lateness_ms
    assert wall >= bench.offsets[-1]  # the replay lasts at least as long as the (scaled) trace


def test_shared_hash_ids_are_found_in_vllms_prefix_cache_in_every_replay(bench: Workbench) -> None:
    first = bench.repetition()["metrics"]
    second = bench.repetition()["metrics"]
    # Four groups of two shared blocks: after each group's first request, 64 of a prompt's 97-104 tokens are cached
    # (about 36/40 x 64/100 = 0.58). Replayed without emptying the cache, 96 would be (above 0.9).
    for metrics in (first, second):
        assert 0.45 < metrics["prefix_cache_hit_rate"] < 0.72, metrics["prefix_cache_hit_rate"]
        assert metrics["send_lag_max_ms"] < SEND_TOLERANCE_MS
    assert abs(second["prefix_cache_hit_rate"] - first["prefix_cache_hit_rate"]) < 0.05


def test_without_shared_hash_ids_nothing_is_cached(bench: Workbench, tmp_path: Path) -> None:
    unique = Workbench(bench.session, experiment(write_trace(tmp_path / "unique.jsonl", shared=False), tmp_path))
    metrics = unique.repetition()["metrics"]
    assert metrics["prefix_cache_hit_rate"] < 0.02, metrics["prefix_cache_hit_rate"]


def test_a_step_comparison_driven_by_the_recorded_arrivals_recovers_a_known_delay(bench: Workbench) -> None:
    """The steps compared are the ones the trace makes (a few requests at a time, prefill and decode mixed), each
    step's own time (the idle engine between arrivals charged to neither arm); a 2 ms wait in the worker before
    every batch of arm B is known to cost 1 + 2 ms / A's mean step. Checked at 99.9% (a calibrated CI misses it
    in 1 run of 1000), and the delay must be detected (at this size, in every run seen here)."""
    delay_s = 0.002
    result = interleaved_comparison(
        bench,
        {"known_delay": {}},
        {"known_delay": {"worker_ms": 1e3 * delay_s}},
        block_steps=1,
        budget_s=12,
        seed=3,
        arrivals=True,
    )
    assert result.driven_by == "the workload's arrivals (at their recorded times x 1)", result.driven_by
    assert result.to_dict()["driven_by"] == result.driven_by and result.batch_size == ANY_WORK
    reference_step_s = result.mean_step_s["A"]
    assert reference_step_s is not None
    known = 1 + delay_s / reference_step_s
    strict = result.estimate_at(0.999)
    assert strict is not None and result.estimate is not None
    assert strict.ci_low <= known <= strict.ci_high, (known, strict, len(result.sums))
    assert result.estimate.ci_low > 1, result.estimate
