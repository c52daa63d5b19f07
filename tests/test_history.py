"""tuner history: Otava's change points in stored benchmark series, read from data.js or exported files.

The series are synthetic: 40 commits of a paired ratio near 1 with 1% multiplicative noise (what a sweep's
ratio looks like), either flat or with a 3% step at commit 20.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.support import RATIO, data_js, sha
from tuner.cli.main import app
from tuner.series.history import analyse_series, detect
from tuner.series.stored import Series, load_series

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ABSOLUTE = "perf-gpu/baseline-absolute/output_tokens_per_s"
STEP_AT = 20


def values(step_pct: float, seed: int, n: int = 40) -> list[float]:
    """1% noise around 1, the mean moving by ``step_pct`` from commit ``STEP_AT`` on."""
    noise = 1 + 0.01 * np.random.default_rng(seed).standard_normal(n)
    level = np.where(np.arange(n) < STEP_AT, 1.0, 1 + step_pct / 100)
    return [round(float(v), 6) for v in level * noise]


def export_dir(path: Path, series: dict[str, list[float]]) -> Path:
    """The same history as `tuner export bench` files, one per commit: <order>-<commit>-ratio-bigger.json."""
    path.mkdir()
    n = len(next(iter(series.values())))
    for i in range(n):
        entries = [{"name": name, "unit": "x baseline", "value": vals[i]} for name, vals in series.items()]
        (path / f"{1_770_000_000 + i * 86_400}-{sha(i)[:12]}-ratio-bigger.json").write_text(json.dumps(entries))
    return path


def by_name(found: list[Any], name: str) -> Any:
    return next(r for r in found if r.series.name == name)


@pytest.mark.parametrize("layout", ["data.js", "export-dir"])
def test_a_3_percent_step_in_1_percent_noise_is_found_at_its_commit(tmp_path: Path, layout: str) -> None:
    series = {RATIO: values(3.0, seed=3), ABSOLUTE: values(0.0, seed=11)}
    source = data_js(tmp_path / "data.js", series) if layout == "data.js" else export_dir(tmp_path / "bench", series)
    results = analyse_series(source, tmp_path / "plots")
    assert {r.series.name for r in results} == {RATIO, ABSOLUTE}
    step = by_name(results, RATIO)
    assert len(step.change_points) == 1, step.change_points
    (cp,) = step.change_points
    assert cp.index == STEP_AT
    assert sha(STEP_AT - 1).startswith(cp.before) and sha(STEP_AT).startswith(cp.after)
    assert 2.0 < cp.change_pct < 4.0 and cp.mean_after > cp.mean_before
    assert cp.p_value < 0.001 and cp.verdict == "improvement"
    assert by_name(results, ABSOLUTE).change_points == ()
    for result in results:
        data = result.plot.read_bytes()
        assert result.plot.parent == tmp_path / "plots" and data[:8] == PNG_MAGIC and len(data) > 10_000


def test_a_flat_series_has_no_change_point(tmp_path: Path) -> None:
    (flat,) = load_series(data_js(tmp_path / "data.js", {RATIO: values(0.0, seed=0)}))
    assert len(flat.points) == 40 and flat.better == "bigger"
    assert detect(flat) == ()


def test_direction_names_the_verdict_and_small_changes_can_be_ignored(tmp_path: Path) -> None:
    """A latency ratio (smaller is better) that rises 3% is a regression; with --min-change 5 it is ignored."""
    (latency,) = load_series(data_js(tmp_path / "data.js", {RATIO: values(3.0, seed=3)}, "customSmallerIsBetter"))
    (cp,) = detect(latency)
    assert cp.verdict == "regression" and cp.index == STEP_AT
    assert detect(latency, min_change_pct=5.0) == ()
    unknown = Series(latency.suite, latency.name, latency.unit, None, latency.points)
    assert [c.verdict for c in detect(unknown)] == ["change"]


def test_cli_prints_the_change_point_and_appends_a_markdown_summary(tmp_path: Path) -> None:
    source = data_js(tmp_path / "data.js", {RATIO: values(3.0, seed=3), ABSOLUTE: values(0.0, seed=11)})
    summary = tmp_path / "step-summary.md"
    summary.write_text("## Earlier step\n")
    plots = tmp_path / "plots"
    argv = ["history", str(source), "-o", str(plots), "--summary", str(summary), "--series", "*/ratio-to-baseline/*"]
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert f"{sha(STEP_AT - 1)[:12]}..{sha(STEP_AT)[:12]}" in result.output and "improvement" in result.output
    assert "1 series, 1 change point(s)" in result.output
    text = summary.read_text()
    assert text.startswith("## Earlier step\n# Benchmark history: change points")  # appended, not replaced
    (row,) = [line for line in text.splitlines() if line.startswith(f"| {RATIO}")]
    assert f"`{sha(STEP_AT - 1)[:12]}..{sha(STEP_AT)[:12]}`" in row and "| improvement |" in row
    assert len(list(plots.glob("*.png"))) == 1  # --series kept the ratio only


def test_cli_flat_history_reports_no_change_points(tmp_path: Path) -> None:
    source = data_js(tmp_path / "data.js", {RATIO: values(0.0, seed=0)})
    summary = tmp_path / "summary.md"
    result = CliRunner().invoke(app, ["history", str(source), "-o", str(tmp_path / "p"), "--summary", str(summary)])
    assert result.exit_code == 0, result.output
    assert "1 series, 0 change point(s)" in result.output and "No change points." in summary.read_text()


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (None, ["{tmp}/missing.js"], "missing.js: no such file or directory"),
        ("broken", ["{tmp}/data.js"], "data.js:1: not valid JSON"),
        ("no-entries", ["{tmp}/data.js"], "expected an object with `entries`"),
        ("no-value", ["{tmp}/data.js"], "entries.s[0].benches[0]: expected a `name` and a finite `value`"),
        ("good", ["{tmp}/data.js", "--series", "nope/*"], "--series: unknown series 'nope/*' (1 stored, e.g. "),
        ("bad-name", ["{tmp}/bench"], "expected a name <order>-<commit>[-<part>].json"),
        ("empty-dir", ["{tmp}/bench"], "no exported <order>-<commit>[-<part>].json files"),
        ("not-export", ["{tmp}/bench"], "not a `tuner export bench` file: [0]: missing 'unit'"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, make: str | None, args: list[str], message: str) -> None:
    js, bench = tmp_path / "data.js", tmp_path / "bench"
    if make == "broken":
        js.write_text('window.BENCHMARK_DATA = {"entries": {"s": [')
    elif make == "no-entries":
        js.write_text("window.BENCHMARK_DATA = []")
    elif make == "no-value":
        js.write_text(
            'window.BENCHMARK_DATA = {"entries": {"s": [{"commit": {"id": "ab"}, "benches": [{"name": "x"}]}]}}'
        )
    elif make == "good":
        data_js(js, {RATIO: values(0.0, seed=0)})
    elif make in ("bad-name", "empty-dir", "not-export"):
        bench.mkdir()
        if make == "bad-name":
            (bench / "latest.json").write_text("[]")
        if make == "not-export":
            (bench / "1-abcdef0.json").write_text('[{"name": "x", "value": 1}]')
    argv = ["history", *(a.format(tmp=tmp_path) for a in args), "-o", str(tmp_path / "plots")]
    result = CliRunner().invoke(app, argv, env={"COLUMNS": "300"})
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.stderr
    assert not (tmp_path / "plots").exists()
