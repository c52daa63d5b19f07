"""``tuner capacity`` on the CPU engine: A/A searches (the capacity ratio's CI must cover 1) and known slowdowns
(its CI must lie below 1), each a whole search through the command's own code on one streaming engine.

    python -m benchmarks.engine.capacity_aa [--mode engine|serve] [--aa 5] [--slow 2] [--rerun on|off]
        [--contention PERIOD,BURST] [--spin-window S] [--out FILE]

The A/A configuration is ``known_delay`` with no delay: every engine process switches between the arms as in a real
comparison, and nothing differs. The slowdown is a 5 ms wait before every batch the worker executes. The workload is
the engine test's (``tests/engine/test_capacity_engine.py``): 48 requests of 16 + 16 tokens at a Poisson rate, TTFT
<= 200 ms for 90% of them, a 90 s budget per search; each search draws other requests (its own seed). With ``--mode
serve`` every search runs through one OpenAI server the tool starts (client, API server, EngineCore and worker on
this host), as ``mode: serve`` does. Each row keeps the host's load over its runs (``host``: how many were
saturated per arm, and the closing note), each load's rounds (``levels``: per arm, each round's share of requests
in target, its longest pause and the tool's collector time; each round's pass, the requests per run and the
discordant requests, enough to estimate the search again) and the rounds run again after other work took the host
(``rerun``; ``--rerun off``: never, ``capacity.contention: null``). ``--contention 6,0.4`` adds other work: on
every CPU a process outside the tool's tree spins for 0.4 s at exponential intervals of mean 6 s, all at once.
``--spin-window 0.01`` sets every engine process's shared-memory spin window to 10 ms in both arms
(``capacity.in_both_arms``): where client, API server, EngineCore and worker outnumber the CPUs, vLLM's 1 s window
starves the server (docs/capacity.md, "Served on a small host").

The file keeps a series per mode (``series``: ``offline`` or ``serve``, each with its command); a run replaces its
own mode's and keeps the other's. Every search is a row of ``searches``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from scipy.stats import t as student

from tuner import interrupts
from tuner.capacity import capacity_on
from tuner.config import Experiment
from tuner.config.start import StartConfig
from tuner.measure.workbench import Workbench, open_session
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records import ARMS, LevelRecord
from tuner.records.files import write_json
from tuner.stats import CapacityEstimateRecord
from tuner.vllm.environment import environment_record

ENGINE = {
    "model": "builtin:opt-tiny",
    "max_num_seqs": 16,
    "max_model_len": 256,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 64 << 20,
    "dtype": "float32",
}
CONFIGURATIONS: dict[str, StrategySet] = {"aa": {"known_delay": {}}, "slow": {"known_delay": {"worker_ms": 5.0}}}
"""What each kind of search compares with vLLM as installed: nothing (A/A), or the known 5 ms worker wait."""
ATTAINMENT = 0.9
"""The share of requests each search's capacity must serve within TTFT <= 200 ms."""


def experiment(
    seed: int,
    out: Path,
    budget_s: float,
    mode: str,
    rerun: bool = True,
    spin_window_s: float | None = None,
    server_nice: int = 10,
) -> Experiment:
    return Experiment.model_validate(
        {
            "name": f"capacity-aa-{seed}",
            "engine": ENGINE,
            "mode": mode,
            "serve": {"server_nice": server_nice},
            "workload": {
                "num_prompts": 48,
                "rate": 32.0,
                "input_len": {"dist": "fixed", "value": 16},
                "output_len": {"dist": "fixed", "value": 16},
                "seed": seed,
            },
            "measure": {"slo": {"ttft_ms": 200.0}, "warmup_prompts": 0},
            "capacity": {
                "attainment": ATTAINMENT,
                "rounds": 2,
                "budget_s": budget_s,
                "min_load": 2,
                "max_load": 1024,
                **({} if rerun else {"contention": None}),
                **({} if spin_window_s is None else {"in_both_arms": _spin(spin_window_s)}),
            },
            "output_dir": str(out),
        }
    )


def _spin(window_s: float) -> StrategySet:
    return {"shm_spin_window": {"window_s": window_s}}


