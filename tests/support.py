"""What tests share to build their subjects: the tiny CPU engines, workloads, experiments, and the engine's own
measured step (the unit engine tests size their effects in)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
import psutil
import yaml

from tuner.config import Experiment
from tuner.metrics import RequestTiming
from tuner.plugin.protocol import pause_tag
from tuner.records import CALIBRATION_SCHEMA, Calibration

if TYPE_CHECKING:
    from tuner.measure.workbench import Workbench

REPO = Path(__file__).resolve().parent.parent

TINY_ENGINE = {
    "model": "builtin:opt-tiny",
    "max_num_seqs": 16,
    "max_model_len": 256,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 64 << 20,  # ~16 MiB needed; reserving 20% of RAM costs 3 s per start
    "dtype": "float32",  # 3x faster than bf16 on CPUs without bf16 units (62 -> 20 ms per step here)
}


def fixed_workload(num_prompts: int, output_len: int, input_len: int = 8) -> dict[str, object]:
    """An offline workload of equal requests: every batch decodes at one batch size (step-level comparisons)."""
    return {
        "num_prompts": num_prompts,
        "input_len": {"dist": "fixed", "value": input_len},
        "output_len": {"dist": "fixed", "value": output_len},
    }


SMALL_WORKLOAD = fixed_workload(8, 16)
"""Eight equal requests of 8 prompt and 16 output tokens: a run of a second or two on the tiny engine."""


def decode_step_s(bench: Workbench, engine: dict[str, object]) -> float:
    """The engine's mean decode step with its full batch running (an A/A of vLLM as installed, offline, for 3 s):
    the unit the capacity tests size their targets, loads and budgets in, so that a slower or busier host changes
    their figures and not their verdict. ``bench``'s workload must fill ``engine``'s ``max_num_seqs``."""
    from tuner.measure.interleave import interleaved_comparison

    steps = interleaved_comparison(bench, {}, {}, block_steps=1, budget_s=3.0, seed=0)
    step_s = steps.mean_step_s["A"]
    assert step_s is not None and steps.batch_size == engine["max_num_seqs"], steps.to_dict()
    return step_s


def is_engine_core(process: psutil.Process) -> bool:
    """Whether ``process`` is a vLLM EngineCore (it renames itself; a name may be cut to 15 characters)."""
    try:
        return "EngineCore" in process.name() or any("EngineCore" in part for part in process.cmdline())
    except psutil.Error:
        return False


STREAMING_ENGINE = {**TINY_ENGINE, "enable_prefix_caching": True, "block_size": 32}
"""The shared streaming engine: KV blocks of 32 tokens, so a trace's hash ids (32 tokens each) are its blocks."""


def experiment(name: str, tmp_path: Path | None = None, **sections: Any) -> Experiment:
    """An experiment named ``name`` on the tiny engine (``engine=`` another), with the given sections, writing
    under ``tmp_path`` when given."""
    body: dict[str, Any] = {"name": name, "engine": TINY_ENGINE, **sections}
    if tmp_path is not None:
        body["output_dir"] = str(tmp_path)
    return Experiment.model_validate(body)


def capacity_experiment(tmp_path: Path | None = None, **sections: Any) -> Experiment:
    """An experiment named ``capacity`` on the shared streaming engine, with the given sections."""
    return experiment("capacity", tmp_path, engine=STREAMING_ENGINE, **sections)


# ---- workers sharing one study (tests/test_workers.py, tests/engine/test_workers_engine.py)

WORKER_SPACE: dict[str, Any] = {
    "gc_threshold": [False, True],
    "gc_threshold.gen0_per_seq": [8, 64],
    "shared_empty_kv_blocks": [False, True],
}


GRACE_S = 5
"""The workers' grace period (s) before a silent worker's trial is failed and retried."""


def write_worker_experiment(tmp_path: Path, name: str) -> Path:
    """An experiment file for workers sharing one study: a small grid, run-level pairs, a short heartbeat."""
    path = tmp_path / f"{name}.yaml"
    body = {
        "name": name,
        "engine": TINY_ENGINE,
        "workload": SMALL_WORKLOAD,
        "measure": {"warmup_prompts": 2},
        "search": {
            "space": WORKER_SPACE,
            "pairs": {"min": 2, "max": 2},
            "method": "runs",
            "heartbeat_s": 1,
            "grace_period_s": GRACE_S,
        },
        "output_dir": str(tmp_path / "results"),
    }
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


def study_trials(url: str, study_name: str) -> list[optuna.trial.FrozenTrial]:
    """The trials of ``study_name`` in the storage at ``url`` (none before it exists)."""
    try:
        return optuna.load_study(study_name=study_name, storage=url).get_trials(deepcopy=False)
    except KeyError:  # not created yet
        return []


def params_key(params: dict[str, Any]) -> str:
    """A grid point's parameters as one comparable string."""
    return repr(sorted(params.items()))


