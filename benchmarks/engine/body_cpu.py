"""The body of the steps and its guard on the CPU engine: A/As, known delays on each side and a strategy that adds
rare long pauses, each comparison read both ways (the plain ratio of sums, ``search.step_estimand: mean``, and the
body with its guard, the sweep's default, :mod:`tuner.measure.step_sums`) from the same steps.

    python -m benchmarks.engine.body_cpu [--gpu-shape] [--out results/reference/body-cpu.json]

One engine (the quickstart's), one-step blocks, the calibration's yardstick (``known_delay`` with no delay: it
switches every engine process and costs nothing measurable) as the reference of every comparison:

- ``aa``: the yardstick against itself (the body's false positives at 5%, and the decision's calls);
- ``engine_core`` and ``worker``: a busy-wait of 5% of a step before each batch's output is processed, or before
  each batch a worker executes (the calibration's known delays). Their known size is ``1 + delay / mean step`` of
  the reference, for the plain ratio; for the body, ``1 + delay / mean body step`` of the reference (a delayed step
  stays under its cap unless it was a pause already);
- ``stall``: ``known_stall`` (EngineCore sleeps 5 steps' time on every 50th decode batch of its arm): its body is
  the reference's, its whole time ~10% longer: never called better.

Per kind: every comparison's plain and body estimates, the guard (the whole time not 0.5% longer) and the verdict;
the coverage of the known sizes at 95%; and from the A/As the engine seconds per +-1% of each estimator (seconds
per pair x (1.96 x per-pair log SD / log 1.01)^2, the median over the A/As). ``--gpu-shape`` runs the CPU engine in
a GPU host's default topology (``uni`` executor, forked EngineCore, async scheduling: one washout step per block).
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from pathlib import Path
from typing import Any

from benchmarks import ROOT
from benchmarks.engine.paired import gpu_shape
from tuner.config import load_experiment
from tuner.measure.interleave import InterleaveResult, interleaved_comparison
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import StrategySet, encode_spec
from tuner.records.files import write_json
from tuner.stats import BodyComparison, RatioEstimate
from tuner.vllm.environment import environment_record

YARDSTICK: StrategySet = {"known_delay": {}}
KNOWN_SHARE = 0.05
STALL_STEPS, STALL_EVERY = 5.0, 50
LOG_1PCT = math.log(1.01)


def _interval(estimate: RatioEstimate) -> dict[str, Any]:
    return {"ratio": estimate.ratio, "ci": [estimate.ci_low, estimate.ci_high], "log_sd": estimate.log_sd}


def engine_s_per_pct(result: InterleaveResult, log_sd: float) -> float:
    """Engine seconds for a 95% CI of +-1% at this comparison's pace and per-pair SD."""
    return result.elapsed_s / len(result.sums) * (1.96 * log_sd / LOG_1PCT) ** 2


def read(result: InterleaveResult, delay_s: float, seed: int) -> dict[str, Any]:
    """One comparison both ways, with the known sizes a delay of ``delay_s`` per B step gives each estimator."""
    assert result.estimate is not None and result.guard is not None, "fewer than two pairs"
    found = BodyComparison(result.estimate, result.guard)
    a_steps = sum(a[0] for a, _ in result.sums)
    plain_known = 1 + delay_s * a_steps / sum(a[1] for a, _ in result.whole)
    body_known = 1 + delay_s * a_steps / sum(a[1] for a, _ in result.sums)
    plain, body = found.guard.whole, found.body
    covered = {
        "plain": bool(plain.ci_low <= plain_known <= plain.ci_high),
        "body": bool(body.ci_low <= body_known <= body.ci_high),
    }
    return {
        "pairs": len(result.sums),
        "elapsed_s": result.elapsed_s,
        "plain": _interval(plain) | {"known": plain_known, "covered": covered["plain"]},
        "body": _interval(body) | {"known": body_known, "covered": covered["body"]},
        "guard_holds": found.guard.holds,
        "verdict": found.verdict,
        "plain_verdict": plain.verdict,
        "line": found.line(),
        "engine_s_per_pct": {
            "plain": engine_s_per_pct(result, plain.log_sd),
            "body": engine_s_per_pct(result, body.log_sd),
        },
    }