def search(bench: Workbench, exp: Experiment, kind: str) -> dict[str, Any]:
    began = time.perf_counter()
    _, record = capacity_on(bench, exp, StartConfig(strategies=CONFIGURATIONS[kind]))
    estimate = record["estimate"]
    arms = (estimate["capacity_a"], estimate["capacity_b"]) if estimate else ()
    row = {
        "kind": kind,
        "mode": MODES[exp.mode],
        "in_both_arms": exp.capacity.in_both_arms if exp.capacity else {},
        "server_nice": exp.serve.server_nice if exp.mode == "serve" else None,
        "seed": exp.workload.seed,
        **verdict(estimate),
        "capacity": [arm["load"] for arm in arms],
        "bounds": [arm["bound"] for arm in arms],
        "loads": len(record["levels"]),
        "passes": estimate["passes"] if estimate else None,
        "passes_beside": estimate["passes_beside"] if estimate else None,
        "rounds": estimate["rounds"] if estimate else None,
        "spent_s": round(record["search"]["spent_s"], 1),
        "stop": record["search"]["stop"],
        "rerun": record["contention"]["rerun"] if record["contention"] else 0,
        "contended": record["contention"]["contended"] if record["contention"] else None,
        "wall_s": round(time.perf_counter() - began, 1),
        "host": record["host"],
        "summary": record["summary"],
        "levels": [_level(level) for level in record["levels"]],
    }
    print(f"{kind} seed {row['seed']}: {row['summary']} ({row['spent_s']} s, {row['stop']})", flush=True)
    return row


def verdict(estimate: CapacityEstimateRecord | None) -> dict[str, Any]:
    """A row's ratio and CI (None: open on that side, or no estimate), and whether the CI covers 1 or lies below it."""
    low, high = (estimate["ci_low"], estimate["ci_high"]) if estimate else (None, None)
    return {
        "ratio": estimate["ratio"] if estimate else None,
        "ci": [low, high],
        "covers_1": (low is None or low <= 1) and (high is None or high >= 1),
        "below_1": high is not None and high < 1,
    }


def _level(level: LevelRecord) -> dict[str, Any]:
    """A level as a row keeps it, enough to see why an interval lay where it did: per arm, each round's share of
    requests in target, its longest pause (s) and the tool's time in its collector (s), and each round's pass (the
    rounds measured together across loads, which the interval resamples whole), with its requests per run and the
    discordant requests (only the reference's, only the configuration's), enough to estimate the search again."""
    difference = level["difference"]
    return {
        "load": round(level["load"], 3),
        "passes": level.get("passes"),
        "requests": level["requests"],
        "discordant": difference["discordant"] if difference else None,
        **{
            arm: {
                "met": [round(run["attainment"], 3) for run in level["runs"][arm]],
                "pause_s": [round(run["pause_s"], 3) for run in level["runs"][arm]],
                "tool_gc_s": [round(run.get("tool_gc_s", 0.0), 3) for run in level["runs"][arm]],
            }
            for arm in ARMS
        },
    }


MODES = {"engine": "offline", "serve": "serve"}
"""A row's ``mode``: in-process (the experiment's ``mode: engine``) or served."""


