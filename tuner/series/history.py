"""``tuner history``: change points in stored benchmark series, found by Apache Otava.

Input is either

- the ``data.js`` that github-action-benchmark keeps on gh-pages (``window.BENCHMARK_DATA = {...}``, or the same
  object as plain JSON, the action's external data file): ``entries`` maps each suite (the action's ``name``)
  to its runs in the order they were stored, each ``{"commit": {"id", "timestamp", ...}, "date", "tool",
  "benches": [{"name", "value", "unit", "range", "extra"}]}``; or
- a directory of ``tuner export bench`` files named ``<order>-<commit>[-<part>].json``: ``<order>`` is digits
  that sort the runs (a sequence number or a Unix time), ``<commit>`` the hex git id they measured and
  ``<part>`` the rest (``ratio-bigger``). Files with the same order and commit are one run; a part ending in
  ``bigger`` or ``smaller`` says which way is better, as the action's tool does.

A series is one bench name in one suite, its values in run order. Otava's e-divisive detector (the Hunter
variant: windows, then weak change points merged by Student's t-test) finds where the mean shifts. Each change
point carries the last commit before it and the first after it (the commits to look at: ``before..after``), the
change of the mean in percent and the t-test's p-value. Nothing here prints: the CLI renders the records.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tuner.errors import UserError

Better = Literal["bigger", "smaller"]
Verdict = Literal["regression", "improvement", "change"]
TOOL_BETTER: dict[str, Better] = {"customBiggerIsBetter": "bigger", "customSmallerIsBetter": "smaller"}
DATA_JS_PREFIX = re.compile(r"^\s*window\.BENCHMARK_DATA\s*=\s*")
EXPORT_FILE = re.compile(r"^(?P<order>\d+)-(?P<commit>[0-9a-fA-F]{7,64})(?:-(?P<part>[\w.-]+))?\.json$")
PLOT_COLOR = {"regression": "worse", "improvement": "better", "change": "not_significant"}  # keys of VERDICT_COLORS


@dataclass(frozen=True)
class Point:
    """One stored value: the commit it measured (and that commit's time, "" when not stored)."""

    commit: str
    timestamp: str
    value: float


@dataclass(frozen=True)
class Series:
    """One bench name in one suite, its points in the order they were stored."""

    suite: str
    name: str
    unit: str
    better: Better | None
    points: tuple[Point, ...]


@dataclass(frozen=True)
class ChangePoint:
    """A shift of the mean between ``points[index - 1]`` (commit ``before``) and ``points[index]`` (``after``)."""

    index: int
    before: str
    after: str
    mean_before: float
    mean_after: float
    change_pct: float
    p_value: float
    verdict: Verdict


@dataclass(frozen=True)
class SeriesHistory:
    """A series, its change points and its plot."""

    series: Series
    change_points: tuple[ChangePoint, ...]
    plot: Path


# ------------------------------------------------------------------------------------------ loading


def load_series(path: Path) -> list[Series]:
    """Every series stored at ``path`` (a data.js file or a directory of exports); bad input is a UserError."""
    if path.is_dir():
        return _from_directory(path)
    if path.is_file():
        return _from_data_js(path)
    if path.exists():
        raise UserError.single(str(path), "not a regular file or a directory")
    raise UserError.single(str(path), "no such file or directory")


def _number(value: Any) -> float | None:
    """A finite value, also from the numeric strings some tools store; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


class _Collector:
    """Points grouped into series by (suite, name), in the order they are added."""

    def __init__(self) -> None:
        self.series: dict[tuple[str, str], tuple[str, Better | None, list[Point]]] = {}

    def add(self, suite: str, name: str, unit: str, better: Better | None, point: Point) -> None:
        self.series.setdefault((suite, name), (unit, better, []))[2].append(point)

    def result(self) -> list[Series]:
        return [
            Series(suite, name, unit, better, tuple(points))
            for (suite, name), (unit, better, points) in self.series.items()
        ]


def _read_json(path: Path, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError.single(str(path), f"not valid JSON: {exc.msg}", line=exc.lineno) from None


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError.single(str(path), f"cannot read: {exc}") from None


def _from_data_js(path: Path) -> list[Series]:
    data = _read_json(path, DATA_JS_PREFIX.sub("", _read_text(path), count=1).rstrip().rstrip(";"))
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise UserError.single(str(path), "not github-action-benchmark data: expected an object with `entries`")
    collector = _Collector()
    for suite, runs in entries.items():
        if not isinstance(runs, list):
            raise UserError.single(str(path), "expected a list of runs", field=f"entries.{suite}")
        for i, run in enumerate(runs):
            where = f"entries.{suite}[{i}]"
            commit = run.get("commit") if isinstance(run, dict) else None
            benches = run.get("benches") if isinstance(run, dict) else None
            if not isinstance(commit, dict) or not isinstance(commit.get("id"), str) or not isinstance(benches, list):
                raise UserError.single(str(path), "expected `commit.id` and a `benches` list", field=where)
            better = TOOL_BETTER.get(str(run.get("tool")))
            for j, bench in enumerate(benches):
                name = bench.get("name") if isinstance(bench, dict) else None
                value = _number(bench.get("value")) if isinstance(bench, dict) else None
                if not isinstance(name, str) or not name or value is None:
                    raise UserError.single(
                        str(path), "expected a `name` and a finite `value`", field=f"{where}.benches[{j}]"
                    )
                point = Point(commit["id"], str(commit.get("timestamp") or ""), value)
                collector.add(suite, name, str(bench.get("unit") or ""), better, point)
    return collector.result()


def _from_directory(path: Path) -> list[Series]:
    from tuner.series.export import validate

    runs: dict[tuple[int, str], list[tuple[Path, str | None]]] = {}
    for file in sorted(path.glob("*.json")):
        match = EXPORT_FILE.match(file.name)
        if not file.is_file():
            raise UserError.single(str(file), "not a regular file")
        if match is None:
            raise UserError.single(str(file), "expected a name <order>-<commit>[-<part>].json (digits, hex id)")
        key = (int(match["order"]), match["commit"])
        runs.setdefault(key, []).append((file, match["part"]))
    if not runs:
        raise UserError.single(str(path), "no exported <order>-<commit>[-<part>].json files in this directory")
    collector = _Collector()
    for (_, commit), files in sorted(runs.items()):
        for file, part in files:
            entries = _read_json(file, _read_text(file))
            problems = validate(entries)
            if problems:
                raise UserError.single(str(file), f"not a `tuner export bench` file: {problems[0]}")
            better: Better | None = next((b for b in ("bigger", "smaller") if (part or "").endswith(b)), None)
            for entry in entries:
                collector.add(path.name, entry["name"], entry["unit"], better, Point(commit, "", float(entry["value"])))
    return collector.result()


def select(series: Sequence[Series], patterns: Sequence[str], source: Path) -> list[Series]:
    """The series whose name matches any glob in ``patterns`` (all when none); a pattern matching none is an error."""
    if not series:
        raise UserError.single(str(source), "no benchmark series in it")
    if not patterns:
        return list(series)
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(s.name, pattern) for s in series):
            examples = ", ".join(s.name for s in series[:3])
            raise UserError.single(
                str(source), f"unknown series {pattern!r} ({len(series)} stored, e.g. {examples})", field="--series"
            )
    return [s for s in series if any(fnmatch.fnmatchcase(s.name, p) for p in patterns)]


# ---------------------------------------------------------------------------------------- detection


def detect(series: Series, *, max_p: float = 0.001, min_change_pct: float = 0.0) -> tuple[ChangePoint, ...]:
    """Otava's change points of ``series`` at p <= ``max_p`` and a mean change of at least ``min_change_pct``%."""
    try:
        from otava.series import AnalysisOptions, Metric
        from otava.series import Series as OtavaSeries
    except ImportError:
        raise UserError.single("apache-otava", "not installed: pip install 'vllm-hosttune[history]'") from None

    options = AnalysisOptions()
    options.max_pvalue = max_p
    options.min_magnitude = min_change_pct / 100
    values = [p.value for p in series.points]
    data = OtavaSeries(series.name, None, list(range(len(values))), {"value": Metric()}, {"value": values}, {})
    found = []
    for cp in data.analyze(options).change_points["value"]:
        index = int(cp.index)
        change = float(cp.forward_change_percent())
        found.append(
            ChangePoint(
                index=index,
                before=series.points[index - 1].commit,
                after=series.points[index].commit,
                mean_before=float(cp.mean_before()),
                mean_after=float(cp.mean_after()),
                change_pct=change,
                p_value=float(cp.pvalue()),
                verdict=_verdict(series.better, change),
            )
        )
    return tuple(found)


def _verdict(better: Better | None, change_pct: float) -> Verdict:
    if better is None or change_pct == 0:
        return "change"
    return "improvement" if (change_pct > 0) == (better == "bigger") else "regression"


# -------------------------------------------------------------------------------------------- plots


def plot_name(series: Series) -> str:
    """A file name for the series' plot: readable, filesystem-safe, unique per (suite, name)."""
    slug = re.sub(r"[^A-Za-z0-9_.=+-]+", "_", series.name).strip("_.")[:120]
    digest = hashlib.sha1(f"{series.suite}\0{series.name}".encode()).hexdigest()[:8]
    return f"{slug}-{digest}.png"


def plot(series: Series, change_points: Sequence[ChangePoint], path: Path) -> Path:
    """Values by commit, the mean of each stretch between change points, each change point marked and labelled."""
    from tuner.report.plots import VERDICT_COLORS, figure, save

    fig = figure(10, 4.2)
    ax = fig.subplots()
    xs = range(len(series.points))
    ax.plot(xs, [p.value for p in series.points], marker="o", markersize=3, linewidth=1, color="#4c72b0")
    bounds = [0, *(cp.index for cp in change_points), len(series.points)]
    for start, stop in itertools.pairwise(bounds):
        mean = sum(p.value for p in series.points[start:stop]) / (stop - start)
        ax.hlines(mean, start - 0.4, stop - 0.6, colors="#222222", linewidth=1.6)
    for cp in change_points:
        color = VERDICT_COLORS[PLOT_COLOR[cp.verdict]]
        ax.axvline(cp.index - 0.5, color=color, linestyle="--", linewidth=1.4)
        ax.annotate(
            f"{cp.change_pct:+.1f}% (p={cp.p_value:.1g})\n{cp.before[:7]}..{cp.after[:7]}",
            (cp.index - 0.5, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -4),
            textcoords="offset points",
            va="top",
            fontsize=8,
            color=color,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none", "alpha": 0.85},
        )
    ticks = list(xs)[:: max(1, math.ceil(len(series.points) / 20))]
    ax.set_xticks(ticks, [series.points[i].commit[:7] for i in ticks], rotation=60, fontsize=7)
    ax.set_xlabel("commit (in the order stored)")
    ax.set_ylabel(series.unit or "value")
    ax.grid(True, axis="y", alpha=0.3)
    better = {"bigger": " (higher is better)", "smaller": " (lower is better)", None: ""}[series.better]
    ax.set_title(f"{series.name}{better}", fontsize=9)
    return save(fig, path)


# ------------------------------------------------------------------------------------------ command


def history(
    path: Path,
    out: Path,
    *,
    patterns: Sequence[str] = (),
    max_p: float = 0.001,
    min_change_pct: float = 0.0,
) -> list[SeriesHistory]:
    """Load the series at ``path``, keep those matching ``patterns``, find their change points, plot each in ``out``."""
    chosen = select(load_series(path), patterns, path)
    results = []
    for series in chosen:
        found = detect(series, max_p=max_p, min_change_pct=min_change_pct)
        try:
            drawn = plot(series, found, out / plot_name(series))
        except OSError as exc:
            raise UserError.single(str(out), f"cannot write the plots: {exc.strerror or exc}") from None
        results.append(SeriesHistory(series, found, drawn))
    return results


def append_markdown(target: Path, text: str) -> None:
    """Append ``text`` to ``target``: every step of a GitHub job appends to ``$GITHUB_STEP_SUMMARY``."""
    try:
        with target.open("a", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UserError.single(str(target), f"cannot write the summary: {exc.strerror or exc}") from None


def summary_markdown(results: Sequence[SeriesHistory], source: Path, max_p: float) -> str:
    """A markdown summary (for ``$GITHUB_STEP_SUMMARY``): what was analysed and every change point."""
    from tuner.report.document import Doc

    doc = Doc("Benchmark history: change points")
    found = [(r, cp) for r in results for cp in r.change_points]
    points = sum(len(r.series.points) for r in results)
    doc.bullets(
        [
            f"source: `{source}`: {len(results)} series, {points} points",
            f"method: Apache Otava e-divisive change-point detection, p ≤ {max_p:g}",
            f"plots: `{results[0].plot.parent}/`" if results else "plots: none",
        ]
    )
    if not found:
        doc.p("No change points.")
        return doc.markdown()
    doc.table(
        ["series", "commits", "change", "mean before → after", "p", "verdict", "plot"],
        [
            [
                r.series.name,
                f"`{cp.before[:12]}..{cp.after[:12]}`",
                f"{cp.change_pct:+.2f}%",
                f"{cp.mean_before:.4g} → {cp.mean_after:.4g} {r.series.unit}".rstrip(),
                f"{cp.p_value:.2g}",
                cp.verdict,
                r.plot.name,
            ]
            for r, cp in found
        ],
    )
    return doc.markdown()
