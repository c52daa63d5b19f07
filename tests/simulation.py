"""A fake host for the statistics, and a screening + confirmation sweep driven through the real decision code.

Pure numpy, vectorised over replicates: no engine. A "block" is one arm's run or step block; it yields an amount
(steps compared) and a time. The host's log slowness drifts as an AR(1) from block to block, block noise is a
heavy-tailed scale mixture, a block now and then holds a long pause, and a trial-arm block may leave residue that
slows the next block whichever arm it belongs to. Pairs are ordered by :func:`tuner.stats.mirrored_order` or at
random (AB/BA per pair, as before), and are analysed by the ratio of sums (:mod:`tuner.stats`, in batches);
sweeps go through :mod:`tuner.sweep.decisions`.

Sweeps mix ways of measuring (:class:`SimGrain`: a host, a pair rate and the pairs a screening buys), and each
candidate is confirmed on its own plan (:mod:`tuner.sweep.plans`), as the tool does. Screening ranks by the CI that
inverts the sign-flip test (:data:`SCREENING_FLIPS`); the confirmation decision reads the exact or Monte-Carlo sign-flip
test of each look as the tool computes it (``confirmation_flips``, the tool's 10,000 by default), since its
smallest p-value is part of the rule.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy import signal

from tuner.metrics.pairs import Pair
from tuner.stats import GUARD_MARGIN, RatioEstimate, drift_factors, mirrored_order, ratio_of_sums_estimates
from tuner.sweep.confirmation import guard_check
from tuner.sweep.decisions import confirm
from tuner.sweep.plans import Candidate, ConfirmationPlan, Design, nominate, plan_candidate, plan_confirmation
from tuner.sweep.power_statements import Ranking, sweep_power
from tuner.sweep.screening import ScreeningResult, gain_bounds, select_candidates
from tuner.sweep.slo_checks import Check

Order = Literal["mirrored", "random"]
_Array = npt.NDArray[np.float64]


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
    trial_whole: _Array | None = None  # the body's: each arm's whole time, pauses included, for its guard
    reference_whole: _Array | None = None

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

    def pairs(self, row: int, n: int) -> list[Pair]:
        """Replicate ``row``'s first ``n`` pairs as a confirmation look holds them (with the whole times, if any)."""
        columns = [self.trial_amount, self.trial_time, self.reference_amount, self.reference_time]
        if self.trial_whole is not None and self.reference_whole is not None:
            columns += [self.trial_whole, self.reference_whole]
        return [tuple(float(c[row, j]) for c in columns) for j in range(n)]  # type: ignore[misc]


def simulate_pairs(
    host: Host,
    n_pairs: int,
    *,
    reps: int,
    seed: int,
    gain: float | npt.ArrayLike = 0.0,
    pause_scale: float = 1.0,
    order: Order = "mirrored",
    body: bool = False,
) -> PairData:
    """``reps`` independent sequences of ``n_pairs`` pairs; ``gain`` (scalar or one per replicate) speeds up every
    trial block, ``pause_scale`` multiplies the trial's pause probability. With ``body`` the times are the body's
    (a pause, one step's, counted up to twice the step: at most one more step time) and the whole times ride
    along for the guard."""
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
    paused = rng.random(blocks) < pause_p
    time = amount * np.exp(log_time) * (1.0 + host.pause_len * paused)

    def arm(values: npt.NDArray[Any], trial: bool) -> _Array:
        return values[is_trial == trial].reshape(reps, n_pairs).astype(np.float64)

    if not body:
        return PairData(arm(amount, True), arm(time, True), arm(amount, False), arm(time, False))
    capped = np.minimum(host.pause_len, 1.0 / np.maximum(amount, 1))
    body_time = amount * np.exp(log_time) * (1.0 + capped * paused)
    return PairData(
        arm(amount, True), arm(body_time, True), arm(amount, False), arm(body_time, False), arm(time, True),
        arm(time, False),
    )  # fmt: skip


# ------------------------------------------------------------------------------------- sweeps


@dataclass(frozen=True)
class SimGrain:
    """One way of measuring on the fake host: its blocks, how fast its pairs come and what a screening buys."""

    name: str
    host: Host
    pairs_per_s: float
    screening_pairs: int
    body: bool = False  # measured by the body of its steps, guarded by their whole time (the tool's default)


