"""`tuner versions` without an engine: the mirrored start order, the pairing of repetitions across starts, the
estimate, the bisection over a sequence of installs, and bad input (one line, exit 2, before any engine starts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from tests.venvs import make_venv
from tuner.cli.main import app
from tuner.versions.start_pairs import Start, StartResult, bisect, compare, pairs, start_order

EXPERIMENT = Path(__file__).resolve().parents[1] / "experiments" / "quickstart.yaml"


def test_start_order_is_mirrored_and_balanced() -> None:
    for seed in range(20):
        order = start_order(6, seed=seed)
        assert [s.pair for s in order] == [i // 2 for i in range(12)]
        assert all({order[2 * i].arm, order[2 * i + 1].arm} == {"A", "B"} for i in range(6))
        # each pair starts with the arm the previous one ended with: AB BA AB ... (or BA AB BA ...)
        assert all(order[2 * i + 1].arm == order[2 * i + 2].arm for i in range(5))
        assert [s.arm for s in order].count("A") == 6
    assert {start_order(1, seed=s)[0].arm for s in range(20)} == {"A", "B"}  # the first arm is drawn
    assert start_order(4, seed=3) == start_order(6, seed=3)[:8]  # a prefix: more starts extend the plan


def rep(tokens_per_s: float, wall_s: float = 2.0) -> dict[str, float]:
    return {"output_tokens_per_s": tokens_per_s, "wall_s": wall_s, "itl_p99_ms": 1000 / tokens_per_s}


def result(pair: int, arm: str, rates: list[float], process_s: float = 40.0) -> StartResult:
    return StartResult(Start(pair, arm), [rep(r) for r in rates], process_s, 20.0)  # type: ignore[arg-type]


def test_one_pair_per_start_pair_from_the_summed_repetitions() -> None:
    results = [result(0, "B", [90, 91]), result(0, "A", [100, 101]), result(1, "A", [102, 99]), result(1, "B", [80])]
    assert pairs(results, "output_tokens_per_s") == [
        (362.0, 4.0, 402.0, 4.0),  # (B tokens, B seconds, A tokens, A seconds) over each start's repetitions
        (160.0, 2.0, 402.0, 4.0),  # B's start measured one repetition: its own sums
    ]
    assert pairs(results[:3], "output_tokens_per_s") == [(362.0, 4.0, 402.0, 4.0)]  # start pair 1 lacks B
    assert pairs(results[:2], "itl_p99_ms")[0] == pytest.approx(
        (2.0, 1000 / 90 + 1000 / 91, 2.0, 1000 / 100 + 1000 / 101)
    )


def synthetic(
    effect: float, seed: int, starts: int = 8, reps: int = 3, start_sd: float = 0.05, rep_sd: float = 0.02
) -> list[StartResult]:
    """Starts of two installs, B's throughput ``effect`` times A's: each start has its own level (lognormal,
    ``start_sd``: the host's load and the engine instance) and its repetitions vary around it (``rep_sd``)."""
    rng = np.random.default_rng(seed)
    out = []
    for start in start_order(starts, seed=seed):
        level = 1000 * (effect if start.arm == "B" else 1.0) * np.exp(rng.normal(0, start_sd))
        rates = list(level * np.exp(rng.normal(0, rep_sd, reps)))
        out.append(result(start.pair, start.arm, rates, process_s=30.0 + 2.0 * reps))
    return out


def test_compare_finds_a_known_slowdown_with_its_size_and_the_restart_cost() -> None:
    comparison = compare(synthetic(0.8, seed=1), "output_tokens_per_s")
    e = comparison.estimate
    assert e.n == 8 and e.verdict == "worse" and comparison.changed
    assert 0.74 < e.ratio < 0.86 and e.ci_high < 0.9  # SE ~0.07/sqrt(8) ~2.5%: within 3 SE of the truth
    assert len(comparison.start_pair_ratios) == 8 and all(0.6 < r < 1.0 for r in comparison.start_pair_ratios)
    assert comparison.restart_s == {"A": 30.0, "B": 30.0}  # process time beyond the 3 x 2 s measured
    assert 0 < comparison.mde < 0.15 and comparison.pairs_for_5pct is not None and comparison.pairs_for_5pct > 8


def test_aa_comparisons_call_a_change_at_about_the_nominal_rate() -> None:
    """200 A/A comparisons of 8 start pairs, start effects 2.5x the repetition noise: the sign-flip test over
    start pairs calls a change in about 5% of them; fail above 10% (binomial: P(>20 of 200 | 5%) < 0.1%).
    Measured when written: 8 of 200; pairing the 24 repetitions instead treats the start effect as signal and
    calls 42 of 200 (21%)."""
    called = sum(compare(synthetic(1.0, seed=s), "output_tokens_per_s", seed=s).changed for s in range(200))
    assert called <= 20


def test_fewer_than_6_start_pairs_never_call_a_change() -> None:
    comparison = compare(synthetic(0.5, seed=3, starts=5), "output_tokens_per_s")
    assert comparison.estimate.ratio < 0.6 and comparison.estimate.p_value >= 2 / 2**5
    assert comparison.estimate.ci_low < 1 < comparison.estimate.ci_high  # the CI inverts that test: unbounded
    assert not comparison.changed


@pytest.mark.parametrize("n", range(2, 10))
def test_bisection_names_the_step_that_changed(n: int) -> None:
    for culprit in range(n - 1):
        level = [0.0 if i <= culprit else 1.0 for i in range(n)]  # one step changes the metric
        seen: list[tuple[int, int]] = []

        def changed(i: int, j: int, level: list[float] = level, seen: list[tuple[int, int]] = seen) -> bool:
            seen.append((i, j))
            return level[i] != level[j]

        found = bisect(n, changed)
        assert found.culprit == (culprit, culprit + 1), (n, culprit)
        assert seen[0] == (0, n - 1)
        assert len(seen) <= 1 + 2 * int(np.ceil(np.log2(n - 1)))  # halving, not every step


def test_bisection_without_a_change_or_with_a_spread_change_names_no_step() -> None:
    flat = bisect(5, lambda i, j: False)
    assert flat.culprit is None and flat.steps == [(0, 4, False)] and "no change" in flat.note
    # two small steps, each below what one comparison detects: only the whole span differs
    spread = bisect(5, lambda i, j: (i, j) == (0, 4))
    assert spread.culprit is None and "spread" in spread.note
    assert [s[:2] for s in spread.steps] == [(0, 4), (0, 2), (2, 4)]
    with pytest.raises(ValueError):
        bisect(1, lambda i, j: True)


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("venvs")
    return {
        "ok": make_venv(root / "ok"),
        "no-vllm": make_venv(root / "no-vllm", vllm=False),
        "no-tuner": make_venv(root / "no-tuner", tuner=False),
    }


@pytest.mark.parametrize(
    ("second", "message"),
    [
        ("/no/such/python", "/no/such/python: no such Python interpreter"),
        ("no-vllm", "vLLM is not installed for this interpreter"),
        ("no-tuner", "the tuner (vllm-hosttune) is not installed for this interpreter"),
        ("/bin/true", "/bin/true: cannot run it as Python: no output"),
        (str(EXPERIMENT), "not executable"),
    ],
)
def test_bad_installs_exit_2_with_one_line_before_any_engine_starts(
    venvs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, second: str, message: str
) -> None:
    monkeypatch.delenv("PYTHONPATH")  # the no-tuner venv must not find this checkout through the environment
    monkeypatch.chdir(tmp_path)
    python = str(venvs.get(second, second))
    out = CliRunner().invoke(app, ["versions", str(EXPERIMENT), str(venvs["ok"]), python], env={"COLUMNS": "300"})
    assert out.exit_code == 2 and isinstance(out.exception, SystemExit), out.output
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], out.stderr
    assert "Traceback" not in out.output and not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--metric", "nope"], "unknown metric 'nope'"), ([], "give two interpreters at least")],
)
def test_bad_arguments_exit_2(args: list[str], message: str) -> None:
    pythons = ["python3", "python3"] if args else ["python3"]
    out = CliRunner().invoke(app, ["versions", str(EXPERIMENT), *pythons, *args], env={"COLUMNS": "300"})
    assert out.exit_code == 2 and message in out.stderr, out.output


