"""A known slowdown found by a capacity search on the shared streaming engine, sized in the engine's own decode step,
on two SLO tiers from one search."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import support
from tests.support import STREAMING_ENGINE, decode_step_s
from tuner.capacity import capacity_on, configuration_from
from tuner.engine.session import EngineSession
from tuner.measure.workbench import Workbench
from tuner.records import CapacityRecord, load_capacity


@pytest.mark.engine
def test_a_known_slowdown_lowers_the_capacity_of_each_slo_tier_with_its_interval_below_1(
    streaming_session: EngineSession, tmp_path: Path
) -> None:
    """A wait of half a decode step before every batch the worker executes makes each request slower and the
    queue longer, so the configuration meets each SLO tier up to a lower Poisson rate than the reference: on both
    tiers of the one search, the capacity ratio's interval must lie below 1.

    The tiers: ``p90``, 90% of requests within a TTFT of 21 steps (the one target this test had before tiers), and
    ``median``, 50% within a TTFT of 8 steps, 99% within an end-to-end latency of 80 steps and at most 1% failed:
    four checks in all, scored on the same runs. Both tiers' knees of the configuration lie above the start (the
    median's at 30-39 requests/s here): started at 0.3 requests per step, the first of these searches left the
    median's below its lowest load and had to run again. Seen here (steps of 9.5 ms): p90 -37.7% and -44.6% (95%
    CIs: at least 20.7% and 23.1% fewer), median -51.5% and -43.2% (at least 28.0% and 25.8% fewer).

    Every figure is in units of this engine's own decode step (``decode_step_s``, measured first), as the
    known-gain tests size their cut: the TTFT target is 21 steps, the wait 0.55 of one, the search starts at 0.25
    requests per step and has 8,000 steps of budget (200 ms, 5 ms, 26 requests/s and 75 s at this host's 9.5 ms).
    Fixed figures were used before, and on a host twice as slow (knees near 16 requests/s, not 37-84) the
    test failed 2 of 2. With at most 16 sequences running, a burst of 48 requests leaves the last 16 waiting two
    waves of 32 decode steps, beyond the target, so at a high enough rate a third of its requests miss and the
    reference's knee is bracketed.

    Seen here with the one target before tiers: -55.1% [-74.6%, -35.4%] and -45.4% [-55.6%, -39.9%] (steps of 9.5
    and 8.8 ms); with
    ``TUNER_TEST_HOST_DELAY_MS=12`` (every EngineCore step 12 ms longer: a 2.3x slower host, knees 33 and 16
    requests/s) -50.0% [-59.2%, -31.5%]; with a second engine test running beside it (steps of 18-21 ms) -44.9%
    and -57.4% (each CI at least 20% and 38% fewer)."""
    workload: dict[str, Any] = {
        "num_prompts": 48,
        "input_len": {"dist": "fixed", "value": 16},
        "output_len": {"dist": "fixed", "value": 32},
        "seed": 5,
    }
    step_s = decode_step_s(
        Workbench(streaming_session, support.capacity_experiment(workload=workload)), STREAMING_ENGINE
    )
    for attempt in range(SEARCHES):
        requests = {**workload, "seed": workload["seed"] + attempt}  # another draw of requests each time
        path, record = _known_slowdown_search(streaming_session, tmp_path / f"search-{attempt}", requests, step_s)
        print(f"decode step {1e3 * step_s:.2f} ms: {record['summary']}")
        estimates = [tier["estimate"] for tier in record["tiers"]]
        assert len(estimates) == 2 and None not in estimates, record["summary"]
        exact = [e for e in estimates if e["capacity_a"]["bound"] == e["capacity_b"]["bound"] == "exact"]  # type: ignore[index]
        assert all(e["ratio"] < 1 for e in exact), record["summary"]  # type: ignore[index,operator]  # a wrong sign
        if len(exact) == 2 and all(e["ci_high"] is not None and e["ci_high"] < 1 for e in exact):  # type: ignore[index]
            break
    for estimate in estimates:
        assert estimate is not None and estimate["capacity_a"]["bound"] == estimate["capacity_b"]["bound"] == "exact"
        assert estimate["ci_high"] is not None and estimate["ci_high"] < 1, record["summary"]
    assert record["estimate"] == estimates[0] and len(record["checks"]) == 4
    for name in TIERS:
        assert f"tier {name}: the configuration serves " in record["summary"], record["summary"]
    assert len(record["search"]["forecast"]) == 2 and record["search"]["stop"] in ("planned", "budget")
    assert load_capacity(path)["levels"] == record["levels"]
    assert all((path.parent / name).is_file() for name in ("attainment.png", "checks.png", "report.md"))


TIERS = ("p90", "median")

SEARCHES = 2
"""A search that is inconclusive, not wrong, is run once more (with other requests); the test fails when the second
is inconclusive too, and at once on a wrong sign (a tier's exact ratio at or above 1). Inconclusive is:

- a knee not bracketed when the budget ran out: on 2026-11-29 one of three CI runs ended so, the reference meeting
  the target in 90.3% of its requests at the highest load probed, 59 requests/s;
- a tier's interval reaching 1: on 2026-12-01 a CI run's p90 tier read -39.2% [-48.0%, +1.4%], its knees read on
  few passes, so the t stretch of the interval was wide. The upper ends of the 17 tier intervals seen (here, in CI
  and in the test's docstring) had a log mean of -0.29 and an SD of 0.13: about 1.6% of tiers reach 1 by a normal
  fit, some 3% of searches with two tiers, so the test fails by chance in about 0.1% of runs (both searches)."""


def _known_slowdown_search(
    session: EngineSession, out: Path, workload: dict[str, Any], step_s: float
) -> tuple[Path, CapacityRecord]:
    rate, ms = 0.25 / step_s, step_s * 1e3  # requests/s: 28 at a 9 ms step; ms of one step
    exp = support.capacity_experiment(
        out,
        workload={**workload, "rate": rate},
        measure={"warmup_prompts": 0},
        capacity={
            "tiers": {
                "p90": {"ttft_ms": {"p90": 21 * ms}},
                "median": {"ttft_ms": {"p50": 8 * ms}, "e2e_ms": {"p99": 80 * ms}, "errors": 0.01},
            },
            "growth": 2.0,
            "rounds": 2,
            "budget_s": 8_000 * step_s,  # 72 s at a 9 ms step: runs last ~48 / rate, so they scale with it
            "min_load": rate / 16,
            "max_load": rate * 32,
        },
        strategies={"known_delay": {"worker_ms": 0.55 * ms}},
    )
    return capacity_on(Workbench(session, exp), exp, configuration_from(exp, None))
