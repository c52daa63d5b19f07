"""Pass weights the capacity estimate's bootstrap (:func:`tuner.stats.pass_bootstrap.pass_bootstrap`) was compared
with, given to :func:`tuner.stats.capacity.estimate_with` in place of the bootstrap's: the rest of the rule (the
bagging, the jackknife after it, the floor, the open sides) is the tool's. ``capacity_sim`` compares it on the same
simulated searches and ``capacity_aa_estimate --draws`` on the engine's; docs/capacity.md says why it was not adopted.

- ``levels_kept``: the bootstrap's draws, keeping only those in which every measured load is still measured, as if
  the loads were fixed by design rather than chosen by the search from what it saw.

Flat Dirichlet weights (the Bayesian bootstrap), compared with the stretched percentile interval before, leave no
pass out of any resample, so the jackknife after the bootstrap has no delete-one values to read.
"""

from __future__ import annotations

import numpy as np

from tuner.stats.crossing import Array
from tuner.stats.pass_bootstrap import Draws, pass_bootstrap

RESAMPLES = 2000


def levels_kept(table: Array) -> Array:
    """The bootstrap's draws in which no measured load loses every pass that measured it (drawn in batches until
    there are enough; a load measured by one pass of 20 stays in 64% of draws)."""
    measured = (table[:, :, 0, 0] > 0).astype(float)  # (level, pass)
    kept: list[Array] = []
    for seed in range(1000):
        draws = pass_bootstrap(RESAMPLES, seed)(table)
        kept.append(draws[np.all(draws @ measured.T > 0, axis=1)])
        if sum(len(k) for k in kept) >= RESAMPLES:
            return np.concatenate(kept)[:RESAMPLES]
    raise ValueError("fewer than one draw in 1,000 keeps every load: too many loads measured by one pass")


RULES: dict[str, Draws] = {"levels_kept": levels_kept}
"""Each rule's weights, by name."""
