"""Peak memory per measurement window: a repetition's peak, not the process-lifetime high-water mark."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tuner.plugin import gc_probe
from tuner.plugin.gc_probe import GcProbe

MIB = 1 << 20


def touch(size: int) -> bytearray:
    block = bytearray(size)
    block[::4096] = b"x" * len(block[::4096])  # resident, not just reserved
    return block


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/clear_refs is Linux-only")
def test_the_peak_is_the_windows_own() -> None:
    probe = GcProbe()
    block = touch(128 * MIB)
    first = probe.snapshot()
    assert first["peak_rss_scope"] == "window" and first["peak_rss_bytes"] >= 128 * MIB
    del block
    probe.reset()  # the next window must not inherit the earlier peak
    assert probe.snapshot()["peak_rss_bytes"] < first["peak_rss_bytes"] - 100 * MIB


def test_without_clear_refs_the_lifetime_mark_is_said(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(gc_probe, "CLEAR_REFS", tmp_path / "missing" / "clear_refs")
    snapshot = GcProbe().snapshot()
    assert snapshot["peak_rss_scope"] == "lifetime" and snapshot["peak_rss_bytes"] >= snapshot["rss_bytes"]
