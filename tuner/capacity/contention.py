"""Rounds run again after other work took the host: a stall that is not the arm's.

On a busy host a run sometimes slows for a while, its processes waiting for CPUs that other work took. On the CPU
engine (2026-11-29, tests running beside it) such a run at 64 requests/s took 1.52 s where its neighbours took
0.8-1.1 s, and met the TTFT target for 42% of its requests where every other round there met it for all; pooled over
six rounds, that one run put the configuration's capacity below that load and an A/A estimate at +60%. Each run
keeps the CPU seconds every process outside the tool's own tree (the tool, its server and its engine) used per wall
second (``other_cpus``, :func:`tuner.metrics.host_load.run_load`). Nothing an arm does runs outside that tree, so
setting rounds aside by it selects by the host, never by the arm: when, on a saturated host, other processes used at
least ``capacity.contention.cpus`` CPUs during either run of a round, the round is set aside and run again, once; a
round run again is kept whatever it meets. Either run, not one more than the other: a burst of other work that
spans the switch between the two runs slows the end of one and the start of the other, which is no pairing. A host
with CPUs to spare is not saturated, and other work there takes nothing from the comparison.

On the CPU engine with other work stalling the host (``benchmarks.engine.capacity_aa --contention 6,0.4``: both
CPUs taken for 0.4 s at intervals of mean 6 s) the rule that compared the two runs (0.25 CPUs more in one) ran 5-10
of 46-48 rounds again and still left rounds that a burst had hit in both runs (0.54 and 0.54 CPUs, 46% and 44% of
requests met where neighbouring loads met all).
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.config import Contention
from tuner.metrics import SATURATED
from tuner.records import ARMS, ContentionRecord, LevelRecord


def contended(rule: Contention, runs: Mapping[str, Mapping[str, float]]) -> str | None:
    """The arm whose run in this round (``runs``: per arm, its run's ``host_busy`` and ``other_cpus``) had the host
    saturated and other processes using at least ``rule.cpus`` CPUs (the more so of the two); None if neither."""
    arm = _more_taken(runs)
    return arm if runs[arm]["host_busy"] >= SATURATED and runs[arm]["other_cpus"] >= rule.cpus else None


def contention_record(levels: list[LevelRecord], rule: Contention | None) -> ContentionRecord:
    """The rounds of ``levels`` run again after other work took the host, per arm whose run it took CPUs from, and
    the note the summary carries."""
    kept = sum(level["rounds"] for level in levels)
    aside = [
        dict(zip(ARMS, pair, strict=True))
        for level in levels
        for pair in zip(*(level["set_aside"][arm] for arm in ARMS), strict=True)
    ]
    counts = {arm: 0 for arm in ARMS}
    for pair in aside:
        counts[_more_taken(pair)] += 1
    note = None
    if aside and rule is not None:
        note = (
            f"{len(aside)} of {kept + len(aside)} rounds were run again because other processes on the saturated host "
            f"used at least {rule.cpus:g} CPUs during one of their runs (the more so: reference {counts['reference']}, "
            f"configuration {counts['configuration']})."
        )
    return {"rounds": kept, "rerun": len(aside), "contended": counts, "note": note}


def _more_taken(runs: Mapping[str, Mapping[str, float]]) -> str:
    """The arm during whose run in the round other processes used more CPUs (the reference on a tie)."""
    return max(ARMS, key=lambda arm: runs[arm]["other_cpus"])
