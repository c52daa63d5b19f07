"""The tail-latency join on hand-made intervals: which slow tokens overlap which pauses and steps."""

from __future__ import annotations

from typing import Any

import numpy as np

from tuner.metrics.tail_attribution import attribute, overlaps, pooled, tail_record
from tuner.metrics.timings import RequestTiming
from tuner.plugin.protocol import pause_tag


def intervals(rows: list[tuple[float, float, int]]) -> dict[str, Any]:
    return {"start": [r[0] for r in rows], "end": [r[1] for r in rows], "tag": [r[2] for r in rows], "dropped": 0}


def test_overlap_is_an_intersection_of_intervals() -> None:
    lo, hi = np.array([1.0, 5.0]), np.array([2.0, 6.0])
    starts = np.array([0.0, 1.5, 2.5, 4.0, 6.5, 0.0])
    ends = np.array([0.9, 1.6, 4.9, 5.1, 7.0, 10.0])
    assert overlaps(starts, ends, lo, hi).tolist() == [False, True, False, True, False, True]


def synthetic_run() -> tuple[list[RequestTiming], list[dict[str, Any]]]:
    """One request and two processes whose pauses fall into known inter-token gaps."""
    # One request, a token every 10 ms from t=100 s; three tokens are 50 ms late.
    gaps = [0.01] * 200
    slow_gaps = (50, 120, 180)
    for slow in slow_gaps:
        gaps[slow] = 0.05
    times = 100 + np.cumsum(gaps)
    timing = RequestTiming(prompt_tokens=1, sent=100.0, chunk_times=times.tolist(), chunk_tokens=[1] * 200)
    gap_start = [times[i - 1] for i in slow_gaps]
    # EngineCore: a critical gen2 pause inside the first two slow gaps, a hidden gen0 pause inside the third;
    # the worker: a critical gen0 pause during a fast token.
    core = {
        "process_name": "EngineCore",
        "gc": {
            "pauses": intervals(
                [
                    (gap_start[0] + 0.01, gap_start[0] + 0.04, pause_tag(2, False)),
                    (gap_start[1] + 0.01, gap_start[1] + 0.04, pause_tag(2, False)),
                    (gap_start[2] + 0.01, gap_start[2] + 0.02, pause_tag(0, True)),
                ]
            )
        },
        # A step per token; the slow gaps hold one long step each (48, 47 and 46 ms: the p99 leaves out the last).
        "steps": intervals(
            [
                (t - (0.049 - 0.001 * slow_gaps.index(i) if i in slow_gaps else 0.009), t - 0.001, 8)
                for i, t in enumerate(times)
            ]
        ),
    }
    worker = {"process_name": "VllmWorker-0", "gc": {"pauses": intervals([(times[10] + 0.001, times[10] + 0.002, 0)])}}
    return [timing], [core, worker]


def test_slow_tokens_are_attributed_to_the_pause_they_overlap() -> None:
    timings, processes = synthetic_run()
    result = attribute(timings, processes, slo_token_ms=30.0)
    assert result is not None
    assert result["samples"] == {"all": 199, "p99": 2, "slo": 3}  # p99 of 199 samples: the top 2 of the 3 ties
    rows = {(r["source"], r["what"]): r["hits"] for r in result["rows"]}
    assert rows["EngineCore", "GC gen2 critical"]["slo"] == 2
    assert rows["EngineCore", "GC gen0 hidden"]["slo"] == 1
    assert rows["VllmWorker-0", "GC gen0 critical"] == {"all": 1, "p99": 0, "slo": 0}
    assert rows["EngineCore", "step above its p99"]["slo"] == 2
    long_steps = {(r["source"], r["what"]): r["hits"] for r in result["long_steps"]["rows"]}
    assert result["long_steps"]["count"] == 2 and long_steps["EngineCore", "GC critical, any gen"] == 2
    timeline = result["timeline"]
    assert timeline["tokens"] and timeline["pauses"]["EngineCore"] and timeline["steps"]
    assert all(0 <= s < e <= timeline["span_s"] + 0.1 for s, e, _ in timeline["tokens"])
    both = pooled([result, None, result])
    assert both is not None and both["samples"]["slo"] == 6 and both["long_steps"]["count"] == 4
    assert tail_record({"reference": [result], "trial": [result]})["timeline"] == timeline
