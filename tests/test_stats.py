"""Tests for tuner.stats on data with known answers."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom, norm

from tuner.stats import (
    Guard,
    RatioEstimate,
    Statistic,
    Verdict,
    boundary_crossing,
    detection_power,
    false_positive_rate,
    holm,
    least_pairs,
    mde,
    mirrored_order,
    obf_boundaries,
    obf_constant,
    paired_ratio,
    paired_ratio_of_sums,
    pairs_needed,
    percentiles,
    ratio_of_sums_estimates,
    reached_precision,
    sequential_p_value,
    unpaired_ratio,
    within_margin,
)

FAST = 999  # bootstrap resamples for tests: plenty for 95% CIs, keeps the suite quick


def _pairs(true_ratio: float, n: int, sigma: float, seed: int) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Pairs sharing a drifting level, each arm with its own lognormal noise; true ratio known."""
    rng = np.random.default_rng(seed)
    level = rng.uniform(50.0, 150.0, n)  # slow drift shared by both members of a pair
    baseline = level * rng.lognormal(0.0, sigma, n)
    treatment = true_ratio * level * rng.lognormal(0.0, sigma, n)
    return treatment, baseline


def _est(ci_low: float, ci_high: float, verdict: Verdict = "not_significant") -> RatioEstimate:
    return RatioEstimate(
        ratio=math.sqrt(ci_low * ci_high),
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=0.5,
        n=10,
        log_sd=0.1,
        statistic="median",
        higher_is_better=True,
        verdict=verdict,
    )


# --------------------------------------------------------------------------
# paired_ratio: known effects


@pytest.mark.parametrize("statistic", ["median", "geomean"])
def test_known_improvement_is_recovered(statistic: Statistic) -> None:
    t, b = _pairs(1.10, n=30, sigma=0.02, seed=1)
    est = paired_ratio(t, b, higher_is_better=True, statistic=statistic, n_resamples=FAST)
    assert est.ratio == pytest.approx(1.10, rel=0.02)
    assert est.ci_low <= 1.10 <= est.ci_high
    assert est.ci_low > 1.0
    assert est.verdict == "better"
    assert est.n == 30
    assert est.statistic == statistic
    assert est.p_value < 1e-4
    # independent noise on both arms -> per-pair log SD ~ sigma * sqrt(2)
    assert est.log_sd == pytest.approx(0.02 * math.sqrt(2), rel=0.35)


@pytest.mark.parametrize("statistic", ["median", "geomean"])
def test_same_data_lower_is_better_is_worse(statistic: Statistic) -> None:
    t, b = _pairs(1.10, n=30, sigma=0.02, seed=1)
    est = paired_ratio(t, b, higher_is_better=False, statistic=statistic, n_resamples=FAST)
    assert est.verdict == "worse"
    assert est.higher_is_better is False


def test_known_regression_and_latency_gain() -> None:
    t, b = _pairs(0.90, n=25, sigma=0.03, seed=2)
    hi = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST)
    lo = paired_ratio(t, b, higher_is_better=False, n_resamples=FAST)
    assert hi.ci_high < 1.0 and hi.ci_low <= 0.90 <= hi.ci_high
    assert hi.verdict == "worse"
    assert lo.verdict == "better"
    assert (hi.ratio, hi.ci_low, hi.ci_high) == (lo.ratio, lo.ci_low, lo.ci_high)


def test_median_point_estimate_is_median_of_pair_ratios_for_odd_n() -> None:
    t = np.array([11.0, 20.0, 33.0, 42.0, 50.0])
    b = np.array([10.0, 19.0, 30.0, 40.0, 51.0])
    est = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST)
    assert est.ratio == pytest.approx(float(np.median(t / b)), rel=1e-12)
    geo = paired_ratio(t, b, higher_is_better=True, statistic="geomean", n_resamples=FAST)
    assert geo.ratio == pytest.approx(float(np.exp(np.mean(np.log(t / b)))), rel=1e-12)


def test_pairing_removes_shared_drift() -> None:
    # Baseline level swings 3x across pairs but each pair is exactly 1.05x:
    # a paired analysis must see a tight CI at 1.05 despite the drift.
    b = np.array([10.0, 30.0, 12.0, 28.0, 15.0, 25.0, 11.0, 29.0])
    t = 1.05 * b
    est = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST)
    assert est.ratio == pytest.approx(1.05)
    assert est.ci_low == pytest.approx(1.05) and est.ci_high == pytest.approx(1.05)
    assert est.verdict == "better"
    assert est.log_sd == pytest.approx(0.0, abs=1e-12)


# --------------------------------------------------------------------------
# paired_ratio: degenerate and null cases