STEP_GRAIN = SimGrain("16-step blocks", STEP_HOST, 89.0 / 60, 178)
"""Step blocks on the 2-core CPU host (89 pairs/min, results/reference/measurement-cpu.json), 120 s of screening."""
SCREENING_FLIPS = 1000
"""Sign flips of a screening estimate: enough for its CI to invert the sign-flip test, as the tool's does (exact at
10 pairs or fewer). With 199 flips the harness fell back to the BCa bootstrap, whose intervals at 8-10 pairs are too
narrow: null trials then ranked above a real gain 7% of the time, where the tool's own ranking does not."""
FINE_HOST = Host(steps=2, drop=0.0, noise_sd=0.015, drift_sd=0.05, pause_p=0.0005, pause_len=0.5)
FINE_GRAIN = SimGrain("2-step blocks", FINE_HOST, 10.0, 200, body=True)
"""Short step blocks: per-pair SD ~0.036 at 10 pairs/s, as the quickstart's calibrated 2-step blocks (20 s); measured
by the body, as the tool's are (its pauses, half a block, stay under the cap: the body is the whole time here)."""
HEAVY_GRAIN = SimGrain(
    "1-step pairs, heavy tails",
    Host(steps=1, drop=0.0, noise_sd=0.012, drift_sd=0.05, pause_p=0.01, pause_len=0.3),
    26.0,
    400,
    body=True,
)
"""One-step pairs as this CPU's calibrations measure them: per-pair SD ~0.05 with excess kurtosis ~23 (rare slow
steps carry the variance, as on the H100's recordings), 26 pairs/s, ~15 s of screening; measured by the body (its
slow steps, 1.3 times the typical, stay under the cap, as this CPU's do: the body is the whole time here)."""
SLOW_GRAIN = SimGrain("slow step blocks", Host(steps=256, noise_sd=0.04, pause_p=0.01, pause_len=0.3), 0.5, 10)
"""Long step blocks: per-pair SD ~0.11 at 0.5 pairs/s, 20 s of screening (the settled GC-pacing blocks before
the comparison was taken apart; ``results/reference/sweep-decisions-sim.json`` names them so)."""
GPU_BODY_GRAIN = SimGrain(
    "1-step pairs, H100-like pauses (body)",
    Host(steps=1, drop=0.0, noise_sd=0.05, drift_sd=0.05, pause_p=0.05, pause_len=1.5),
    15.0,
    900,
    body=True,
)
"""One-step pairs in the H100 recordings' shape, measured by the body: 5% of steps hold a pause of 1.5 steps (over
twice the median, as 4-7% of the H100's pairs), which carries most of the plain mean's variance; the body counts
each such step up to twice its length (about 0.6 of the plain mean's per-pair SD, the H100's 0.44 in engine
minutes). 15 pairs/s, 60 s of screening."""
RUN_GRAIN = SimGrain("run-level pairs", Host(steps=1, drop=0.0, drift_sd=0.1, drift_rho=0.5, noise_sd=0.03), 0.2, 8)
"""Run-level pairs: per-pair SD ~0.15, a pair every 5 s, 8 pairs of screening."""


@dataclass(frozen=True)
class SweepSpec:
    """A sweep: one gain and one way of measuring per screened trial (the baseline aside), the confirmation
    budget per candidate and the design."""

    gains: tuple[float, ...] = (0.0,) * 20
    grains: tuple[SimGrain, ...] = (STEP_GRAIN,) * 20
    budget_s: float = 2000.0  # per candidate: ~2,400 pairs of STEP_GRAIN, what 1% needs at SD 0.15
    design: Design = field(default_factory=Design)
    confirmation_flips: int = 10_000  # sign flips per confirmation estimate, as the tool
    report_flips: int | None = None  # re-estimate the reported effect's CI with this many
    host_drift: float = 0.0  # SD of the log factor the sweep's host noise stands at against its calibration's
    calibration_pairs: int = 0  # > 0: the promise rests on a calibration of this many pairs (else the true SDs)


@dataclass(frozen=True)
class SweepOutcome:
    winner: int | None
    winner_gain: float | None  # the winner's true ratio - 1
    effect: RatioEstimate | None  # the reported (confirmation) estimate of the winner
    repeated: tuple[float, float] | None  # the winner's gain interval inverting the decision
    selected: bool  # whether the trial with the largest gain was a candidate
    promised: float  # the tool's own sweep power for the largest gain in the spec (nan without one)
    planned_pairs: int  # per measured candidate, mean
    used_pairs: int  # per measured candidate, up to the look that stopped
    looks: int
    screening_calls: tuple[str, ...]  # every screened trial's verdict (a screening call, unadjusted)


def drifted(grain: SimGrain, factor: float) -> SimGrain:
    """``grain`` on a host whose block noise, drift and pauses stand ``factor`` times where they were calibrated
    (every source of its per-pair SD, so that the SD itself moves by about ``factor``)."""
    h = grain.host
    host = replace(h, noise_sd=h.noise_sd * factor, drift_sd=h.drift_sd * factor, pause_len=h.pause_len * factor)
    return replace(grain, host=host)


