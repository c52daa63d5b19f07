"""Shared by the paired benchmarks: one engine, two arms in mirrored order, throughput as a paired ratio of sums."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from benchmarks import ROOT
from tuner.config import Experiment
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import encode_spec
from tuner.stats import mirrored_order, paired_ratio_of_sums

THIRD_PARTY = ROOT / "tests" / "third_party"
"""The test-only strategies and plugins (found by their entry points once on the path)."""


def test_plugins_on_path() -> None:
    """The test-only plugins importable here and in every vLLM process this one starts."""
    sys.path.insert(0, str(THIRD_PARTY))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(THIRD_PARTY), os.environ.get("PYTHONPATH")) if p)


def gpu_shape() -> None:
    """The CPU engine reshaped by the test plugin into a GPU host's default topology: ``uni`` executor, forked
    EngineCore, async scheduling."""
    test_plugins_on_path()
    os.environ["TUNER_TEST_GPU_SHAPE"] = "uni,fork,async"


ENGINE = {
    "model": "builtin:opt-tiny",
    "max_num_seqs": 128,
    "max_model_len": 512,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 256 << 20,
    "dtype": "float32",
}


def workbench(engine: dict[str, Any], install: list[str]) -> Workbench:
    """A started engine with ``install`` switchable, warmed up once on its decode-heavy workload (2 x max_num_seqs)."""
    experiment = Experiment.model_validate(
        {
            "name": "paired-bench",
            "engine": engine,
            "workload": {
                "num_prompts": 2 * engine["max_num_seqs"],
                "input_len": {"dist": "fixed", "value": 16},
                "output_len": {"dist": "uniform", "low": 48, "high": 96},
            },
            "measure": {"warmup_prompts": 2 * engine["max_num_seqs"]},  # the allocators settle before measuring
        }
    )
    return Workbench.start(experiment, encode_spec({}, install))


def paired_runs(
    bench: Workbench, arms: tuple[str, str], enter: Callable[[str], object], pairs: int
) -> dict[str, list[dict[str, Any]]]:
    """``pairs`` repetitions of each arm in mirrored order (AB BA ...), ``enter(arm)`` before each; the repetitions
    per arm, in order."""
    first, second = arms
    runs: dict[str, list[dict[str, Any]]] = {first: [], second: []}
    for flip in mirrored_order(pairs, seed=0):
        for arm in (second, first) if flip else (first, second):
            enter(arm)
            rep = bench.repetition(label=arm)
            runs[arm].append({key: value for key, value in rep.items() if key != "token_ids"})
    return runs


def throughput_ratio(runs: dict[str, list[dict[str, Any]]], trial: str, reference: str) -> dict[str, Any]:
    """The paired ratio of sums of output tokens over wall time, trial / reference, with its 95% CI."""

    def amounts(arm: str) -> tuple[list[float], list[float]]:
        return [r["metrics"]["output_tokens"] for r in runs[arm]], [r["metrics"]["wall_s"] for r in runs[arm]]

    estimate = paired_ratio_of_sums(*amounts(trial), *amounts(reference))
    return {"ratio": estimate.ratio, "ci": [estimate.ci_low, estimate.ci_high], "p": estimate.p_value, "n": estimate.n}
