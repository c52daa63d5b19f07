"""The body of a step comparison from the blocks EngineCore timed (tuner.measure.body_steps)."""

from __future__ import annotations

import numpy as np
import pytest

from tuner.measure.body_steps import body_of, body_sums
from tuner.measure.interleave import InterleaveResult, _estimate
from tuner.plugin.protocol import Arm, BlockRecord


def block(pair: int, arm: Arm, t0: float, dt: list[float], washout: int = 0, running: int = 8) -> BlockRecord:
    starts = list(np.cumsum([t0, *dt[:-1]]))
    return {
        "pair": pair, "arm": arm, "t0": [float(s) for s in starts], "dt": dt, "running": [running] * len(dt),
        "tokens": [running] * len(dt), "gc_s": [0.0] * len(dt), "allocated": 0, "washout": washout,
    }  # fmt: skip


def comparison(blocks: list[BlockRecord], block_steps: int = 1) -> InterleaveResult:
    result = _estimate(blocks, block_steps, None)
    result.blocks = blocks
    return result


def test_a_step_over_twice_the_running_median_is_capped_and_washout_steps_set_caps_uncounted() -> None:
    """40 steps of 10 ms (washout ones among them), then a 50 ms step in B's block: its body is the cap, 20 ms,
    and its excess 30 ms; the washout steps count toward the median but not toward either arm's sums."""
    blocks, t = [], 0.0
    arms: tuple[Arm, Arm] = ("A", "B")
    for pair in range(20):
        for arm in arms:
            blocks.append(block(pair, arm, t, [0.010, 0.010], washout=1))
            t += 0.020
    blocks.append(block(20, "A", t, [0.010, 0.010], washout=1))
    blocks.append(block(20, "B", t + 0.020, [0.010, 0.050], washout=1))
    sums = body_sums(comparison(blocks))
    assert len(sums) == 21 and all(a[0] == b[0] == 1 for a, b in sums)  # one counted step per block
    (a, b) = sums[-1]
    assert a == (1, pytest.approx(0.010), pytest.approx(0.0))
    assert b == (1, pytest.approx(0.020), pytest.approx(0.030))


def test_the_guard_is_the_plain_ratio_of_sums_and_the_body_finds_a_gain_the_pauses_hide() -> None:
    """400 one-step pairs, B 3% faster in every step, 5% of steps holding a pause of 2-10 steps in either arm: the
    guard's whole-time estimate is the comparison's own plain ratio of sums, and the body's interval holds B's
    0.97 and is narrower than the plain one."""
    rng = np.random.default_rng(3)
    blocks, t = [], 0.0
    for pair in range(400):
        order: list[Arm] = ["A", "B"] if rng.random() < 0.5 else ["B", "A"]
        for arm in order:
            dt = 0.010 * float(np.exp(rng.normal(0, 0.05))) * (0.97 if arm == "B" else 1.0)
            dt += 0.010 * rng.uniform(2, 10) * (rng.random() < 0.05)
            blocks.append(block(pair, arm, t, [dt]))
            t += dt
    result = comparison(blocks)
    found = body_of(result)
    assert found is not None and result.estimate is not None
    assert found.guard.whole.ratio == pytest.approx(result.estimate.ratio)
    assert found.body.ci_low <= 0.97 <= found.body.ci_high
    assert found.body.ci_high / found.body.ci_low < result.estimate.ci_high / result.estimate.ci_low


def test_too_few_pairs_give_no_body() -> None:
    assert body_of(comparison([block(0, "A", 0.0, [0.01]), block(0, "B", 0.01, [0.01])])) is None
