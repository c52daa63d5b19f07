"""``tuner dashboard``: github-action-benchmark's charts, rendered from ``tuner export bench`` files.

For a README or a report where the live gh-pages page cannot be shown: each file is one run (in the order
given), each entry name one series, its ``range`` (``0.98-1.05x (95% CI)`` for ratios) the CI drawn around the
value. Which way is better comes from the file name (``...-bigger.json`` / ``...-smaller.json``), as the action's
``tool`` says it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from tuner.report.plots import BenchPoint, BenchSeries, dashboard
from tuner.series.export import read_entries

RATIO_RANGE = re.compile(r"^(?P<low>[0-9.]+)-(?P<high>[0-9.]+)x\b")
PART = re.compile(r"-?((ratio|absolute)-)?(bigger|smaller)$")  # the files of one run differ only in this part
ALERT = {"bigger": 1.05, "smaller": 1.10}  # the perf workflow's alert thresholds on ratio series (105%, 110%)


def _ci(text: str | None) -> tuple[float | None, float | None]:
    match = RATIO_RANGE.match(text or "")
    return (float(match["low"]), float(match["high"])) if match else (None, None)


def load(exports: Sequence[Path]) -> list[BenchSeries]:
    """Every series in ``exports`` (a file per run and kind, named ``<run>-<series>-<kind>.json`` as ``tuner export
    bench`` writes them: ``<run>`` labels the run), in the order the names first appear."""
    points: dict[str, tuple[str, str | None, list[BenchPoint]]] = {}
    for path in exports:
        better = next((b for b in ("bigger", "smaller") if path.stem.endswith(b)), None)
        for entry in read_entries(path):
            low, high = _ci(entry.get("range"))
            point = BenchPoint(PART.sub("", path.stem) or path.stem, float(entry["value"]), low, high)
            points.setdefault(entry["name"], (entry["unit"], better, []))[2].append(point)
    return [BenchSeries(name, unit, better, pts) for name, (unit, better, pts) in points.items()]


def render(exports: Sequence[Path], out: Path, title: str) -> Path:
    """Draw every series of ``exports`` into one PNG at ``out``."""
    return dashboard(out, load(exports), title=title, alert=ALERT)
