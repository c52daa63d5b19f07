"""The bagged estimate and its jackknife-after-bootstrap interval (:mod:`tuner.stats.pass_bootstrap`), on
statistics whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import t as student

from tuner.stats.pass_bootstrap import bagged_interval, pass_bootstrap


def _resampled_means(values: np.ndarray, resamples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Each resample's mean of ``values`` (one per pass) under the pass bootstrap's draws, and the draws."""
    weights = pass_bootstrap(resamples, seed)(np.zeros((1, len(values), 1, 3)))
    return weights @ values / len(values), weights


def test_the_jackknife_after_bootstrap_se_of_a_mean_is_its_standard_error() -> None:
    """For the mean of 20 passes the bagged estimate is the mean and the delete-one values are the means of the
    other 19, so the SE is the textbook sd / sqrt(p), up to the resamples' Monte-Carlo noise (seen here within
    1.7% at 20,000 resamples over these 5 draws; the delete-one values' SD without the jackknife's scaling is 0.23
    times it, and a mean off by more than a twentieth of the SE fails)."""
    rng = np.random.default_rng(3)
    for _ in range(5):
        values = rng.normal(0.0, 1.0, 20)
        means, weights = _resampled_means(values, 20_000, seed=int(rng.integers(1 << 30)))
        found = bagged_interval(means, weights, df=19, confidence=0.95)
        textbook = float(np.std(values, ddof=1)) / math.sqrt(20)
        assert found.center == pytest.approx(values.mean(), abs=0.05 * textbook)
        assert found.se == pytest.approx(textbook, rel=0.05)
        half = float(student.ppf(0.975, 19)) * found.se
        assert (found.low, found.high) == pytest.approx((found.center - half, found.center + half))


def test_a_side_is_open_when_more_than_the_tails_share_is_censored_on_it() -> None:
    """3% of resamples censored upwards (+inf) open the upper side at 95% (the tail is 2.5%), not the lower; 2% open
    neither; an unknown resample (nan) counts against both sides. The mean is over the finite values."""
    values, weights = _resampled_means(np.random.default_rng(4).normal(0.0, 1.0, 12), 2000)
    for share, value, opened in ((0.03, math.inf, (False, True)), (0.02, math.inf, (False, False))):
        censored = values.copy()
        censored[: int(share * len(values))] = value
        found = bagged_interval(censored, weights, df=11, confidence=0.95)
        assert (math.isinf(found.low), math.isinf(found.high)) == opened
        assert found.center == pytest.approx(values[int(share * len(values)) :].mean())
    unknown = values.copy()
    unknown[:60] = math.nan
    found = bagged_interval(unknown, weights, df=11, confidence=0.95)
    assert found.low == -math.inf and found.high == math.inf and math.isfinite(found.se)


def test_a_pass_in_every_resample_leaves_no_delete_one_value_and_the_interval_open() -> None:
    """One pass is drawn into every resample, so none leaves it out: no SE, an open interval, the mean still said."""
    values, weights = _resampled_means(np.array([0.3]), 500)
    found = bagged_interval(values, weights, df=1, confidence=0.95)
    assert found.center == pytest.approx(0.3) and math.isnan(found.se)
    assert (found.low, found.high) == (-math.inf, math.inf)
