"""Cheap virtualenvs that hold the same vLLM: a new venv whose ``.pth`` points at this venv's site-packages.

No second install: the venv sees the running interpreter's packages (vLLM, torch, the tuner's dist-info with its
plugin entry point), this checkout's ``tuner`` and the test plugins, plus any extra ``.pth`` lines (e.g. one
that sets an environment variable in every process of that install).
"""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
THIRD_PARTY = Path(__file__).parent / "third_party"
PLUMBING = Path(__file__).parent / "plumbing"


def make_venv(path: Path, *, vllm: bool = True, tuner: bool = True, extra_lines: tuple[str, ...] = ()) -> Path:
    """Create a venv at ``path`` (no pip) that imports this interpreter's packages; return its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    lines = [str(ROOT), str(THIRD_PARTY), str(PLUMBING)] if tuner else []
    if vllm:
        lines += site.getsitepackages()
    (Path(purelib) / "shared.pth").write_text("\n".join([*lines, *extra_lines]) + "\n")
    return python