def test_the_command_alternates_installs_bisects_and_writes_every_comparison(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The orchestration with the engine start replaced: install 2 of 4 is 30% slower from there on."""

    from tuner.config import load_experiment
    from tuner.versions import run as versions_run
    from tuner.versions.installs import Install

    speed = {"py0": 1000.0, "py1": 1000.0, "py2": 700.0, "py3": 700.0}
    calls: list[tuple[str, str]] = []
    rng = np.random.default_rng(0)

    def fake_start(install: Install, experiment: Path, output: Path, log: Path) -> tuple[dict[str, Any], float]:
        calls.append((install.python, output.stem))
        level = speed[install.python] * np.exp(rng.normal(0, 0.02))
        latencies: dict[str, dict[str, float]] = {f"{family}_ms": {} for family in ("ttft", "tpot", "itl", "e2e")}
        reps = [{"metrics": {"output_tokens_per_s": level, "wall_s": 2.0, **latencies}} for _ in range(3)]
        return {"repetitions": reps, "engine": {"start_s": 20.0}}, 40.0

    monkeypatch.setattr(versions_run, "run_start", fake_start)
    experiment = load_experiment(EXPERIMENT).model_copy(update={"output_dir": tmp_path})
    installs = [Install(f"py{i}", "0.3x", "3.11") for i in range(4)]
    path = versions_run.compare_installs(experiment, EXPERIMENT, installs, starts=6, metric="output_tokens_per_s")
    record = json.loads(path.read_text())
    assert [(c["from"], c["to"], c["changed"]) for c in record["comparisons"]] == [
        (0, 3, True),
        (0, 1, False),
        (1, 3, True),
        (1, 2, True),
    ]
    assert record["bisection"]["culprit"] == [1, 2]
    assert record["comparisons"][0]["estimate"]["ratio"] == pytest.approx(0.7, rel=0.03)
    assert record["comparisons"][0]["restart_s"] == {"A": 34.0, "B": 34.0}
    first = calls[:12]  # installs 0 and 3, mirrored: each start pair begins with the arm the last one ended with
    assert {p for p, _ in first} == {"py0", "py3"} and all(first[2 * i + 1][0] == first[2 * i + 2][0] for i in range(5))
    assert [name for _, name in first[:2]] in (["0A", "0B"], ["0B", "0A"])
