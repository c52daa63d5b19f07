"""Pass weights the capacity interval's bootstrap (:func:`tuner.stats.pass_bootstrap.pass_bootstrap`) was compared
with, each given to :func:`tuner.stats.capacity.estimate_with` in place of the bootstrap's: the rest of the rule
(the stretch, the floor, the open sides) is the tool's. ``capacity_sim`` compares them on the same simulated
searches and ``capacity_aa_estimate --draws`` on the engine's; docs/capacity.md says why neither was adopted.

- ``dirichlet``: each pass weighted by a flat Dirichlet draw (the Bayesian bootstrap, Rubin 1981). No pass, and so
  no load, ever leaves a resample, and the weights move continuously rather than in whole passes.
- ``levels_kept``: the bootstrap's draws, keeping only those in which every measured load is still measured, as if
  the loads were fixed by design rather than chosen by the search from what it saw.
"""

from __future__ import annotations

import numpy as np

from tuner.stats.crossing import Array
from tuner.stats.pass_bootstrap import Draws, pass_bootstrap

RESAMPLES = 2000


def dirichlet(table: Array) -> Array:
    """Flat Dirichlet weights of each pass, scaled to a mean of 1 (as the bootstrap's counts have)."""
    passes = table.shape[1]
    return np.asarray(np.random.default_rng(0).dirichlet(np.ones(passes), RESAMPLES) * passes, dtype=np.float64)


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


RULES: dict[str, Draws] = {"dirichlet": dirichlet, "levels_kept": levels_kept}
"""Each rule's weights, by name."""
