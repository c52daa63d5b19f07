"""A ``capacity_aa`` row keeps enough of each load to estimate its search again (the per-pass table the bootstrap
resamples, and the discordant requests the interval's floor pools): rebuilt from the row, the estimate is the one the
search made from every request's flags."""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.engine.capacity_aa import ATTAINMENT, _level
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
