"""What a result was measured on: software versions, hardware, and the code's git revision."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

from tuner.vllm.imports import versions


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _device() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return str(torch.cuda.get_device_name(0))
    except Exception:  # torch missing or broken: the CPU is the device
        pass
    return f"cpu ({_cpu_model()})"


def _git_sha(cwd: Path) -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


class EnvironmentRecord(TypedDict):
    """What a result was measured on (every key present after loading; None where a record does not say)."""

    python: str | None
    platform: str | None
    cpu_count: int | None
    cpu_model: str | None
    device: str | None
    versions: dict[str, str | None]  # distribution: version (None: not installed)
    git_sha: str | None
    hostname: str | None


def environment_record() -> EnvironmentRecord:
    """A JSON-ready description of the machine and software under test."""
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "device": _device(),
        "versions": versions(),
        "git_sha": _git_sha(Path(__file__).resolve().parent),
        "hostname": platform.node(),
    }
