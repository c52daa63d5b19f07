"""The stall estimand's calibration and power: on the H100 steps (re-paired A/A) and on the CPU engine.

    python -m benchmarks.engine.stall_rate   # writes results/reference/stall-rate.json
    python -m benchmarks.engine.stall_rate --skip-engine --out /tmp/stall-rate.json   # the H100 part only

The difference is :func:`tuner.stats.stall_rate.paired_rate_difference`'s (``method`` in the output): Newcombe's
score interval on counts deflated by the between-pair design effect, flagged when it excludes 0.

H100 (``../shared/data/h100-steps``, no engine): every A/A series is re-paired in one-step blocks of random order
``--h100-draws`` times; the share of draws whose stall-rate difference is flagged must stay at or below 5%. The
same draws with a known stall (``--stall-ms`` added to every ``--every``-th step of arm B) measure power and how
often the 95% CI covers the injected rate (1 / every); each share has its Clopper-Pearson 95% interval.

CPU engine (the quickstart's, one-step blocks as the sweep uses): ``--aa`` independent A/A step-level comparisons
of ``--budget`` engine seconds (arm B applies the yardstick with no stall, so both arms switch alike), then
``--ab`` comparisons in which arm B sleeps ``--stall-ms`` on every ``--every``-th batch
(:class:`strategies.known_stall.KnownStall`). The flag share of the A/A comparisons has its Clopper-Pearson 95%
interval; each injected comparison reports its difference, CI and whether the CI holds 1 / every.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import binomtest

from benchmarks import ROOT
from benchmarks.h100.recordings import DATA
from tuner.config import load_experiment
from tuner.measure.grain import DEFAULT_BLOCK_STEPS
from tuner.measure.interleave import interleaved_comparison
from tuner.measure.stalls import CompareStep, StallComparison, compare_stalls
from tuner.measure.workbench import Workbench
from tuner.plugin.protocol import Arm, encode_spec
from tuner.records.files import write_json
from tuner.stats.stall_rate import METHOD, StallRule
from tuner.vllm.environment import environment_record

YARDSTICK = "known_stall"


def _share(hits: int, total: int) -> dict[str, Any]:
    """``hits`` of ``total`` draws (flagged, found or covered) with the share's Clopper-Pearson 95% interval."""
    interval = binomtest(hits, total).proportion_ci(confidence_level=0.95, method="exact")
    return {"hits": hits, "of": total, "rate": hits / total, "rate_ci95": [interval.low, interval.high]}


