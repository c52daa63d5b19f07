"""Tests for benchmarks.h100.step_adjust: the neighbour-drift adjusted ratio of sums on synthetic drifting step times.

Every check is seeded. Where a check counts outcomes of a randomized procedure, the bound is a binomial quantile at
which a correct implementation fails with probability at most 0.1% (stated per test).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy.stats import binom

from benchmarks.h100.step_adjust import adjusted_step_fit, adjusted_step_ratio, random_units
from tuner.stats import paired_ratio_of_sums

Floats = np.ndarray[Any, np.dtype[np.float64]]


def drifting_steps(
    n: int,
    rng: np.random.Generator,
    drift_sd: float = 0.06,
    jitter: float = 0.08,
    spikes: float = 0.02,
    smooth: int = 1,
) -> Floats:
    """Step seconds around 30 ms: a slow AR(1) drift of the host's speed (log scale; averaged over ``smooth``
    steps, a drift whose slope persists), white jitter, and rare spikes that add 1-3 step times (the heavy tail a
    ratio of sums weighs by its time)."""
    drift = np.empty(n + smooth - 1)
    level = rng.normal(0.0, drift_sd / math.sqrt(1 - 0.97**2))
    for i in range(drift.size):
        level = 0.97 * level + rng.normal(0.0, drift_sd)
        drift[i] = level
    drift = np.convolve(drift, np.full(smooth, 1.0 / smooth), mode="valid")
    steps = 0.03 * np.exp(drift + rng.normal(0.0, jitter, n))
    return steps + 0.03 * rng.uniform(1.0, 3.0, n) * (rng.random(n) < spikes)


def pairs_of(steps: Floats, rng: np.random.Generator) -> tuple[Floats, np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """One-step blocks in random AB/BA pairs: (seconds, is_trial, unit)."""
    is_trial, unit = random_units(steps.size // 2, "AB", rng)
    return steps[: unit.size], is_trial, unit


def test_sign_flip_test_is_exact_over_every_assignment() -> None:
    """Exactness itself, no sampling error: one fixed drifting series (the sharp null: the arms change nothing), all
    2**9 orientations of its 9 pairs (plus a context block each side). An exact level-5% test rejects for at most
    5% of them, whatever the data; here every p-value is computed by full enumeration."""
    rng = np.random.default_rng(3)
    steps = drifting_steps(20, rng)
    rejections, p_values = 0, []
    for orientation in itertools.product((False, True), repeat=9):
        b_first = np.array(orientation)
        is_trial = np.r_[False, np.column_stack([b_first, ~b_first]).ravel(), True]
        unit = np.r_[-1, np.repeat(np.arange(9), 2), -1]
        est = adjusted_step_ratio(steps, np.ones(20), is_trial, unit, lags=1)
        rejections += est.p_value < 0.05
        p_values.append(est.p_value)
    assert rejections <= 0.05 * 2**9
    # p-values of an exact test are (nearly) uniform over the assignments: ~10% of them at or below 0.1.
    assert 0.05 <= np.mean(np.array(p_values) <= 0.1) <= 0.1 + 2 / 2**9


def test_aa_false_positive_rate_is_nominal_on_drifting_data() -> None:
    """Seeded A/A: 300 comparisons of 60 random pairs of drifting step times, 999 Monte-Carlo flips each. A correct
    test rejects Binomial(300, <= 0.05) times; the bounds hold with probability 99.8% (0.1% each side)."""
    rng = np.random.default_rng(11)
    rejections = 0
    for seed in range(300):
        seconds, is_trial, unit = pairs_of(drifting_steps(122, rng), rng)
        est = adjusted_step_ratio(seconds, np.ones(seconds.size), is_trial, unit, n_permutations=999, seed=seed)
        rejections += est.p_value < 0.05
        assert (est.ci_low <= 1.0 <= est.ci_high) == (est.p_value >= 0.05)  # the CI inverts the same test
    assert binom.ppf(0.001, 300, 0.05) <= rejections <= binom.ppf(0.999, 300, 0.05)


@pytest.mark.parametrize("effect", ["multiplicative", "additive", "spikes_halved"])
def test_recovers_an_injected_ratio(effect: str) -> None:
    """A known effect on B's steps, in random AB/BA pairs and in alternating ABAB units: the CI covers the true
    ratio of sums (every block run as B over every block run as A) at the nominal rate, and the estimates centre
    on it. Coverage is Binomial(200, >= 0.95) for a calibrated CI: the lower bound fails with probability 0.1%.
    ``spikes_halved`` puts the whole effect on the heavy tail, where a covariate built from the pair's own blocks
    would absorb part of it; the neighbours' drift does not."""
    rng = np.random.default_rng({"multiplicative": 1, "additive": 2, "spikes_halved": 3}[effect])
    covered, errors = 0, []
    for seed in range(200):
        steps = drifting_steps(240, rng)
        if effect == "multiplicative":
            as_b = steps * 1.03
        elif effect == "additive":
            as_b = steps + 0.03 * 0.03
        else:
            as_b = np.where(steps > 0.06, 0.06 + (steps - 0.06) / 2, steps)
        is_trial, unit = random_units(120 if seed % 2 else 60, "AB" if seed % 2 else "ABAB", rng)
        seconds = np.where(is_trial, as_b, steps)
        truth = float(as_b.sum() / steps.sum())
        est = adjusted_step_ratio(seconds, np.ones(240), is_trial, unit, n_permutations=999, seed=seed)
        covered += est.ci_low <= truth <= est.ci_high
        errors.append(math.log(est.ratio / truth))
    assert covered >= binom.ppf(0.001, 200, 0.95)
    se = np.std(errors, ddof=1) / math.sqrt(len(errors))
    assert abs(np.mean(errors)) < 3.5 * se  # unbiased: the mean log error is within 3.5 standard errors of 0