@pytest.mark.parametrize("n", [2, 3, 10])
@pytest.mark.parametrize("statistic", ["median", "geomean"])
def test_identical_arms(n: int, statistic: Statistic) -> None:
    x = np.linspace(5.0, 9.0, n)
    est = paired_ratio(x, x.copy(), higher_is_better=True, statistic=statistic)
    assert est.ratio == 1.0
    assert (est.ci_low, est.ci_high) == (1.0, 1.0)
    assert est.verdict == "not_significant"  # no equivalence margin given: no claim of "no difference"
    assert math.isnan(est.p_value)
    assert est.log_sd == 0.0
    # Within a margin, a zero-width CI at 1 is a confident "no difference".
    assert paired_ratio(x, x, higher_is_better=True, margin=0.01).verdict == "no_difference"


@pytest.mark.parametrize("n", [2, 3, 4])
def test_tiny_noisy_samples_do_not_crash(n: int) -> None:
    t, b = _pairs(1.0, n=n, sigma=0.1, seed=n)
    for statistic in ("median", "geomean"):
        est = paired_ratio(t, b, higher_is_better=True, statistic=statistic, n_resamples=FAST)
        assert 0 < est.ci_low <= est.ratio <= est.ci_high
        assert math.isfinite(est.ci_low) and math.isfinite(est.ci_high)


def test_aa_not_significant() -> None:
    t, b = _pairs(1.0, n=30, sigma=0.02, seed=3)
    est = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST)
    assert est.ci_low < 1.0 < est.ci_high
    assert est.verdict == "not_significant"
    assert est.p_value > 0.05


@pytest.mark.parametrize("statistic", ["median", "geomean"])
def test_aa_false_positive_rate_is_near_nominal(statistic: Statistic) -> None:
    estimates = []
    for i in range(200):
        t, b = _pairs(1.0, n=20, sigma=0.05, seed=10_000 + i)
        estimates.append(paired_ratio(t, b, higher_is_better=True, statistic=statistic, n_resamples=FAST, seed=i))
    fpr = false_positive_rate(estimates)
    assert fpr <= 0.08  # nominal 5% with slack for 200 draws
    assert fpr >= 0.005  # and the CI is not absurdly wide either


def test_no_difference_is_an_equivalence_test_at_the_margin() -> None:
    # 4 pairs, +-30% noise with mixed signs: the CI straddles 1 and is very wide: not significant, never "no
    # difference" unless the whole CI lies within the margin.
    b = np.array([100.0, 120.0, 90.0, 110.0])
    t = b * np.exp([0.30, -0.25, 0.20, -0.35])
    loose = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST)
    strict = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST, margin=0.05)
    assert loose.ci_low < 1.0 < loose.ci_high
    assert loose.verdict == strict.verdict == "not_significant"
    assert (strict.ratio, strict.ci_low, strict.ci_high) == (loose.ratio, loose.ci_low, loose.ci_high)
    wide = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST, margin=100.0)
    assert wide.verdict == "no_difference"
    # The region is [1 / (1 + margin), 1 + margin]: a CI of [0.980, 1.027] is no equivalence at 1%, is at 3%.
    assert not within_margin(0.980, 1.027, 0.01) and within_margin(0.980, 1.027, 0.03)
    assert within_margin(1 / 1.03, 1.03, 0.03) and not within_margin(0.97, 1.0, 0.03)


def test_a_margin_does_not_override_a_clear_verdict() -> None:
    t, b = _pairs(1.5, n=6, sigma=0.05, seed=5)
    est = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST, margin=1e-6)
    assert est.ci_low > 1.0
    assert est.verdict == "better"


def test_narrow_aa_within_the_margin_is_no_difference() -> None:
    t, b = _pairs(1.0, n=40, sigma=0.005, seed=6)
    est = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST, margin=0.02)
    assert est.ci_low < 1.0 < est.ci_high
    assert est.verdict == "no_difference"


def test_deterministic_for_seed_and_seed_matters() -> None:
    t, b = _pairs(1.02, n=12, sigma=0.05, seed=7)
    kw: dict[str, Any] = {"higher_is_better": True, "statistic": "geomean", "n_resamples": FAST}
    a1 = paired_ratio(t, b, seed=42, **kw)
    a2 = paired_ratio(list(t), list(b), seed=42, **kw)
    other = paired_ratio(t, b, seed=43, **kw)
    assert a1 == a2
    assert (other.ci_low, other.ci_high) != (a1.ci_low, a1.ci_high)
    assert other.ratio == a1.ratio


def test_higher_confidence_gives_wider_interval() -> None:
    t, b = _pairs(1.0, n=20, sigma=0.05, seed=8)
    narrow = paired_ratio(t, b, higher_is_better=True, confidence=0.80, n_resamples=FAST)
    wide = paired_ratio(t, b, higher_is_better=True, confidence=0.99, n_resamples=FAST)
    assert wide.ci_low < narrow.ci_low <= narrow.ci_high < wide.ci_high


# --------------------------------------------------------------------------
# input validation


