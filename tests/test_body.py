"""The body of the steps and its guard on the whole time (tuner.stats.body), on simulated steps with heavy tails."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuner.stats import BodyComparison, body_comparison, paired_ratio_of_sums, running_caps, split_at_caps

PAIRS = 128
"""One-step pairs per simulated comparison (256 steps: the H100 projection's calibration chunk)."""
COMPARISONS = 300


def host_steps(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` steps of a noisy host: 10 ms, a slowly drifting level (AR(1), 0.7), log SD 0.08 around it, and 5% of
    steps holding a pause of 1-8 steps' time (the H100 recordings' 4-7% of pairs over twice the median)."""
    drift = np.zeros(n)
    noise = rng.normal(0, 0.05, n)
    for i in range(1, n):
        drift[i] = 0.7 * drift[i - 1] + noise[i]
    steps = 0.01 * np.exp(drift + rng.normal(0, 0.06, n))
    pauses = rng.random(n) < 0.05
    return steps + pauses * 0.01 * rng.uniform(1, 8, n)


def compare(
    rng: np.random.Generator, *, factor: float = 1.0, pause_rate: float = 0.0, pairs: int = PAIRS
) -> tuple[BodyComparison, float]:
    """One comparison of one-step pairs, arms at random within each pair; B's steps scaled by ``factor`` and
    holding an added 5-step pause at ``pause_rate``. Also the body's true ratio: every step's body had it run B."""
    steps = host_steps(rng, 2 * pairs)
    as_b = steps * factor + (rng.random(steps.size) < pause_rate) * 0.05
    b_second = rng.random(pairs) < 0.5
    is_b = np.column_stack([~b_second, b_second]).ravel()
    observed = np.where(is_b, as_b, steps)
    caps = running_caps(observed)
    body, excess = split_at_caps(observed, caps)
    truth = float(np.minimum(as_b, caps).sum() / np.minimum(steps, caps).sum())
    by_arm = {}
    for arm, mask in (("B", is_b), ("A", ~is_b)):
        m = mask.reshape(pairs, 2)
        by_arm[arm] = ((body.reshape(pairs, 2) * m).sum(axis=1), (excess.reshape(pairs, 2) * m).sum(axis=1))
    ones = np.ones(pairs)
    seed = int(rng.integers(1e9))
    found = body_comparison((ones, *by_arm["B"]), (ones, *by_arm["A"]), n_permutations=2000, seed=seed)
    return found, truth


def test_a_cap_is_twice_the_median_of_the_steps_before_it() -> None:
    rng = np.random.default_rng(1)
    t = rng.lognormal(0, 0.3, 500)
    naive = [2 * np.median(t[max(0, i - 64) : i] if i >= 16 else t[:16]) for i in range(t.size)]
    assert running_caps(t) == pytest.approx(naive)
    body, excess = split_at_caps(t, running_caps(t))
    assert body + excess == pytest.approx(t) and (excess >= 0).all() and (body <= running_caps(t)).all()


def test_an_aa_is_called_different_at_about_the_nominal_rate() -> None:
    """Both arms alike: over 300 comparisons the body's 95% CI excludes 1 in at most 8.8% of them (5% plus three
    binomial SEs: a calibrated test fails this about 1 time in 1,000), and the decision (body and guard) calls a
    winner in at most half that (its 'better' is one side)."""
    rng = np.random.default_rng(2)
    found = [compare(rng)[0] for _ in range(COMPARISONS)]
    bound = 0.05 + 3 * math.sqrt(0.05 * 0.95 / COMPARISONS)
    assert sum(f.body.verdict != "not_significant" for f in found) / COMPARISONS <= bound
    assert sum(f.verdict == "better" for f in found) / COMPARISONS <= bound / 2


def test_a_known_one_percent_gain_in_the_body_is_covered() -> None:
    """B's steps 1% faster: its body's true ratio lies in the 95% CI in at least 91% of 300 comparisons (95% less
    three SEs)."""
    rng = np.random.default_rng(3)
    runs = [compare(rng, factor=0.99) for _ in range(COMPARISONS)]
    covered = sum(f.body.ci_low <= truth <= f.body.ci_high for f, truth in runs)
    assert covered / COMPARISONS >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / COMPARISONS), covered


def test_the_body_is_several_times_cheaper_than_the_mean_on_heavy_tails() -> None:
    """The same comparisons' body against the plain ratio of sums: the body's per-pair log SD is less than two
    thirds of the plain one's (a variance, so engine time, under 45%) on these tails."""
    rng = np.random.default_rng(4)
    ratios = []
    for _ in range(40):
        steps = host_steps(rng, 2 * PAIRS).reshape(PAIRS, 2)
        body, _ = split_at_caps(steps.ravel(), running_caps(steps.ravel()))
        ones = np.ones(PAIRS)
        plain = paired_ratio_of_sums(ones, steps[:, 1], ones, steps[:, 0], n_permutations=200)
        capped = body.reshape(PAIRS, 2)
        typical = paired_ratio_of_sums(ones, capped[:, 1], ones, capped[:, 0], n_permutations=200)
        ratios.append(typical.log_sd / plain.log_sd)
    assert float(np.median(ratios)) < 2 / 3, ratios


def test_an_arm_that_adds_rare_long_pauses_is_never_a_winner() -> None:
    """B 1% faster in its body but holding an added 5-step pause in 2% of its steps (its whole time ~4% longer):
    over 100 comparisons of 512 pairs it is never called better (the guard would have to put the whole time's
    upper bound below 1.005, ~4 of its SEs under the truth), and its whole time is shown worse by more than the
    margin in some (the host's own pauses make its interval ~10% wide at 512 pairs)."""
    rng = np.random.default_rng(5)
    found = [compare(rng, factor=0.99, pause_rate=0.02, pairs=512)[0] for _ in range(100)]
    assert sum(f.verdict == "better" for f in found) == 0 and sum(f.guard.holds for f in found) == 0
    assert sum(f.guard.breached for f in found) >= 10, [f.line() for f in found[:5]]
    assert sum(f.verdict == "worse" for f in found) >= 10
