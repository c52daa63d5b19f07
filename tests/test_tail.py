"""The tail-latency join on hand-made intervals: which slow tokens overlap which pauses and steps."""

from __future__ import annotations

import numpy as np

from tests.support import synthetic_run
from tuner.metrics.tail_attribution import attribute, overlaps, pooled, tail_record


def test_overlap_is_an_intersection_of_intervals() -> None:
    lo, hi = np.array([1.0, 5.0]), np.array([2.0, 6.0])
    starts = np.array([0.0, 1.5, 2.5, 4.0, 6.5, 0.0])
    ends = np.array([0.9, 1.6, 4.9, 5.1, 7.0, 10.0])
    assert overlaps(starts, ends, lo, hi).tolist() == [False, True, False, True, False, True]


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
