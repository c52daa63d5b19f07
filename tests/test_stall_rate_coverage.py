"""The stall-rate difference's interval (:func:`tuner.stats.stall_rate.paired_rate_difference`) on simulated
comparisons of 8 pairs x 60 judged steps per arm per pair, each step stalling independently at its arm's rate
unless a test says otherwise: coverage of the true difference, A/A flags, no stalls at all, bursts.

Each simulated test draws ``REPLICATES`` = 2000 comparisons from a fixed seed. Coverage must be >= 93%: an
interval covering 95% fails that with probability 4e-5, one covering 90% passes it with probability 2e-6 (92%:
0.05). The A/A flag share must be <= the 99.9% binomial quantile at 5% (131 of 2000, 6.55%): a test flagging at
exactly 5% fails with probability < 0.1%, one flagging at 8% passes with probability 0.8%.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, norm

from tuner.stats.stall_rate import RateDifference, newcombe_interval, paired_rate_difference

PAIRS, STEPS = 8, 60
REPLICATES = 2000
MIN_COVERAGE = 0.93
MAX_AA_FLAGS = binom.ppf(0.999, REPLICATES, 0.05) / REPLICATES
Pairs = list[tuple[tuple[int, int], tuple[int, int]]]


def _as_pairs(stalls_a: np.ndarray, stalls_b: np.ndarray) -> Pairs:
    return [((int(a), STEPS), (int(b), STEPS)) for a, b in zip(stalls_a, stalls_b, strict=True)]


def _independent(rng: np.random.Generator, rate_a: float, rate_b: float, every: int) -> Pairs:
    """Steps stalling independently at each arm's rate; with ``every``, arm B's steps (numbered across its blocks
    from a random phase) also stall on every ``every``-th, as the ``known_stall`` yardstick makes them."""
    injected = np.zeros(PAIRS, dtype=np.int64)
    if every:
        numbers = rng.integers(every) + np.arange(PAIRS * STEPS)
        injected = (numbers % every == 0).reshape(PAIRS, STEPS).sum(axis=1)
    stalls_b = injected + rng.binomial(STEPS - injected, rate_b)
    return _as_pairs(rng.binomial(STEPS, rate_a, PAIRS), stalls_b)


def _bursts(rng: np.random.Generator, chance: float, length: int) -> Pairs:
    """A/A with clustered stalls: each arm's block has one burst of ``length`` stalls with probability ``chance``."""
    return _as_pairs(*(length * rng.binomial(1, chance, (2, PAIRS))))


def _pooled(comparison: Pairs) -> tuple[tuple[int, int], tuple[int, int]]:
    """Each arm's (stalls, steps) over all pairs, as if its steps were independent."""
    a, b = np.sum(comparison, axis=0).tolist()
    return (a[0], a[1]), (b[0], b[1])


def _simulated(comparison: Pairs) -> RateDifference:
    difference = paired_rate_difference(comparison)
    assert difference is not None
    return difference


def _consistent(results: list[RateDifference]) -> bool:
    """One verdict: the flag (the interval excludes 0) and the p agree on every comparison."""
    return all(r.flagged == (r.p_value < 1 - r.confidence) for r in results)


def test_newcombes_interval_reproduces_his_published_examples() -> None:
    """Newcombe (1998), Statistics in Medicine 17:873, Table II, method 10: (x1/n1 - x2/n2) -> 95% interval."""
    published = {
        (56, 70, 48, 80): (0.0524, 0.3339),
        (9, 10, 3, 10): (0.1705, 0.8090),
        (5, 56, 0, 29): (-0.0381, 0.1926),
        (0, 10, 0, 20): (-0.1611, 0.2775),
        (0, 10, 0, 10): (-0.2775, 0.2775),
        (10, 10, 0, 20): (0.6791, 1.0000),
        (10, 10, 0, 10): (0.6075, 1.0000),
    }
    z = float(norm.ppf(0.975))
    for (x1, n1, x2, n2), interval in published.items():
        assert newcombe_interval((x2, n2), (x1, n1), z) == pytest.approx(interval, abs=6e-5)