def _screen(
    spec: SweepSpec, grains: tuple[SimGrain, ...], seed: int
) -> tuple[list[ScreeningResult], list[float | None]]:
    """Every trial screened at its grain's budget (grains batched), in trial order, and for those measured by the
    body the per-pair SD of their whole time (what their guard's power rests on)."""
    gains = np.asarray(spec.gains)
    results: dict[int, ScreeningResult] = {}
    guard_sds: dict[int, float | None] = {}
    for g, grain in enumerate(dict.fromkeys(grains)):
        index = [j for j, mine in enumerate(grains) if mine == grain]
        data = simulate_pairs(
            grain.host, grain.screening_pairs, reps=len(index), gain=gains[index], seed=seed + g, body=grain.body
        )
        wholes = _wholes(data) if grain.body else [None] * len(index)
        for j, e, whole in zip(index, data.estimates(n_permutations=SCREENING_FLIPS, seed=seed), wholes, strict=True):
            breached = whole is not None and whole.ci_high < 1 / (1 + GUARD_MARGIN)  # throughput: shown worse
            results[j] = ScreeningResult(j, not breached, e)  # a breached guard: never nominated, as the tool's
            guard_sds[j] = whole.log_sd if whole is not None else None
    trials = range(len(spec.gains))
    return [results[j] for j in trials], [guard_sds[j] for j in trials]


def _wholes(data: PairData) -> list[RatioEstimate]:
    """Per replicate, the whole time's throughput ratio (pauses included): what the guard reads."""
    assert data.trial_whole is not None and data.reference_whole is not None
    return ratio_of_sums_estimates(
        data.trial_amount, data.trial_whole, data.reference_amount, data.reference_whole,
        n_permutations=SCREENING_FLIPS,
    )  # fmt: skip


def run_sweep(spec: SweepSpec, seed: int) -> SweepOutcome:
    """Screen every trial, plan each candidate's confirmation, confirm look by look until the decision stops, as
    the sweep would."""
    design = spec.design
    gains = np.asarray(spec.gains)
    screen_seed, confirm_seed, host_seed = (int(s) for s in np.random.SeedSequence(seed).generate_state(3))
    host_rng = np.random.default_rng(host_seed)
    factor = math.exp(spec.host_drift * host_rng.standard_normal()) if spec.host_drift else 1.0
    grains = tuple(drifted(g, factor) for g in spec.grains) if factor != 1.0 else spec.grains
    screening, guard_sds = _screen(spec, grains, screen_seed)
    chosen = [r for r in select_candidates(screening, None, design.min_effect) if r.estimate is not None]
    ranked = [
        (
            Candidate(
                r.trial, {}, "steps", grains[r.trial].pairs_per_s, grains[r.trial].name, guard_sd=guard_sds[r.trial]
            ),
            e.log_sd,
            e.n,
        )
        for r in chosen
        if (e := r.estimate) is not None
    ]
    screened = {r.trial: gain_bounds(r.estimate)[1] - 1 for r in chosen if r.estimate is not None}
    plan, _ = nominate(ranked, budget_s=spec.budget_s, design=design, screened_gain=screened)
    promised = promise(spec, calibrated_scale(spec, int(host_rng.integers(2**31))))
    calls = tuple(r.estimate.verdict if r.estimate else "not_significant" for r in screening)
    if not plan.candidates:
        return SweepOutcome(None, None, None, None, False, promised, 0, 0, 0, calls)
    data = {
        p.trial: simulate_pairs(
            grains[p.trial].host, p.pairs, reps=1, gain=gains[p.trial], seed=confirm_seed + p.trial,
            body=grains[p.trial].body,
        )
        for p in plan.measured
    }  # fmt: skip
    history: dict[int, list[RatioEstimate]] = {c: [] for c in plan.candidates}
    guards: dict[int, list[Check]] = {}
    rounds = max(len(p.looks) for p in plan.measured)
    for k in range(rounds):
        for p in plan.measured:
            if k < len(p.looks):
                n = p.looks[k]
                history[p.trial] += data[p.trial].estimates(n, n_permutations=spec.confirmation_flips, seed=seed + n)
                if grains[p.trial].body:
                    guards[p.trial] = guard_check(data[p.trial].pairs(0, n), p, k)
        decision = confirm(plan, screening, history, guards)
        if decision.stop:
            break
    effect = decision.effect
    if decision.winner is not None and spec.report_flips:
        n = history[decision.winner][-1].n
        effect = data[decision.winner].estimates(n, n_permutations=spec.report_flips)[0]
    winner_gain = (
        None
        if decision.winner is None
        else true_ratio(spec.grains[decision.winner].host, float(gains[decision.winner])) - 1
    )
    used = [history[p.trial][-1].n for p in plan.measured if history[p.trial]]
    return SweepOutcome(
        decision.winner,
        winner_gain,
        effect,
        decision.repeated,
        int(np.argmax(gains)) in plan.candidates,
        promised,
        int(np.mean([p.pairs for p in plan.measured])),
        int(np.mean(used)) if used else 0,
        decision.look,
        calls,
    )


