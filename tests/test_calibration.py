"""The calibration record and the grain chosen from it (no engine: records built by hand)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.support import calibration_record
from tuner.calibrate.run import CHECK_PAIRS, STRICT_PAIRS, _check_budget_s
from tuner.errors import UserError
from tuner.measure.grain import DEFAULT_BLOCK_STEPS, grain_for
from tuner.measure.interleave import InterleaveResult
from tuner.records.calibration import (
    cost_line,
    engine_s_per_pct,
    load_calibration,
    save_calibration,
)


def test_engine_seconds_per_percent_is_time_per_pair_times_pairs_for_a_one_percent_ci() -> None:
    # 0.1 per-pair log SD: (1.96 * 0.1 / log 1.01)^2 = 388.3 pairs for +-1%, at 0.05 s each.
    assert engine_s_per_pct(0.05, 0.1) == pytest.approx(0.05 * (1.96 * 0.1 / math.log(1.01)) ** 2)
    assert engine_s_per_pct(0.05, 0.2) == pytest.approx(4 * engine_s_per_pct(0.05, 0.1))  # noise doubled: 4x time
    assert engine_s_per_pct(0.05, math.inf) == math.inf and engine_s_per_pct(0.0, 0.1) == math.inf


def test_the_record_round_trips_and_another_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    assert load_calibration(path) is None  # none yet: the sweep uses the default grain
    save_calibration(path, calibration_record())
    assert load_calibration(path) == json.loads(json.dumps(calibration_record()))
    path.write_text(json.dumps({**calibration_record(), "schema": "tuner.calibration/0"}))
    with pytest.raises(UserError, match="run `tuner calibrate` again"):
        load_calibration(path)
    path.write_text("{not json")
    with pytest.raises(UserError, match="not a readable calibration"):
        load_calibration(path)


def test_the_cost_line_says_what_one_percent_costs_against_run_level_pairs() -> None:
    line = cost_line(calibration_record())
    assert "~10 engine-seconds here at 2-step blocks" in line and "~400 s (40x)" in line


def test_the_grain_follows_the_calibration_and_takes_gc_pacing_apart_at_that_grain() -> None:
    plain = {"shared_empty_kv_blocks": {"enabled": False}}
    assert (grain_for(plain, None).block_steps, grain_for(plain, None).paced) == (DEFAULT_BLOCK_STEPS, False)
    assert grain_for(plain, calibration_record(recommended=4)).block_steps == 4
    assert grain_for(plain, calibration_record(recommended=4), block_steps=8).block_steps == 8  # the experiment decides
    gc = {"gc_threshold": {"gen0_per_seq": 64}}
    paced = grain_for(gc, calibration_record(recommended=2))
    assert (paced.block_steps, paced.paced) == (2, True)  # the mutator at the calibrated grain, not long blocks
    assert "gc_threshold paces the collector" in paced.why and "without its GC" in paced.why
    assert grain_for({**gc, **plain}, None).paced  # one pacing strategy makes the trial a GC-pacing one


def test_a_recovery_check_runs_long_enough_for_a_strict_ci_at_its_grains_pair_rate() -> None:
    """At 5 pairs in 6 s (16-step blocks on a slow host) no 99.9% sign-flip CI exists; the check gets the time for
    CHECK_PAIRS pairs at that rate. A fast grain keeps the user's budget."""

    def aa(pairs: int, elapsed_s: float) -> InterleaveResult:
        return InterleaveResult(estimate=None, sums=[((1, 0.02), (1, 0.02))] * pairs, elapsed_s=elapsed_s)

    assert 2 ** (1 - STRICT_PAIRS) < 1 - 0.999 < 2 ** (2 - STRICT_PAIRS)  # the fewest pairs with a 99.9% CI
    assert _check_budget_s(aa(5, 6.0), 6.0) == pytest.approx(CHECK_PAIRS * 6.0 / 5)
    assert _check_budget_s(aa(120, 6.0), 6.0) == 6.0
    assert _check_budget_s(aa(0, 6.0), 6.0) == 6.0  # no rate known: the user's budget
