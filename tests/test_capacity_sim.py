"""The capacity simulation's host stalls (``benchmarks.simulations.capacity_model``): a stalled run's requests that
arrive while the host stands still miss their TTFT target, those before it are served as without it, and a host
without stalls draws no random numbers for them (the figures without stalls are the ones committed before)."""

from __future__ import annotations

import numpy as np

from benchmarks.simulations.capacity_model import Host, Server, World, serve, stalls, workload


def test_a_stall_makes_the_requests_arriving_in_it_miss_and_leaves_those_before_it() -> None:
    server = Server(requests=200)
    arrivals, prompts = workload(np.random.default_rng(0), 1, World(server, Host(), bursty=False, effect=0.0))
    arrivals = arrivals / 10.0  # 10 requests/s: far below the knee, every request met
    calm = serve(arrivals, prompts, np.ones(1), 0.0, np.random.default_rng(1), server)
    at, length = stalls(np.random.default_rng(2), arrivals, Host(stall_rate=0.999))
    stalled = serve(arrivals, prompts, np.ones(1), 0.0, np.random.default_rng(1), server, (at, length))
    assert calm.all()
    assert length[0] == 0.25 * (arrivals[0, -1] - arrivals[0, 0]) and arrivals[0, 0] <= at[0] <= arrivals[0, -1]
    waited_out = (arrivals[0] > at[0]) & (arrivals[0] < at[0] + length[0] - server.ttft_slo_s)
    assert waited_out.sum() > 10 and not stalled[0, waited_out].any()
    assert stalled[0, arrivals[0] < at[0] - 1.0].all()


def test_a_host_without_stalls_draws_nothing_for_them() -> None:
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    at, length = stalls(rng, np.arange(12.0).reshape(3, 4), Host())
    assert rng.bit_generator.state == before and not at.any() and not length.any()
