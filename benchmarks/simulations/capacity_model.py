"""The simulated server and host behind ``benchmarks.simulations.capacity_sim``: requests arrive (Poisson or in
bursts), a server batches them continuously in steps whose length grows with the batch and the prompt tokens admitted,
and the host slows every step (a drift shared by both arms of a round, each run's own noise, each step's jitter, and
optionally a stall: the host stops once in a share of runs). Each request is met when its TTFT and TPOT are within
target; an arm's true capacity is where its expected attainment crosses a target."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Bools = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.floating[Any]]
CHUNK = 1500  # simulated runs per vectorised batch (keeps the step history near 50 MB)


@dataclass(frozen=True)
class Server:
    base_s: float = 0.010
    per_seq_s: float = 0.0006
    per_token_s: float = 0.00002  # prefill, per prompt token admitted in the step
    max_batch: int = 32
    output_tokens: int = 32
    prompt_tokens: tuple[int, int] = (64, 512)
    requests: int = 300  # per run
    ttft_slo_s: float = 0.5
    tpot_slo_s: float = 0.045
    mean_burst: float = 4.0  # bursty arrivals: mean requests per burst


@dataclass(frozen=True)
class Host:
    drift_sd: float = 0.05  # stationary SD of the AR(1) log slowness shared by both arms of a round
    drift_rho: float = 0.9  # its correlation from one round to the next
    run_sd: float = 0.01  # each run's own log slowness
    jitter_sd: float = 0.05  # each step's
    stall_rate: float = 0.0  # the share of runs in which the host stops once (a collection, a descheduled process)
    stall_share: float = 0.25  # for this share of the run's span of arrivals


def unit_arrivals(rng: np.random.Generator, runs: int, server: Server, bursty: bool) -> Floats:
    """Arrival times at load 1 (divide by the load): Poisson, or bursts at rate 1 / mean_burst."""
    shape = (runs, server.requests)
    if not bursty:
        return np.cumsum(rng.exponential(1.0, shape), axis=1)
    first = rng.random(shape) < 1 / server.mean_burst
    return np.cumsum(np.where(first, rng.exponential(server.mean_burst, shape), rng.exponential(0.02, shape)), axis=1)


def stalls(rng: np.random.Generator, arrivals: Floats, host: Host) -> tuple[Floats, Floats]:
    """Per run (rows of absolute arrival times): when its stall begins (uniform over its arrivals) and how long it
    lasts (``stall_share`` of that span in ``stall_rate`` of the runs, else 0)."""
    if host.stall_rate == 0:
        return np.zeros(len(arrivals)), np.zeros(len(arrivals))
    first, span = arrivals[:, 0], arrivals[:, -1] - arrivals[:, 0]
    hit = rng.random(len(arrivals)) < host.stall_rate
    return first + rng.random(len(arrivals)) * span, np.where(hit, host.stall_share * span, 0.0)


def serve(
    arrivals: Floats,
    prompts: Floats,
    slowness: Floats,
    jitter: float,
    rng: np.random.Generator,
    s: Server,
    stall: tuple[Floats, Floats] | None = None,
) -> Bools:
    """Met flags (runs, requests) of independent runs, all advanced one step at a time together; a run's
    ``stall`` (:func:`stalls`) lengthens the first step that starts after it begins."""
    runs, n = arrivals.shape
    big = 1e7  # row offset: a flat, sorted array of every run's arrivals
    rows = np.arange(runs)
    flat = (arrivals + rows[:, None] * big).ravel()
    cum = np.concatenate([np.zeros((runs, 1)), np.cumsum(prompts, axis=1)], axis=1)
    clock, admitted, steps = arrivals[:, 0].copy(), np.zeros(runs, np.int64), np.zeros(runs, np.int64)
    cap, out = 256, s.output_tokens
    stall_at, pending = stall if stall is not None else (np.zeros(runs), np.zeros(runs))
    pending, stalling = pending.copy(), bool(pending.any())  # no stall: the step loop does no work for them
    ends: Floats = np.zeros((runs, cap))  # per step: its end
    upto: npt.NDArray[np.int64] = np.full((runs, cap), n, np.int64)  # per step: admitted so far
    active = rows
    while active.size:
        done_steps = steps[active]
        if done_steps.max() + 1 >= cap:
            ends = np.concatenate([ends, np.zeros((runs, cap))], axis=1)
            upto = np.concatenate([upto, np.full((runs, cap), n, np.int64)], axis=1)
            cap *= 2
        finished = np.where(done_steps >= out, upto[active, np.maximum(done_steps - out, 0)], 0)
        a = admitted[active]
        running = a - finished
        waiting = np.searchsorted(flat, clock[active] + active * big, side="right") - active * n - a
        idle = (running == 0) & (waiting == 0)
        new = np.minimum(waiting, s.max_batch - running)
        prefill = cum[active, a + new] - cum[active, a]
        step = (s.base_s + s.per_seq_s * (running + new) + s.per_token_s * prefill) * slowness[active]
        step *= np.exp(jitter * rng.standard_normal(active.size))
        if stalling:
            stalled = ~idle & (pending[active] > 0) & (clock[active] >= stall_at[active])
            step = step + np.where(stalled, pending[active], 0.0)
            pending[active[stalled]] = 0.0
        clock[active] = np.where(idle, arrivals[active, np.minimum(a, n - 1)], clock[active] + step)
        go = active[~idle]
        ends[go, steps[go]] = clock[go]
        upto[go, steps[go]] = a[~idle] + new[~idle]
        admitted[go] += new[~idle]
        steps[go] += 1
        after = steps[active]
        left = admitted[active] - np.where(after >= out, upto[active, np.maximum(after - out, 0)], 0)
        active = active[(admitted[active] < n) | (left > 0)]
    flat_upto = (upto + rows[:, None] * (n + 1)).ravel()
    at = np.searchsorted(flat_upto, np.arange(n) + rows[:, None] * (n + 1), side="right") - rows[:, None] * cap
    first = np.take_along_axis(ends, at, axis=1)
    tpot = (np.take_along_axis(ends, at + out - 1, axis=1) - first) / (out - 1)
    return np.asarray((first - arrivals <= s.ttft_slo_s) & (tpot <= s.tpot_slo_s))


@dataclass(frozen=True)
class World:
    server: Server
    host: Host
    bursty: bool
    effect: float  # B's steps take (1 - effect) of A's


def workload(rng: np.random.Generator, runs: int, world: World) -> tuple[Floats, Floats]:
    """``runs`` request sets: unit arrival times (divide by the load) and prompt lengths."""
    low, high = world.server.prompt_tokens
    prompts = rng.integers(low, high + 1, (runs, world.server.requests)).astype(np.float64)
    return unit_arrivals(rng, runs, world.server, world.bursty), prompts


def rounds_at(
    rng: np.random.Generator,
    world: World,
    loads: Floats,
    drifts: Floats,
    requests: tuple[Floats, Floats],
    scales: Floats | None = None,
) -> tuple[Bools, Bools]:
    """One round per (load, drift, request set): met flags of arm A and of arm B on the same requests; B's at the
    load times the round's ``scales`` where given (its arrival times divided by it: the same requests, as much
    faster), else at A's load."""
    met_a, met_b = [], []
    for start in range(0, loads.size, CHUNK // 2):
        part = slice(start, start + CHUNK // 2)
        k = loads[part].size
        arrivals, prompts = requests[0][part] / loads[part, None], requests[1][part]
        slowness = np.exp(np.tile(drifts[part], 2) + world.host.run_sd * rng.standard_normal(2 * k))
        slowness[k:] *= 1 - world.effect
        both = np.concatenate([arrivals, arrivals if scales is None else arrivals / scales[part, None]])
        met = serve(
            both, np.tile(prompts, (2, 1)), slowness, world.host.jitter_sd, rng, world.server,
            stalls(rng, both, world.host),
        )  # fmt: skip
        met_a.append(met[:k])
        met_b.append(met[k:])
    return np.concatenate(met_a), np.concatenate(met_b)


def expected_attainment(world: World, load: float, arm_effect: float, runs: int, seed: int) -> float:
    """One arm's mean attainment at ``load`` over ``runs`` runs, the same random numbers at every load."""
    rng = np.random.default_rng(seed)
    arrivals, prompts = workload(rng, runs, world)
    host = world.host
    slowness = np.exp(host.drift_sd * rng.standard_normal(runs) + host.run_sd * rng.standard_normal(runs))
    met = []
    for i in range(0, runs, CHUNK):
        at = arrivals[i : i + CHUNK] / load
        met.append(serve(at, prompts[i : i + CHUNK], slowness[i : i + CHUNK] * (1 - arm_effect), host.jitter_sd, rng,
                         world.server, stalls(rng, at, host)))  # fmt: skip
    return float(np.concatenate(met).mean())


def true_capacity(world: World, target: float, arm_effect: float, runs: int = 4000, seed: int = 99) -> float:
    """The load at which the arm's expected attainment crosses ``target`` (bisection in log load)."""
    low, high = math.log(1.0), math.log(200.0)
    for _ in range(24):
        middle = (low + high) / 2
        meets = expected_attainment(world, math.exp(middle), arm_effect, runs, seed) >= target
        low, high = (middle, high) if meets else (low, middle)
    return math.exp((low + high) / 2)


def drift_series(rng: np.random.Generator, host: Host, state: Floats, rounds: int) -> Floats:
    """``rounds`` further steps of each AR(1) drift in ``state``: (len(state), rounds)."""
    out = np.empty((state.size, rounds))
    for r in range(rounds):
        out[:, r] = state = host.drift_rho * state + math.sqrt(
            1 - host.drift_rho**2
        ) * host.drift_sd * rng.standard_normal(state.size)
    return out
