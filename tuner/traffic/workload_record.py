"""What traffic a result holds for: the record ``run.json`` and the sweep summary keep under ``workload``."""

from __future__ import annotations

from typing import Literal, TypedDict

from tuner.traffic.shape import WorkloadShape


class DatasetRecord(TypedDict):
    """Which file, and what of it, a result holds for (``run.json`` and the sweep summary, under ``workload``)."""

    path: str
    format: str
    sha256: str
    bytes: int
    records_read: int  # good records read (reading stops at num_prompts or at the window's end)
    read_to_end: bool
    bad_skipped: int  # on_error: skip
    bad_examples: list[str]
    before_window: int
    clipped: int  # too_long: clip: requests shortened (prompt first)
    # Of those, requests whose output alone exceeded the context and was shortened too (0 in records before 2026-11-27).
    output_clipped: int
    requests: int  # replayed
    sample: str
    schedule: str | None
    time_scale: float


class WorkloadRecord(TypedDict):
    """What traffic a result holds for (``run.json`` and the sweep summary, ``workload``)."""

    source: Literal["synthetic", "dataset"]
    dataset: DatasetRecord | None
    replay: str  # how requests were sent, e.g. "at their recorded times x 0.5, at most 8 in flight"
    shape: WorkloadShape