# ---- records and series to read (the report, tail, calibration and dashboard tests)


def intervals(rows: list[tuple[float, float, int]]) -> dict[str, Any]:
    return {"start": [r[0] for r in rows], "end": [r[1] for r in rows], "tag": [r[2] for r in rows], "dropped": 0}


def synthetic_run() -> tuple[list[RequestTiming], list[dict[str, Any]]]:
    """One request and two processes whose pauses fall into known inter-token gaps."""
    # One request, a token every 10 ms from t=100 s; three tokens are 50 ms late.
    gaps = [0.01] * 200
    slow_gaps = (50, 120, 180)
    for slow in slow_gaps:
        gaps[slow] = 0.05
    times = 100 + np.cumsum(gaps)
    timing = RequestTiming(prompt_tokens=1, sent=100.0, chunk_times=times.tolist(), chunk_tokens=[1] * 200)
    gap_start = [times[i - 1] for i in slow_gaps]
    # EngineCore: a critical gen2 pause inside the first two slow gaps, a hidden gen0 pause inside the third;
    # the worker: a critical gen0 pause during a fast token.
    core = {
        "process_name": "EngineCore",
        "gc": {
            "pauses": intervals(
                [
                    (gap_start[0] + 0.01, gap_start[0] + 0.04, pause_tag(2, False)),
                    (gap_start[1] + 0.01, gap_start[1] + 0.04, pause_tag(2, False)),
                    (gap_start[2] + 0.01, gap_start[2] + 0.02, pause_tag(0, True)),
                ]
            )
        },
        # A step per token; the slow gaps hold one long step each (48, 47 and 46 ms: the p99 leaves out the last).
        "steps": intervals(
            [
                (t - (0.049 - 0.001 * slow_gaps.index(i) if i in slow_gaps else 0.009), t - 0.001, 8)
                for i, t in enumerate(times)
            ]
        ),
    }
    worker = {"process_name": "VllmWorker-0", "gc": {"pauses": intervals([(times[10] + 0.001, times[10] + 0.002, 0)])}}
    return [timing], [core, worker]


def calibration_record(
    recommended: int = 2, steps_per_gen0: float | None = 50.0, gc_share: float = 2e-4
) -> Calibration:
    return {
        "schema": CALIBRATION_SCHEMA,
        "experiment": "x",
        "created": "2026-11-25T00:00:00+00:00",
        "vllm": "0.32.0",
        "topology": {"executor": "mp (worker processes)", "scheduling": "sync", "processes": ""},
        "precision": [
            {
                "method": "runs",
                "block_steps": None,
                "pairs": 6,
                "elapsed_s": 15.0,
                "log_sd": 0.05,
                "ratio": 1.0,
                "ci": (0.9, 1.1),
                "engine_s_per_pct": 400.0,
            },
            {
                "method": "steps",
                "block_steps": 2,
                "pairs": 170,
                "elapsed_s": 15.0,
                "log_sd": 0.1,
                "ratio": 1.0,
                "ci": (0.99, 1.01),
                "engine_s_per_pct": 10.0,
            },
            {
                "method": "collector",
                "block_steps": 32,
                "pairs": 8,
                "elapsed_s": 12.0,
                "log_sd": 0.004,
                "ratio": 1.0,
                "ci": (0.997, 1.003),
                "engine_s_per_pct": 0.1,
            },
        ],
        "recommended_block_steps": recommended,
        "recovery": [],
        "gc": {
            "steps": 700,
            "gen0_collections": 14,
            "steps_per_gen0": steps_per_gen0,
            "gc_share": 1e-4,
            "share_of_mutator": gc_share,
        },
        "strategies": {},
        "elapsed_s": 130.0,
    }


RATIO = "perf-gpu/ratio-to-baseline/gc_threshold(gen0_per_seq=64)/output_tokens_per_s"


def sha(i: int) -> str:
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def data_js(path: Path, series: dict[str, list[float]], tool: str = "customBiggerIsBetter") -> Path:
    """github-action-benchmark's gh-pages data.js with one suite holding ``series`` (name -> value per commit)."""
    n = len(next(iter(series.values())))
    runs = [
        {
            "commit": {"id": sha(i), "message": f"commit {i}", "timestamp": f"2026-03-{i % 28 + 1:02d}T12:00:00Z"},
            "date": 1_770_000_000_000 + i * 86_400_000,
            "tool": tool,
            "benches": [
                {"name": name, "value": vals[i], "unit": "x baseline", "range": "0.99-1.01x (95% CI)"}
                for name, vals in series.items()
            ],
        }
        for i in range(n)
    ]
    data = {"lastUpdate": 1, "repoUrl": "https://example.invalid/repo", "entries": {"vLLM ratios (GPU)": runs}}
    path.write_text("window.BENCHMARK_DATA = " + json.dumps(data, indent=2))
    return path