def test_adjustment_reduces_the_variance_under_drift() -> None:
    """A smooth drift (the host's speed wanders with a slope that persists over a few steps), 500 random pairs, 8
    seeds: the neighbours' drift explains much of each pair's time-ordered difference, so the adjusted CI is
    narrower than the plain one on the same data. (Under a random walk the increments on either side of a pair are
    independent of the pair's own, and the covariate can explain at most a third of the variance.)"""
    rng = np.random.default_rng(5)
    sd_ratios, width_ratios = [], []
    for seed in range(8):
        seconds, is_trial, unit = pairs_of(
            drifting_steps(1000, rng, drift_sd=0.1, jitter=0.01, spikes=0.0, smooth=8), rng
        )
        kwargs: dict[str, Any] = {"n_permutations": 2000, "seed": seed}
        plain = adjusted_step_fit(seconds, np.ones(1000), is_trial, unit, lags=0, **kwargs)
        adjusted = adjusted_step_fit(seconds, np.ones(1000), is_trial, unit, lags=1, **kwargs)
        sd_ratios.append(adjusted.sd_ratio)
        width = math.log(adjusted.estimate.ci_high / adjusted.estimate.ci_low)
        width_ratios.append(width / math.log(plain.estimate.ci_high / plain.estimate.ci_low))
        assert 0.2 < adjusted.beta[0] < 0.5  # drift across a pair spans 3 steps, the pair's own difference 1
    assert np.median(sd_ratios) < 0.7
    assert np.median(width_ratios) < 0.7


def test_without_covariates_it_is_the_projects_ratio_of_sums() -> None:
    """lags=0 on one-step pairs gives tuner.stats.paired_ratio_of_sums' estimate, p-value (every one of the 2**12
    patterns, so no Monte-Carlo) and log_sd. Its CI inverts that same test with B's seconds de-treated (steps are
    fixed, time scales); tuner.stats inverts it with scaled amounts, a different null away from 1, so instead of
    comparing the two intervals each bound is checked against the project's test on de-treated data: it accepts
    just inside the bound and rejects just outside."""
    rng = np.random.default_rng(8)
    seconds, is_trial, unit = pairs_of(drifting_steps(24, rng) * np.r_[np.ones(12), np.full(12, 1.1)], rng)
    ours = adjusted_step_ratio(seconds, np.ones(24), is_trial, unit, lags=0)
    b, a, ones = seconds[is_trial], seconds[~is_trial], np.ones(12)
    theirs = paired_ratio_of_sums(ones, b, ones, a, higher_is_better=False)
    assert ours.ratio == pytest.approx(theirs.ratio, rel=1e-12)
    assert ours.p_value == theirs.p_value
    assert ours.log_sd == pytest.approx(theirs.log_sd, rel=1e-6)
    assert (ours.verdict, ours.n, ours.higher_is_better) == (theirs.verdict, 12, False)
    for bound, inward in ((ours.ci_low, 1 + 1e-7), (ours.ci_high, 1 - 1e-7)):
        inside = paired_ratio_of_sums(ones, b / (bound * inward), ones, a, higher_is_better=False).p_value
        outside = paired_ratio_of_sums(ones, b / (bound / inward), ones, a, higher_is_better=False).p_value
        assert inside >= 0.05 > outside


def test_unequal_steps_keep_the_ratio_of_sums() -> None:
    """Blocks of different lengths: the unadjusted root is (sum t_B / sum a_B) / (sum t_A / sum a_A)."""
    rng = np.random.default_rng(9)
    steps = rng.integers(1, 5, 40).astype(np.float64)
    seconds = 0.03 * steps * rng.lognormal(0.0, 0.2, 40)
    is_trial, unit = random_units(20, "AB", rng)
    fit = adjusted_step_fit(seconds, steps, is_trial, unit, lags=0)
    expected = (seconds[is_trial].sum() / steps[is_trial].sum()) / (seconds[~is_trial].sum() / steps[~is_trial].sum())
    assert fit.estimate.ratio == pytest.approx(expected, rel=1e-10)
    assert fit.plain_ratio == pytest.approx(expected, rel=1e-12)


def test_random_units_mirror_the_pattern() -> None:
    is_trial, unit = random_units(400, "ABBA", np.random.default_rng(0))
    patterns = {"".join("B" if t else "A" for t in is_trial[unit == u]) for u in range(400)}
    assert patterns == {"ABBA", "BAAB"}
    assert 0.4 < np.mean(is_trial[unit == unit][::4]) < 0.6  # the first block is B about half the time
    with pytest.raises(ValueError, match="both arms"):
        random_units(3, "AA", np.random.default_rng(0))


@pytest.mark.parametrize(
    ("is_trial", "unit", "message"),
    [
        ([True, False, True, False], [0, 1, 0, 1], "consecutive"),
        ([True, True, True, False], [0, 0, 1, 1], "both arms"),
        ([True, False, True, False], [0, 0, -1, -1], "at least 2 units"),
    ],
)
def test_rejects_designs_it_cannot_test(is_trial: list[bool], unit: list[int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        adjusted_step_ratio(np.full(4, 0.03), np.ones(4), np.array(is_trial), np.array(unit))


def test_segments_cut_the_neighbours() -> None:
    """A block across a recording gap is no neighbour: with every unit at a segment edge there is no covariate."""
    rng = np.random.default_rng(4)
    seconds, is_trial, unit = pairs_of(drifting_steps(40, rng), rng)
    fit = adjusted_step_fit(seconds, np.ones(40), is_trial, unit, segment=unit, lags=1)
    assert fit.beta == (0.0,)
    assert fit.estimate.ratio == pytest.approx(fit.plain_ratio, rel=1e-12)
