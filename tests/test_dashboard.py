"""The reference data's export in github-action-benchmark's documented format, and `tuner dashboard`, which draws
the committed README picture (results/reference/dashboard.png) from it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from tuner.cli.main import app
from tuner.series.dashboard import load

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "results" / "reference" / "quickstart"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# github-action-benchmark's README, "Examples > Custom benchmark" (customBiggerIsBetter / customSmallerIsBetter):
# a JSON array of objects with `name`, `unit` and a numeric `value`, optionally `range` and `extra` (strings).
# Written from the documentation, not from tuner/series/entries.py, so the two can disagree.
DOCUMENTED = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "unit", "value"],
        "properties": {
            "name": {"type": "string"},
            "unit": {"type": "string"},
            "value": {"type": "number"},
            "range": {"type": "string"},
            "extra": {"type": "string"},
        },
        "additionalProperties": False,
    },
}


def export(tmp_path: Path) -> list[Path]:
    out = CliRunner().invoke(app, ["export", "bench", str(REFERENCE), "-o", str(tmp_path / "0ab8a23.json")])
    assert out.exit_code == 0, out.output
    return sorted(tmp_path.glob("0ab8a23-*.json"))


def test_the_reference_export_has_the_documented_format(tmp_path: Path) -> None:
    files = export(tmp_path)
    assert [f.name for f in files] == [
        f"0ab8a23-{series}-{kind}.json" for series in ("absolute", "ratio") for kind in ("bigger", "smaller")
    ]
    for file in files:
        entries = json.loads(file.read_text())
        jsonschema.validate(entries, DOCUMENTED)
        assert entries and len({e["name"] for e in entries}) == len(entries)
    ratios = json.loads((tmp_path / "0ab8a23-ratio-bigger.json").read_text())
    assert {e["unit"] for e in ratios} == {"x baseline"} and all(e["range"].endswith("x (95% CI)") for e in ratios)


def test_the_dashboard_draws_every_ratio_series_with_its_ci(tmp_path: Path) -> None:
    files = [f for f in export(tmp_path) if "-ratio-" in f.name]
    series = load(files)
    assert len(series) == 6 and all(len(s.points) == 1 and s.points[0].run == "0ab8a23" for s in series)
    assert {s.better for s in series} == {"bigger", "smaller"}
    for item in series:
        (point,) = item.points
        assert point.ci_low is not None and point.ci_high is not None and point.ci_low < point.value < point.ci_high
    png = tmp_path / "dashboard.png"
    out = CliRunner().invoke(app, ["dashboard", *map(str, files), "-o", str(png)])
    assert out.exit_code == 0, out.output
    assert png.read_bytes().startswith(PNG_MAGIC)
    committed = ROOT / "results" / "reference" / "dashboard.png"
    assert committed.read_bytes().startswith(PNG_MAGIC) and committed.stat().st_size < 200_000


def test_runs_become_points_in_the_order_given(tmp_path: Path) -> None:
    for run, value in (("1-aaaaaaa", 1.0), ("2-bbbbbbb", 0.9)):
        entry = {"name": "s", "unit": "x baseline", "value": value, "range": f"{value - 0.01}-{value + 0.01}x (95% CI)"}
        (tmp_path / f"{run}-ratio-bigger.json").write_text(json.dumps([entry]))
    (series,) = load(sorted(tmp_path.glob("*.json")))
    assert [(p.run, p.value) for p in series.points] == [("1-aaaaaaa", 1.0), ("2-bbbbbbb", 0.9)]
    assert series.points[1].ci_low == pytest.approx(0.89)


def test_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('[{"name": "x", "value": 1}]')
    for name, message in (("missing.json", "missing.json: no such file"), ("bad.json", "missing 'unit'")):
        out = CliRunner().invoke(app, ["dashboard", str(tmp_path / name), "-o", str(tmp_path / "d.png")])
        assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], out.stderr
