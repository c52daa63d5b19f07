"""The randomization units of :mod:`benchmarks.h100.step_adjust` and the per-unit terms of its statistic: each unit's
time-ordered contrast and its neighbour-drift covariates, linear in the tested ratio (that module's docstring has
the derivation)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Linear:
    """Per unit, the contrast and the covariates as linear functions of theta: d = theta du + dv, C = theta Cu + Cv."""

    du: Floats
    dv: Floats
    cu: Floats
    cv: Floats
    signs: Floats


def random_units(
    n_units: int, pattern: str, rng: np.random.Generator
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """A randomized design of ``n_units`` consecutive units, each running ``pattern`` (blocks of arms "A"/"B": "AB"
    for pairs, "ABAB" or "ABABABAB" for alternating runs, "ABBA" for mirrored quadruples) or its mirror image (A and
    B swapped), a fair coin per unit: per block whether it runs the trial arm B, and its unit."""
    if n_units < 1 or not pattern or set(pattern) != {"A", "B"}:
        raise ValueError(f"need n_units >= 1 and a pattern of both arms A and B, got {n_units}, {pattern!r}")
    mirrored = rng.random(n_units) < 0.5
    is_b = np.array([arm == "B" for arm in pattern])
    is_trial = (is_b[None, :] != mirrored[:, None]).ravel()
    unit = np.repeat(np.arange(n_units, dtype=np.int64), len(pattern))
    return is_trial, unit


@dataclass(frozen=True)
class Blocks:
    """Validated per-block inputs, and the units as runs of blocks [start, end] in time order."""

    t: Floats
    a: Floats
    b: npt.NDArray[np.bool_]
    segment: npt.NDArray[np.int64]
    used: npt.NDArray[np.bool_]
    starts: npt.NDArray[np.intp]
    ends: npt.NDArray[np.intp]


def validated(
    seconds: npt.ArrayLike,
    steps: npt.ArrayLike,
    is_trial: npt.ArrayLike,
    unit: npt.ArrayLike,
    segment: npt.ArrayLike | None,
) -> Blocks:
    t = np.asarray(seconds, dtype=np.float64)
    a = np.asarray(steps, dtype=np.float64)
    b = np.asarray(is_trial)
    u = np.asarray(unit)
    g = np.zeros(t.shape, dtype=np.int64) if segment is None else np.asarray(segment)
    if t.ndim != 1 or {a.shape, b.shape, u.shape, g.shape} != {t.shape}:
        raise ValueError("seconds, steps, is_trial, unit (and segment) must be 1-D arrays of one length per block")
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(np.isfinite(a)) and np.all(a > 0)):
        raise ValueError("block seconds and steps must be finite and positive")
    if b.dtype != np.bool_ or not np.issubdtype(u.dtype, np.integer) or not np.issubdtype(g.dtype, np.integer):
        raise ValueError("is_trial must be boolean, unit and segment integer")
    used = u >= 0
    change = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])  # runs of equal unit ids
    run_ends = np.r_[change[1:], u.size] - 1
    keep = used[change]
    starts, ends = change[keep], run_ends[keep]
    if starts.size != np.unique(u[used]).size:
        raise ValueError("each unit's blocks must be consecutive in time")
    if starts.size < 2:
        raise ValueError(f"a comparison needs at least 2 units, got {starts.size}")
    segment_changes = np.cumsum(np.r_[0, g[1:] != g[:-1]])
    if np.any(segment_changes[starts] != segment_changes[ends]):
        raise ValueError("each unit's blocks must lie in one segment")
    trials = np.add.reduceat(b.astype(np.int64), change)[keep]
    if np.any(trials == 0) or np.any(trials == ends - starts + 1):
        raise ValueError("every unit needs blocks of both arms")
    return Blocks(t=t, a=a, b=b.astype(np.bool_), segment=g.astype(np.int64), used=used, starts=starts, ends=ends)


def linear_terms(blocks: Blocks, lags: int, intercept: bool) -> Linear:
    """The unit contrasts and covariates, linear in theta (see the module docstring)."""
    t, a, b, g, used, starts, ends = (
        blocks.t,
        blocks.a,
        blocks.b,
        blocks.segment,
        blocks.used,
        blocks.starts,
        blocks.ends,
    )
    total = float(a[used].sum())
    trial_time, reference_time = float(t[used & b].sum()), float(t[used & ~b].sum())
    eu = np.where(b, t, 0.0) - a * trial_time / total  # e_j(theta) = theta * eu_j + ev_j
    ev = np.where(b, 0.0, t) - a * reference_time / total
    counts = ends - starts + 1
    index = np.repeat(np.arange(starts.size), counts)
    members = np.flatnonzero(used)  # the units' blocks, in time order (units are consecutive runs)
    orient = np.where(b, 1.0, -1.0)  # o_j: +1 on B
    signs = -orient[starts]  # s_u = +1 when the unit's first block ran A
    r = orient[members] * signs[index]  # r_j: the pattern with the unit's first block at -1
    du = np.asarray(np.bincount(index, r * eu[members], minlength=starts.size), dtype=np.float64)
    dv = np.asarray(np.bincount(index, r * ev[members], minlength=starts.size), dtype=np.float64)
    columns_u, columns_v = [], []
    for lag in range(1, lags + 1):
        after, before = ends + lag, starts - lag
        ok = (before >= 0) & (after < t.size)
        after, before = np.where(ok, after, 0), np.where(ok, before, 0)
        ok &= (g[after] == g[starts]) & (g[before] == g[starts])
        columns_u.append(np.where(ok, eu[after] - eu[before], 0.0))
        columns_v.append(np.where(ok, ev[after] - ev[before], 0.0))
    if intercept:
        columns_u.append(np.zeros(starts.size))
        columns_v.append(np.ones(starts.size))
    cu = np.stack(columns_u, axis=1) if columns_u else np.zeros((starts.size, 0))
    cv = np.stack(columns_v, axis=1) if columns_v else np.zeros((starts.size, 0))
    return Linear(du=du, dv=dv, cu=cu, cv=cv, signs=signs)


def coefficients(*terms: npt.ArrayLike) -> tuple[Floats, Floats, Floats]:
    """A polynomial's three coefficients (theta^2, theta, 1) as float arrays."""
    squared, linear, constant = (np.asarray(term, dtype=np.float64) for term in terms)
    return squared, linear, constant
