"""The pass weights the capacity interval's bootstrap was compared with (``benchmarks.resampling``): what each
promises of its draws, and that the weights given are what :func:`tuner.stats.capacity.estimate_with` reads."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.engine.capacity_aa import ATTAINMENT
from benchmarks.engine.capacity_aa_estimate import estimated
from benchmarks.resampling import RESAMPLES, RULES, levels_kept
from tests.test_capacity_aa_estimate import _searched
from tuner.stats import capacity_ratio
from tuner.stats.capacity import _table, estimate_with
from tuner.stats.pass_bootstrap import pass_bootstrap


def _table_of(measured_by: list[list[int]], passes: int) -> np.ndarray:
    """A (level, pass, check, counts) table with 10 requests where ``measured_by[level]`` lists its passes."""
    table = np.zeros((len(measured_by), passes, 1, 3))
    for level, tags in enumerate(measured_by):
        table[level, tags, 0] = (10, 9, 9)
    return table


def test_levels_kept_keeps_a_load_one_pass_measured_in_every_draw_the_bootstrap_would_drop_it_from() -> None:
    table = _table_of([list(range(10)), [3], [4, 7]], passes=10)
    plain = pass_bootstrap(RESAMPLES, 0)(table)
    assert np.mean(plain[:, 3] == 0) > 0.3  # (9/10)^10 = 35% of the bootstrap's draws lose the load of pass 3
    kept = levels_kept(table)
    assert kept.shape == (RESAMPLES, 10) and np.all(kept.sum(axis=1) == 10)
    assert np.all(kept[:, 3] > 0) and np.all(kept[:, [4, 7]].sum(axis=1) > 0)


def test_levels_kept_says_so_when_almost_no_draw_keeps_every_load() -> None:
    table = _table_of([[tag] for tag in range(40)], passes=40)  # 40 loads, each one pass's: (1 - 1/e)^40 ~ 1e-8
    with pytest.raises(ValueError, match="keeps every load"):
        levels_kept(table)


def test_the_weights_given_are_what_the_bagged_estimate_and_its_interval_are_read_from() -> None:
    levels, row = _searched(np.random.default_rng(3))
    made = capacity_ratio(levels, ATTAINMENT)
    assert estimate_with(levels, ATTAINMENT, pass_bootstrap(2000, 0)).to_dict() == made.to_dict()
    _, _, table = _table(levels)
    assert table.shape[1] == made.passes
    for draws in RULES.values():
        other = estimate_with(levels, ATTAINMENT, draws)
        again = estimated(row, draws)
        assert other.ratio == again["ratio"] and again["ci"] == [other.ci_low, other.ci_high]
        assert (other.ratio, other.ci_low, other.ci_high) != (made.ratio, made.ci_low, made.ci_high)
