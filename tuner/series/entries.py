"""The exported entry format: github-action-benchmark's custom-tool input, which ``tuner export bench`` writes and
``tuner history``, ``tuner pr-check`` and ``tuner dashboard`` read.

A file is a JSON list of entries ``{"name", "unit", "value", "range" (optional), "extra" (optional)}``; which way
is better is the action's ``tool`` (``customBiggerIsBetter`` / ``customSmallerIsBetter``), and the end of the
file's name for ``tuner export bench``'s files (``...-bigger.json`` / ``...-smaller.json``).
:data:`BENCH_ENTRY_SCHEMA` is the JSON Schema of one file; :func:`validate` checks a list against it (plus unique
names and finite values) without third-party packages.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

from tuner.errors import UserError

Better = Literal["bigger", "smaller"]
KINDS: tuple[Better, ...] = ("bigger", "smaller")
TOOLS: dict[Better, str] = {"bigger": "customBiggerIsBetter", "smaller": "customSmallerIsBetter"}


class BenchEntry(TypedDict):
    """One value of one series in one run."""

    name: str
    unit: str
    value: float
    range: NotRequired[str]  # e.g. "1.02-1.08x (95% CI)" or "± 12.5"
    extra: NotRequired[str]  # human-readable context


BENCH_ENTRY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "github-action-benchmark custom tool input (customBiggerIsBetter / customSmallerIsBetter)",
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "unit", "value"],
        "additionalProperties": False,
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "unit": {"type": "string", "minLength": 1},
            "value": {"type": "number"},
            "range": {"type": "string"},
            "extra": {"type": "string"},
        },
    },
}


def better_of(name: str) -> Better | None:
    """Which way is better for the entries of a file named ``name`` (its end: ``bigger`` or ``smaller``)."""
    return next((kind for kind in KINDS if name.endswith(kind)), None)


def validate(entries: Any) -> list[str]:
    """Problems with ``entries`` against :data:`BENCH_ENTRY_SCHEMA` (plus unique names, finite values)."""
    if not isinstance(entries, list):
        return ["top level: expected a list"]
    problems = []
    names: set[str] = set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            problems.append(f"[{i}]: expected an object")
            continue
        problems += _entry_problems(entry, f"[{i}]")
        name = entry.get("name")
        if isinstance(name, str):
            if name in names:
                problems.append(f"[{i}].name: duplicate {name!r}")
            names.add(name)
    return problems


def _entry_problems(entry: dict[str, Any], where: str) -> list[str]:
    problems = [f"{where}: missing {key!r}" for key in ("name", "unit", "value") if key not in entry]
    allowed = BENCH_ENTRY_SCHEMA["items"]["properties"]
    problems += [f"{where}: unexpected key {key!r}" for key in set(entry) - set(allowed)]
    for key in ("name", "unit", "range", "extra"):
        if key in entry and not isinstance(entry[key], str):
            problems.append(f"{where}.{key}: expected a string")
    problems += [f"{where}.{key}: empty" for key in ("name", "unit") if key in entry and entry[key] == ""]
    if "value" in entry:
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            problems.append(f"{where}.value: expected a number")
        elif isinstance(value, float) and not math.isfinite(value):
            problems.append(f"{where}.value: not finite")
    return problems


def read_entries(path: Path) -> list[BenchEntry]:
    """A ``tuner export bench`` file's entries, validated; bad input is a one-line :class:`UserError`."""
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError.single(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError.single(str(path), f"cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UserError.single(str(path), f"not valid JSON: {exc.msg}", line=exc.lineno) from None
    problems = validate(entries)
    if problems:
        raise UserError.single(str(path), f"not a `tuner export bench` file: {problems[0]}")
    return list(entries)