def nominal_sd(grain: SimGrain) -> float:
    """The per-pair SD of ``grain``, as a long calibration would measure it (cached by host)."""
    return _nominal_sd(grain.host, grain.body)


def nominal_guard_sd(grain: SimGrain) -> float | None:
    """The per-pair SD of ``grain``'s whole time where it is measured by the body (None: not)."""
    return _nominal_sd(grain.host, whole=True) if grain.body else None


@functools.cache
def _nominal_sd(host: Host, body: bool = False, whole: bool = False) -> float:
    data = simulate_pairs(host, 4000, reps=8, seed=1, body=body or whole)
    estimates = _wholes(data) if whole else data.estimates(n_resamples=20, n_permutations=9)
    return float(np.sqrt(np.mean([e.log_sd**2 for e in estimates])))


def calibrated_scale(spec: SweepSpec, seed: int) -> float:
    """The factor a calibration of ``spec.calibration_pairs`` pairs of the first grain (at the host's calibrated
    state) puts on every grain's true SD: its SD over the true one (1 without a calibration)."""
    if not spec.calibration_pairs:
        return 1.0
    grain = spec.grains[0]
    data = simulate_pairs(grain.host, spec.calibration_pairs, reps=1, seed=seed, body=grain.body)
    return data.estimates(n_resamples=20, n_permutations=9)[0].log_sd / nominal_sd(grain)


def promise(spec: SweepSpec, scale: float = 1.0) -> float:
    """What the tool promises before the sweep for the spec's largest gain: nomination among every trial by
    screening lower bound at each grain's noise (only intervals that allow min_effect, plans that can confirm what
    the estimate hopes), times the confirmation power of that trial's own plan. Every SD is the true one times
    ``scale`` (a calibration's error); with a calibration, averaged over where the host's noise may stand since
    (:func:`tuner.stats.drift_factors`), as the tool's statement is."""
    best = int(np.argmax(spec.gains))
    gain = spec.gains[best]
    if gain <= 0:
        return math.nan
    if not spec.calibration_pairs:
        return _promise_at(spec, best, scale)
    scales, powers = _promise_curve(spec, best)
    factors = drift_factors(spec.calibration_pairs)
    return sum(w * float(np.interp(math.log(scale * f), scales, powers)) for f, w in factors)


@functools.cache
def _promise_curve(spec: SweepSpec, best: int) -> tuple[_Array, _Array]:
    """The promise at SD factors from 1/4 to 4 (log-spaced; it is smooth in the factor): sweeps read it by
    interpolation instead of a nomination integral per drift node."""
    scales = np.linspace(math.log(0.25), math.log(4.0), 81)
    return scales, np.array([_promise_at(spec, best, math.exp(x)) for x in scales])


def _promise_at(spec: SweepSpec, best: int, scale: float) -> float:
    grain, design = spec.grains[best], spec.design
    m = min(design.m, len(spec.gains))
    candidate = Candidate(
        best, {}, "steps", grain.pairs_per_s, grain.name, guard_sd=_scaled(nominal_guard_sd(grain), scale)
    )
    plan = plan_candidate(candidate, scale * nominal_sd(grain), 10**6, budget_s=spec.budget_s, m=m, design=design)
    rankings = [
        Ranking.of(
            scale * nominal_sd(g), g.screening_pairs,
            plan_candidate(
                Candidate(j, {}, "steps", g.pairs_per_s, g.name, guard_sd=_scaled(nominal_guard_sd(g), scale)),
                scale * nominal_sd(g), 10**6,
                budget_s=spec.budget_s, m=design.m, design=design,
            ),
        )
        for j, g in enumerate(spec.grains)
    ]  # fmt: skip
    return sweep_power(spec.gains[best], plan, rankings[best], rankings[:best] + rankings[best + 1 :])


def _scaled(sd: float | None, scale: float) -> float | None:
    return None if sd is None else sd * scale


def run_sweeps(spec: SweepSpec, reps: int, seed: int) -> list[SweepOutcome]:
    return [run_sweep(spec, seed * 100_003 + r) for r in range(reps)]


def confirmation_plan(log_sd: float, pairs_per_s: float, budget_s: float, design: Design) -> ConfirmationPlan:
    """One candidate's plan at a per-pair SD and pair rate (for tests of the sequential rule)."""
    candidate = Candidate(0, {}, "steps", pairs_per_s, "test grain")
    return plan_confirmation([(candidate, log_sd, 10**6)], budget_s=budget_s, design=design)
