"""A fake host for the statistics, and a screening + confirmation sweep driven through the real decision code.

Pure numpy, vectorised over replicates: no engine. A "block" is one arm's run or step block; it yields an amount
(steps compared) and a time. The host's log slowness drifts as an AR(1) from block to block, block noise is a
heavy-tailed scale mixture, a block now and then holds a long pause, and a trial-arm block may leave residue that
slows the next block whichever arm it belongs to. Pairs are ordered by :func:`tuner.stats.mirrored_order` or at
random (AB/BA per pair, as before), and are analysed by the ratio of sums (:mod:`tuner.stats`, in batches);
sweeps go through :mod:`tuner.sweep.decisions`.

Small bootstrap and permutation counts inside sweeps are deliberate. Screening uses its CI only to rank (200
resamples; its p-value is unused), and the confirmation decision reads only the standardized estimate, not the
CI or the Monte-Carlo p-value (20 of each by default; the benchmark raises them to report the effect's CI).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import signal

from tuner.stats import RatioEstimate, mirrored_order, ratio_of_sums_estimates
from tuner.sweep.decisions import (
    ConfirmationPlan,
    Design,
    ScreeningResult,
    confirm,
    plan_confirmation,
    ranking_sd,
    sweep_power,
)

Order = Literal["mirrored", "random"]
_Array = npt.NDArray[np.float64]

PAIRS_PER_MINUTE = 89.0  # step-level pairs per minute on the 2-core CPU host (results/reference/measurement-cpu.json)
SCREENING_PAIRS = 178  # the default 120 s step budget of one trial at that rate


@dataclass(frozen=True)
class Host:
    """Noise of one block. The defaults give the ratio of sums a per-pair SD of 0.15, as step blocks on the CPU host
    (the SD of per-pair log ratios is ~0.13: a pause weighs more in time than in log time)."""

    steps: int = 16  # steps per block; each drops out (not comparable) with probability `drop`
    drop: float = 0.1
    drift_sd: float = 0.2  # stationary SD of the AR(1) log slowness
    drift_rho: float = 0.95  # its block-to-block correlation
    noise_sd: float = 0.045  # block log noise; a share `outlier_p` of blocks has `outlier_scale` times more
    outlier_p: float = 0.1
    outlier_scale: float = 3.0
    pause_p: float = 0.005  # chance of a long pause in a block, which adds `pause_len` block times
    pause_len: float = 1.0
    carry: float = 0.0  # log slowdown of the block that follows a trial-arm block (residue)


STEP_HOST = Host()


def true_ratio(host: Host, gain: float = 0.0, pause_scale: float = 1.0) -> float:
    """The estimand: the trial's throughput over the reference's, E[time_ref] / E[time_trial] per amount."""
    return (1 + gain) * (1 + host.pause_len * host.pause_p) / (1 + host.pause_len * host.pause_p * pause_scale)


@dataclass(frozen=True)
class PairData:
    """Per replicate (rows) and pair (columns): each arm's amount and time."""

    trial_amount: _Array
    trial_time: _Array
    reference_amount: _Array
    reference_time: _Array

    def estimates(self, n: int | None = None, rows: slice = slice(None), **kwargs: int) -> list[RatioEstimate]:
        """Throughput ratio of each replicate in ``rows`` from its first ``n`` pairs (all by default)."""
        cut = (rows, slice(0, n))
        return ratio_of_sums_estimates(
            self.trial_amount[cut],
            self.trial_time[cut],
            self.reference_amount[cut],
            self.reference_time[cut],
            **kwargs,  # type: ignore[arg-type]
        )


def simulate_pairs(
    host: Host,
    n_pairs: int,
    *,
    reps: int,
    seed: int,
    gain: float | npt.ArrayLike = 0.0,
    pause_scale: float = 1.0,
    order: Order = "mirrored",
) -> PairData:
    """``reps`` independent sequences of ``n_pairs`` pairs; ``gain`` (scalar or one per replicate) speeds up every
    trial block, ``pause_scale`` multiplies the trial's pause probability."""
    rng = np.random.default_rng(seed)
    trial_first: npt.NDArray[np.bool_]
    if order == "mirrored":
        seeds = np.random.SeedSequence(seed).generate_state(reps)
        trial_first = np.array([mirrored_order(n_pairs, seed=int(s)) for s in seeds], dtype=bool).reshape(reps, -1)
    else:
        trial_first = rng.random((reps, n_pairs)) < 0.5
    is_trial = np.stack([trial_first, ~trial_first], axis=2).reshape(reps, 2 * n_pairs)
    after_trial = np.pad(is_trial[:, :-1], ((0, 0), (1, 0)))

    blocks = (reps, 2 * n_pairs)
    innovations = rng.normal(0.0, host.drift_sd * math.sqrt(1 - host.drift_rho**2), blocks)
    start = host.drift_rho * rng.normal(0.0, host.drift_sd, (reps, 1))
    drift = signal.lfilter([1.0], [1.0, -host.drift_rho], innovations, axis=1, zi=start)[0]
    scale = np.where(rng.random(blocks) < host.outlier_p, host.outlier_scale * host.noise_sd, host.noise_sd)
    speedup = np.log1p(np.broadcast_to(np.asarray(gain, dtype=np.float64), (reps,)))[:, None]
    log_time = drift + scale * rng.standard_normal(blocks) + host.carry * after_trial - speedup * is_trial
    pause_p = host.pause_p * np.where(is_trial, pause_scale, 1.0)
    amount = host.steps - rng.binomial(host.steps, host.drop, blocks)
    time = amount * np.exp(log_time) * (1.0 + host.pause_len * (rng.random(blocks) < pause_p))

    def arm(values: npt.NDArray[Any], trial: bool) -> _Array:
        return values[is_trial == trial].reshape(reps, n_pairs).astype(np.float64)

    return PairData(arm(amount, True), arm(time, True), arm(amount, False), arm(time, False))


