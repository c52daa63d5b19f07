"""``tuner pr-check``: a pull request's exported series against its base branch's stored series.

github-action-benchmark compares a new point with the single previous stored point, so one noisy point on the
base branch moves every PR's verdict. Here the reference is the base's stored *series*: its last ``window``
points up to the PR's base commit (all stored points when that commit is not stored). On the log scale those
points give a mean and an SD (run-to-run noise, CI included, and any slow drift), and the PR's value is judged
by a Student t prediction interval for one new point from that distribution: p is the one-sided chance that a
base-like run comes out at least this far on the worse (or better) side. Holm across the series keeps the chance
of any false regression at most ``alpha`` per PR; a call also needs ``min_change_pct``, so a tiny but
significant move on a very quiet series does not block a PR. Nothing here prints: the CLI renders the checks.
"""

from __future__ import annotations

import fnmatch
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from scipy import stats as _st

from tuner.errors import UserError
from tuner.series.entries import Better, read_entries
from tuner.series.stored import Series, load_series, select
from tuner.stats import holm

Verdict = Literal["regression", "improvement", "unchanged", "no base"]
COMMENT_MARKER = "<!-- tuner pr-check -->"
MIN_BASE_POINTS = 3  # a mean and an SD with at least 2 degrees of freedom


@dataclass(frozen=True)
class SeriesCheck:
    """One PR value against its base series."""

    name: str
    unit: str
    value: float
    base_points: int
    base_mean: float | None  # geometric mean of the base points used
    change_pct: float | None
    p_worse: float | None  # one-sided prediction p-values, before Holm
    p_better: float | None
    verdict: Verdict


def read_export(path: Path) -> dict[str, tuple[str, float]]:
    """``{name: (unit, value)}`` of a ``tuner export bench`` file (github-action-benchmark's custom format)."""
    return {e["name"]: (e["unit"], float(e["value"])) for e in read_entries(path)}


def base_values(series: Series, base_commit: str | None, window: int) -> list[float]:
    """The last ``window`` stored values up to and including ``base_commit`` (every value when it is absent)."""
    points = list(series.points)
    if base_commit:
        ends = [i for i, p in enumerate(points) if p.commit.startswith(base_commit) or base_commit.startswith(p.commit)]
        if ends:
            points = points[: ends[-1] + 1]
    return [p.value for p in points[-window:] if p.value > 0]


def check_value(
    name: str, unit: str, value: float, base: Sequence[float], better: Better | None
) -> tuple[SeriesCheck, float, float]:
    """The raw check of one value (verdict settled later across series) and its one-sided p-values."""
    if len(base) < MIN_BASE_POINTS or value <= 0 or better is None:
        return SeriesCheck(name, unit, value, len(base), None, None, None, None, "no base"), math.nan, math.nan
    logs = [math.log(v) for v in base]
    mean, sd, n = statistics.fmean(logs), statistics.stdev(logs), len(logs)
    diff = math.log(value) - mean
    if sd == 0:
        p_low, p_high = (0.0 if diff < 0 else 1.0), (0.0 if diff > 0 else 1.0)
    else:
        t = diff / (sd * math.sqrt(1 + 1 / n))
        p_low, p_high = float(_st.t.cdf(t, n - 1)), float(_st.t.sf(t, n - 1))
    p_worse, p_better = (p_low, p_high) if better == "bigger" else (p_high, p_low)
    change = 100 * math.expm1(diff)
    check = SeriesCheck(name, unit, value, n, math.exp(mean), change, p_worse, p_better, "unchanged")
    return check, p_worse, p_better


def check_pull_request(
    exports: Sequence[Path],
    base: Path,
    *,
    patterns: Sequence[str] = (),
    base_commit: str | None = None,
    window: int = 20,
    alpha: float = 0.05,
    min_change_pct: float = 2.0,
) -> list[SeriesCheck]:
    """Every PR value (of the series matching ``patterns``) checked against the base's stored series."""
    stored = {s.name: s for s in load_series(base)}
    values: dict[str, tuple[str, float]] = {}
    for path in exports:
        values.update(read_export(path))
    if patterns:
        values = {k: v for k, v in values.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
        select(list(stored.values()), patterns, base)  # a pattern the base does not store is a typo
    if not values:
        raise UserError.single(", ".join(map(str, exports)), "no exported series to check", field="--series")
    raw = []
    for name, (unit, value) in sorted(values.items()):
        series = stored.get(name)
        points = base_values(series, base_commit, window) if series else []
        raw.append(check_value(name, unit, value, points, series.better if series else None))
    worse, better = holm([r[1] for r in raw]), holm([r[2] for r in raw])
    out = []
    for (check, _, _), p_worse, p_better in zip(raw, worse, better, strict=True):
        if check.verdict == "no base" or check.change_pct is None:
            out.append(check)
            continue
        big_enough = abs(check.change_pct) >= min_change_pct
        verdict: Verdict = "unchanged"
        if big_enough and p_worse <= alpha:
            verdict = "regression"
        elif big_enough and p_better <= alpha:
            verdict = "improvement"
        out.append(replace(check, p_worse=p_worse, p_better=p_better, verdict=verdict))
    return out


def comment_markdown(checks: Sequence[SeriesCheck], *, base_label: str, alpha: float, min_change_pct: float) -> str:
    """The PR comment: the verdict first, then the series that moved, then every series (collapsed)."""
    regressions = [c for c in checks if c.verdict == "regression"]
    improvements = [c for c in checks if c.verdict == "improvement"]
    if regressions:
        headline = f"**{len(regressions)} regression(s)** against {base_label}"
    else:
        headline = f"no regression against {base_label}"
    lines = [
        COMMENT_MARKER,
        "### Host-side performance: this PR vs its base",
        "",
        f"{headline} ({len(checks)} series; a call needs Holm-adjusted p ≤ {alpha:g} against the base's stored "
        f"series and a change of at least {min_change_pct:g}%).",
        "",
    ]
    header = [
        "| series | PR | base (geo. mean, n) | change | p (adjusted) | verdict |",
        "|---|---:|---:|---:|---:|---|",
    ]
    moved = regressions + improvements
    if moved:
        lines += header + [_row(c) for c in moved] + [""]
    lines += ["<details><summary>every series</summary>", "", *header, *(_row(c) for c in checks), "", "</details>"]
    return "\n".join(lines) + "\n"


def _row(check: SeriesCheck) -> str:
    if check.base_mean is None or check.change_pct is None:
        return f"| `{check.name}` | {check.value:.4g} {check.unit} | {check.base_points} stored | | | no base |"
    p = check.p_worse if check.verdict != "improvement" else check.p_better
    return (
        f"| `{check.name}` | {check.value:.4g} {check.unit} | {check.base_mean:.4g} (n={check.base_points}) | "
        f"{check.change_pct:+.2f}% | {p:.2g} | {check.verdict} |"
    )
