"""tuner pr-check: a PR's exported values against the base branch's stored series (not its previous point).

The stored series are synthetic (tests/test_history.py): a paired ratio near 1 with 1% multiplicative noise per
commit. A PR value is one more draw (same noise) or that draw moved by a known step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.support import RATIO, data_js, sha
from tuner.cli.main import app
from tuner.series.pr_check import COMMENT_MARKER, base_values, check_pull_request
from tuner.series.stored import load_series

LATENCY = "perf-gpu/ratio-to-baseline/gc_threshold(gen0_per_seq=64)/itl_p99_ms"


def flat(seed: int, n: int = 30) -> list[float]:
    return [round(float(v), 6) for v in 1 + 0.01 * np.random.default_rng(seed).standard_normal(n)]


def export(path: Path, values: dict[str, float]) -> Path:
    path.write_text(json.dumps([{"name": k, "unit": "x baseline", "value": v} for k, v in values.items()]))
    return path


def test_a_5_percent_loss_is_a_regression_and_noise_is_not(tmp_path: Path) -> None:
    base = data_js(tmp_path / "data.js", {RATIO: flat(0)})
    (bad,) = check_pull_request([export(tmp_path / "bad.json", {RATIO: 0.95})], base)
    assert bad.verdict == "regression" and bad.base_points == 20 and bad.p_worse is not None and bad.p_worse < 1e-3
    assert bad.change_pct == pytest.approx(-5, abs=1)
    (good,) = check_pull_request([export(tmp_path / "good.json", {RATIO: 1.06})], base)
    assert good.verdict == "improvement"


def test_false_regressions_stay_near_alpha_on_base_like_prs(tmp_path: Path) -> None:
    """400 PRs, each with its own stored base series, drawn from the base's own distribution (no change): a
    regression (one-sided, alpha = 5%, here without the min_change guard) is called in 5% of them; fail above 8%
    (binomial: P(>32 of 400 | 5%) < 0.5%). 23 of 400 when written."""
    draws = 1 + 0.01 * np.random.default_rng(2).standard_normal(400)
    called = 0
    for i, value in enumerate(draws):
        base = data_js(tmp_path / f"{i}.js", {RATIO: flat(100 + i)})
        (check,) = check_pull_request([export(tmp_path / f"{i}.json", {RATIO: float(value)})], base, min_change_pct=0)
        called += check.verdict == "regression"
    assert called <= 32


def test_a_noisy_last_base_point_does_not_decide(tmp_path: Path) -> None:
    """The previous-point rule calls a regression whenever main's last point came out high; the stored series
    does not."""
    stored = flat(3)
    stored[-1] = 1.06  # one lucky run on main
    base = data_js(tmp_path / "data.js", {RATIO: stored})
    (check,) = check_pull_request([export(tmp_path / "pr.json", {RATIO: 1.0})], base)
    assert check.verdict == "unchanged" and 1.0 / stored[-1] < 0.95  # the previous point alone would say -5.7%


def test_direction_min_change_and_holm_across_series(tmp_path: Path) -> None:
    base = data_js(tmp_path / "data.js", {LATENCY: flat(4)}, tool="customSmallerIsBetter")
    (slower,) = check_pull_request([export(tmp_path / "a.json", {LATENCY: 1.05})], base)
    assert slower.verdict == "regression"  # a latency ratio going up
    (small,) = check_pull_request([export(tmp_path / "b.json", {LATENCY: 1.05})], base, min_change_pct=6)
    assert small.verdict == "unchanged"
    one = check_pull_request([export(tmp_path / "c.json", {LATENCY: 1.03})], base, min_change_pct=0)[0]
    assert one.p_worse is not None and one.p_worse < 0.05


def test_points_after_the_base_commit_and_new_series(tmp_path: Path) -> None:
    stored = [1.0] * 10 + [0.9] * 10  # main regressed after commit 9; the PR branched from commit 9
    base = data_js(tmp_path / "data.js", {RATIO: [v + 0.001 * (i % 3) for i, v in enumerate(stored)]})
    (series,) = load_series(base)
    assert base_values(series, sha(9)[:12], window=5) == [p.value for p in series.points][5:10]
    assert len(base_values(series, "ffffffff", window=50)) == 20  # an unknown commit: every stored point
    checks = check_pull_request(
        [export(tmp_path / "pr.json", {RATIO: 0.9, "new/series": 1.0})], base, base_commit=sha(9)
    )
    assert {c.name: c.verdict for c in checks} == {RATIO: "regression", "new/series": "no base"}


def test_cli_writes_the_comment_and_fails_on_regression(tmp_path: Path) -> None:
    base = data_js(tmp_path / "data.js", {RATIO: flat(5)})
    pr = export(tmp_path / "pr.json", {RATIO: 0.9})
    comment = tmp_path / "comment.md"
    argv = ["pr-check", str(pr), "--base", str(base), "--comment", str(comment)]
    ok = CliRunner().invoke(app, argv, env={"COLUMNS": "300"})
    assert ok.exit_code == 0, ok.output
    text = comment.read_text()
    assert text.startswith(COMMENT_MARKER) and "**1 regression(s)**" in text and "| -9.69% |" in text
    failed = CliRunner().invoke(app, [*argv, "--fail-on-regression"], env={"COLUMNS": "300"})
    assert failed.exit_code == 6


@pytest.mark.parametrize(
    ("pr_text", "args", "message"),
    [
        (None, [], "pr.json: no such file"),
        ("[{", [], "pr.json:1: not valid JSON"),
        ('[{"name": "x", "value": 1}]', [], "not a `tuner export bench` file: [0]: missing 'unit'"),
        ('[{"name": "x", "unit": "u", "value": 1}]', ["--series", "nope/*"], "unknown series 'nope/*'"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, pr_text: str | None, args: list[str], message: str) -> None:
    base = data_js(tmp_path / "data.js", {RATIO: flat(6)})
    pr = tmp_path / "pr.json"
    if pr_text is not None:
        pr.write_text(pr_text)
    out = CliRunner().invoke(app, ["pr-check", str(pr), "--base", str(base), *args], env={"COLUMNS": "300"})
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], out.stderr
