"""Glue for ``tuner versions``: check the installs, run the engine starts in mirrored order, pair, bisect, write.

Layout of one invocation (``<output_dir>/<experiment>/versions/<time>/``)::

    starts/<k>-<i>-<j>-<pair><arm>.json (and .log)   each engine start's run.json and its output
    versions.json                                    the installs, every comparison and the bisection
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from tuner.config import Experiment
from tuner.feedback import SILENT, Feedback, TableData, task
from tuner.records import new_run_dir, write_json
from tuner.report import fmt_ci
from tuner.versions.installs import Install, run_start
from tuner.versions.start_pairs import (
    MIN_STARTS,
    Bisection,
    Comparison,
    StartResult,
    bisect,
    compare,
    start_order,
    start_result,
)


def compare_installs(
    experiment: Experiment,
    experiment_file: Path,
    installs: list[Install],
    feedback: Feedback = SILENT,
    *,
    starts: int,
    metric: str,
    seed: int = 0,
) -> Path:
    """Compare the installs (bisecting a sequence of more than two), print the verdicts, write versions.json."""
    out = new_run_dir(experiment.output_dir / experiment.name, "versions")
    for index, install in enumerate(installs):
        feedback.note(f"install {index}: {install.label}")
    comparisons: list[dict[str, Any]] = []

    def changed(i: int, j: int) -> bool:
        label = f"{len(comparisons)}-{i}-{j}"
        results = _measure(installs[i], installs[j], experiment_file, out / "starts" / label, starts, seed, feedback)
        comparison = compare(results, metric, seed=seed)
        feedback.table(_table(comparison, installs[i], installs[j]))
        comparisons.append({"from": i, "to": j, **comparison.to_dict()})
        return comparison.changed

    bisection = bisect(len(installs), changed)
    if len(installs) > 2:
        feedback.note(_bisection_line(bisection, installs))
    path = write_json(
        out / "versions.json",
        {
            "kind": "versions",
            "experiment": experiment.name,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "metric": metric,
            "starts_per_arm": starts,
            "installs": [{"python": i.python, "vllm": i.vllm, "python_version": i.python_version} for i in installs],
            "comparisons": comparisons,
            "bisection": {"steps": bisection.steps, "culprit": bisection.culprit, "note": bisection.note},
        },
    )
    feedback.note(f"wrote {path}")
    return path


def _measure(
    a: Install, b: Install, experiment_file: Path, folder: Path, starts: int, seed: int, feedback: Feedback
) -> list[StartResult]:
    """Run ``starts`` engine starts per arm in mirrored order, each in its install's own interpreter."""
    results = []
    order = start_order(starts, seed=seed)
    if starts < MIN_STARTS:
        feedback.note(
            f"{starts} start pairs: the sign-flip test needs {MIN_STARTS} to reach p < 0.05, so no change "
            "will be called; the CI and the power are still shown",
            "warning",
        )
    with task(feedback, f"engine starts: {a.vllm} vs {b.vllm}", len(order)) as progress:
        for start in order:
            install = a if start.arm == "A" else b
            name = f"{start.pair}{start.arm}"
            progress.update(description=f"engine start {name} ({install.vllm})")
            run, seconds = run_start(install, experiment_file, folder / f"{name}.json", folder / f"{name}.log")
            results.append(start_result(start, run, seconds))
            progress.advance()
    return results


def _table(comparison: Comparison, a: Install, b: Install) -> TableData:
    e = comparison.estimate
    verdict = {"better": "B faster", "worse": "B slower"}.get(e.verdict, "no change called")
    columns = ("ratio B/A", "95% CI", "p", "start pairs", "verdict", "detectable", "for ±5%", "per start pair")
    row = (
        f"{e.ratio:.4f}",
        fmt_ci(e.ci_low, e.ci_high, 4),
        f"{e.p_value:.3g}",
        str(e.n),
        verdict,
        f"±{comparison.mde:.1%}",
        "-" if comparison.pairs_for_5pct is None else f"{comparison.pairs_for_5pct} pairs",
        " ".join(f"{r:.3f}" for r in comparison.start_pair_ratios),
        f"{comparison.restart_s['A']:.1f} / {comparison.restart_s['B']:.1f}",
    )
    caption = (
        "ratio of sums over start pairs (sign-flip test, two-sided 5%: 6 start pairs at least to call a change); "
        "detectable: the change found with 80% power at these pairs; for ±5%: the start pairs that needs; restart: "
        "seconds per engine start beyond the measured repetitions (engine start "
        f"{comparison.engine_start_s['A']:.1f} / {comparison.engine_start_s['B']:.1f} s)"
    )
    return TableData(f"{b.label} / {a.label}: {comparison.metric}", (*columns, "restart s A/B"), [row], caption)


def _bisection_line(bisection: Bisection, installs: list[Install]) -> str:
    if bisection.culprit is None:
        return f"bisection: {bisection.note}"
    i, j = bisection.culprit
    return f"bisection: the change is the step {installs[i].label} -> {installs[j].label}"