# ------------------------------------------------------------------------------------- sweeps


@dataclass(frozen=True)
class SweepSpec:
    """A sweep: one gain per screened trial (the baseline aside), the screening budget and the design."""

    gains: tuple[float, ...] = (0.0,) * 20
    screening_pairs: int = SCREENING_PAIRS
    design: Design = field(default_factory=Design)
    host: Host = STEP_HOST
    confirmation_resamples: int = 20  # bootstrap resamples and sign flips per confirmation estimate
    report_resamples: int | None = None  # re-estimate the reported effect with this many, as the tool reports it


@dataclass(frozen=True)
class SweepOutcome:
    winner: int | None
    winner_gain: float | None  # the winner's true ratio - 1
    effect: RatioEstimate | None  # the reported (confirmation) estimate of the winner
    selected: bool  # whether the trial with the largest gain was a candidate
    promised: float  # the plan's own sweep power for the largest gain in the spec (nan without one)
    planned_pairs: int  # per candidate
    used_pairs: int  # per candidate, up to the look that stopped
    looks: int


def run_sweep(spec: SweepSpec, seed: int) -> SweepOutcome:
    """Screen every trial, plan the confirmation from the screening, confirm look by look until the decision
    stops, as the sweep would."""
    host, design = spec.host, spec.design
    gains = np.asarray(spec.gains)
    screen_seed, confirm_seed = np.random.SeedSequence(seed).generate_state(2)
    screen = simulate_pairs(host, spec.screening_pairs, reps=gains.size, gain=gains, seed=int(screen_seed))
    estimates = screen.estimates(n_resamples=200, n_permutations=9, seed=seed)
    screening = [ScreeningResult(j, True, e) for j, e in enumerate(estimates)]
    plan = plan_confirmation(screening, design)
    promised = _promise(spec, plan, ranking_sd(screening))
    if not plan.candidates:
        return SweepOutcome(None, None, None, False, promised, 0, 0, 0)

    data = simulate_pairs(
        host, plan.pairs, reps=len(plan.candidates), gain=gains[list(plan.candidates)], seed=int(confirm_seed)
    )
    history: dict[int, list[RatioEstimate]] = {c: [] for c in plan.candidates}
    for n in plan.looks:
        draws = spec.confirmation_resamples
        at_look = data.estimates(n, n_resamples=draws, n_permutations=draws, seed=seed + n)
        for c, estimate in zip(plan.candidates, at_look, strict=True):
            history[c].append(estimate)
        decision = confirm(plan, screening, history)
        if decision.stop:
            break
    effect = decision.effect
    if decision.winner is not None and spec.report_resamples:
        row = plan.candidates.index(decision.winner)
        draws = spec.report_resamples
        effect = data.estimates(n, slice(row, row + 1), n_resamples=draws, n_permutations=draws)[0]
    winner_gain = None if decision.winner is None else true_ratio(host, float(gains[decision.winner])) - 1
    selected = int(np.argmax(gains)) in plan.candidates
    return SweepOutcome(decision.winner, winner_gain, effect, selected, promised, plan.pairs, n, decision.look)


def _promise(spec: SweepSpec, plan: ConfirmationPlan, noise: float) -> float:
    best = max(spec.gains)
    if best <= 0 or not plan.candidates:
        return math.nan
    return sweep_power(
        best,
        log_sd=plan.log_sd,
        trials=len(spec.gains),
        screening_pairs=spec.screening_pairs,
        confirmation_pairs=plan.pairs,
        design=spec.design,
        ranking_sd=noise,
    )


def run_sweeps(spec: SweepSpec, reps: int, seed: int) -> list[SweepOutcome]:
    return [run_sweep(spec, seed * 100_003 + r) for r in range(reps)]
