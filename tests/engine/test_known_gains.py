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
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support import TINY_ENGINE, fixed_workload
from tuner.stats import detection_power, paired_ratio_of_sums
from tuner.sweep.confirmation import candidate
from tuner.sweep.plans import Design, plan_candidate

pytestmark = pytest.mark.engine

BASE_MS = 2.0  # the wait the cut comes out of: >= 1% of any step seen here
CUT_SHARE = 0.01  # of this engine's own median step, measured before the cut is first applied
GAIN_RANGE = (1.005, 1.015)  # about 1%: a compared step is not the median step the cut was sized on (0.76-1.07%)
STRICT = 0.999
DEMANDED_POWER = 0.95
ATTEMPTS = 3
BUDGET_S = 60
METRIC = "output_tokens_per_s"


@dataclass(frozen=True)
class Outcome:
    """What one sweep of the known gain found: the confirmation's decision, its pairs and the power its noise
    gave the tool's own test for the known gain."""

    confirmed: bool
    known_gain: float
    pairs: list[list[float]]
    power: float
    line: str


def _sweep_the_known_gain(out: Path, side: str) -> Outcome:
    name = f"{side}_speedup"
    path = out / "gain.yaml"
    out.mkdir(parents=True)
    experiment = {
        "name": "gain",
        "engine": {**TINY_ENGINE, "max_num_seqs": 32},
        "workload": fixed_workload(32, 48),
        "measure": {"warmup_prompts": 4},
        "search": {
            "space": {name: [False, True], f"{name}.cut_share": [CUT_SHARE]},
            "pairs": {"min": 2, "max": 2},
            "step_budget_s": 15,
            # This host's calibration picks 2-step blocks (10-13 engine-seconds per +-1% against 23-26 at one step;
            # `tuner calibrate experiments/quickstart.yaml`), as a user's quickstart sweep would use them.
            "block_steps": 2,
            # The default min_effect (1%). At 0.5% a candidate is nominated only where its plan has 50% power at
            # max(0.5%, its screening's point): a true 0.9% screened at 0.6% then goes unmeasured (CI at 4dfd4f2).
            "confirm": {"budget_s": BUDGET_S, "looks": 2, "max_candidates": 1},
        },
        "output_dir": str(out / "results"),
    }
    path.write_text(yaml.safe_dump(experiment))
    base = f"{BASE_MS},0" if side == "engine_core" else f"0,{BASE_MS}"  # a wait only where the cut is
    cut_log = out / "cut.log"
    env = {**os.environ, "TUNER_TEST_BASE_DELAY_MS": base, "TUNER_TEST_CUT_LOG": str(cut_log), "COLUMNS": "200"}
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "sweep", str(path)], capture_output=True, text=True, env=env, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "results" / "gain" / "sweep" / "summary.json").read_text())
    trial = next(t for t in summary["trials"] if t["strategies"] == {name: {"cut_share": CUT_SHARE}})
    steps = trial["step_interleave"]
    assert steps["block_steps"] == 2 and steps["left_out"] == []  # compared per step, in every engine process
    (logged,) = cut_log.read_text().split("\n")[:-1]  # one process on this side fixed its cut, once
    strategy, median_step_s = logged.split()
    assert strategy == name
    cut_s = CUT_SHARE * float(median_step_s)
    confirmation = summary["confirmation"]
    if not confirmation["plan"]:
        return _not_nominated(trial, confirmation["notes"], side, cut_s)
    assert confirmation["plan"][0]["method"] == "steps" and confirmation["plan"][0]["block_steps"] == 2
    pairs = confirmation["pairs"][str(trial["number"])]
    known_gain = 1 + cut_s * sum(p[0] for p in pairs) / sum(p[1] for p in pairs)
    effect = confirmation["decision"]["rows"][0]["confirmation"]
    power = detection_power(effect["log_sd"], len(pairs), known_gain - 1, looks=2)
    reference_step_ms = 1e3 * sum(p[3] for p in pairs) / sum(p[2] for p in pairs)
    line = (
        f"{side} (cut {1e3 * cut_s:.3f} ms of {reference_step_ms:.1f}): confirmed {effect['ratio']:.4f} "
        f"[{effect['ci_low']:.4f}, {effect['ci_high']:.4f}], known {known_gain:.4f}; "
        f"{len(pairs)} pairs at log SD {effect['log_sd']:.3f}: power {power:.3f} for it"
    )
    confirmed = summary["winner"]["confirmed"] and confirmation["decision"]["winner"] == trial["number"]
    return Outcome(confirmed, known_gain, pairs, power, line)


