"""The searches of ``capacity_aa`` estimated again from their rows, with no engine: what a series would have said
under the interval rule the tool has now (``tuner.stats.capacity``).

    python -m benchmarks.engine.capacity_aa_estimate [--file results/reference/capacity-aa-cpu.json]
        [--draws bootstrap|levels_kept]

A row keeps, per load, each round's share of requests in target per arm, its pass, the requests per run and the
discordant requests (``capacity_aa``): the per-pass table the bootstrap resamples and the counts the interval's
floor pools, so the estimate is rebuilt as the search made it. Rows from before the passes were kept are left out.
It prints, per mode, each search's recorded and rebuilt estimate, and the series' coverage and A/A spread under the
rule now (``capacity_aa.spread``), so a change to the rule is judged on the engine's own searches at once; with
``--draws``, under the tool's rule with the passes weighted as ``benchmarks.resampling`` says instead.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.engine.capacity_aa import ATTAINMENT, spread, verdict
from benchmarks.resampling import RULES
from tuner.records import ARMS
from tuner.stats import LevelResult, PairedCounts, capacity_ratio
from tuner.stats.capacity import estimate_with
from tuner.stats.pass_bootstrap import Draws


def levels_of(row: dict[str, Any]) -> list[LevelResult]:
    """A row's levels as the search measured them (met counts from the shares: exact below 1,000 requests per run,
    as the shares keep three decimals); the discordant requests beyond each round's net difference go in its first
    round, as only their sum at a load enters the estimate."""
    levels = []
    for level in row["levels"]:
        requests = level["requests"]
        met_a, met_b = ([round(share * requests) for share in level[arm]["met"]] for arm in ARMS)
        only_a = [max(a - b, 0) for a, b in zip(met_a, met_b, strict=True)]
        only_b = [max(b - a, 0) for a, b in zip(met_a, met_b, strict=True)]
        if level["discordant"] is not None:
            both = level["discordant"][0] - sum(only_a)  # pairs of discordant requests that cancel in the rounds
            only_a[0], only_b[0] = only_a[0] + both, only_b[0] + both
        counts = PairedCounts((requests,) * len(met_a), tuple(met_a), tuple(only_a), tuple(only_b))
        levels.append(LevelResult(level["load"], (counts,), tuple(level["passes"])))
    return levels


def estimated(row: dict[str, Any], draws: Draws | None = None) -> dict[str, Any]:
    """The row with its ratio and CI as the rule now gives them from its levels (with the passes weighted by
    ``draws`` in place of the bootstrap's, if given)."""
    levels = levels_of(row)
    found = capacity_ratio(levels, ATTAINMENT) if draws is None else estimate_with(levels, ATTAINMENT, draws)
    return {**row, **verdict(found.to_dict())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", type=Path, default=Path("results/reference/capacity-aa-cpu.json"))
    parser.add_argument("--draws", choices=["bootstrap", *RULES], default="bootstrap", help="how passes are weighted")
    args = parser.parse_args()
    draws = RULES.get(args.draws)
    rows = json.loads(args.file.read_text())["searches"]
    kept = [r for r in rows if r["levels"] and all(level.get("passes") for level in r["levels"])]
    print(f"{len(kept)} of {len(rows)} searches keep their passes")
    for mode in sorted({r["mode"] for r in kept}):
        recorded = [r for r in kept if r["mode"] == mode]
        again = [estimated(r, draws) for r in recorded]
        for old, new in zip(recorded, again, strict=True):
            print(f"{mode} {old['kind']} seed {old['seed']}: recorded {_said(old)}, now {_said(new)}")
        print(f"{mode}: {json.dumps(spread(again))}")


def _said(row: dict[str, Any]) -> str:
    low, high = (f"{x:.3f}" if x is not None else "open" for x in row["ci"])
    return f"{row['ratio']:.3f} [{low}, {high}]"


if __name__ == "__main__":
    main()