def summary(rows: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    """What a kind's comparisons say together."""
    out: dict[str, Any] = {"comparisons": len(rows)}
    if kind == "aa":
        out["body_called"] = sum(r["body"]["ci"][0] > 1 or r["body"]["ci"][1] < 1 for r in rows)
        out["plain_called"] = sum(r["plain_verdict"] != "not_significant" for r in rows)
        out["engine_s_per_pct"] = {
            way: statistics.median(r["engine_s_per_pct"][way] for r in rows) for way in ("plain", "body")
        }
    elif kind != "stall":
        out["covered"] = {way: sum(r[way]["covered"] for r in rows) for way in ("plain", "body")}
    out["called_better"] = sum(r["verdict"] == "better" for r in rows)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=8, help="A/A comparisons")
    parser.add_argument("--known", type=int, default=3, help="comparisons per known effect")
    parser.add_argument("--budget-s", type=float, default=20.0, help="engine seconds per comparison")
    parser.add_argument("--gpu-shape", action="store_true", help="uni executor, forked EngineCore, async scheduling")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.gpu_shape:
        gpu_shape()
    out = args.out or ROOT / "results" / "reference" / f"body-cpu{'-gpu-shape' if args.gpu_shape else ''}.json"
    experiment = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    bench = Workbench.start(experiment, encode_spec({}, ["known_delay", "known_stall"]))
    began = time.perf_counter()
    rows: dict[str, list[dict[str, Any]]] = {}
    try:
        probe = interleaved_comparison(bench, YARDSTICK, YARDSTICK, block_steps=1, budget_s=5.0, seed=0)
        step_s = probe.mean_step_s["A"] or 0.0
        delay_ms = KNOWN_SHARE * step_s * 1e3
        print(f"mean step {step_s * 1e3:.2f} ms; known delays {delay_ms:.3f} ms", flush=True)
        kinds: dict[str, tuple[StrategySet, float, int]] = {
            "aa": (YARDSTICK, 0.0, args.aa),
            "engine_core": ({"known_delay": {"engine_core_ms": delay_ms}}, delay_ms / 1e3, args.known),
            "worker": ({"known_delay": {"worker_ms": delay_ms}}, delay_ms / 1e3, args.known),
            "stall": (
                {**YARDSTICK, "known_stall": {"stall_ms": STALL_STEPS * step_s * 1e3, "every": STALL_EVERY}},
                0.0,
                args.known,
            ),
        }
        for kind, (trial, delay_s, count) in kinds.items():
            for i in range(count):
                seed = 1000 * len(rows) + i + 1
                result = interleaved_comparison(
                    bench, YARDSTICK, trial, block_steps=1, budget_s=args.budget_s, seed=seed
                )
                row = read(result, delay_s, seed)
                rows.setdefault(kind, []).append(row)
                print(f"{kind} {i + 1}/{count} ({time.perf_counter() - began:.0f} s): {row['line']}", flush=True)
    finally:
        bench.session.close()
    record: dict[str, Any] = {
        "command": "python -m benchmarks.engine.body_cpu" + (" --gpu-shape" if args.gpu_shape else ""),
        "environment": environment_record(),
        "topology": "uni,fork,async (GPU default shape)" if args.gpu_shape else "mp, spawn, sync (CPU default)",
        "mean_step_s": step_s,
        "known_delay_ms": delay_ms,
        "summary": {kind: summary(found, kind) for kind, found in rows.items()},
        "comparisons": rows,
    }
    for kind, s in record["summary"].items():
        print(kind, s)
    write_json(out, record)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