def _repaired(dt: np.ndarray, rng: np.random.Generator, stall_s: float, every: int) -> list[CompareStep]:
    """A series cut into one-step blocks of random order in pairs; every ``every``-th B step gets ``stall_s``."""
    steps: list[CompareStep] = []
    b_steps = 0
    for pair in range(len(dt) // 2):
        order: tuple[Arm, Arm] = ("A", "B") if rng.random() < 0.5 else ("B", "A")
        for arm, seconds in zip(order, dt[2 * pair : 2 * pair + 2], strict=True):
            if arm == "B":
                b_steps += 1
                seconds += stall_s if stall_s and b_steps % every == 0 else 0.0
            steps.append((arm, pair, float(seconds), 0.0))
    return steps


def h100(data: Path, draws: int, stall_s: float, every: int, rule: StallRule) -> dict[str, Any]:
    """Flag shares over re-pairings of every A/A series of the H100 data, without and with an injected stall."""
    rng = np.random.default_rng(0)
    out: dict[str, Any] = {"method": METHOD, "known_difference": 1 / every, "series": {}}
    totals = {"aa": [0, 0], "injected": [0, 0], "covered": [0, 0]}
    for path in sorted(data.glob("*.json")):
        for label, run in json.loads(path.read_text()).items():
            if not label.startswith("AA"):
                continue
            dt = np.array([row[2] for row in run["log"]])
            aa = [compare_stalls(_repaired(dt, rng, 0.0, every), rule, seed=i) for i in range(draws)]
            ab = [compare_stalls(_repaired(dt, rng, stall_s, every), rule, seed=i) for i in range(draws)]
            flags = sum(c.difference is not None and c.difference.flagged for c in aa)
            found = sum(c.difference is not None and c.difference.flagged and c.difference.difference > 0 for c in ab)
            covered = sum(_covers(c, 1 / every) for c in ab)
            out["series"][f"{path.stem}:{label}"] = {
                "steps": len(dt),
                "median_ms": float(np.median(dt) * 1e3),
                "natural_stall_rate": float(np.mean([c.a.rate or 0.0 for c in aa])),
                "aa_flagged": flags / draws,
                "injected_found": found / draws,
                "injected_covered": covered / draws,
                "injected_design_effect": float(np.median([c.difference.design_effect for c in ab if c.difference])),
            }
            for key, hits in (("aa", flags), ("injected", found), ("covered", covered)):
                totals[key][0] += hits
                totals[key][1] += draws
    out["aa"] = _share(*totals["aa"])
    out["injected_found"] = _share(*totals["injected"])
    out["injected_covered"] = _share(*totals["covered"])
    return out


def _covers(comparison: StallComparison, rate: float) -> bool:
    d = comparison.difference
    return d is not None and d.ci_low <= rate <= d.ci_high


def engine(aa: int, ab: int, budget: float, stall_ms: float, every: int, sensitive: StallRule) -> dict[str, Any]:
    """A/A flag shares (the experiment's rule and ``sensitive``, on the same steps) and injected-stall coverage on
    the quickstart's CPU engine."""
    experiment = load_experiment(ROOT / "experiments" / "quickstart.yaml")
    bench = Workbench.start(experiment, encode_spec({}, [YARDSTICK]))
    rows: dict[str, list[Mapping[str, Any]]] = {"aa": [], "aa_sensitive": [], "injected": []}
    try:
        for i in range(aa + ab):
            injected = i >= aa
            b = {YARDSTICK: {"stall_ms": stall_ms if injected else 0.0, "every": every}}
            result = interleaved_comparison(
                bench, {}, b, block_steps=DEFAULT_BLOCK_STEPS, budget_s=budget, min_pairs=10**9,
                seed=100 + i,
            )  # fmt: skip
            if result.stalls is None:
                sys.exit(f"comparison {i} had no comparable batch size")
            row = result.stalls.to_dict()
            if injected:
                rows["injected"].append({**row, "covers_known": _covers(result.stalls, 1 / every)})
            else:
                rows["aa"].append(row)
                rows["aa_sensitive"].append(compare_stalls(result.compared, sensitive, seed=100 + i).to_dict())
            print("injected" if injected else "A/A", i, json.dumps(row["arms"]), json.dumps(row["difference"]))
    finally:
        bench.session.close()

    def flagged(comparisons: list[Mapping[str, Any]]) -> dict[str, Any]:
        hits = sum(bool((c["difference"] or {}).get("flagged")) for c in comparisons)
        return _share(hits, len(comparisons)) | {"comparisons": comparisons}

    return {
        "budget_s": budget,
        "aa": flagged(rows["aa"]),
        "aa_sensitive": {"rule": asdict(sensitive)} | flagged(rows["aa_sensitive"]),
        "injected": {
            "stall_ms": stall_ms,
            "every": every,
            "known_difference": 1 / every,
            "covered": sum(bool(r["covers_known"]) for r in rows["injected"]),
            "of": len(rows["injected"]),
            "comparisons": rows["injected"],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the H100 per-step recordings")
    parser.add_argument("--h100-draws", type=int, default=400)
    parser.add_argument("--aa", type=int, default=40, help="A/A comparisons on the engine")
    parser.add_argument("--ab", type=int, default=10, help="comparisons with an injected stall")
    parser.add_argument("--budget", type=float, default=15.0, help="engine seconds per comparison")
    parser.add_argument("--stall-ms", type=float, default=200.0)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--sensitive-factor", type=float, default=1.5, help="A/A also at this factor, no floor")
    parser.add_argument("--skip-engine", action="store_true", help="only the H100 part (no engine started)")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "reference" / "stall-rate.json")
    args = parser.parse_args()
    rule = load_experiment(ROOT / "experiments" / "quickstart.yaml").measure.stalls.rule()
    result: dict[str, Any] = {
        "command": "python -m benchmarks.engine.stall_rate",
        "rule": {"factor": rule.factor, "floor_s": rule.floor_s, "window": rule.window},
        "h100": h100(args.data, args.h100_draws, args.stall_ms / 1e3, args.every, rule),
    }
    print("H100", json.dumps({k: v for k, v in result["h100"].items() if k != "series"}), flush=True)
    if not args.skip_engine:
        result["environment"] = environment_record()
        sensitive = StallRule(factor=args.sensitive_factor, floor_s=0.0)
        result["cpu_engine"] = engine(args.aa, args.ab, args.budget, args.stall_ms, args.every, sensitive)
        for key in ("aa", "aa_sensitive"):
            print(
                f"engine {key}", json.dumps({k: v for k, v in result["cpu_engine"][key].items() if k != "comparisons"})
            )
        injected = result["cpu_engine"]["injected"]
        print(f"engine injected: CI holds {injected['known_difference']:.3f} in {injected['covered']}/{injected['of']}")
    write_json(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
