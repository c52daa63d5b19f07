"""A real sweep through the CLI on the CPU engine: one engine for all trials, Ctrl-C, then --resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.support import TINY_ENGINE
from tuner.cli.main import app

pytestmark = pytest.mark.engine


def write_experiment(tmp_path: Path) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "name": "e2e",
                "engine": TINY_ENGINE,
                "workload": {
                    "num_prompts": 8,
                    "input_len": {"dist": "fixed", "value": 8},
                    "output_len": {"dist": "fixed", "value": 16},
                },
                "measure": {"warmup_prompts": 2},
                "search": {
                    "space": {
                        "gc_threshold": [False, True],
                        "gc_threshold.gen0_per_seq": [64],
                        "shared_empty_kv_blocks": [False, True],
                        "shared_empty_kv_blocks.enabled": [False],
                    },
                    "objectives": [{"metric": "output_tokens_per_s"}],
                    "constraints": [{"metric": "itl_p99_ms", "max": 10_000}],
                    "pairs": {"min": 2, "max": 2},
                    "step_budget_s": 4,
                    "confirm": {"budget_s": 6, "looks": 2},
                },
                "output_dir": str(tmp_path / "results"),
            }
        )
    )
    return path


def tuner(*args: str) -> list[str]:
    return [sys.executable, "-m", "tuner", *args]


def running_trials(db: Path) -> list[int]:
    """The numbers of the trials running in the study at ``db``, read without writing: Optuna's ``load_study``
    creates missing tables, and did so here while the sweep was creating them (the sweep then failed: "table
    trial_intermediate_values already exists")."""
    if not db.exists():
        return []
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            return [n for (n,) in conn.execute("SELECT number FROM trials WHERE state = 'RUNNING'")]
    except sqlite3.OperationalError:  # no tables yet, or the sweep holds the write lock
        return []


def test_sweep_interrupted_then_resumed_without_duplicates(tmp_path: Path) -> None:
    path = write_experiment(tmp_path)
    db = tmp_path / "results" / "e2e" / "study.db"
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(
        tuner("sweep", str(path)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # interrupt in the middle of trial 1 (the baseline is trial 0)
        if 1 in running_trials(db):
            break
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("trial 1 never started")
    proc.send_signal(signal.SIGINT)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 130, output[-3000:]
    assert "Traceback" not in output
    summary = json.loads((tmp_path / "results" / "e2e" / "sweep" / "summary.json").read_text())
    states = {t["number"]: t["state"] for t in summary["trials"]}
    assert states[0] == "COMPLETE" and states[1] == "INTERRUPTED"

    again = CliRunner().invoke(app, ["sweep", str(path)])
    assert again.exit_code == 2 and "--resume" in again.stderr  # never silently restarts a study

    resumed = subprocess.run(
        tuner("sweep", str(path), "--resume"), capture_output=True, text=True, env=env, timeout=600
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    summary = json.loads((tmp_path / "results" / "e2e" / "sweep" / "summary.json").read_text())
    complete = [t for t in summary["trials"] if t["state"] == "COMPLETE"]
    configs = [json.dumps(t["params"], sort_keys=True) for t in complete]
    assert len(complete) == 4 and len(set(configs)) == 4  # the whole grid, each point exactly once
    assert summary["engine_starts"] == 1  # the resumed run did 3 trials on one engine
    assert all(t["pairs"] == 2 and t["token_ids_match"] for t in complete)
    for trial in complete:
        if not trial["is_baseline"]:
            ratio = trial["ratios"]["output_tokens_per_s"]
            assert ratio["ci_low"] <= ratio["ratio"] <= ratio["ci_high"]
            assert trial["verdict"] in {"better", "worse", "no_difference", "not_significant"}
    assert all(0 <= s < 5 for s in summary["switch_s"])
    # Every step-switchable set is judged by step interleaving at the grain its strategies need: one-step blocks
    # without a calibration; GC pacing taken apart: its mutator in one-step blocks with each step's GC taken out,
    # and its collector from each arm alone (here the engine's own GC is far below a tenth of min_effect: piloted,
    # then bounded), within the same 4 s step budget.
    by_set = {tuple(t["strategies"]): t for t in complete}
    kv = by_set[("shared_empty_kv_blocks",)]["step_interleave"]
    assert kv["steps"] > 0 and (kv["block_steps"], kv["left_out"]) == (1, [])
    assert by_set[("shared_empty_kv_blocks",)]["ratios"]["output_tokens_per_s"]["source"] == "steps"
    assert "decode step time" in by_set[("shared_empty_kv_blocks",)]["ratios"]["output_tokens_per_s"]["quantity"]
    gc = by_set[("gc_threshold",)]
    pacing = gc["gc_pacing"]
    assert pacing["mutator"] is not None and pacing["mutator_pairs"] >= 2 and pacing["collector_s"] > 0
    assert pacing["skipped"].startswith("collector only piloted") and pacing["bound"] < 0.001
    assert gc["step_interleave"]["block_steps"] == 1 and "paces the collector" in gc["step_interleave"]["grain"]
    ratio = gc["ratios"]["output_tokens_per_s"]
    # A product of the mutator and the collector's bound; where the pilot saw no collection in either arm the bound
    # is 0 and the product is the mutator's own ratio of sums, exactly (tuner.stats.product).
    assert ratio["source"] == "steps"
    assert ratio["statistic"] == ("product_of_ratios" if pacing["bound"] > 0 else "ratio_of_sums")
    mutator = pacing["mutator"]  # a step-time ratio; the trial's ratio is throughput, its CI widened by the bound
    assert ratio["ci_low"] <= 1 / mutator["ratio"] <= ratio["ci_high"]
    # Then the candidates were confirmed on fresh pairs; winner files exist only for a confirmed winner.
    # No candidate at all is a legitimate outcome: a trial whose screening CI lies wholly below 1 is not one (at 2
    # run-level pairs the CI, which inverts the sign-flip test, is unbounded; a step-level trial's can exclude 1).
    # Nor is one whose screening interval rules out min_effect, or whose budget gives it less than even odds to
    # confirm what it hopes (run-level candidates get 5-6 pairs in 6 s on this host, too few for the exact test to
    # reach one-sided 2.5% at 2 looks): the notes say so instead of spending the budget.
    decision = summary["confirmation"]["decision"]
    plans = summary["confirmation"]["plan"]
    assert all(r["confirmation"] is not None for r in decision["rows"])
    assert {r["trial"] for r in decision["rows"]} == {p["trial"] for p in plans} and all(p["measurable"] for p in plans)
    if not decision["rows"]:
        assert not summary["winner"]["confirmed"] and not plans
        assert "no screened trial was nominated" in decision["reason"], decision["reason"]
    out = tmp_path / "results" / "e2e" / "sweep"
    if summary["winner"]["confirmed"]:
        assert "TUNER_PLUGIN=" in (out / "winner.env").read_text()
    else:
        assert "no confirmed winner" in (out / "no-confirmed-winner.txt").read_text()
        assert not (out / "winner.yaml").exists()
    assert "minimum detectable effect" in resumed.stdout
    assert "(screening" in resumed.stdout or "not significant" in resumed.stdout  # screening calls say what they are
