"""Stored benchmark series: what ``tuner history`` and ``tuner pr-check`` read.

Input is either

- the ``data.js`` that github-action-benchmark keeps on gh-pages (``window.BENCHMARK_DATA = {...}``, or the same
  object as plain JSON, the action's external data file): ``entries`` maps each suite (the action's ``name``)
  to its runs in the order they were stored, each ``{"commit": {"id", "timestamp", ...}, "date", "tool",
  "benches": [{"name", "value", "unit", "range", "extra"}]}``; or
- a directory of ``tuner export bench`` files named ``<order>-<commit>[-<part>].json``: ``<order>`` is digits
  that sort the runs (a sequence number or a Unix time), ``<commit>`` the hex git id they measured and
  ``<part>`` the rest (``ratio-bigger``). Files with the same order and commit are one run; a part ending in
  ``bigger`` or ``smaller`` says which way is better, as the action's tool does.

A series is one bench name in one suite, its values in run order.
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tuner.errors import UserError
from tuner.series.entries import TOOLS, Better, better_of, validate

TOOL_BETTER: dict[str, Better] = {tool: better for better, tool in TOOLS.items()}
DATA_JS_PREFIX = re.compile(r"^\s*window\.BENCHMARK_DATA\s*=\s*")
EXPORT_FILE = re.compile(r"^(?P<order>\d+)-(?P<commit>[0-9a-fA-F]{7,64})(?:-(?P<part>[\w.-]+))?\.json$")
T = TypeVar("T")


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


def load_series(path: Path) -> list[Series]:
    """Every series stored at ``path`` (a data.js file or a directory of exports); bad input is a UserError."""
    if path.is_dir():
        return _from_directory(path)
    if path.is_file():
        return _from_data_js(path)
    if path.exists():
        raise UserError.single(str(path), "not a regular file or a directory")
    raise UserError.single(str(path), "no such file or directory")


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


def _field(data: Any, key: str, kind: type[T]) -> T | None:
    """``data[key]`` where ``data`` is a JSON object holding a ``kind`` there, else None."""
    value = data.get(key) if isinstance(data, dict) else None
    return value if isinstance(value, kind) else None


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
    entries = _field(data, "entries", dict)
    if entries is None:
        raise UserError.single(str(path), "not github-action-benchmark data: expected an object with `entries`")
    collector = _Collector()
    for suite, runs in entries.items():
        if not isinstance(runs, list):
            raise UserError.single(str(path), "expected a list of runs", field=f"entries.{suite}")
        for i, run in enumerate(runs):
            where = f"entries.{suite}[{i}]"
            commit, benches = _field(run, "commit", dict), _field(run, "benches", list)
            commit_id = _field(commit, "id", str)
            if commit_id is None or benches is None:
                raise UserError.single(str(path), "expected `commit.id` and a `benches` list", field=where)
            better = TOOL_BETTER.get(_field(run, "tool", str) or "")
            for j, bench in enumerate(benches):
                name, value = _field(bench, "name", str), _number(_field(bench, "value", object))
                if not name or value is None:
                    raise UserError.single(
                        str(path), "expected a `name` and a finite `value`", field=f"{where}.benches[{j}]"
                    )
                point = Point(commit_id, str(_field(commit, "timestamp", object) or ""), value)
                collector.add(suite, name, str(_field(bench, "unit", object) or ""), better, point)
    return collector.result()


def _from_directory(path: Path) -> list[Series]:
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
            better = better_of(part or "")
            for entry in entries:
                collector.add(path.name, entry["name"], entry["unit"], better, Point(commit, "", float(entry["value"])))
    return collector.result()
