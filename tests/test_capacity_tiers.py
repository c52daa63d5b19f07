"""SLO tiers in ``tuner capacity``: per-metric percentile checks and an error-rate target, each tier's capacity the
lowest of its checks' crossings, several tiers from one search (tuner.stats.capacity, tuner.capacity.slo, the
planner), and how the file says them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

import tuner.capacity.levels
from tests.test_capacity import _record
from tests.test_capacity_stats import MIN_COVERAGE, REQUESTS, _attainment, _latent
from tuner.capacity import KneePlanner
from tuner.capacity.levels import measure_level
from tuner.capacity.sentence import tiers_sentence
from tuner.capacity.slo import CapacitySlo, Check
from tuner.config import Experiment, LoadKnob, check_capacity
from tuner.feedback import SILENT
from tuner.metrics import RequestLatency
from tuner.records import CAPACITY_SCHEMA, load_capacity
from tuner.report.capacity import write_capacity_report
from tuner.report.load_table import load_rows
from tuner.series.capacity import capacity_entries
from tuner.stats import LevelResult, Share, capacity_ratio, tier

TIERS = {
    "interactive": {"ttft_ms": {"p95": 200}, "tpot_ms": {"p99": 50}, "errors": 0.01},
    "batch": {"ttft_ms": {"p95": 200}, "e2e_ms": {"p90": 5000}},
}


def _experiment(capacity: dict[str, Any], slo: dict[str, float] | None = None) -> Experiment:
    measure = {"slo": slo} if slo else {}
    return Experiment.model_validate({"name": "x", "workload": {"rate": 4}, "measure": measure, "capacity": capacity})


# --- the estimate on a tier -----------------------------------------------------------------------------------------


def _exact(load: float, knees: tuple[float, ...], n: int = 100_000) -> list[np.ndarray]:
    """One noiseless round's flags per check: each check's curve logistic in log load, 95% met at its knee."""
    return [np.arange(n) < round(n * float(_attainment(np.array(math.log(load / knee * 10)), 0.0))) for knee in knees]


@pytest.mark.parametrize(("b_knees", "ratio"), [((10.0, 9.6), 1.2), ((10.0, 12.0), 1.25)])
def test_a_tier_is_met_where_every_check_is_so_its_capacity_is_its_lowest_crossing(
    b_knees: tuple[float, float], ratio: float
) -> None:
    """Check 0 crosses 95% at 10 in both arms; check 1 at 8 in A and ``b_knees[1]`` in B. A's capacity on the tier
    is 8 (check 1 binds); B's is 9.6 where check 1 still binds, and 10 where it moved past check 0's knee."""
    levels = []
    for load in (6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0):
        a, b = _exact(load, (10.0, 8.0)), _exact(load, b_knees)
        levels.append(LevelResult.of_checks(load, [[a[0]] * 3, [a[1]] * 3], [[b[0]] * 3, [b[1]] * 3]))
    found = capacity_ratio(levels, [Share(0, 0.95), Share(1, 0.95)])
    assert found.capacity_a.load == pytest.approx(8.0, rel=1e-3)
    assert found.capacity_b.load == pytest.approx(8.0 * ratio, rel=1e-3)
    assert found.ratio == pytest.approx(ratio, rel=1e-3) and found.flagged
    only_check_0 = capacity_ratio(levels, [Share(0, 0.95)])
    assert only_check_0.ratio == pytest.approx(1.0, abs=1e-3)  # the other check alone sees no difference


def test_a_share_of_check_0_is_the_one_check_tier() -> None:
    rng = np.random.default_rng(3)
    levels = []
    for load in (8.0, 10.0, 12.0):
        u = _latent(rng, (4, REQUESTS))
        levels.append(
            LevelResult.measured(load, u < _attainment(np.log([load]), 0.0), u < _attainment(np.log([load]), 0.1))
        )
    assert capacity_ratio(levels, 0.95).to_dict() == capacity_ratio(levels, [Share(0, 0.95)]).to_dict()


def test_a_target_is_refused_when_its_shares_cannot_cross_or_name_a_check_not_measured() -> None:
    for bad in (1.0, 0.0, [Share(0, 1.0)], []):
        with pytest.raises(ValueError, match="share"):
            tier(bad)
    level = LevelResult.measured(10.0, [[True, False]] * 2, [[True, True]] * 2)
    with pytest.raises(ValueError, match="check the levels do not have"):
        capacity_ratio([level], [Share(1, 0.9)])
    two = LevelResult.of_checks(10.0, [[[True]] * 2] * 2, [[[True]] * 2] * 2)
    with pytest.raises(ValueError, match="cannot merge"):
        level.merged(two)


def _tier_levels(rng: np.random.Generator, passes: int, ratio: float) -> list[LevelResult]:
    """A grid measured in passes, two checks decided by the same latent requests (a slow request is slow in both):
    check 0 with its knee at 12, check 1 at 10 (so it binds), B's checks both moved up by ``ratio``; host state per
    pass, noise per run, misses in blocks."""
    host = 0.03 * rng.standard_normal(passes)
    levels = []
    for load in (8.0, 9.0, 10.0, 11.0, 12.0, 13.0):
        u = _latent(rng, (passes, REQUESTS))
        runs = host[:, None] + 0.01 * rng.standard_normal((passes, 2))
        x = np.log(load) + runs
        met = [
            [u < _attainment(x[:, i : i + 1] - math.log(knee / 10), math.log(ratio) if i else 0.0) for knee in (12, 10)]
            for i in (0, 1)
        ]
        levels.append(LevelResult.of_checks(load, met[0], met[1]))
    return levels


@pytest.mark.parametrize("ratio", [1.0, 1.12])
def test_a_tiers_interval_covers_the_truth(ratio: float) -> None:
    """300 simulated grids of five passes on a two-check tier (the bootstrap resamples passes, the same draws for
    every check): the interval covers the true ratio in >= 91.5% of them, as a one-check target's does (measured
    98.7% under A/A, 95.3% at a true 1.12)."""
    rng = np.random.default_rng(int(100 * ratio))
    covered = 0
    for _ in range(300):
        found = capacity_ratio(_tier_levels(rng, 5, ratio), [Share(0, 0.95), Share(1, 0.95)], resamples=1000)
        covered += found.ci_low <= ratio <= found.ci_high
    assert covered / 300 >= MIN_COVERAGE, covered


# --- several tiers from one search ----------------------------------------------------------------------------------


def test_one_search_brackets_and_grids_every_tiers_knee() -> None:
    """Tier 1 needs 95% of check 0 (its knee at 10); tier 2 99% of check 1, met up to about 2.3 (a stricter tier):
    the one search brackets and measures around both, so each tier gets an exact capacity from the shared runs (a
    search for tier 1 alone leaves tier 2 censored below its lowest load, 6)."""
    rng = np.random.default_rng(0)
    search = KneePlanner(6.0, [Share(0, 0.95)], tiers=([Share(1, 0.99)],), budget=400)
    while (probe := search.next_probe()) is not None:
        u = _latent(rng, (probe.rounds, REQUESTS))
        x = math.log(probe.load) + 0.01 * rng.standard_normal((probe.rounds, 1))
        checks = [u < _attainment(x, 0.0), u < _attainment(x + math.log(10 / 4) + 0.4, 0.0)]
        search.record(LevelResult.of_checks(probe.load, checks, checks))
    first, second = search.estimates()
    assert first.capacity_a.bound == second.capacity_a.bound == "exact"
    assert first.capacity_a.load == pytest.approx(10, rel=0.1) and 1.5 < second.capacity_a.load < 3
    loads = [level.load for level in search.levels]
    assert sum(1 for x in loads if x < 5) >= 2 and sum(1 for x in loads if 8 < x < 12) >= 2
    assert first.ci_low <= 1 <= first.ci_high and second.ci_low <= 1 <= second.ci_high


# --- the file, the checks and the words -----------------------------------------------------------------------------


def test_tiers_share_their_checks_and_say_what_they_ask() -> None:
    slo = CapacitySlo.of(_experiment({"tiers": TIERS}))
    assert slo.checks == (
        Check("ttft_ms", 200),
        Check("tpot_ms", 50),
        Check("completed"),
        Check("e2e_ms", 5000),
    )
    assert slo.tiers == {
        "interactive": (Share(0, 0.95), Share(1, 0.99), Share(2, 0.99)),
        "batch": (Share(0, 0.95), Share(3, 0.9)),
    }
    assert slo.words("interactive") == (
        "95% of requests within TTFT <= 200 ms, 99% within TPOT <= 50 ms and at most 1% failed"
    )
    assert slo.words("batch") == "95% of requests within TTFT <= 200 ms and 90% within end-to-end latency <= 5000 ms"
    legacy = CapacitySlo.of(_experiment({"attainment": 0.9}, {"ttft_ms": 500, "tpot_ms": 50}))
    assert legacy.checks == (Check("slo"),) and legacy.tiers == {"slo": (Share(0, 0.9),)}
    assert legacy.words("slo") == "90% of requests within TTFT <= 500 ms and TPOT <= 50 ms"


def test_a_request_that_did_not_complete_passes_no_latency_check() -> None:
    slo = CapacitySlo.of(_experiment({"tiers": TIERS}))
    rep: Any = {
        "met": [False, False, False],
        "latencies": [RequestLatency(150, 60, 900), None, RequestLatency(250, 10, 6000)],
    }
    flags = slo.flags(rep)
    assert flags == [[True, False, False], [False, False, True], [True, False, True], [True, False, False]]
    assert slo.joint("interactive", flags) == [False, False, False]
    assert slo.joint("batch", flags) == [True, False, False]


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        ({"tiers": {"a": {"ttft_ms": {"p100": 200}}}}, "not a percentile"),
        ({"tiers": {"a": {"ttft_ms": {"95": 200}}}}, "not a percentile"),
        ({"tiers": {"a": {"ttft_ms": {"p95": -1}}}}, "positive number of ms"),
        ({"tiers": {"a": {}}}, "a tier needs a target"),
        ({"tiers": {"a": {"errors": 0}}}, "greater than 0"),
        ({"tiers": {"a b": {"errors": 0.01}}}, "tier name"),
        ({"attainment": 0.9, "tiers": {"a": {"errors": 0.01}}}, "keep one"),
    ],
)
def test_a_tier_the_search_cannot_meet_is_refused_with_its_reason(capacity: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        _experiment(capacity)


def test_tiers_are_an_slo_of_their_own() -> None:
    """Without measure.slo a search needs tiers; with them it needs nothing more."""
    assert check_capacity(_experiment({"tiers": TIERS}), None) == []
    assert "capacity.tiers" in check_capacity(_experiment({}), None)[0].message


def test_each_tier_gets_its_sentence() -> None:
    def estimate(ratio: float, low: float, high: float) -> dict[str, Any]:
        arm = {"load": 4.0, "bound": "exact", "ci_low": 3.0, "ci_high": 5.0}
        return {"capacity_a": arm, "capacity_b": arm, "ratio": ratio, "ci_low": low, "ci_high": high,
                "flagged": low > 1 or high < 1}  # fmt: skip

    tiers: Any = [
        {"name": "interactive", "words": "95% of requests within TTFT <= 200 ms", "estimate": estimate(1.1, 1.05, 1.2)},
        {"name": "batch", "words": "90% of requests within e2e <= 5 s", "estimate": estimate(1.0, 0.9, 1.1)},
    ]
    said = tiers_sentence(tiers, LoadKnob.RATE)
    assert said.startswith("tier interactive: the configuration serves 10.0% [5.0%, 20.0%] more requests/s")
    assert "; tier batch: the configuration is not shown to serve a different load" in said
    assert tiers_sentence(tiers[:1], LoadKnob.RATE).startswith("the configuration serves 10.0%")


def test_a_record_from_before_tiers_reads_as_its_one_tier(tmp_path: Path) -> None:
    level = {"load": 4.0, "attainment": {"reference": 0.9, "configuration": 0.95}, "difference": None, "runs": {}}
    old = {"schema": CAPACITY_SCHEMA, "slo": {"ttft_ms": 500.0, "tpot_ms": None, "e2e_ms": None}, "target": 0.99,
           "estimate": None, "levels": [level]}  # fmt: skip
    path = tmp_path / "capacity.json"
    path.write_text(json.dumps(old))
    record = load_capacity(path)
    assert record["checks"] == [{"metric": "slo", "limit_ms": None, "words": "TTFT <= 500 ms"}]
    assert [(t["name"], t["words"], t["shares"]) for t in record["tiers"]] == [
        ("slo", "99% of requests within TTFT <= 500 ms", [{"check": 0, "least": 0.99}])
    ]
    assert record["levels"][0]["tiers"]["slo"]["attainment"] == {"reference": 0.9, "configuration": 0.95}


def test_the_report_gives_each_tier_its_capacities_and_draws_each_check(tmp_path: Path) -> None:
    """A search of two tiers over three checks: a row per tier with both capacities and the ratio, the CSV a row per
    load, tier and arm, and a panel per check."""
    record = _record(tmp_path)
    record["checks"] = [
        {"metric": "ttft_ms", "limit_ms": 200.0, "words": "TTFT <= 200 ms"},
        {"metric": "tpot_ms", "limit_ms": 50.0, "words": "TPOT <= 50 ms"},
        {"metric": "completed", "limit_ms": None, "words": "completed"},
    ]
    second = {**record["tiers"][0], "name": "batch", "words": "90% of requests within TPOT <= 50 ms"}
    at_least = {"load": 9.0, "bound": "at_least", "ci_low": 9.0, "ci_high": None}
    second["estimate"] = {**second["estimate"], "capacity_b": at_least, "ratio_bound": "at_least", "ci_high": None}
    record["tiers"] = [{**record["tiers"][0], "name": "interactive"}, second]
    for level in record["levels"]:
        level["checks"] = [level["attainment"]] * 3
        level["tiers"] = {"interactive": level["tiers"]["slo"], "batch": level["tiers"]["slo"]}
    paths = write_capacity_report(tmp_path, record)
    assert [p.name for p in paths] == ["report.md", "report.html", "attainment.png", "checks.png"]
    text = (tmp_path / "report.md").read_text()
    interactive = "| interactive | 90% of requests within TTFT <= 500 ms | 10 [9, 11] | 12 [10.8, 13.2] |"
    assert f"{interactive} 1.200 [1.050, 1.400] |" in text
    assert "| batch | 90% of requests within TPOT <= 50 ms | 10 [9, 11] | at least 9 | 1.200 [1.050, open] |" in text
    rows = load_rows(record)
    assert [(r.load, r.tier, r.arm) for r in rows[:4]] == [
        (4.0, "interactive", "reference"), (4.0, "interactive", "configuration"),
        (4.0, "batch", "reference"), (4.0, "batch", "configuration"),
    ]  # fmt: skip
    assert (tmp_path / "checks.png").stat().st_size > 10_000
    entries = capacity_entries(record, "cap")  # type: ignore[arg-type]
    assert [e["name"] for e in entries] == ["cap/capacity-ratio/known_delay(worker_ms=4.0)/rate/interactive"]
    assert "tier interactive: 90% of requests within TTFT <= 500 ms" in entries[0]["extra"]  # batch's is a bound


def test_a_level_scores_each_request_on_every_check_and_each_tier_on_its_checks_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two rounds of three requests: the configuration's second request fails (it passes no check) and its third is
    slow to its first token; each check's counts and each tier's joint counts are the requests' flags added up."""
    fast, slow = RequestLatency(100, 20, 900), RequestLatency(300, 20, 1000)
    runs = {"reference": [fast, fast, fast], "configuration": [fast, None, slow]}

    class Engine:
        offsets, requests = [0.0, 0.5, 1.0], [object()] * 3
        arm = "reference"

        def switch(self, strategies: dict[str, Any]) -> None:
            self.arm = "configuration" if strategies else "reference"

        def repetition(self, feedback: Any, label: str) -> dict[str, Any]:
            found = runs[self.arm]
            return {"met": [x is not None for x in found], "latencies": found, "metrics": {"wall_s": 1.0}}

    load = {"host_busy": 0.5, "tree_cpus": 1.0, "other_cpus": 0.0, "tool_wait": 0.01, "tool_gc_s": 0.0}
    monkeypatch.setattr(tuner.capacity.levels, "run_load", lambda *_: load)
    slo = CapacitySlo.of(_experiment({"tiers": TIERS}))
    engine = Engine()
    measured = measure_level(
        lambda tag: engine,  # type: ignore[arg-type, return-value]
        4.0,
        {"reference": {}, "configuration": {"known_delay": {}}},
        passes=(0, 1),
        done=0,
        seed=0,
        feedback=SILENT,
        progress=SILENT.task("", None),
        slo=slo,
    )
    ttft, tpot, completed, e2e = measured.level.checks
    assert (sum(ttft.met_a), sum(ttft.met_b)) == (6, 2) and (sum(tpot.met_a), sum(tpot.met_b)) == (6, 4)
    assert (sum(completed.met_a), sum(completed.met_b)) == (6, 4) and sum(e2e.met_b) == 4
    assert (sum(measured.tiers["interactive"].met_a), sum(measured.tiers["interactive"].met_b)) == (6, 2)
    assert [run["attainment"] for run in measured.runs["configuration"]] == pytest.approx([1 / 3, 1 / 3])
