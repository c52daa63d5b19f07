"""`tuner versions` on the CPU engine: cheap virtualenvs holding the same vLLM (tests/venvs.py), one of them with
a known host delay (the test plugin's ``TUNER_TEST_HOST_DELAY_MS``, set by a ``.pth`` line in that venv only).

Each test runs 6 start pairs (12 engine starts, ~40 s each here: ~8 min), the fewest at which the sign-flip test
can call a change, and the sign-flip test then calls one only when all 6 start pairs agree. Error rates: the CI
inverts that sign-flip test, so at 6 start pairs the A/A CI misses 1 exactly when the verdict calls a difference:
in 2 of the 64 swap patterns (3.1%) when the two installs are exchangeable. The A/A test asserts both.
The delay (15 ms per ~10 ms step: 5 ms made a 32% slowdown here) is a log ratio of about -0.9 against a
start-pair SD of about 0.2-0.3 on this shared host (two starts of one install differed by 23%), so one start
pair comes out above 1 with probability below 0.1%: a miss is a failure of the command, not chance.
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

from tests.support import TINY_ENGINE
from tests.venvs import make_venv

pytestmark = [pytest.mark.engine, pytest.mark.slow]  # ~8 min each: `bash scripts/test.sh -m slow`

DELAY = 'import os; os.environ["TUNER_TEST_HOST_DELAY_MS"] = "15"'


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("versions")
    path = root / "exp.yaml"
    workload = {
        "num_prompts": 16,
        "input_len": {"dist": "fixed", "value": 8},
        "output_len": {"dist": "fixed", "value": 32},
    }
    path.write_text(
        yaml.safe_dump(
            {
                "name": "versions",
                "engine": TINY_ENGINE,
                "workload": workload,
                "measure": {"repetitions": 3, "warmup_prompts": 2},
                "output_dir": str(root / "results"),
            }
        )
    )
    return path


def versions(experiment: Path, *pythons: Path) -> tuple[dict[str, Any], str]:
    """Run `tuner versions` on ``pythons`` (6 start pairs); its versions.json and its output."""
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "versions", str(experiment), *map(str, pythons), "--starts", "6"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        timeout=1500,
        check=False,
    )
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-3000:]
    path = max((experiment.parent / "results").rglob("versions.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(path.read_text()), done.stdout


def test_versions_finds_a_known_host_delay(experiment: Path) -> None:
    a, slow = make_venv(experiment.parent / "a"), make_venv(experiment.parent / "slow", extra_lines=(DELAY,))
    record, out = versions(experiment, a, slow)
    (comparison,) = record["comparisons"]
    estimate = comparison["estimate"]
    assert estimate["n"] == 6 and estimate["verdict"] == "worse" and estimate["ci_high"] < 0.95, estimate
    assert all(r < 1 for r in comparison["start_pair_ratios"])
    assert comparison["restart_s"]["A"] > comparison["engine_start_s"]["A"] > 0  # interpreter and imports on top
    assert "B slower" in out


def test_versions_aa_between_two_venvs_of_the_same_vllm_calls_no_change(experiment: Path) -> None:
    """No change called, and the CI covers 1: it inverts the sign-flip test, so it misses 1 exactly when the verdict
    calls a difference (3.1% of A/A comparisons at 6 start pairs; the BCa bootstrap CI it replaced missed 1 in ~12%,
    once here: 0.964 [0.939, 0.985], p = 0.0625). The ratio stays within 10% of 1 (~0.5 of the start-pair SD)."""
    a, a2 = make_venv(experiment.parent / "a-aa"), make_venv(experiment.parent / "a2-aa")
    record, out = versions(experiment, a, a2)
    (comparison,) = record["comparisons"]
    estimate = comparison["estimate"]
    assert estimate["n"] == 6 and estimate["verdict"] == "no_difference" and not comparison["changed"], estimate
    assert estimate["ci_low"] <= 1 <= estimate["ci_high"], estimate
    assert 0.9 < estimate["ratio"] < 1.1 and "no change called" in out
