"""The body of a step comparison from the blocks EngineCore timed, and its guard, as a comparison reads them
(tuner.measure.step_sums, tuner.measure.interleave.Counting, tuner.metrics.pairs.guard_estimate)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from tuner.measure.interleave import Counting
from tuner.measure.step_sums import body_pair_sums
from tuner.metrics.pairs import guard_estimate, pairs_estimate
from tuner.plugin.protocol import Arm, BlockRecord


def block(pair: int, arm: Arm, t0: float, dt: list[float], washout: int = 0, running: int = 8) -> BlockRecord:
    starts = list(np.cumsum([t0, *dt[:-1]]))
    return {
        "pair": pair, "arm": arm, "t0": [float(s) for s in starts], "dt": dt, "running": [running] * len(dt),
        "tokens": [running] * len(dt), "gc_s": [0.0] * len(dt), "allocated": 0, "washout": washout,
    }  # fmt: skip


Pause = Callable[[int, Arm, np.random.Generator], float]
"""A step's pause, in steps: from its pair, its arm and the noise."""


def one_step_blocks(seed: int, pairs: int, step: float, pause: Pause) -> list[BlockRecord]:
    """One-step pairs in random order of 10 ms steps with 5% log noise, B's ``step`` of A's, each step holding a
    pause of ``pause`` steps."""
    rng = np.random.default_rng(seed)
    blocks, t = [], 0.0
    for pair in range(pairs):
        order: list[Arm] = ["A", "B"] if rng.random() < 0.5 else ["B", "A"]
        for arm in order:
            dt = 0.010 * float(np.exp(rng.normal(0, 0.05))) * (step if arm == "B" else 1.0)
            dt += 0.010 * pause(pair, arm, rng)
            blocks.append(block(pair, arm, t, [dt]))
            t += dt
    return blocks


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
    sums = body_pair_sums(blocks, 8, 1)
    assert len(sums) == 21 and all(a[0] == b[0] == 1 for a, b in sums)  # one counted step per block
    (a, b) = sums[-1]
    assert a == (1, pytest.approx(0.010), pytest.approx(0.0))
    assert b == (1, pytest.approx(0.020), pytest.approx(0.030))


def test_the_guard_is_the_plain_ratio_of_sums_and_the_body_finds_a_gain_the_pauses_hide() -> None:
    """400 one-step pairs, B 3% faster in every step, 5% of steps holding a pause of 2-10 steps in either arm: the
    guard's whole-time estimate is the comparison's own plain ratio of sums, and the body's interval holds B's
    0.97 and is narrower than the plain one."""
    blocks = one_step_blocks(3, 400, 0.97, lambda _, arm, rng: rng.uniform(2, 10) * (rng.random() < 0.05))
    body, plain = Counting(1, estimand="body").result(blocks, None), Counting(1).result(blocks, None)
    assert body.estimate is not None and body.guard is not None and plain.estimate is not None
    assert body.guard.whole.ratio == pytest.approx(plain.estimate.ratio)
    assert body.whole == plain.sums  # the guard reads the very pairs the plain mean does
    assert body.mean_step_s["A"] < plain.mean_step_s["A"]  # the body's mean step leaves out the excess
    assert body.estimate.ci_low <= 0.97 <= body.estimate.ci_high
    assert body.estimate.ci_high / body.estimate.ci_low < plain.estimate.ci_high / plain.estimate.ci_low


def test_a_trial_whose_typical_steps_are_faster_but_that_adds_pauses_is_never_better() -> None:
    """B's steps 4% faster, but 1% of them hold a pause of 20-40 steps (about +30% of its time): the body (each
    paused step counted up to its cap) calls B faster; the guard shows the whole time worse, so the comparison's
    verdict is "worse"."""
    result = Counting(1, estimand="body").result(
        one_step_blocks(5, 1000, 0.96, lambda _, arm, rng: rng.uniform(20, 40) * (arm == "B" and rng.random() < 0.01)),
        None,
    )
    assert result.estimate is not None and result.guard is not None
    assert result.estimate.verdict == "better" and result.guard.breached
    assert result.verdict == "worse"


def test_a_faster_body_is_better_only_once_the_guard_shows_the_whole_time_not_worse() -> None:
    """B 4% faster in every step; four steps (two per arm) hold a pause of 10 steps. At 200 pairs the body is shown
    faster while the whole time's interval, pauses and all, still reaches past the margin: "not significant". At
    2000 pairs (the same four pauses) the guard holds: "better". Five noise draws each."""
    pauses = {(3, "A"), (11, "B"), (19, "A"), (27, "B")}

    def pause(pair: int, arm: Arm, _: np.random.Generator) -> float:
        return 10.0 * ((pair, arm) in pauses)

    for seed in range(5):
        few = Counting(1, estimand="body").result(one_step_blocks(seed, 200, 0.96, pause), None)
        assert few.estimate is not None and few.guard is not None
        assert few.estimate.verdict == "better" and not few.guard.holds
        assert few.verdict == "not_significant"
        many = Counting(1, estimand="body").result(one_step_blocks(seed, 2000, 0.96, pause), None)
        assert many.guard is not None and many.guard.holds and many.verdict == "better"


def test_too_few_pairs_give_no_body() -> None:
    result = Counting(1, estimand="body").result([block(0, "A", 0.0, [0.01]), block(0, "B", 0.01, [0.01])], None)
    assert result.estimate is None and result.guard is None


def test_body_pairs_carry_the_whole_seconds_that_the_guard_reads() -> None:
    """A confirmation's body pairs: (trial steps, body s, reference steps, body s, trial whole s, reference whole
    s). Their ratio of sums is the body's; the guard reads the whole seconds; plain pairs have no guard."""
    body_pairs = [(1.0, 0.010, 1.0, 0.011, 0.030, 0.011), (1.0, 0.010, 1.0, 0.011, 0.010, 0.011)] * 4
    body = pairs_estimate(body_pairs, "tpot_mean_ms")
    whole = guard_estimate(body_pairs)
    assert body.ratio == pytest.approx(0.010 / 0.011)
    assert whole is not None and whole.ratio == pytest.approx(0.020 / 0.011)
    assert guard_estimate([p[:4] for p in body_pairs]) is None
