"""The Python sources of vLLM's GPU wheels, for the static compatibility check (nothing is installed or imported).

Each release is downloaded once per machine with pip (about 300 MB, seconds on PyPI) and only its ``vllm/**/*.py``
are kept, in the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``, under ``vllm-hosttune/vllm-src/<version>/``), so
every clone on the machine shares them; the wheel is deleted after unpacking (and kept out of pip's cache). A
release's files never change, so a tree once unpacked is never fetched again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MATRIX = ("0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0")
"""The vLLM releases the tuner supports: every one is checked statically against the strategies and hooks."""
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vllm-hosttune" / "vllm-src"
DOWNLOAD_TIMEOUT_S = 180


class FetchError(RuntimeError):
    """A wheel could not be downloaded or unpacked."""


def gpu_vllm_source(version: str) -> Path:
    """The ``vllm`` package directory of the GPU wheel ``vllm==version``, from the cache or fetched into it."""
    target = CACHE / version
    if not target.is_dir():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE, prefix=f".{version}-") as tmp:
            wheel = _download(version, Path(tmp) / "wheel")
            staging = Path(tmp) / "src"
            with zipfile.ZipFile(wheel) as archive:
                for name in archive.namelist():
                    if name.startswith("vllm/") and name.endswith(".py"):
                        archive.extract(name, staging)
            try:
                staging.rename(target)  # complete or absent: an interrupted fetch leaves no partial tree
            except OSError:
                if not target.is_dir():  # else another test process unpacked the same release first
                    raise
    return target / "vllm"


def _download(version: str, into: Path) -> Path:
    command = [
        *(sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"),
        *("--platform", "manylinux_2_28_x86_64", "--python-version", "3.12"),
        *("--no-cache-dir", "--disable-pip-version-check", "--quiet", "-d", str(into), f"vllm=={version}"),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=DOWNLOAD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise FetchError(f"pip download vllm=={version} took more than {DOWNLOAD_TIMEOUT_S} s") from None
    wheels = sorted(into.glob("vllm-*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        output = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise FetchError(f"pip download vllm=={version} failed (exit {done.returncode}): {' | '.join(output)}")
    return wheels[0]
