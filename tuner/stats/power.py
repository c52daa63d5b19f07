"""Sizing a comparison from the per-pair log-ratio SD (power, MDE, pairs needed) and ordering its pairs."""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass

from scipy import optimize as _opt
from scipy import stats as _st

from tuner.stats.sequential import _obf_constant, boundary_crossing


def _check_power_args(log_sd: float, alpha: float, m: int, power: float, looks: int) -> None:
    if not (math.isfinite(log_sd) and log_sd > 0):
        raise ValueError(f"log_sd must be positive and finite, got {log_sd}")
    if not 0.0 < alpha < 0.5 or m < 1 or looks < 1:
        raise ValueError(f"need 0 < alpha < 0.5, m >= 1, looks >= 1; got {alpha}, {m}, {looks}")
    if not alpha / m < power < 1.0:
        raise ValueError(f"power must be in (alpha / m, 1), got {power}")


def _equal_looks(looks: int) -> tuple[float, ...]:
    return tuple((k + 1) / looks for k in range(looks))


@functools.lru_cache(maxsize=256)
def _drift_for_power(alpha: float, m: int, power: float, looks: int) -> float:
    """The B-value drift at which the OBF test at level alpha / m (Holm's first step) has the given power."""
    fractions = _equal_looks(looks)
    constant = _obf_constant(alpha / m, fractions)
    return float(_opt.brentq(lambda d: boundary_crossing(constant, fractions, d) - power, 0.0, 50.0, xtol=1e-9))


@dataclass(frozen=True)
class Guard:
    """The body's guard as power sees it (:mod:`tuner.stats.body`): the whole time's per-pair log SD, and the
    margin within which the whole time must be shown (the same gain assumed there: pauses unchanged)."""

    sd: float
    margin: float


def detection_power(
    log_sd: float,
    n_pairs: int,
    effect: float,
    *,
    alpha: float = 0.025,
    m: int = 1,
    looks: int = 1,
    guard: Guard | None = None,
) -> float:
    """Chance that a true relative gain ``effect`` (0.01 = +1%) is confirmed with ``n_pairs`` pairs of per-pair
    log-ratio SD ``log_sd``: one-sided level alpha / m (Holm's first step among m candidates), O'Brien-Fleming
    over ``looks`` equal looks (1 = a fixed-size test). With a ``guard``, the chance that the whole time is also
    shown within its margin by the same test: both must hold for a win. The two are joined by a Gaussian copula
    with the correlation the body and the whole time have when the excess above the caps is independent of the
    body (``log_sd / guard.sd``): the product where the excess dominates, the smaller of the two where there is
    none (the whole time is then the body)."""
    _check_power_args(log_sd, alpha, m, 0.5 + alpha / (2 * m), looks)
    fractions = _equal_looks(looks)
    constant = _obf_constant(alpha / m, fractions)
    power = boundary_crossing(constant, fractions, math.log1p(effect) * math.sqrt(n_pairs) / log_sd)
    if guard is None:
        return power
    drift = (math.log1p(effect) + math.log1p(guard.margin)) * math.sqrt(n_pairs) / guard.sd
    return _both(power, boundary_crossing(constant, fractions, drift), min(1.0, log_sd / guard.sd))


def _both(p: float, q: float, rho: float) -> float:
    """P(both) of two events of chances ``p`` and ``q`` whose normal scores correlate by ``rho``."""
    if min(p, q) <= 0.0 or max(p, q) >= 1.0 or rho >= 1.0 - 1e-9:
        return min(p, q) if rho >= 1.0 - 1e-9 or max(p, q) >= 1.0 else 0.0
    scores = [float(_st.norm.ppf(p)), float(_st.norm.ppf(q))]
    joint = _st.multivariate_normal(mean=[0.0, 0.0], cov=[[1.0, rho], [rho, 1.0]]).cdf(scores)
    return float(min(max(joint, p * q), min(p, q)))


def mde(
    log_sd: float,
    n_pairs: int,
    *,
    alpha: float = 0.025,
    m: int = 1,
    power: float = 0.8,
    looks: int = 1,
    guard: Guard | None = None,
) -> float:
    """Minimum detectable relative gain (0.01 = +1%) with ``n_pairs`` pairs: the gain confirmed with probability
    ``power`` by the test of :func:`detection_power` (its ``guard`` too). inf without pairs."""
    _check_power_args(log_sd, alpha, m, power, looks)
    if n_pairs < 1:
        return math.inf
    alone = math.expm1(_drift_for_power(alpha, m, power, looks) * log_sd / math.sqrt(n_pairs))
    if guard is None:
        return alone

    def short(effect: float) -> float:
        return detection_power(log_sd, n_pairs, effect, alpha=alpha, m=m, looks=looks, guard=guard) - power

    high = max(2 * alone, 1e-6)
    while short(high) < 0:
        if high > 1e6:
            return math.inf
        high *= 2
    return float(_opt.brentq(short, alone, high, xtol=1e-9)) if short(alone) < 0 else alone


def pairs_needed(
    log_sd: float,
    effect: float,
    *,
    alpha: float = 0.025,
    m: int = 1,
    power: float = 0.8,
    looks: int = 1,
    guard: Guard | None = None,
) -> int:
    """Pairs (the maximum, with several looks) for which :func:`mde` is at most ``effect`` (0.01 = +1%).

    With looks=1 this is the textbook ((z_{1-alpha/m} + z_power) * log_sd / log(1 + effect))^2; O'Brien-Fleming
    looks add a few percent to the maximum and save pairs on average when the gain is real. With a ``guard``, the
    fewest pairs at which :func:`detection_power` (the guard's too) reaches ``power``.
    """
    _check_power_args(log_sd, alpha, m, power, looks)
    if not (math.isfinite(effect) and effect > 0):
        raise ValueError(f"effect must be a positive relative gain, got {effect}")
    alone = math.ceil((_drift_for_power(alpha, m, power, looks) * log_sd / math.log1p(effect)) ** 2 - 1e-9)
    if guard is None:
        return alone
    whole = pairs_needed(guard.sd, (1 + effect) * (1 + guard.margin) - 1, alpha=alpha, m=m, power=power, looks=looks)
    low, high = alone, 4 * max(alone, whole)
    while low < high:
        middle = (low + high) // 2
        found = detection_power(log_sd, middle, effect, alpha=alpha, m=m, looks=looks, guard=guard)
        low, high = (middle + 1, high) if found < power else (low, middle)
    return low


def mirrored_order(n_pairs: int, *, seed: int) -> list[bool]:
    """Per pair, whether the trial arm runs first, in mirrored order (AB BA AB BA ...): each pair starts with the
    arm the previous pair ended with; the first arm is drawn at random (seeded).

    Both blocks of every pair then follow the same arm, so residue an arm leaves behind (garbage, caches) hits
    the two arms of a pair alike and cancels; with independent random AB/BA order the reference follows the
    trial 3/4 of the time and the ratio is biased by half the carry-over. For runs (step blocks inside EngineCore
    keep a random order: :mod:`tuner.plugin.step_interleaver` says what mirrored blocks did there); the order of n
    pairs is a prefix of the order of more pairs with the same seed, so it extends batch by batch. With one
    random bit per sequence the sign-flip test no longer rests on randomized order but on the arms being
    exchangeable within a pair under no effect (simulated in tests/test_sweep_decisions_sim.py).
    """
    if n_pairs < 0:
        raise ValueError(f"n_pairs must be >= 0, got {n_pairs}")
    first = random.Random(seed).random() < 0.5
    return [first != (i % 2 == 1) for i in range(n_pairs)]
