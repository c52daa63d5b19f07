"""A known slowdown found by a capacity search on the shared streaming engine, sized in the engine's own decode step."""

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
def test_a_known_slowdown_lowers_the_capacity_with_its_interval_below_1(
    streaming_session: EngineSession, tmp_path: Path
) -> None:
    """A wait of half a decode step before every batch the worker executes makes each request slower and the
    queue longer, so the configuration meets the TTFT target up to a lower Poisson rate than the reference: the
    capacity ratio's interval must lie below 1.

    Every figure is in units of this engine's own decode step (``decode_step_s``, measured first), as the
    known-gain tests size their cut: the TTFT target is 21 steps, the wait 0.55 of one, the search starts at 0.3
    requests per step and has 8,000 steps of budget (200 ms, 5 ms, 32 requests/s and 75 s at this host's 9.5 ms).
    Those were the fixed figures before, and on a host twice as slow (knees near 16 requests/s, not 37-84) the
    test failed 2 of 2. With at most 16 sequences running, a burst of 48 requests leaves the last 16 waiting two
    waves of 32 decode steps, beyond the target, so at a high enough rate a third of its requests miss and the
    reference's knee is bracketed.

    Seen here: -55.1% [-74.6%, -35.4%] and -45.4% [-55.6%, -39.9%] (steps of 9.5 and 8.8 ms); with
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
        estimate = record["estimate"]
        assert estimate is not None, record["summary"]
        if estimate["capacity_a"]["bound"] == estimate["capacity_b"]["bound"] == "exact":
            break
    assert estimate["capacity_a"]["bound"] == estimate["capacity_b"]["bound"] == "exact", record["summary"]
    assert estimate["ci_high"] is not None and estimate["ci_high"] < 1, record["summary"]
    assert record["summary"].startswith("the configuration serves ") and " fewer requests/s" in record["summary"]
    assert len(record["search"]["forecast"]) == 2 and record["search"]["stop"] in ("planned", "budget")
    assert load_capacity(path)["levels"] == record["levels"]
    assert (path.parent / "attainment.png").is_file() and (path.parent / "report.md").is_file()


SEARCHES = 2
"""A search that spends its budget before bracketing both knees is inconclusive, not wrong, and is run once more
(with other requests): on 2026-11-29 one of three CI runs ended so, the reference meeting the target in 90.3% of its
requests at the highest load probed, 59 requests/s, when the budget ran out. Whenever both knees are bracketed, the
interval must lie below 1: a wrong sign or an interval across 1 fails at once."""


def _known_slowdown_search(
    session: EngineSession, out: Path, workload: dict[str, Any], step_s: float
) -> tuple[Path, CapacityRecord]:
    rate = 0.3 / step_s  # requests/s: 33 at a 9 ms step
    exp = support.capacity_experiment(
        out,
        workload={**workload, "rate": rate},
        measure={"slo": {"ttft_ms": 21 * step_s * 1e3}, "warmup_prompts": 0},
        capacity={
            "attainment": 0.9,
            "growth": 2.0,
            "rounds": 2,
            "budget_s": 8_000 * step_s,  # 72 s at a 9 ms step: runs last ~48 / rate, so they scale with it
            "min_load": rate / 16,
            "max_load": rate * 32,
        },
        strategies={"known_delay": {"worker_ms": 0.55 * step_s * 1e3}},
    )
    return capacity_on(Workbench(session, exp), exp, configuration_from(exp, None))