@pytest.mark.parametrize(
    ("rate_a", "rate_b", "every"),
    [(0.0, 0.003, 0), (0.001, 0.004, 0), (0.0, 0.005, 0), (0.005, 0.045, 0), (0.005, 0.005, 25)],
    ids=["0-vs-0.3%", "0.1-vs-0.4%", "0-vs-0.5%", "0.5-vs-4.5%", "0.5%-plus-every-25th"],
)
def test_the_interval_covers_the_true_difference_at_rare_stalls(rate_a: float, rate_b: float, every: int) -> None:
    """Coverage >= 93% (module docstring; measured 96.4% at 0.5% vs 4.5%, 99.75-100% in the others) where the old
    swap-test inversion covered 76-88% at the first three, and the +4 points injected (0.5% vs 4.5%, or every
    25th step of B) are found >= 90% of the time (measured 98.3% and 100%; at a true 97% power, 2000 draws fall
    below 90% with probability 1e-48)."""
    rng = np.random.default_rng(11)
    truth = rate_b - rate_a + ((1 - rate_b) / every if every else 0.0)
    results = [_simulated(_independent(rng, rate_a, rate_b, every)) for _ in range(REPLICATES)]
    covered = np.mean([r.ci_low <= truth <= r.ci_high for r in results])
    assert covered >= MIN_COVERAGE, covered
    assert _consistent(results)
    if truth >= 0.03:
        found = np.mean([r.flagged and r.difference > 0 for r in results])
        assert found >= 0.90, found


@pytest.mark.parametrize("rate", [0.0, 0.005])
def test_aa_flags_at_most_at_the_nominal_rate(rate: float) -> None:
    """Equal rates flag <= 6.55% of 2000 comparisons (module docstring; measured 1.15% at 0.5%, none at 0)."""
    rng = np.random.default_rng(12)
    results = [_simulated(_independent(rng, rate, rate, 0)) for _ in range(REPLICATES)]
    flagged = np.mean([r.flagged for r in results])
    assert flagged <= MAX_AA_FLAGS, flagged
    assert _consistent(results)


def test_no_stalls_in_either_arm_still_allows_a_difference_of_the_rule_of_three() -> None:
    """0 of 480 steps per arm: each rate may be up to Wilson's z^2 / (n + z^2) = 0.79%, so the interval is that
    wide either way around 0 and nothing is flagged (the swap-test inversion gave [-2.7e-12, 2.7e-12])."""
    none = paired_rate_difference([((0, STEPS), (0, STEPS))] * PAIRS)
    assert none is not None and none.difference == 0 and none.design_effect == 1
    z = float(norm.ppf(0.975))
    assert none.ci_high == pytest.approx(z**2 / (PAIRS * STEPS + z**2)) and none.ci_low == -none.ci_high
    assert none.ci_high > 0.005 and not none.flagged and none.p_value == 1


def test_p_is_the_level_at_which_the_interval_reaches_zero() -> None:
    """The interval at confidence 1 - p has its side towards 0 at 0; a little below, it excludes 0 (4 vs 16 stalls
    in 480 steps per arm, design effect 1.06: p = 0.012)."""
    counts = [((0, STEPS), (3, STEPS))] * 4 + [((1, STEPS), (1, STEPS))] * 4
    at_95 = paired_rate_difference(counts)
    assert at_95 is not None and 0.001 < at_95.p_value < 0.05 and at_95.flagged
    at_p = paired_rate_difference(counts, confidence=1 - at_95.p_value)
    assert at_p is not None and at_p.ci_low == pytest.approx(0, abs=1e-9)
    below = paired_rate_difference(counts, confidence=1 - 1.01 * at_95.p_value)
    assert below is not None and below.flagged and below.p_value == at_95.p_value


def test_stalls_in_bursts_within_a_few_pairs_widen_the_interval() -> None:
    """The same 2 vs 12 stalls in 480 steps per arm: spread over the pairs they are as independent steps would
    give (design effect 1); all in two pairs of B, the pairs disagree (design effect 4.1) and the interval widens.
    On A/A comparisons whose stalls come in bursts of 6 (one block in 10) the interval flags within the module
    docstring's bound (measured 0.6%); on raw counts, as if steps were independent, it flags about half of them
    (51.3%; > 30% asserted, which would fail without the clustering)."""
    spread = paired_rate_difference(_as_pairs(np.array([1, 0, 0, 1, 0, 0, 0, 0]), np.array([2, 2, 1, 2, 2, 1, 1, 1])))
    burst = paired_rate_difference(_as_pairs(np.array([1, 0, 0, 1, 0, 0, 0, 0]), np.array([6, 6, 0, 0, 0, 0, 0, 0])))
    assert spread is not None and burst is not None and spread.difference == burst.difference
    assert spread.design_effect == 1 and burst.design_effect > 3
    assert burst.ci_low < spread.ci_low and burst.ci_high > spread.ci_high and spread.flagged and not burst.flagged
    rng = np.random.default_rng(13)
    comparisons = [_bursts(rng, 0.1, 6) for _ in range(REPLICATES)]
    flagged = np.mean([_simulated(c).flagged for c in comparisons])
    assert flagged <= MAX_AA_FLAGS, flagged
    z = float(norm.ppf(0.975))
    raw = [newcombe_interval(*_pooled(c), z) for c in comparisons]
    assert np.mean([low > 0 or high < 0 for low, high in raw]) > 0.3
