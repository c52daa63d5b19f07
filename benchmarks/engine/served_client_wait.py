"""Served runs at one load: how long the client waited for a CPU, and the share of each run's requests in target.

    python -m benchmarks.engine.served_client_wait [--load 100] [--runs 150]
        [--out results/reference/served-client-wait-cpu.json]

Per setting (``serve.server_nice`` and the engine processes' shm spin window; vLLM's own is 1 s), one server of
the capacity A/A's engine and workload (``benchmarks.engine.capacity_aa``: 48 requests, TTFT <= 200 ms), and
``--runs`` runs at ``--load`` requests/s. Per run: the share of requests within the TTFT target, and how long the
client's threads waited runnable for a CPU (Linux's ``/proc/self/task/*/schedstat``). A run that met the target for
under 80% of its requests while the server kept up is an outlier in one arm of a capacity round. A served run's
latencies are the client's clock: a client waiting behind the server's processes adds its wait to them.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from benchmarks.engine.capacity_aa import ENGINE, experiment
from tuner.capacity.load import at_load
from tuner.config import LoadKnob
from tuner.measure.workbench import Workbench, open_session
from tuner.metrics.host_load import tool_waited_s
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records.files import write_json
from tuner.vllm.environment import environment_record

SETTINGS = ((0, 1.0), (0, 0.01), (10, 0.01), (10, 1.0))
"""(server_nice, spin window s): vLLM's defaults, then a 10 ms window, then each with the server 10 below."""
TARGET_MS = 200.0


def _waited() -> float:
    """The client's threads' wait for a CPU so far (s); the benchmark stops where it cannot be read."""
    waited = tool_waited_s()
    if waited is None:
        raise SystemExit("the client's wait for a CPU cannot be read here (Linux's /proc/self/task/*/schedstat)")
    return waited


def runs_at(server_nice: int, window_s: float, load: float, runs: int) -> dict[str, Any]:
    """``runs`` served runs at ``load`` on one server of this setting, and what they met and waited."""
    exp = experiment(100, Path("results/benchmarks/served-client-wait"), 90.0, "serve", server_nice=server_nice)
    strategies: StrategySet = {"known_delay": {}, "shm_spin_window": {"window_s": window_s}}
    session = open_session(
        {**ENGINE, "enable_prefix_caching": True},
        encode_spec(strategies, list(strategies)),
        streaming=True,
        serve=exp.serving,
    )
    met, waits, walls = [], [], []
    try:
        bench = Workbench(session, at_load(exp, LoadKnob.RATE, load))
        bench.switch(strategies)
        for _ in range(runs):
            before = _waited()
            repetition = bench.repetition()
            waits.append(1e3 * (_waited() - before))
            ttfts = [timing.ttft_ms if timing else None for timing in repetition["latencies"]]
            met.append(sum(t is not None and t <= TARGET_MS for t in ttfts) / len(ttfts))
            walls.append(repetition["metrics"]["wall_s"])
    finally:
        session.close()
    row = {
        "server_nice": server_nice,
        "spin_window_s": window_s,
        "runs": runs,
        "met_under_80pct": sum(share < 0.8 for share in met),
        "met_under_50pct": sum(share < 0.5 for share in met),
        "met_mean": statistics.fmean(met),
        "client_wait_ms_median": statistics.median(waits),
        "client_wait_ms_p90": statistics.quantiles(waits, n=10)[-1],
        "wall_s_median": statistics.median(walls),
    }
    print(
        f"server_nice {server_nice}, spin window {window_s:g} s: {row['met_under_80pct']} of {runs} runs met the "
        f"target for under 80% of requests ({row['met_under_50pct']} under 50%), mean {row['met_mean']:.3f}; the "
        f"client waited for a CPU {row['client_wait_ms_median']:.0f} ms a run (median; p90 "
        f"{row['client_wait_ms_p90']:.0f}), runs of {row['wall_s_median']:.2f} s",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--load", type=float, default=100.0, help="requests/s")
    parser.add_argument("--runs", type=int, default=150, help="runs per setting")
    parser.add_argument("--out", type=Path, default=Path("results/reference/served-client-wait-cpu.json"))
    parser.add_argument("--only", metavar="NICE:WINDOW", action="append", help="one setting (repeatable); all: none")
    args = parser.parse_args()
    settings = [(int(n), float(w)) for n, w in (o.split(":") for o in args.only)] if args.only else SETTINGS
    _waited()  # before any server starts: a host without schedstat is told so at once
    rows = [runs_at(nice, window, args.load, args.runs) for nice, window in settings]
    command = f"python -m benchmarks.engine.served_client_wait --load {args.load:g} --runs {args.runs} --out {args.out}"
    write_json(args.out, {"command": command, "environment": environment_record(), "load": args.load, "rows": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