def series(rows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """One mode's series so far: its command and host, and :func:`spread`."""
    return {
        "command": (
            f"python -m benchmarks.engine.capacity_aa --mode {args.mode} --aa {args.aa} --slow {args.slow} "
            f"--budget-s {args.budget_s:g} --rerun {args.rerun}"
            + (f" --contention {args.contention}" if args.contention else "")
            + (f" --spin-window {args.spin_window:g}" if args.spin_window is not None else "")
            + (f" --server-nice {args.server_nice}" if args.mode == "serve" else "")
            + f" --out {args.out}"
        ),
        "environment": environment_record(),
        **spread(rows),
    }


def spread(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Coverage, and the A/A estimates' SD beside their CIs' mean half-width (both in ratio units); that ratio split
    into the intervals' mean t quantile (df: the passes beside the crossings, less one) and their mean SE (half-width
    over t) over the SD, so a width above ~2 SDs says whether few passes or the SE made it; and the root mean square
    of the closed A/A log estimates over their own SEs (log half-width over t), about 1 when each interval is scaled
    to its own search's error, however much the SEs vary between searches (a width over the SD can come from that)."""
    aa = [r for r in rows if r["kind"] == "aa"]
    slow = [r for r in rows if r["kind"] == "slow"]
    estimates = [r["ratio"] for r in aa if r["ratio"] is not None]
    closed = [r for r in aa if None not in r["ci"]]
    half_widths = [(r["ci"][1] - r["ci"][0]) / 2 for r in closed]
    quantiles = [float(student.ppf(0.975, r["passes_beside"] - 1)) for r in closed]
    sd = statistics.stdev(estimates) if len(estimates) > 1 else None
    mean_half_width = statistics.fmean(half_widths) if half_widths else None
    mean_se = statistics.fmean(h / t for h, t in zip(half_widths, quantiles, strict=True)) if closed else None
    log_ses = [math.log(r["ci"][1] / r["ci"][0]) / 2 / t for r, t in zip(closed, quantiles, strict=True)]
    z = [math.log(r["ratio"]) / se for r, se in zip(closed, log_ses, strict=True)]
    return {
        "aa_covering_1": f"{sum(r['covers_1'] for r in aa)} of {len(aa)}",
        "aa_closed": f"{len(half_widths)} of {len(aa)}",
        "slow_below_1": f"{sum(r['below_1'] for r in slow)} of {len(slow)}",
        "aa_sd": sd,
        "aa_mean_half_width": mean_half_width,
        # a calibrated 95% CI's half-width is ~2 SDs of the estimates it comes from (t SDs with few passes)
        "half_width_over_sd": mean_half_width / sd if mean_half_width and sd else None,
        "aa_mean_t": statistics.fmean(quantiles) if quantiles else None,
        "aa_se_over_sd": mean_se / sd if mean_se and sd else None,
        "aa_z_rms": math.sqrt(statistics.fmean(x * x for x in z)) if z else None,
    }


def summary(rows: list[dict[str, Any]], args: argparse.Namespace, kept: dict[str, Any]) -> dict[str, Any]:
    """The file: this mode's series beside the other modes' ``kept`` from it, and every search of them all."""
    mode = MODES[args.mode]
    others = [row for row in kept.get("searches", []) if row["mode"] != mode]
    return {
        "series": {**{m: s for m, s in kept.get("series", {}).items() if m != mode}, mode: series(rows, args)},
        "searches": others + rows,
    }


BURNER = """
import os, random, sys, time
period, burst, stop = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
for _ in range(os.cpu_count() or 1):
    if os.fork() == 0:
        break
else:
    sys.exit(0)  # the launcher leaves, so its children are not the tool's descendants
waits = random.Random(7)  # the same intervals in every burner: together they take the whole host
while not os.path.exists(stop):
    time.sleep(waits.expovariate(1 / period))
    end = time.perf_counter() + burst
    while time.perf_counter() < end:
        pass
"""
"""Other work on the host: a process per CPU, outside the tool's process tree, spinning ``burst`` seconds at
exponential intervals of mean ``period`` seconds, until the file ``stop`` exists."""


def contention(spec: str | None, stop: Path) -> None:
    """Start the burners of ``--contention PERIOD,BURST`` (none without a spec); they end once ``stop`` exists."""
    stop.unlink(missing_ok=True)
    if spec is not None:
        period, burst = spec.split(",")
        subprocess.run([sys.executable, "-c", BURNER, period, burst, str(stop)], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=("engine", "serve"), default="engine", help="in-process or served")
    parser.add_argument("--aa", type=int, default=5, help="A/A searches")
    parser.add_argument("--slow", type=int, default=2, help="known-slowdown searches")
    parser.add_argument("--budget-s", type=float, default=90.0)
    parser.add_argument("--out", type=Path, default=Path("results/reference/capacity-aa-cpu.json"))
    parser.add_argument("--rerun", choices=("on", "off"), default="on", help="capacity.contention: rounds run again")
    parser.add_argument(
        "--contention", metavar="PERIOD,BURST", help="other work on every CPU: BURST s at mean intervals of PERIOD s"
    )
    parser.add_argument(
        "--spin-window", type=float, metavar="S", help="every engine process's shm spin window, in both arms (vLLM: 1)"
    )
    parser.add_argument(
        "--server-nice", type=int, default=10, metavar="N", help="serve.server_nice: the server N below the client"
    )
    args = parser.parse_args()
    interrupts.install()  # Ctrl-C and SIGTERM end the series, its server and engine stopped (below), as the CLI does
    scratch = Path("results/benchmarks/capacity-aa")
    serve = experiment(0, scratch, args.budget_s, args.mode, server_nice=args.server_nice).serving
    both = {} if args.spin_window is None else _spin(args.spin_window)
    session = open_session(
        {**ENGINE, "enable_prefix_caching": True}, encode_spec(both, ["known_delay"]), streaming=True, serve=serve
    )
    kept = json.loads(args.out.read_text()) if args.out.exists() else {}  # the other modes' series stay
    rows: list[dict[str, Any]] = []
    stop = scratch / "stop-contention"
    scratch.mkdir(parents=True, exist_ok=True)
    contention(args.contention, stop)
    try:
        for index, kind in enumerate(["aa"] * args.aa + ["slow"] * args.slow):
            exp = experiment(
                100 + index,
                scratch / f"search-{index}",
                args.budget_s,
                args.mode,
                args.rerun == "on",
                args.spin_window,
                args.server_nice,
            )
            rows.append(search(Workbench(session, exp), exp, kind))
            write_json(args.out, summary(rows, args, kept))  # after every search: an interrupted series keeps it
    except KeyboardInterrupt:
        interrupts.acknowledge()  # the series ends here: let the server and the engine stop undisturbed
        print(f"interrupted after {len(rows)} searches, kept in {args.out}", file=sys.stderr)
        raise SystemExit(130) from None
    finally:
        stop.touch()
        session.close()
    result = series(rows, args)
    print(f"A/A CIs covering 1: {result['aa_covering_1']}; slowdowns found below 1: {result['slow_below_1']}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