@pytest.mark.parametrize(
    ("treatment", "baseline", "match"),
    [
        ([1.0, 2.0, 3.0], [1.0, 2.0], "equal length"),
        ([1.0], [1.0], "at least 2"),
        ([], [], "at least 2"),
        ([1.0, float("nan")], [1.0, 2.0], "non-finite"),
        ([1.0, 2.0], [1.0, float("inf")], "non-finite"),
        ([1.0, 0.0], [1.0, 2.0], "positive"),
        ([1.0, 2.0], [-1.0, 2.0], "positive"),
        ([[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]], "one-dimensional"),
    ],
)
def test_paired_input_validation(treatment: Any, baseline: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        paired_ratio(treatment, baseline, higher_is_better=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"statistic": "mean"},
        {"confidence": 1.0},
        {"confidence": 0.0},
        {"n_resamples": 0},
        {"margin": 0.0},
        {"margin": -0.1},
        {"margin": float("nan")},
    ],
)
def test_paired_parameter_validation(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        paired_ratio([1.0, 2.0, 3.0], [1.0, 2.0, 3.0], higher_is_better=True, **kwargs)


@pytest.mark.parametrize(
    ("treatment", "baseline"),
    [
        ([1.0], [1.0, 2.0]),
        ([1.0, 2.0], [1.0, float("nan")]),
        ([1.0, 2.0], [0.0, 2.0]),
    ],
)
def test_unpaired_input_validation(treatment: list[float], baseline: list[float]) -> None:
    with pytest.raises(ValueError):
        unpaired_ratio(treatment, baseline, higher_is_better=True)


# --------------------------------------------------------------------------
# unpaired_ratio


def test_unpaired_recovers_ratio_of_medians() -> None:
    rng = np.random.default_rng(9)
    baseline = 100.0 * rng.lognormal(0.0, 0.03, 40)
    treatment = 125.0 * rng.lognormal(0.0, 0.03, 35)  # unequal sizes are fine
    est = unpaired_ratio(treatment, baseline, higher_is_better=True, n_resamples=FAST)
    assert est.ratio == pytest.approx(float(np.median(treatment) / np.median(baseline)), rel=1e-12)
    assert est.ratio == pytest.approx(1.25, rel=0.03)
    assert est.ci_low <= 1.25 <= est.ci_high
    assert est.verdict == "better"
    assert est.n == 35
    assert math.isnan(est.log_sd)
    assert est.statistic == "median"
    assert est.p_value < 1e-6
    lower = unpaired_ratio(treatment, baseline, higher_is_better=False, n_resamples=FAST)
    assert lower.verdict == "worse"


def test_unpaired_same_distribution_is_no_difference() -> None:
    rng = np.random.default_rng(10)
    a = 100.0 * rng.lognormal(0.0, 0.05, 30)
    b = 100.0 * rng.lognormal(0.0, 0.05, 30)
    est = unpaired_ratio(a, b, higher_is_better=True, n_resamples=FAST)
    assert est.ci_low < 1.0 < est.ci_high
    assert est.verdict == "not_significant"
    assert est.p_value > 0.05


def test_unpaired_constant_samples() -> None:
    same = unpaired_ratio([5.0, 5.0, 5.0], [5.0, 5.0], higher_is_better=True)
    assert (same.ratio, same.ci_low, same.ci_high) == (1.0, 1.0, 1.0)
    assert same.verdict == "not_significant"
    assert math.isnan(same.p_value)
    diff = unpaired_ratio([6.0, 6.0], [5.0, 5.0, 5.0], higher_is_better=False)
    assert diff.ratio == pytest.approx(1.2)
    assert diff.ci_low == pytest.approx(1.2) and diff.ci_high == pytest.approx(1.2)
    # 2 vs 3 samples cannot reach p < 0.05 in a rank test: no difference is called, however clean.
    assert diff.verdict == "not_significant"
    enough = unpaired_ratio([6.0] * 6, [5.0] * 6, higher_is_better=False)
    assert enough.p_value < 0.05 and enough.verdict == "worse"


def test_unpaired_tiny_samples_do_not_crash() -> None:
    est = unpaired_ratio([1.0, 2.0], [1.5, 2.5], higher_is_better=True, n_resamples=FAST)
    assert 0 < est.ci_low <= est.ratio <= est.ci_high


# --------------------------------------------------------------------------
# reached_precision, false_positive_rate, to_dict


def test_reached_precision() -> None:
    # Only precision stops sampling: a wide CI keeps sampling even when it already calls a difference.
    assert not reached_precision(_est(1.01, 1.30, "better"), 0.01)
    assert not reached_precision(_est(0.70, 0.99, "worse"), 0.01)
    assert reached_precision(_est(1.05, 1.06, "better"), 0.02)  # a precise difference
    assert reached_precision(_est(0.995, 1.005), 0.02)  # narrow around 1
    assert not reached_precision(_est(0.95, 1.05), 0.02)  # straddles 1, too wide
    assert reached_precision(_est(1.0, 1.019), 0.02)  # no wider than min_effect
    assert reached_precision(_est(1.0, 1.0), 0.01)
    with pytest.raises(ValueError):
        reached_precision(_est(0.9, 1.1), 0.0)


def test_reached_precision_tracks_sample_size() -> None:
    t, b = _pairs(1.0, n=60, sigma=0.03, seed=11)
    small = paired_ratio(t[:6], b[:6], higher_is_better=True, n_resamples=FAST)
    large = paired_ratio(t, b, higher_is_better=True, n_resamples=FAST)
    assert small.ci_low < 1.0 < small.ci_high
    assert not reached_precision(small, 0.05)
    assert reached_precision(large, 0.05)


def test_false_positive_rate() -> None:
    ests = [_est(1, 1, "better"), _est(1, 1, "worse"), _est(1, 1), _est(1, 1, "not_significant")]
    assert false_positive_rate(ests) == 0.5
    assert false_positive_rate([_est(1, 1)]) == 0.0
    with pytest.raises(ValueError):
        false_positive_rate([])


def test_to_dict_is_json_safe() -> None:
    est = paired_ratio([3.0, 4.0, 5.0], [3.0, 4.0, 5.0], higher_is_better=False)
    d = est.to_dict()
    assert d["p_value"] is None  # nan -> None
    assert d["ratio"] == 1.0 and d["verdict"] == "not_significant" and d["n"] == 3
    assert d["higher_is_better"] is False
    expected_keys = {"ratio", "ci_low", "ci_high", "p_value", "n", "log_sd"}
    expected_keys |= {"statistic", "higher_is_better", "verdict"}
    assert set(d) == expected_keys
    json.dumps(d, allow_nan=False)
    u = unpaired_ratio([1.0, 2.0, 3.0], [2.0, 3.0, 4.0], higher_is_better=True, n_resamples=FAST)
    assert u.to_dict()["log_sd"] is None
    json.dumps(u.to_dict(), allow_nan=False)


# --------------------------------------------------------------------------
# percentiles


def test_percentiles_match_numpy_and_are_ordered() -> None:
    values = np.random.default_rng(12).lognormal(3.0, 0.7, 1000)
    out = percentiles(values)
    assert list(out) == ["mean", "p50", "p90", "p99"]
    assert out["mean"] == pytest.approx(float(np.mean(values)))
    for q in (50, 90, 99):
        assert out[f"p{q}"] == pytest.approx(float(np.percentile(values, q)))
    assert out["p50"] is not None and out["p90"] is not None and out["p99"] is not None
    assert out["p50"] <= out["p90"] <= out["p99"]


def test_percentiles_known_values_and_custom_qs() -> None:
    out = percentiles([1, 2, 3, 4], qs=(0, 25, 99.9, 100))
    assert out == {
        "mean": 2.5,
        "p0": 1.0,
        "p25": 1.75,
        "p99.9": pytest.approx(3.997),
        "p100": 4.0,
    }


def test_percentiles_empty_and_nonfinite() -> None:
    assert percentiles([]) == {"mean": None, "p50": None, "p90": None, "p99": None}
    assert percentiles([float("nan")]) == {"mean": None, "p50": None, "p90": None, "p99": None}
    out = percentiles([1.0, float("nan"), 3.0, float("inf")], qs=(50,))
    assert out == {"mean": 2.0, "p50": 2.0}
    json.dumps(percentiles([]), allow_nan=False)


# --------------------------------------------------------------------------
# properties

_positive = st.floats(min_value=0.1, max_value=1000.0, allow_nan=False, allow_infinity=False)
_pair_lists = st.integers(min_value=2, max_value=10).flatmap(
    lambda n: st.tuples(
        st.lists(_positive, min_size=n, max_size=n),
        st.lists(_positive, min_size=n, max_size=n),
    )
)


@settings(max_examples=40, deadline=None)
@given(
    data=_pair_lists,
    statistic=st.sampled_from(["median", "geomean"]),
    seed=st.integers(0, 2**16),
)
def test_property_point_estimate_inside_ci(
    data: tuple[list[float], list[float]], statistic: Statistic, seed: int
) -> None:
    t, b = data
    est = paired_ratio(t, b, higher_is_better=True, statistic=statistic, n_resamples=199, seed=seed)
    tol = 1e-9 * est.ratio
    assert est.ci_low - tol <= est.ratio <= est.ci_high + tol
    assert est.ci_low > 0 and math.isfinite(est.ci_high)


@settings(max_examples=40, deadline=None)
@given(data=_pair_lists, statistic=st.sampled_from(["median", "geomean"]))
def test_property_swapping_arms_inverts_ratio(data: tuple[list[float], list[float]], statistic: Statistic) -> None:
    t, b = data
    fwd = paired_ratio(t, b, higher_is_better=True, statistic=statistic, n_resamples=199)
    rev = paired_ratio(b, t, higher_is_better=True, statistic=statistic, n_resamples=199)
    assert rev.ratio == pytest.approx(1.0 / fwd.ratio, rel=1e-9)
    assert rev.log_sd == pytest.approx(fwd.log_sd, rel=1e-9, abs=1e-12)


def test_sequential_stopping_keeps_the_aa_false_positive_rate_nominal() -> None:
    """Looking after every pair and stopping once `reached_precision` must not inflate false positives.

    Stopping as soon as a look shows a difference (optional stopping) calls A/A "different" far more often
    than 5%; stopping on precision alone does not depend on where the estimate lies.
    """
    verdicts = []
    for i in range(200):
        t, b = _pairs(1.0, n=30, sigma=0.05, seed=20_000 + i)
        for n in range(6, 31):  # min 6 pairs, then a look after every pair, at most 30
            estimate = paired_ratio(t[:n], b[:n], higher_is_better=True, n_resamples=FAST, seed=i)
            if reached_precision(estimate, 0.02):
                break
        verdicts.append(estimate)
    assert false_positive_rate(verdicts) <= 0.08


# --------------------------------------------------------------------------
# ratio of sums, sign-flip test, Holm, group-sequential looks, power, order


def _rate_pairs(true_ratio: float, n: int, seed: int) -> tuple[np.ndarray[Any, Any], ...]:
    """(trial amount, trial time, reference amount, reference time): drifting speed, a few steps dropped per block."""
    rng = np.random.default_rng(seed)
    level = rng.uniform(0.5, 2.0, n)
    amount_t, amount_r = 16.0 - rng.binomial(16, 0.1, (2, n))
    time_t = amount_t * level * rng.lognormal(0.0, 0.05, n) / true_ratio
    time_r = amount_r * level * rng.lognormal(0.0, 0.05, n)
    return amount_t, time_t, amount_r, time_r


def test_ratio_of_sums_recovers_a_known_throughput_ratio() -> None:
    data = _rate_pairs(1.08, n=40, seed=1)
    est = paired_ratio_of_sums(*data, n_resamples=FAST)
    assert est.ratio == pytest.approx(1.08, rel=0.02)
    assert est.ci_low <= 1.08 <= est.ci_high and est.ci_low > 1.0
    assert (est.verdict, est.statistic, est.n) == ("better", "ratio_of_sums", 40)
    assert est.p_value < 1e-3
    time_per_amount = paired_ratio_of_sums(*data, higher_is_better=False, n_resamples=FAST)
    assert time_per_amount.ratio == pytest.approx(1 / est.ratio)
    assert (time_per_amount.ci_low, time_per_amount.ci_high) == pytest.approx((1 / est.ci_high, 1 / est.ci_low))
    assert time_per_amount.verdict == "better"  # less time per token is better


def test_ratio_of_sums_weighs_a_pause_by_its_time() -> None:
    """Nine equal pairs and one where the reference paused for 9 extra seconds: the rate ratio is 19/10."""
    ones = np.ones(10)
    reference_time = ones.copy()
    reference_time[0] = 10.0
    est = paired_ratio_of_sums(ones, ones, ones, reference_time, n_resamples=FAST)
    assert est.ratio == pytest.approx(19 / 10)
    assert paired_ratio(1 / ones, 1 / reference_time, higher_is_better=True).ratio == 1.0  # the median sees nothing


def _brute_force_sign_flip_p(
    amount_t: np.ndarray, time_t: np.ndarray, amount_r: np.ndarray, time_r: np.ndarray
) -> float:
    """The two-sided sign-flip p of log R over every swap pattern, one pattern at a time (the reference the
    vectorised code is checked against)."""
    n = len(amount_t)
    observed = math.log(amount_t.sum() / time_t.sum() / (amount_r.sum() / time_r.sum()))
    hits = 0
    for mask in range(2**n):
        swap = np.array([(mask >> i) & 1 for i in range(n)], dtype=bool)
        a_t, t_t = np.where(swap, amount_r, amount_t), np.where(swap, time_r, time_t)
        a_r, t_r = np.where(swap, amount_t, amount_r), np.where(swap, time_t, time_r)
        hits += abs(math.log(a_t.sum() / t_t.sum() / (a_r.sum() / t_r.sum()))) >= abs(observed) - 1e-12
    return hits / 2**n


def test_sign_flip_p_value_is_exact_for_small_n() -> None:
    amount_t, time_t, amount_r, time_r = _rate_pairs(1.03, n=8, seed=2)
    est = paired_ratio_of_sums(amount_t, time_t, amount_r, time_r, n_resamples=FAST)
    assert est.p_value == _brute_force_sign_flip_p(amount_t, time_t, amount_r, time_r)
    monte_carlo = paired_ratio_of_sums(amount_t, time_t, amount_r, time_r, n_resamples=FAST, n_permutations=100)
    assert monte_carlo.p_value == pytest.approx(est.p_value, abs=0.1)


def test_ratio_of_sums_identical_arms_and_determinism() -> None:
    amount, time_s, _, _ = _rate_pairs(1.0, n=12, seed=3)
    same = paired_ratio_of_sums(amount, time_s, amount, time_s)
    assert (same.ratio, same.ci_low, same.ci_high, same.verdict) == (1.0, 1.0, 1.0, "not_significant")
    assert math.isnan(same.p_value) and same.log_sd == 0.0
    data = _rate_pairs(1.0, n=30, seed=4)
    assert paired_ratio_of_sums(*data, seed=5) == paired_ratio_of_sums(*data, seed=5)
    assert paired_ratio_of_sums(*data, seed=5).ci_low != paired_ratio_of_sums(*data, seed=6).ci_low


def test_ratio_of_sums_batch_matches_single_comparisons() -> None:
    rows = [_rate_pairs(r, n=9, seed=10 + i) for i, r in enumerate((0.95, 1.0, 1.1))]
    batch = ratio_of_sums_estimates(*(np.vstack([row[j] for row in rows]) for j in range(4)), n_resamples=FAST)
    for row, est in zip(rows, batch, strict=True):
        single = paired_ratio_of_sums(*row, n_resamples=FAST)
        assert (est.ratio, est.p_value, est.log_sd) == pytest.approx((single.ratio, single.p_value, single.log_sd))


def test_ratio_of_sums_influence_sd_gives_the_standard_error() -> None:
    """log_sd / sqrt(n) is the standard error of log R: over 300 A/A comparisons it matches the spread."""
    rng = np.random.default_rng(7)
    n, reps = 60, 300
    amount = rng.integers(8, 17, (reps, n, 2)).astype(float)
    times = amount * rng.lognormal(0.0, 0.1, (reps, n, 2)) * rng.uniform(0.5, 2.0, (reps, n, 1))
    ests = ratio_of_sums_estimates(amount[..., 0], times[..., 0], amount[..., 1], times[..., 1], n_resamples=200)
    spread = float(np.std([math.log(e.ratio) for e in ests]))
    assert np.mean([e.log_sd for e in ests]) / math.sqrt(n) == pytest.approx(spread, rel=0.12)
    coverage = np.mean([e.ci_low <= 1.0 <= e.ci_high for e in ests])
    assert 0.90 <= coverage <= 0.99


def _exchangeable_pairs(
    noise: str, n: int, reps: int, seed: int, true_ratio: float | np.ndarray[Any, Any] = 1.0
) -> tuple[np.ndarray[Any, Any], ...]:
    """``reps`` comparisons of ``n`` pairs (amount, time per arm) whose arms are exchangeable once the trial's rate is
    divided by ``true_ratio`` (scalar, or one per comparison as a column): a host speed shared by the pair, a few
    dropped steps, and per-block noise that is lognormal (SD 0.15) or heavy-tailed (0.08 x Student t with 2 df: no
    variance)."""
    rng = np.random.default_rng(seed)
    amount = (16.0 - rng.binomial(16, 0.1, (2, reps, n))).astype(np.float64)
    level = rng.lognormal(0.0, 0.3, (reps, n))
    heavy = noise == "heavy_tailed"
    log_noise = 0.08 * rng.standard_t(2, (2, reps, n)) if heavy else rng.normal(0.0, 0.15, (2, reps, n))
    time_s = amount * level * np.exp(log_noise)
    return amount[0], time_s[0] / true_ratio, amount[1], time_s[1]


@pytest.mark.parametrize("noise", ["lognormal", "heavy_tailed"])
@pytest.mark.parametrize("n", [4, 6, 10])
def test_ratio_of_sums_ci_holds_its_coverage_at_few_pairs(n: int, noise: str) -> None:
    """1000 comparisons of n pairs, half A/A and half with a true ratio of 1.1: the 95% CI misses the truth at most
    67 times (the binomial 99th percentile at 5%, so a CI with nominal coverage fails with < 1% chance; a 10% miss
    rate is caught with 99.98% chance, 8% with 93%). The BCa bootstrap this replaced fails every case: 209-214
    misses at 4 pairs, 150-162 at 6, 103-128 at 10. Inverting the exact sign-flip test, the misses are the
    comparisons whose test rejects the truth (31-36 at 6 and 10 pairs here: the test's level is 3.1% at 6 pairs,
    4.9% at 10), none at 4 pairs, where p >= 2/16 and the CI is unbounded."""
    reps = 1000
    limit = int(binom.ppf(0.99, reps, 0.05))
    assert limit == 67 and binom.sf(limit, reps, 0.10) > 0.999
    truth = np.where(np.arange(reps) < reps // 2, 1.0, 1.1)
    ests = ratio_of_sums_estimates(*_exchangeable_pairs(noise, n, reps, seed=n, true_ratio=truth[:, None]))
    misses = sum(not e.ci_low <= r <= e.ci_high for e, r in zip(ests, truth, strict=True))
    assert misses <= limit, misses
    assert n > 4 or misses == 0  # 4 pairs cannot reject at 5%: the CI is then unbounded


@pytest.mark.parametrize(("n", "n_permutations"), [(6, 10_000), (9, 10_000), (30, 2000)])
def test_ratio_of_sums_ci_excludes_1_exactly_when_p_is_below_alpha(n: int, n_permutations: int) -> None:
    """The CI inverts the sign-flip test: over comparisons with true ratios from 0.8 to 1.25 (so p straddles alpha),
    exact (6, 9 pairs) and Monte-Carlo (30 pairs) flips and two confidence levels, the CI clears 1 if and only if
    p < 1 - confidence, and the verdict follows."""
    reps = 200
    truth = np.exp(np.random.default_rng(n).uniform(math.log(0.8), math.log(1.25), (reps, 1)))
    data = _exchangeable_pairs("lognormal", n, reps, seed=100 + n, true_ratio=truth)
    for confidence in (0.95, 0.8):
        ests = ratio_of_sums_estimates(*data, confidence=confidence, n_permutations=n_permutations)
        clear = [e.ci_low > 1.0 or e.ci_high < 1.0 for e in ests]
        assert clear == [e.p_value < 1 - confidence for e in ests]
        assert 0 < sum(clear) < reps  # both outcomes occur
        assert clear == [e.verdict in ("better", "worse") for e in ests]
        assert all(e.ci_low <= e.ratio <= e.ci_high for e in ests)


def test_ratio_of_sums_ci_bounds_are_where_the_shifted_test_turns() -> None:
    """8 pairs, every one of the 256 swap patterns by brute force: just inside each bound the test of "R = bound"
    does not reject at 5%, just outside it does."""
    amount_t, time_t, amount_r, time_r = _rate_pairs(1.2, n=8, seed=21)
    est = paired_ratio_of_sums(amount_t, time_t, amount_r, time_r)

    def p_value(log_shift: float) -> float:
        return _brute_force_sign_flip_p(amount_t * math.exp(-log_shift), time_t, amount_r, time_r)

    assert est.ci_low > 1.0 and est.p_value < 0.05
    for bound, inward in ((est.ci_low, 1.0), (est.ci_high, -1.0)):
        assert p_value(math.log(bound) + inward * 1e-6) >= 0.05
        assert p_value(math.log(bound) - inward * 1e-6) < 0.05


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (([1.0, 2.0], [1.0, 2.0], [1.0], [1.0]), "equal"),
        (([1.0, 2.0], [1.0, -2.0], [1.0, 2.0], [1.0, 2.0]), "positive"),
        (([1.0], [1.0], [1.0], [1.0]), "at least 2"),
        (([[1.0, 2.0]], [[1.0, 2.0]], [[1.0, 2.0]], [[1.0, 2.0]]), "one-dimensional"),
    ],
)
def test_ratio_of_sums_input_validation(args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        paired_ratio_of_sums(*args)


def test_holm_step_down() -> None:
    assert holm([0.01, 0.04, 0.03, float("nan")]) == pytest.approx([0.04, 0.09, 0.09, 1.0])
    assert holm([0.2]) == [0.2]
    assert holm([]) == []
    assert holm([0.6, 0.5]) == pytest.approx([1.0, 1.0])


@pytest.mark.parametrize(("looks", "published"), [(1, 1.960), (2, 1.977), (3, 2.004), (4, 2.024), (5, 2.040)])
def test_obf_constants_match_published_values(looks: int, published: float) -> None:
    """O'Brien-Fleming C for K equal looks at one-sided 2.5% (Jennison & Turnbull 2000, table 2.3)."""
    assert obf_constant(0.025, [(k + 1) / looks for k in range(looks)]) == pytest.approx(published, abs=6e-4)


def test_obf_boundaries_give_the_nominal_error_and_power() -> None:
    """200k simulated B-value paths at 4 unequal looks cross the computed boundaries at 2.5% (SE 0.035 points),
    and with a drift as often as boundary_crossing says."""
    fractions = [0.2, 0.45, 0.7, 1.0]
    boundaries = np.array(obf_boundaries(0.025, fractions))
    rng = np.random.default_rng(8)
    increments = rng.standard_normal((200_000, 4)) * np.sqrt(np.diff(fractions, prepend=0.0))
    z = np.cumsum(increments, axis=1) / np.sqrt(fractions)
    assert np.mean(np.any(z >= boundaries, axis=1)) == pytest.approx(0.025, abs=0.0012)
    drift = 2.5
    z_drift = (np.cumsum(increments, axis=1) + drift * np.array(fractions)) / np.sqrt(fractions)
    expected = boundary_crossing(boundaries[-1], fractions, drift)
    assert np.mean(np.any(z_drift >= boundaries, axis=1)) == pytest.approx(expected, abs=0.004)


def test_sequential_p_value() -> None:
    assert sequential_p_value([1.7], [1.0]) == pytest.approx(float(norm.sf(1.7)))
    fractions = [0.25, 0.5, 0.75, 1.0]
    constant = obf_constant(0.025, fractions)
    at_boundary = [0.0, constant / math.sqrt(0.5)]  # B = C at the second look
    assert sequential_p_value(at_boundary, fractions) == pytest.approx(0.025, rel=1e-3)
    assert sequential_p_value([-3.0], fractions) > 0.5
    with pytest.raises(ValueError):
        sequential_p_value([1.0] * 5, fractions)


def test_power_functions_agree() -> None:
    # One look: the textbook formula.
    z = 1.959964 + 0.841621
    assert pairs_needed(0.15, 0.02) == math.ceil((z * 0.15 / math.log(1.02)) ** 2)
    assert mde(0.15, 451) == pytest.approx(math.expm1(z * 0.15 / math.sqrt(451)), rel=1e-4)
    for looks, m in ((1, 1), (4, 3)):
        n = pairs_needed(0.15, 0.01, m=m, looks=looks)
        assert detection_power(0.15, n, 0.01, m=m, looks=looks) == pytest.approx(0.8, abs=0.002)
        assert mde(0.15, n, m=m, looks=looks) <= 0.01 < mde(0.15, n - 2, m=m, looks=looks)
    assert 1.0 < pairs_needed(0.15, 0.01, looks=4) / pairs_needed(0.15, 0.01) < 1.05  # OBF costs a few percent
    assert pairs_needed(0.15, 0.01, m=3) > pairs_needed(0.15, 0.01)  # Holm's first step is alpha / m
    assert mde(0.15, 0) == math.inf
    with pytest.raises(ValueError):
        pairs_needed(0.0, 0.01)


def test_the_guarded_power_joins_the_bodys_and_its_guards_and_its_mde_and_pairs_invert_it() -> None:
    """A body measured with the whole time guarded: a guard whose SD is tiny costs nothing, nor one that is the
    body itself; a noisy one costs power; the guarded MDE and pairs needed invert the guarded power (80% at them,
    less one pair below); and a simulated guard (the whole time's bound at the look's boundary within +0.5%) holds
    as often as the formula says at one look."""
    body = detection_power(0.15, 900, 0.02, m=2, looks=4)
    noisy = Guard(0.40, 0.005)
    assert detection_power(0.15, 900, 0.02, m=2, looks=4, guard=Guard(1e-6, 0.005)) == pytest.approx(body)
    assert detection_power(0.15, 900, 0.02, m=2, looks=4, guard=noisy) < body - 0.05
    # no excess above the caps: the whole time is the body, whose win already shows it within the margin
    assert detection_power(0.15, 900, 0.02, m=2, looks=4, guard=Guard(0.15, 0.005)) == pytest.approx(body)
    effect = mde(0.15, 900, m=2, looks=4, guard=noisy)
    assert effect > mde(0.15, 900, m=2, looks=4)
    assert detection_power(0.15, 900, effect, m=2, looks=4, guard=noisy) == pytest.approx(0.8, abs=1e-6)
    n = pairs_needed(0.15, 0.01, m=3, looks=4, guard=noisy)
    assert detection_power(0.15, n, 0.01, m=3, looks=4, guard=noisy) >= 0.8
    assert detection_power(0.15, n - 1, 0.01, m=3, looks=4, guard=noisy) < 0.8
    rng = np.random.default_rng(5)
    n, whole_sd, gain, margin = 400, 0.4, 0.01, 0.005
    bound = norm.isf(0.025)
    means = rng.normal(-math.log1p(gain), whole_sd / math.sqrt(n), 20_000)  # log whole-time ratio, trial / reference
    held = float(np.mean(means + bound * whole_sd / math.sqrt(n) < math.log1p(margin)))
    formula = detection_power(1e-6, n, gain, guard=Guard(whole_sd, margin))  # the body certain: the guard alone
    assert held == pytest.approx(formula, abs=0.015)


def test_mirrored_order() -> None:
    orders = [mirrored_order(40, seed=s) for s in range(20)]
    assert {o[0] for o in orders} == {True, False}  # the first arm is random
    for order in orders:
        blocks = [arm for trial_first in order for arm in ((1, 0) if trial_first else (0, 1))]
        assert all(blocks[2 * i] == blocks[2 * i - 1] for i in range(1, 40))  # each pair starts as the last ended
        # first-order carry-over balanced: each arm follows the trial arm equally often (first block aside)
        follows_trial = [sum(blocks[i - 1] == 1 for i in range(1, 80) if blocks[i] == arm) for arm in (0, 1)]
        assert abs(follows_trial[0] - follows_trial[1]) <= 1
    assert mirrored_order(10, seed=3) == mirrored_order(25, seed=3)[:10]
    assert mirrored_order(0, seed=1) == []


@pytest.mark.parametrize("level", [0.05, 0.001])
def test_least_pairs_is_where_the_sign_flip_test_first_reaches_its_level(level: float) -> None:
    """With every pair the same way the exact two-sided p is 2^(1-n): ``least_pairs`` pairs reach ``level``, one
    fewer cannot, and the CI at 1 - level is then bounded only from that many pairs on."""
    n = least_pairs(level)

    def p_value(pairs: int) -> float:
        faster = [1.0 + 0.01 * i for i in range(pairs)]  # every pair: the trial makes 2% more tokens in the time
        return paired_ratio_of_sums([f * 1.02 for f in faster], faster, faster, faster).p_value

    assert p_value(n) <= level < p_value(n - 1)
    assert (n, least_pairs(level, sided=1)) in {(6, 5), (11, 10)}
