"""The range a plan's per-pair SD is stated with (:mod:`tuner.stats.sd_prediction`): the sampling error of a
heavy-tailed SD, and a prediction bound that covers the next SD at its level when the host drifts."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as st

from tuner.stats import excess_kurtosis, predict_sd
from tuner.stats.sd_prediction import KURTOSIS_FLOOR, log_sd_error

# A normal scale mixture: 2% of pairs 6x wider (rare slow steps). Excess kurtosis 3 (0.98 + 0.02 * 6^4) /
# (0.98 + 0.02 * 6^2)^2 - 3 = 24.9, above the floor, so the floor does not hide an error in the formula.
P, SCALE = 0.02, 6.0
KURTOSIS = 3 * (1 - P + P * SCALE**4) / (1 - P + P * SCALE**2) ** 2 - 3


def pairs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape) * np.where(rng.random(shape) < P, SCALE, 1.0)


def test_the_mixture_is_heavier_than_the_floor_and_its_kurtosis_is_read_back() -> None:
    assert KURTOSIS > KURTOSIS_FLOOR
    k = excess_kurtosis(pairs(np.random.default_rng(0), (400_000,)))
    assert k == pytest.approx(KURTOSIS, rel=0.15)
    assert excess_kurtosis([1.0, 1.0, 1.0, 1.0]) is None and excess_kurtosis([1.0, 2.0]) is None


@pytest.mark.parametrize("n", [300, 1000])
def test_the_log_sd_error_is_the_spread_of_heavy_tailed_sample_sds(n: int) -> None:
    """Over 4,000 samples of n pairs, the SD of log(sample SD) is what ``log_sd_error`` says at the mixture's
    kurtosis (within 15%: the delta method at this kurtosis needs a few hundred pairs), and 1.5x or more what the
    chi-square (normal pairs) says."""
    x = pairs(np.random.default_rng(n), (4000, n))
    spread = float(np.std(np.log(np.std(x, axis=1, ddof=1))))
    assert spread == pytest.approx(log_sd_error(n, KURTOSIS), rel=0.15)
    assert spread > 1.5 * 0.5 * math.sqrt(2 / n)


def test_the_upper_bound_covers_the_next_sd_at_its_level_when_the_host_drifts() -> None:
    """A calibration of 300 pairs, then a screening of 400 on a host whose noise moved by exp(0.3 z): over 4,000
    such pairs the one-sided 95% bound covers the screening's SD 93-97% of the time (binomial SE 0.35 points), where
    the chi-square bound covers far less."""
    rng = np.random.default_rng(7)
    drift = 0.3
    now = np.std(pairs(rng, (4000, 300)), axis=1, ddof=1)
    moved = np.exp(drift * rng.standard_normal(4000))
    later = np.std(pairs(rng, (4000, 400)), axis=1, ddof=1) * moved
    highs = np.array([predict_sd(s, 300, next_pairs=400, kurtosis=KURTOSIS, drift=drift).high for s in now])
    covered = float(np.mean(later <= highs))
    assert 0.93 <= covered <= 0.97
    chi_square = now * math.sqrt(299 / st.chi2.ppf(0.05, 299))
    assert float(np.mean(later <= chi_square)) < 0.75


def test_a_range_needs_two_pairs_and_is_said_in_words() -> None:
    assert predict_sd(0.05, 1).high == math.inf
    p = predict_sd(0.05, 300)
    assert p.low < 0.05 < p.high and p.words() == f"0.050 ({p.low:.3f}-{p.high:.3f} expected next)"
    assert predict_sd(0.05, 3000).high < p.high  # more pairs, a narrower range
