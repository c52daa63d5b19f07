"""GC telemetry from inside one process, through ``gc.callbacks``.

Installed by the plugin in every vLLM process. It times each collection (start to stop callback), counts
collections per generation, keeps the longest pause and a log-spaced pause histogram. ``reset()`` opens a
new measurement window; ``snapshot()`` returns plain data for the window so far.

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


# Upper bucket edges of the pause histogram, in milliseconds (the last bucket is open-ended).
PAUSE_EDGES_MS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)


class GcProbe:
    """Times every collection of this interpreter between ``reset()`` and ``snapshot()``."""

    def __init__(self) -> None:
        self._started_at: float | None = None
        self._installed = False
        self.reset()

    def install(self) -> None:
        if not self._installed:
            gc.callbacks.append(self._callback)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            gc.callbacks.remove(self._callback)
            self._installed = False

    def reset(self) -> None:
        self.window_start = time.perf_counter()
        self.collections = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self.collected = 0
        self.max_pause_s = 0.0
        self.histogram = [0] * (len(PAUSE_EDGES_MS) + 1)
        self.windowed_peak = reset_peak_rss()

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started_at = time.perf_counter()
            return
        if self._started_at is None:
            return
        pause = time.perf_counter() - self._started_at
        self._started_at = None
        generation = min(int(info.get("generation", 0)), 2)
        self.collections[generation] += 1
        self.seconds[generation] += pause
        self.collected += int(info.get("collected", 0))
        self.max_pause_s = max(self.max_pause_s, pause)
        self.histogram[bisect.bisect_left(PAUSE_EDGES_MS, pause * 1e3)] += 1

    def snapshot(self) -> dict[str, Any]:
        """The window so far as JSON-ready data."""
        wall = time.perf_counter() - self.window_start
        total = sum(self.seconds)
        memory = psutil.Process().memory_info()
        return {
            "window_s": wall,
            "collections": list(self.collections),
            "gc_seconds": list(self.seconds),
            "gc_total_s": total,
            "gc_share": total / wall if wall > 0 else 0.0,
            "max_pause_ms": self.max_pause_s * 1e3,
            "collected_objects": self.collected,
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
