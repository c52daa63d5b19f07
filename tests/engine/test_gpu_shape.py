"""The CPU engine in the topology a GPU runs by default: the worker inside EngineCore (``uni`` executor),
EngineCore forked, async scheduling (vLLM's CPU platform forces ``mp``, spawn and sync; the test plugin
``tuner_test_plugin.gpu_shape`` undoes that). The model runner stays V1: V2 needs Triton, which the CPU build
lacks, so V2-shaped behaviour is covered by unit tests with V2-shaped objects (tests/test_ndarray_outputs.py).

Each case is a real ``tuner run`` in its own process, where vLLM loads the shaping plugin like any other.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import TINY_ENGINE, fixed_workload

pytestmark = pytest.mark.engine

REPO = Path(__file__).parents[2]
GPU_SHAPE = {**os.environ, "TUNER_TEST_GPU_SHAPE": "uni,fork,async", "HF_HUB_OFFLINE": "1"}
WORKLOAD = {"num_prompts": 8, "input_len": {"dist": "fixed", "value": 8}, "output_len": {"dist": "fixed", "value": 16}}


def run(tmp_path: Path, strategies: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], Path]:
    path = tmp_path / "run.yaml"
    body = {
        "name": "gpu-shape",
        "engine": TINY_ENGINE,
        "workload": WORKLOAD,
        "measure": {"repetitions": 2, "warmup_prompts": 2},
        "strategies": strategies,
        "output_dir": str(tmp_path / "results"),
    }
    path.write_text(yaml.safe_dump(body))
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "run", str(path)], cwd=REPO, env=GPU_SHAPE, capture_output=True, text=True
    )
    return done, path


def test_strategies_act_in_a_forked_engine_core_that_holds_the_worker(tmp_path: Path) -> None:
    done, _ = run(tmp_path, {"gc_threshold": {"gen0_per_seq": 8}, "shared_empty_kv_blocks": {"enabled": False}})
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(next((tmp_path / "results").rglob("run.json")).read_text())
    for repetition in record["repetitions"]:
        processes = {p["process_name"]: p for p in repetition["processes"]}
        assert set(processes) == {"MainProcess", "EngineCore"}  # no worker process: it runs inside EngineCore
        core = processes["EngineCore"]
        assert core["roles"] == ["engine_core", "worker"] and core["forked"]  # forked, its plugin state its own
        assert core["gc"]["threshold"][0] == 700 + 8 * TINY_ENGINE["max_num_seqs"]
        assert core["counters"]["shared_empty_kv_blocks"]["fresh_empty"] > 0
        assert core["counters"]["gc_threshold"]["in_force"] > 0


def test_gc_in_waits_collects_while_engine_core_waits_for_the_batch_future(tmp_path: Path) -> None:
    done, _ = run(tmp_path, {"gc_in_waits": {"min_count": 50}})
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(next((tmp_path / "results").rglob("run.json")).read_text())
    for repetition in record["repetitions"]:
        core = next(p for p in repetition["processes"] if p["process_name"] == "EngineCore")
        assert core["counters"]["gc_in_waits"]["waits"] > 0  # AsyncOutputFuture.result: the uni + async wait
        assert core["gc"]["threshold"][0] == 64 * TINY_ENGINE["max_num_seqs"]
    hidden = [sum(p["gc"]["hidden"]["collections"]) for r in record["repetitions"] for p in r["processes"]]
    assert sum(hidden) > 0


def test_a_strategy_that_cannot_act_on_this_path_is_refused_before_the_engine_starts(tmp_path: Path) -> None:
    done, path = run(tmp_path, {"ndarray_outputs": {}})  # the V1 runner's async output path is not patched
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"error: {path}:" in done.stderr
    assert "strategies.ndarray_outputs: does not act on this engine's code path" in done.stderr
    assert "async scheduling" in done.stderr
    assert not (tmp_path / "results").exists()  # nothing measured, nothing written


def test_a_strategy_that_silently_does_nothing_is_caught_by_the_activity_check(tmp_path: Path) -> None:
    done, _ = run(tmp_path, {"step_delay": {"delay_ms": 0.0}})  # active everywhere, but its path never runs
    assert done.returncode == 3, done.stderr[-3000:]
    assert "step_delay: active in EngineCore" in done.stderr and "counters did not move" in done.stderr
    assert not list((tmp_path / "results").rglob("run.json"))  # no number from it


def test_calibration_in_the_gpu_topology_recovers_known_delays_on_both_sides_of_the_batch_queue(
    tmp_path: Path,
) -> None:
    """``tuner calibrate`` on the CPU engine shaped as a GPU host runs it: the worker inside EngineCore and async
    scheduling, where each engine step finishes the batch scheduled one step earlier (a washout step per block).
    A known delay in EngineCore's scheduler and one in the worker's execute_model must each be recovered by the
    step-level estimate (its 99.9% CI covers 1 + delay / step: a calibrated one fails 1 check in 1000, one that
    charged a batch to the wrong arm loses 1/(K+1) of the effect or more), and the A/A at the chosen grain covers
    1 (the grain is chosen among calibrated lengths only)."""
    path = tmp_path / "calibrate.yaml"
    body = {
        "name": "gpu-shape-calibration",
        "engine": {**TINY_ENGINE, "max_num_seqs": 16},
        "workload": fixed_workload(16, 64),
        "measure": {"warmup_prompts": 4},
        "output_dir": str(tmp_path / "results"),
    }
    path.write_text(yaml.safe_dump(body))
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "calibrate", str(path), "--budget-s", "6"],
        cwd=REPO,
        env=GPU_SHAPE,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    directory = tmp_path / "results" / "gpu-shape-calibration" / "calibration"
    record = json.loads((directory / "calibration.json").read_text())
    assert record["topology"]["executor"].startswith("uni") and record["topology"]["scheduling"].startswith("async")
    assert {(r["side"], r["covered"]) for r in record["recovery"]} == {("engine_core", True), ("worker", True)}, record
    chosen = next(p for p in record["precision"] if p["block_steps"] == record["recommended_block_steps"])
    assert chosen["ci"][0] <= 1.0 <= chosen["ci"][1]
    assert record["strategies"]["gc_threshold"] == "active (counters moved)"
    assert record["strategies"]["ndarray_outputs"].startswith("not active")  # V1 runner under async: refused
    assert (directory / "report.md").is_file() and (directory / "precision.png").stat().st_size > 0
    assert "engine-seconds here" in done.stdout
