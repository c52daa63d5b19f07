"""The power statement before screening reads the noise of the method each trial will use: the calibration's step
noise for step trials at a calibrated grain (for GC-pacing trials, the mutator's and, where GC matters, the
collector's), the baseline's run-level pairs for run-level trials; restart pairs are said to be measured by their own
trials."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import support
from tests.support import calibration_record
from tuner.config import Experiment
from tuner.config.start import StartConfig
from tuner.measure.gc_pacing import PILOT_SHARE, split_share
from tuner.measure.grain import grain_for
from tuner.records.calibration import Calibration
from tuner.stats import predict_sd
from tuner.sweep.noise import power_before_screening
from tuner.sweep.plans import CONFIRMATION_PACE
from tuner.sweep.study import planned_configs


def experiment(tmp_path: Path) -> Experiment:
    space = {"shared_empty_kv_blocks": [False, True], "gc_threshold": [False, True], "engine.max_num_seqs": [32, 8]}
    return support.experiment(
        "power",
        tmp_path,
        engine={"model": "builtin:opt-tiny", "max_num_seqs": 32},
        search={
            "space": space,
            "sampler": "grid",
            "pairs": {"min": 6, "max": 8},
            "step_budget_s": 20,
            "confirm": {"budget_s": 30, "looks": 2},
        },
    )


def method_of(config: StartConfig) -> str:
    """As the sweep decides it: another engine than the experiment's is measured by restart pairs."""
    return "restarts" if config.engine.get("max_num_seqs", 32) != 32 else "steps"


def baseline_arms(walls: tuple[float, ...]) -> dict[str, list[dict[str, float]]]:
    """Six run-level A/A pairs of 1.2 s runs, the trial arm's walls scattered by ``walls``."""
    reference = [{"wall_s": 1.2, "output_tokens_per_s": 1000.0} for _ in walls]
    trial = [{"wall_s": 1.2 * w, "output_tokens_per_s": 1000.0 / w} for w in walls]
    return {"trial": trial, "reference": reference}


def statement(tmp_path: Path, calibration: Calibration | None) -> dict[str, Any]:
    exp = experiment(tmp_path)
    assert exp.search is not None
    configs = planned_configs(exp)
    assert len(configs) == 7  # the grid less the baseline
    walls = (1.2, 0.85, 1.15, 0.8, 1.1, 0.9)  # run-level noise: per-pair SD ~0.17
    return power_before_screening(
        configs,
        method_of,
        lambda c: grain_for(c.strategies, calibration),
        calibration,
        baseline_arms(walls),
        exp.search,
    )


