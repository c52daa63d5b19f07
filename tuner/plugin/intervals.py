"""A bounded ring of time intervals, kept inside engine processes for the tail-latency join.

Each interval is (start, end) on ``time.monotonic`` (CLOCK_MONOTONIC, one clock for every process of a Linux host)
plus one small integer tag (a GC generation and whether it was hidden, or a step's scheduled tokens). Storage is
three preallocated ``array`` columns, so recording allocates nothing the GC tracks and memory is fixed; when full,
the oldest intervals are overwritten and :attr:`dropped` says how many.
"""

from __future__ import annotations

from array import array

from tuner.plugin.protocol import Intervals

DEFAULT_CAPACITY = 65_536  # ~1.3 MB per ring: minutes of steps or collections at several hundred per second


class IntervalRing:
    """The most recent ``capacity`` intervals."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._start = array("d", bytes(8 * capacity))
        self._end = array("d", bytes(8 * capacity))
        self._tag = array("q", bytes(8 * capacity))
        self.clear()

    def clear(self) -> None:
        self._next = 0
        self.recorded = 0

    def add(self, start: float, end: float, tag: int = 0) -> None:
        i = self._next
        self._start[i] = start
        self._end[i] = end
        self._tag[i] = tag
        self._next = (i + 1) % self.capacity
        self.recorded += 1

    @property
    def dropped(self) -> int:
        return max(0, self.recorded - self.capacity)

    def export(self) -> Intervals:
        """The kept intervals, oldest first, as JSON-ready columns."""
        n = min(self.recorded, self.capacity)
        first = (self._next - n) % self.capacity
        order = [(first + k) % self.capacity for k in range(n)]
        return {
            "start": [self._start[i] for i in order],
            "end": [self._end[i] for i in order],
            "tag": [self._tag[i] for i in order],
            "dropped": self.dropped,
        }
