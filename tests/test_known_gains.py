"""``tuner sweep`` on the CPU engine confirms a known 1% gain in EngineCore and another in the worker process.

Each sweep starts an engine whose every step waits a base time on the side under test (``TUNER_TEST_BASE_DELAY_MS``;
a busy-wait on both sides at once starves the front-end on this 2-core host). The strategy under test (third-party,
``tests/third_party``) cuts a known part of that wait. The sweep screens it, compares it step by step (each batch
carries its arm to the worker process) and confirms it on fresh step pairs within 60 s. The candidate's throughput
gain is known: cut / its mean step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import TINY_ENGINE, fixed_workload
from tuner.stats import paired_ratio_of_sums

pytestmark = pytest.mark.engine

BASE_MS = 2.0
CUT_MS = 0.2  # ~1% of a step of this engine with the base waits (17-24 ms)
STRICT = 0.999


@pytest.mark.parametrize("side", ["worker", "engine_core"])
def test_a_known_one_percent_gain_is_confirmed_within_60_s(tmp_path: Path, side: str) -> None:
    """The confirmed candidate is the speedup, and a 99.9% CI of the confirmation's own pairs (the tool prints
    its 95% one) covers the known gain: a calibrated CI misses in 1 run of 1000. Power: at 10-13 engine-seconds
    per +-1% (this host, 2-step blocks) the confirmation's ~48 s of pairs reach +-0.45-0.5%, so a 1% gain clears
    the final O'Brien-Fleming bound (z ~2.0) in well over 99 runs of 100; at one-step blocks (23-26 s per +-1%)
    it would be ~85 and this test would be flaky, which is why the grain is measured, not fixed."""
    name = f"{side}_speedup"
    path = tmp_path / "gain.yaml"
    experiment = {
        "name": "gain",
        "engine": {**TINY_ENGINE, "max_num_seqs": 32},
        "workload": fixed_workload(32, 48),
        "measure": {"warmup_prompts": 4},
        "search": {
            "space": {name: [False, True], f"{name}.cut_ms": [CUT_MS]},
            "pairs": {"min": 2, "max": 2},
            "step_budget_s": 15,
            # This host's calibration picks 2-step blocks (10-13 engine-seconds per +-1% against 23-26 at one step;
            # `tuner calibrate experiments/quickstart.yaml`), as a user's quickstart sweep would use them.
            "block_steps": 2,
            "confirm": {"budget_s": 60, "looks": 2, "min_effect": 0.01, "max_candidates": 1},
        },
        "output_dir": str(tmp_path / "results"),
    }
    path.write_text(yaml.safe_dump(experiment))
    base = f"{BASE_MS},0" if side == "engine_core" else f"0,{BASE_MS}"  # a wait only where the cut is
    env = {**os.environ, "TUNER_TEST_BASE_DELAY_MS": base, "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "sweep", str(path)], capture_output=True, text=True, env=env, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "results" / "gain" / "sweep" / "summary.json").read_text())
    trial = next(t for t in summary["trials"] if t["strategies"] == {name: {"cut_ms": CUT_MS}})
    steps = trial["step_interleave"]
    assert steps["block_steps"] == 2 and steps["left_out"] == []  # compared per step, in every engine process
    confirmation = summary["confirmation"]
    assert confirmation["candidates"][0]["method"] == "steps"
    pairs = confirmation["pairs"][str(trial["number"])]
    known_gain = 1 + CUT_MS / 1e3 * sum(p[0] for p in pairs) / sum(p[1] for p in pairs)
    effect = confirmation["decision"]["rows"][0]["confirmation"]
    interval = f"[{effect['ci_low']:.4f}, {effect['ci_high']:.4f}]"
    print(f"{side}: confirmed {effect['ratio']:.4f} {interval}, known {known_gain:.4f}")
    assert 1.006 <= known_gain <= 1.014  # the gain is the 1% this test is about
    assert summary["winner"]["confirmed"] and confirmation["decision"]["winner"] == trial["number"], confirmation
    strict = paired_ratio_of_sums(*([p[i] for p in pairs] for i in range(4)), confidence=STRICT)
    assert strict.ci_low <= known_gain <= strict.ci_high, (known_gain, strict)
