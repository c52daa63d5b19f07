"""Per-request timings: the longest pause of a run (nothing streamed while a request was in flight)."""

from __future__ import annotations

import pytest

from tuner.metrics.timings import RequestTiming, longest_pause, summarize


def _request(sent: float, chunks: list[float]) -> RequestTiming:
    return RequestTiming(1, sent=sent, chunk_times=chunks, chunk_tokens=[1] * len(chunks), finished=chunks[-1])


def test_the_longest_pause_is_the_longest_silence_while_a_request_is_in_flight() -> None:
    """The idle 0.47 s between the first request's end and the second's send is no pause (nothing was in flight);
    the 0.4 s between two of the second's chunks is, and so is the 0.25 s the third waited for its first token."""
    timings = [
        _request(0.0, [0.01, 0.02, 0.03]),
        _request(0.5, [0.51, 0.52, 0.92, 0.93]),
        _request(1.5, [1.75, 1.76]),
    ]
    assert longest_pause(timings) == pytest.approx(0.4)
    assert longest_pause(timings[2:]) == pytest.approx(0.25)
    assert summarize(timings, wall_s=2.0)["longest_pause_ms"] == pytest.approx(400.0)


def test_requests_streaming_side_by_side_leave_no_pause_longer_than_their_steps() -> None:
    """Two requests whose chunks interleave every 10 ms: each has 20 ms between its own chunks, the run none."""
    timings = [_request(0.0, [0.01, 0.03, 0.05]), _request(0.0, [0.02, 0.04, 0.06])]
    assert longest_pause(timings) == pytest.approx(0.01)
    assert longest_pause([]) == 0.0
