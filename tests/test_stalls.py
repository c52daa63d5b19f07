"""The stall estimand on numbers (no engine): which steps are stalls, the per-arm summary of a step-level
comparison's blocks and the paired stall-rate difference in it, and the report's table. The difference's
calibration (coverage, A/A flags) is in ``test_stall_rate_coverage``; on the engine: ``python -m
benchmarks.engine.stall_rate``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tuner.measure.stalls import CompareStep, compare_stalls
from tuner.report.document import Doc
from tuner.report.stall_section import stall_section
from tuner.stats.stall_rate import StallRule, paired_rate_difference, stall_flags

RULE = StallRule(factor=3.0, floor_s=0.020, window=64, min_history=8)


def _trial(number: int, strategies: dict[str, Any], step_interleave: dict[str, Any] | None) -> dict[str, Any]:
    """A trial row as the loader gives it, with what the stall table reads."""
    row = {"number": number, "is_baseline": False, "strategies": strategies, "engine": {}, "env": None}
    return {**row, "step_interleave": step_interleave}


def test_a_stall_is_slow_against_its_arms_recent_median_and_the_floor() -> None:
    rng = np.random.default_rng(1)
    steps = 0.030 * np.exp(rng.normal(0, 0.1, 500))  # 30 ms steps, 10% jitter
    stalls = [3, 100, 101, 400]  # the first is too early to judge; two in a row are two stalls
    steps[stalls] = 0.200
    steps[250] = 0.080  # 2.7 x the median: slow, not a stall
    judged, stall = stall_flags(steps, RULE)
    assert not judged[:8].any() and judged[8:].all()
    assert list(np.flatnonzero(stall)) == [100, 101, 400]
    # On a fast host the floor decides: 5 ms among 1 ms steps is five times the median but not a stall.
    fast = np.full(100, 0.001)
    fast[50] = 0.005
    assert not stall_flags(fast, RULE)[1].any()


def test_no_stalls_anywhere_is_no_difference_and_one_pair_is_too_few() -> None:
    none = paired_rate_difference([((0, 16), (0, 16))] * 10)
    assert none is not None and none.difference == 0 and not none.flagged and none.p_value == 1 == none.swap_p
    assert paired_rate_difference([((1, 16), (0, 16))]) is None


def test_a_comparisons_steps_give_each_arms_stalls_and_their_paired_difference() -> None:
    """B stalls 150 ms on every 10th of its steps, EngineCore collecting 40 ms of it once; A never stalls."""
    rng = np.random.default_rng(3)
    steps: list[CompareStep] = []
    b_steps = 0
    for pair in range(60):
        for arm in rng.permutation(["A", "B"]):
            for seconds in 0.030 * np.exp(rng.normal(0, 0.1, 8)):
                gc_s = 0.0
                if arm == "B":
                    b_steps += 1
                    if b_steps % 10 == 0:
                        seconds, gc_s = (0.160, 0.040) if b_steps == 250 else (0.150, 0.0)
                steps.append((arm, pair, float(seconds), gc_s))
    result = compare_stalls(steps, RULE)
    assert result.a.stalls == 0 and result.a.steps == 480 - 8
    assert result.b.stalls == 48 and result.b.steps == 472  # 480 steps, the first 8 not judged, no stall among them
    assert result.b.longest_s == pytest.approx(0.160) and result.b.longest_gc_s == pytest.approx(0.040)
    diff = result.difference
    assert diff is not None and diff.flagged and diff.ci_low <= 0.1 <= diff.ci_high
    data = result.to_dict()
    assert data["arms"]["B"]["rate"] == pytest.approx(48 / 472) and data["difference"]["flagged"] is True


def test_the_sweep_report_shows_each_step_level_trials_stalls_beside_its_verdict() -> None:
    """A trial whose comparison counted stalls gets a row (rates, difference with CI, longest stall and EngineCore's
    GC in it); a run-level trial (no step comparison) gets none, and with none at all there is no section."""
    steps: list[CompareStep] = []
    for pair in range(40):
        steps.append(("A", pair, 0.030, 0.0))
        steps.append(("B", pair, 0.200 if pair % 4 == 3 else 0.030, 0.012 if pair == 39 else 0.0))
    stalls = compare_stalls(steps, RULE).to_dict()
    trials = [
        _trial(1, {"known_stall": {"stall_ms": 170.0, "every": 4}}, {"stalls": stalls}),
        _trial(2, {"gc_freeze": {"enabled": True}}, None),
    ]
    doc = Doc("report")
    stall_section(doc, trials)
    text = doc.markdown()
    assert "## Stalls" in text and "3 x its arm's running median" in text and "20 ms" in text
    (row,) = [line for line in text.splitlines() if line.startswith("| #1 ")]
    assert "known_stall" in row and "0.00% of 32" in row and "25.00% of 32" in row
    assert "| yes |" in row and "200 ms (GC 12 ms)" in row and "#2" not in text
    # Three judged pairs of 8 steps per arm (the first 8 steps of each arm are not judged), no stall: bounded by
    # the rates 24 steps allow (Wilson: up to 13.8%); a record of the swap-test inversion left such sides at +-1.
    few_steps: list[CompareStep] = [
        (arm, pair, 0.030, 0.0) for pair in range(4) for arm in ("A", "B") for _ in range(8)
    ]
    few = compare_stalls(few_steps, RULE).to_dict()
    old = {**few, "difference": {**few["difference"], "ci_low": -1.0, "ci_high": 1.0}}
    for number, record, shown in ((3, few, "+0.00 [-13.80, +13.80]"), (4, old, "+0.00 unbounded")):
        doc = Doc("report")
        stall_section(doc, [_trial(number, {}, {"stalls": record})])
        assert shown in doc.markdown()
    empty = Doc("report")
    stall_section(empty, trials[1:])
    assert "Stalls" not in empty.markdown()
