"""A ``capacity_aa`` row keeps enough of each load to estimate its search again (the per-pass table the bootstrap
resamples, and the discordant requests the interval's floor pools): rebuilt from the row, the estimate is the one the
search made from every request's flags."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from benchmarks.engine.capacity_aa import ATTAINMENT, _level, spread
from benchmarks.engine.capacity_aa_estimate import estimated, levels_of
from tuner.stats import LevelResult, capacity_ratio


def _searched(rng: np.random.Generator) -> tuple[list[LevelResult], dict[str, Any]]:
    """Levels of 48 requests per run at six loads, each measured in its own passes, B's knee above A's; and the row
    ``capacity_aa`` would keep of them."""
    levels, rows = [], []
    for i, load in enumerate((8.0, 10.0, 12.0, 14.0, 16.0, 20.0)):
        passes = tuple(int(p) for p in sorted(rng.choice(12, size=int(rng.integers(2, 7)), replace=False)))
        met_a = [rng.random(48) < 1.0 - 0.09 * i for _ in passes]
        met_b = [(a | (rng.random(48) < 0.3)) & (rng.random(48) < 0.97) for a in met_a]
        level = LevelResult.measured(load, met_a, met_b, passes)
        levels.append(level)
        counts = level.checks[0]
        record = {
            "load": load,
            "requests": 48,
            "passes": list(passes),
            "difference": {"discordant": [sum(counts.only_a), sum(counts.only_b)]},
            "runs": {
                "reference": [{"attainment": m / 48, "pause_s": 0.0} for m in counts.met_a],
                "configuration": [{"attainment": m / 48, "pause_s": 0.0} for m in counts.met_b],
            },
        }
        rows.append(_level(record))  # type: ignore[arg-type]  # the keys _level reads
    return levels, {"kind": "aa", "mode": "serve", "seed": 0, "levels": rows}


def test_a_search_rebuilt_from_its_row_gives_its_own_estimate() -> None:
    for seed in range(5):
        levels, row = _searched(np.random.default_rng(seed))
        made = capacity_ratio(levels, ATTAINMENT)
        again = estimated(row)
        assert again["ratio"] == made.ratio and again["ci"] == [made.ci_low, made.ci_high]
        rebuilt = levels_of(row)
        for mine, theirs in zip(rebuilt, levels, strict=True):
            assert mine.passes == theirs.passes and mine.checks[0].met_a == theirs.checks[0].met_a
            assert mine.checks[0].met_b == theirs.checks[0].met_b
            assert sum(mine.checks[0].only_a) == sum(theirs.checks[0].only_a)


def test_a_search_whose_row_lost_a_pass_is_estimated_otherwise() -> None:
    levels, row = _searched(np.random.default_rng(7))
    row["levels"][2]["passes"] = [p + 100 for p in row["levels"][2]["passes"]]  # the level in passes of its own
    made = capacity_ratio(levels, ATTAINMENT)
    again = estimated(row)
    assert (again["ratio"], again["ci"]) != (made.ratio, [made.ci_low, made.ci_high])


def test_the_series_width_splits_into_its_t_quantile_and_its_se_over_the_spread() -> None:
    """Two closed A/A rows (half-widths 0.10 and 0.20 at 6 and 11 passes beside the crossings) and one open: the mean
    t is t(5) and t(10) averaged, the SE each half-width over its t, and width / SD their product within rounding
    (the SD from all three estimates, the widths from the closed two); the log estimates over their own SEs,
    0 and ln 1.1 / (ln(1.3 / 0.9) / 2 / t(10)), give the RMS z."""
    rows = [
        {"kind": "aa", "ratio": 1.0, "ci": [0.9, 1.1], "covers_1": True, "below_1": False, "passes_beside": 6},
        {"kind": "aa", "ratio": 1.1, "ci": [0.9, 1.3], "covers_1": True, "below_1": False, "passes_beside": 11},
        {"kind": "aa", "ratio": 0.95, "ci": [None, None], "covers_1": True, "below_1": False, "passes_beside": 1},
    ]
    found = spread(rows)
    t5, t10 = 2.570582, 2.228139
    sd = float(np.std([1.0, 1.1, 0.95], ddof=1))
    assert found["aa_closed"] == "2 of 3" and found["aa_sd"] == pytest.approx(sd)
    assert found["aa_mean_t"] == pytest.approx((t5 + t10) / 2, rel=1e-6)
    assert found["aa_se_over_sd"] == pytest.approx((0.1 / t5 + 0.2 / t10) / 2 / sd, rel=1e-6)
    assert found["half_width_over_sd"] == pytest.approx(0.15 / sd)
    z = math.log(1.1) / (math.log(1.3 / 0.9) / 2 / t10)  # the first closed row estimates 1 exactly: z = 0
    assert found["aa_z_rms"] == pytest.approx(z / math.sqrt(2), rel=1e-6)
