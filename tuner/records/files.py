"""Result files: where they go, and the one atomic writer.

Layout (documented in ``results/README.md``; the records' fields in ``docs/records.md``)::

    <output_dir>/<experiment>/<YYYYmmdd-HHMMSS>/run.json      one `tuner run`
    <output_dir>/<experiment>/study.db                         the Optuna study of `tuner sweep`
    <output_dir>/<experiment>/sweep/…                          sweep summary, verdicts, winner export
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tuner.errors import UserError


def write_bytes(path: Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically: a reader (or a kill) never sees a half-written file. The one
    writer of result files (JSON, text, PNG)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide results from the rest of a team
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json(path: Path, data: Any) -> Path:
    """``data`` as indented JSON (values JSON lacks as their ``str``), atomically."""
    return write_bytes(path, (json.dumps(data, indent=2, sort_keys=False, default=str) + "\n").encode("utf-8"))


def read_schema_json(path: Path, schema: str, what: str, fix: str = "") -> dict[str, Any]:
    """The JSON object at ``path`` when its ``schema`` is ``schema``; else :class:`UserError` saying what is wrong
    (``what``: the record's name; ``fix``: what to do about another schema)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UserError.single(str(path), f"not a readable {what}: {exc}", "schema") from exc
    if not isinstance(data, dict) or data.get("schema") != schema:
        found = data.get("schema") if isinstance(data, dict) else None
        raise UserError.single(str(path), f"schema {found!r} is not {schema!r}{fix}", "schema")
    return data


def write_text(path: Path, text: str) -> Path:
    """UTF-8 text, atomically."""
    return write_bytes(path, text.encode("utf-8"))


def new_run_dir(output_dir: Path, experiment: str) -> Path:
    """A fresh, unique directory for one run."""
    base = output_dir / experiment / time.strftime("%Y%m%d-%H%M%S")
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    path.mkdir(parents=True)
    return path


def destination_problem(path: Path) -> str | None:
    """Why a result file could not be written at ``path`` (None if it can), found before any engine starts: a
    directory, a parent that is no directory, or a parent where a probe file cannot be created."""
    if path.is_dir():
        return "is a directory: give a file name (e.g. DIR/run.json)"
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a directory"
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=f".{path.name}.", suffix=".probe")
    except OSError as exc:
        return f"cannot write in {existing}: {exc.strerror or exc}"
    os.close(fd)
    os.unlink(probe)
    return None


def check_destination(path: Path, where: str) -> None:
    """Refuse (:class:`UserError`, naming ``where`` the path came from) a result destination that
    :func:`destination_problem` finds unwritable."""
    if problem := destination_problem(path):
        raise UserError.single(str(path), problem, where)


def write_json_keeping(path: Path, data: Any, fallback: Callable[[], Path]) -> tuple[Path, str | None]:
    """Write ``data`` to ``path``; if that fails (the disk changed since the check), to the place ``fallback()``
    makes, so that a measured result is never lost. Returns where it went and, after a fallback, why."""
    try:
        return write_json(path, data), None
    except OSError as exc:
        why = f"could not write {path} ({exc.strerror or exc})"
    return write_json(fallback(), data), why
