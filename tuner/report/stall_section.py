"""Stalls beside throughput: for every trial compared at step level, each arm's stall rate, the paired difference
and the longest stall (:mod:`tuner.measure.stalls`), so a configuration that is faster on average but stalls more
shows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tuner.records import TrialRow
from tuner.report.describe import fmt_num, fmt_p, trial_label
from tuner.report.document import Doc


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{100 * rate:.2f}%"


def _longest(arm: Mapping[str, Any]) -> str:
    if arm["longest_s"] is None:
        return "-"
    collecting = arm["longest_gc_s"] or 0.0
    return f"{fmt_num(arm['longest_s'] * 1e3)} ms" + (f" (GC {fmt_num(collecting * 1e3)} ms)" if collecting else "")


def _difference(diff: Mapping[str, Any] | None) -> list[str]:
    """The difference cell (percentage points with the CI), its p and whether it is flagged. Records from before
    the score interval put a side their swap-test inversion could not bound (too few pairs) at a rate difference of
    +-1, which the score interval reaches only when the point does: such a side reads 'unbounded'."""
    if not diff:
        return ["-", "-", "no"]
    low, point, high = diff["ci_low"], diff["difference"], diff["ci_high"]
    unbounded = low <= -1 < point or point < 1 <= high
    ci = "unbounded" if unbounded else f"[{100 * low:+.2f}, {100 * high:+.2f}]"
    return [f"{100 * point:+.2f} {ci}", fmt_p(diff["p_value"]), "yes" if diff["flagged"] else "no"]


def stall_section(doc: Doc, trials: Sequence[TrialRow]) -> None:
    """One row per trial whose step-level comparison counted stalls; nothing when none did."""
    rows = []
    rule: Mapping[str, Any] = {}
    for trial in trials:
        steps = trial["step_interleave"]
        stalls = steps["stalls"] if steps else None
        if not stalls:
            continue
        rule = stalls["rule"]
        a, b = stalls["arms"]["A"], stalls["arms"]["B"]
        rows.append(
            [
                trial_label(trial),
                f"{_percent(a['rate'])} of {a['steps']}",
                f"{_percent(b['rate'])} of {b['steps']}",
                *_difference(stalls["difference"]),
                _longest(b),
            ]
        )
    if not rows:
        return
    doc.h("Stalls")
    doc.p(
        f"A stall is a compared step slower than {rule['factor']:g} x its arm's running median (last "
        f"{rule['window']} steps) and than {rule['floor_s'] * 1e3:g} ms. Rates are stalls over judged steps; the "
        "difference (trial minus baseline, percentage points) has Newcombe's score 95% CI, widened when stalls "
        "cluster in a few pairs (design effect), and p is where that CI reaches 0: flagged when it excludes 0. GC "
        "is EngineCore's collection time during the trial's longest stall."
    )
    doc.table(
        ["trial", "baseline stalls", "trial stalls", "difference [95% CI]", "p", "flagged", "longest (trial)"], rows
    )