def _not_nominated(trial: dict, notes: list[str], side: str, cut_s: float) -> Outcome:
    """A sweep whose screening left the speedup unmeasured (ruled out, or too noisy for its budget): a miss, with
    the power the tool's own plan would have had for the known gain at the screening's noise."""
    steps = trial["step_interleave"]
    known_gain = 1 + cut_s / steps["mean_step_s"]["A"]
    screened = steps["estimate"]
    plan = plan_candidate(
        candidate(trial, METRIC), screened["log_sd"], screened["n"], budget_s=BUDGET_S, m=1, design=Design(m=1, looks=2)
    )
    power = plan.power_at(known_gain - 1)
    line = (
        f"{side}: not nominated ({'; '.join(notes)}); screened {screened['ratio']:.4f} of the reference's step time "
        f"over {screened['n']} pairs at log SD {screened['log_sd']:.3f}, known gain {known_gain:.4f}: its plan's "
        f"power {power:.3f} for it"
    )
    return Outcome(False, known_gain, [], power, line)


@pytest.mark.parametrize("side", ["worker", "engine_core"])
def test_a_known_one_percent_gain_is_confirmed_within_60_s(tmp_path: Path, side: str) -> None:
    """Every sweep: the 99.9% CI of the confirmation's own pairs (the tool prints its 95% one) covers the known
    gain, so a calibrated CI fails this in 1 run of 1000. And the confirmed candidate is the speedup whenever the
    noise the run actually had gave the tool's own test (one-sided 2.5%, 2 O'Brien-Fleming looks) at least 95%
    power for the known gain; a miss there is run again, and three such misses fail the test. A sweep whose screening
    leaves the speedup unmeasured is a miss too, at the power its plan would have had from the screening's noise:
    a screening interval rules out the 1% min_effect for a true 0.76% gain up to ~8% of the time, so a miss at 95%
    power comes at most 1 time in 8, three in a row in 1 run of 500. A tool that cannot detect the gain at that noise
    fails it every time.

    Why conditional: on this 2-core host the step noise depends on what else runs. Alone, per-pair log SD was
    0.044-0.088 over 408-574 pairs (power for the known gain 0.57-1.00, most often above 0.95); with one other test
    process beside it, 0.15-0.23 (power ~0.13), and the tool then says before confirming that its budget "cannot
    reach min_effect". The per-pair SD is estimated independently of the mean, so conditioning on it does not
    bias the check.

    The cut is 1% of this engine's own median step (this host's steps have been 21-53 ms), so the known gain is
    ~1% whatever the host's speed that day; each sweep's gain is computed from the cut its engine logged."""
    lines = []
    for attempt in range(ATTEMPTS):
        outcome = _sweep_the_known_gain(tmp_path / f"sweep{attempt}", side)
        lines.append(outcome.line)
        print(outcome.line)
        if outcome.pairs:
            columns = ([p[i] for p in outcome.pairs] for i in range(4))
            strict = paired_ratio_of_sums(*columns, confidence=STRICT)
            assert strict.ci_low <= outcome.known_gain <= strict.ci_high, (outcome.known_gain, strict)
        assert GAIN_RANGE[0] <= outcome.known_gain <= GAIN_RANGE[1], outcome.line
        if outcome.confirmed or outcome.power < DEMANDED_POWER:
            return
    pytest.fail(f"not confirmed in {ATTEMPTS} sweeps, each with power >= {DEMANDED_POWER}: " + "; ".join(lines))
