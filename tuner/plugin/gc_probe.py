"""GC telemetry from inside one process, through ``gc.callbacks``.

Installed by the plugin in every vLLM process. It times each collection (start to stop callback), counts
collections per generation, keeps the longest pause and a log-spaced pause histogram. ``reset()`` opens a
new measurement window; ``snapshot()`` returns plain data for the window so far.

Each pause is also classified: *hidden* when the thread that ran it was blocked at a wait point
(:mod:`strategies.framework.wait_points`: waiting for another process or the device, so the collection cost nothing),
else *critical*; *overran* counts the hidden pauses after which the wait returned at once (what it waited for had
probably arrived during the pause, so part of it delayed the process). Counts, seconds and the longest pause are kept
per class and generation, and every pause's interval (``time.monotonic``, the system-wide CLOCK_MONOTONIC) goes into a
bounded ring for the tail-latency join.

Peak memory is the window's own: on Linux ``reset()`` writes "5" to ``/proc/self/clear_refs``, which resets
the kernel's resident high-water mark (``VmHWM``) to the current RSS, and the snapshot reads ``VmHWM``. Where
that is not possible the peak is the process-lifetime high-water mark (``ru_maxrss``), said by
``peak_rss_scope: "lifetime"``: both arms of a pair then share it and its ratio is ~1 by construction.
"""

from __future__ import annotations

import bisect
import gc
import os
import resource
import time
from pathlib import Path
from typing import Any

import psutil

from strategies.framework import wait_points
from tuner.plugin.intervals import IntervalRing
from tuner.plugin.protocol import PAUSE_EDGES_MS, PAUSE_KINDS, GcSnapshot, PauseClassSnapshot, pause_tag

CLEAR_REFS = Path("/proc/self/clear_refs")
STATUS = Path("/proc/self/status")


def reset_peak_rss() -> bool:
    """Reset this process's resident high-water mark to its current RSS (Linux); False where that fails."""
    try:
        CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def vm_hwm_bytes() -> int | None:
    """The resident high-water mark since the last reset (``VmHWM``), None where /proc has none."""
    try:
        for line in STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


class PauseClass:
    """Collections of one class (critical or hidden): count, seconds and longest pause per generation."""

    __slots__ = ("collections", "max_s", "seconds")

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.max_s = [0.0, 0.0, 0.0]

    def add(self, generation: int, pause: float) -> None:
        self.collections[generation] += 1
        self.seconds[generation] += pause
        self.max_s[generation] = max(self.max_s[generation], pause)

    def snapshot(self, wall: float) -> PauseClassSnapshot:
        total = sum(self.seconds)
        return {
            "collections": list(self.collections),
            "seconds": list(self.seconds),
            "max_pause_ms": [m * 1e3 for m in self.max_s],
            "total_s": total,
            "share": total / wall if wall > 0 else 0.0,
        }


class GcProbe:
    """Times every collection of this interpreter between ``reset()`` and ``snapshot()``."""

    def __init__(self) -> None:
        self._folded = 0  # gen0 counts the collections so far reset: with the count, its advance so far
        self._started_at: float | None = None
        self._hidden = False
        self._last_hidden = (0, 0.0)
        self._installed = False
        self.pauses = IntervalRing()
        self.reset()

    def install(self) -> None:
        if not self._installed:
            gc.callbacks.append(self._callback)
            wait_points.on_overrun.append(self._overran)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._callback)
            wait_points.on_overrun.remove(self._overran)
            self._installed = False

    def allocated(self) -> int:
        """How far gen0's count has advanced while the probe was installed: the count now plus the count each
        collection found and reset. The count rises with each GC-tracked allocation and falls with each
        deallocation while it is above zero, and a gen0 threshold T triggers a collection each time it passes T, so
        the advance between two calls over T + 1 is how many collections it triggered, whether or not one came
        between them."""
        return self._folded + gc.get_count()[0]

    def _overran(self) -> None:
        self.classes["overran"].add(*self._last_hidden)

    def reset(self) -> None:
        self.window_start = time.monotonic()
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.collected = 0
        self.max_pause_s = 0.0
        self.histogram = [0] * (len(PAUSE_EDGES_MS) + 1)
        self.classes = {kind: PauseClass() for kind in (*PAUSE_KINDS, "overran")}
        self.pauses.clear()
        self.windowed_peak = reset_peak_rss()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._folded += gc.get_count()[0]
            self._hidden = wait_points.in_wait()
            self._started_at = time.monotonic()
            return
        if self._started_at is None:
            return
        ended = time.monotonic()
        started, self._started_at = self._started_at, None
        pause = ended - started
        generation = min(int(info.get("generation", 0)), 2)
        self.classes[PAUSE_KINDS[self._hidden]].add(generation, pause)
        if self._hidden:
            self._last_hidden = (generation, pause)
            wait_points.pause_ended(ended)
        self.pauses.add(started, ended, pause_tag(generation, self._hidden))
        self.collections[generation] += 1
        self.seconds[generation] += pause
        self.collected += int(info.get("collected", 0))
        self.max_pause_s = max(self.max_pause_s, pause)
        self.histogram[bisect.bisect_left(PAUSE_EDGES_MS, pause * 1e3)] += 1

    def snapshot(self) -> GcSnapshot:
        """The window so far as JSON-ready data."""
        wall = time.monotonic() - self.window_start
        total = sum(self.seconds)
        memory = psutil.Process().memory_info()
        classes = {kind: pauses.snapshot(wall) for kind, pauses in self.classes.items()}
        return {
            "window_s": wall,
            "collections": list(self.collections),
            "gc_seconds": list(self.seconds),
            "gc_total_s": total,
            "gc_share": total / wall if wall > 0 else 0.0,
            "max_pause_ms": self.max_pause_s * 1e3,
            "collected_objects": self.collected,
            "critical": classes["critical"],
            "hidden": classes["hidden"],
            "overran": classes["overran"],
            "gc_critical_share": classes["critical"]["share"],
            "critical_max_pause_ms": max(classes["critical"]["max_pause_ms"]),
            "pauses": self.pauses.export(),
            "pause_histogram": {"edges_ms": list(PAUSE_EDGES_MS), "counts": list(self.histogram)},
            "threshold": list(gc.get_threshold()),
            "freeze_count": gc.get_freeze_count(),
            "tracked_objects": len(gc.get_objects()) if os.environ.get("TUNER_COUNT_OBJECTS") else None,
            "rss_bytes": memory.rss,
            # Linux updates the high-water mark lazily, so it can trail the current RSS a little.
            "peak_rss_bytes": max(memory.rss, self._peak_bytes()),
            "peak_rss_scope": "window" if self.windowed_peak else "lifetime",
        }

    def _peak_bytes(self) -> int:
        hwm = vm_hwm_bytes() if self.windowed_peak else None
        return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