def test_step_trials_are_stated_from_the_calibrations_step_noise(tmp_path: Path) -> None:
    calibration = calibration_record()  # 2-step blocks: per-pair SD 0.1 from 170 pairs in 15 s
    power = statement(tmp_path, calibration)
    groups = {(g["method"], g["grain"]): g for g in power["groups"]}
    steps = groups[("steps", "2-step blocks")]
    assert steps["log_sd"] == 0.1 and steps["pairs_per_s"] == pytest.approx(170 / 15)
    predicted = predict_sd(0.1, 170, next_pairs=steps["screening_pairs"])  # what its screenings are expected to show
    assert steps["sd_upper"] == pytest.approx(predicted.high) and steps["sd_low"] == pytest.approx(predicted.low)
    assert steps["sd_low"] < 0.1 < steps["sd_upper"]
    assert steps["screening_pairs"] == int(170 / 15 * 20)  # the whole step budget
    plan = steps["confirmation"]
    assert plan["pairs"] == int(CONFIRMATION_PACE * 30 * 170 / 15) and plan["holm_m"] == 3
    runs_sd = groups[("runs", "run-level pairs")]["log_sd"] if ("runs", "run-level pairs") in groups else None
    assert runs_sd is None  # no trial of this space is measured by run-level pairs: their noise is not quoted
    gc = groups[("steps", "GC pacing: 2-step mutator + collector")]  # GC 0.02% here: the collector only piloted
    assert gc["log_sd"] == 0.1 and gc["pairs_per_s"] == pytest.approx(170 / 15 * (1 - PILOT_SHARE))
    assert "for the mutator" in gc["source"] and "only piloted" in gc["source"]
    heavy = statement(
        tmp_path, calibration_record(gc_share=0.05)
    )  # GC 5% of a step: the collector's noise is stated too
    both = next(g for g in heavy["groups"] if g["grain"] == "GC pacing: 2-step mutator + collector")
    r_m, r_c = 170 / 15, 8 / 12.0
    c = split_share(0.004**2 / r_c, 0.1**2 / r_m)  # each part's variance times its engine seconds
    assert c == pytest.approx(PILOT_SHARE)  # a quiet collector, noisy steps: the mutator gets all but the pilot
    expected = (0.1**2 + 0.004**2 * r_m * (1 - c) / (r_c * c)) ** 0.5
    assert both["log_sd"] == pytest.approx(expected)
    assert both["pairs_per_s"] == pytest.approx(r_m * (1 - c))
    assert "collector A/A (8 block pairs" in both["source"]
    assert any("engine.max_num_seqs: compared by restart pairs" in line for line in power["lines"])
    text = "\n".join(power["lines"])
    assert "the calibration's A/A at this block length (170 pairs" in text and "at the top of the SD's range" in text
    assert f"per-pair SD 0.100 ({predicted.low:.3f}-{predicted.high:.3f} expected next)" in text


def test_a_quiet_step_grain_within_30_s_detects_under_one_and_a_half_percent(tmp_path: Path) -> None:
    """The calibration's 2-step noise on this host (SD ~0.038 at ~10 pairs/s): one step-level candidate planned
    within 30 s detects well under 1.5% even at Holm over 3 and two looks; at the top of the SD's predicted range
    (the host's drift roughly doubles it) under 2%."""
    calibration = calibration_record()
    calibration["precision"][1] |= {"log_sd": 0.038, "pairs": 150, "elapsed_s": 15.0}
    steps = next(g for g in statement(tmp_path, calibration)["groups"] if g["grain"] == "2-step blocks")
    assert steps["confirmation"]["mde"] < 0.01 and steps["confirmation"]["mde_upper"] < 0.02


def test_without_a_calibration_step_noise_is_unknown_until_screening(tmp_path: Path) -> None:
    power = statement(tmp_path, None)
    steps = next(g for g in power["groups"] if g["grain"] == "1-step blocks")
    assert steps["log_sd"] is None and "no calibration" in steps["source"] and steps["confirmation"] is None


def test_a_calibration_measured_by_the_body_states_the_guards_noise_and_power_counts_it(tmp_path: Path) -> None:
    """The calibration's step A/A measured by the body also records its whole time's SD: the statement quotes it,
    and a whole time twice as noisy as the body (pauses past the cap, as an H100's) costs the planned confirmation
    power: a larger MDE and a lower chance for a min_effect trial than the body alone would promise."""
    calibration = calibration_record()
    calibration["precision"][1] |= {"log_sd": 0.05, "pairs": 300, "elapsed_s": 15.0}
    alone = next(g for g in statement(tmp_path, calibration)["groups"] if g["grain"] == "2-step blocks")
    calibration["precision"][1]["guard_log_sd"] = 0.10
    power = statement(tmp_path, calibration)
    guarded = next(g for g in power["groups"] if g["grain"] == "2-step blocks")
    assert guarded["guard_sd"] == 0.10 and alone["guard_sd"] is None
    assert guarded["confirmation"]["mde"] > alone["confirmation"]["mde"]
    assert guarded["sweep_power"] < alone["sweep_power"]
    text = "\n".join(power["lines"])
    assert "(the body's; its guard's whole time 0.1)" in text and "the guard holding too" in text
