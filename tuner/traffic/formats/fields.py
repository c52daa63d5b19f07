"""Reading one record's fields, shared by the format readers; a wrong field raises :class:`FieldError`."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

from tuner.traffic.records import BadRecord, FieldError, TraceRequest

MAX_LINE_BYTES = 16 << 20
"""A longer line is refused: one record of a trace is never this large, and reading it would hold it all."""


def numbered_lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """``(line number, bytes)`` for each line of ``stream``; the bytes are None for a line longer than
    :data:`MAX_LINE_BYTES` (then skipped to its end without holding it)."""
    number = 0
    while True:
        raw = stream.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while (rest := stream.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                pass
            yield number, None
        else:
            yield number, raw


def json_lines(
    stream: BinaryIO, parse: Callable[[int, dict[str, Any]], TraceRequest]
) -> Iterator[TraceRequest | BadRecord]:
    """JSON Lines records, each object turned into a request by ``parse(line, object)``; blank lines are skipped,
    and a line that is no JSON object, or whose fields ``parse`` refuses, is a :class:`BadRecord`."""
    for number, raw in numbered_lines(stream):
        if raw is not None and not raw.strip():
            continue
        try:
            if raw is None:
                raise too_long_line()
            yield parse(number, json_object(raw))
        except FieldError as exc:
            yield BadRecord(number, exc.field, exc.message)


def too_long_line() -> FieldError:
    return FieldError("", f"line longer than {MAX_LINE_BYTES >> 20} MiB: not a record")


def text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FieldError("", f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start + 1}") from None


def json_object(raw: bytes) -> dict[str, Any]:
    """One JSON Lines record, which must be an object."""
    try:
        value = json.loads(text(raw))
    except json.JSONDecodeError as exc:
        raise FieldError("", f"not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(value, dict):
        raise FieldError("", f"expected a JSON object, got {kind(value)}")
    return value


def kind(value: Any) -> str:
    """How a JSON value is named in a message."""
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    return "null" if value is None else names.get(type(value), "an object")


def count(record: dict[str, Any], key: str, *, minimum: int = 1) -> int:
    """A required whole number of tokens (``12`` or ``12.0``)."""
    if key not in record:
        raise FieldError(key, "missing")
    return count_value(record[key], key, minimum=minimum)


def count_value(value: Any, key: str, *, minimum: int = 1) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(key, f"expected a whole number, got {kind(value)} {value!r}"[:200])
    if value < minimum:
        raise FieldError(key, f"must be at least {minimum}, got {value}")
    return value


def time_value(value: Any, key: str) -> float:
    """A finite, non-negative time."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(key, f"expected a number, got {kind(value)} {value!r}"[:200])
    if not math.isfinite(value) or value < 0:
        raise FieldError(key, f"must be a finite number >= 0, got {value}")
    return float(value)


def string(record: dict[str, Any], key: str) -> str:
    """A required non-empty string."""
    if key not in record:
        raise FieldError(key, "missing")
    value = record[key]
    if not isinstance(value, str):
        raise FieldError(key, f"expected a string, got {kind(value)}")
    if not value:
        raise FieldError(key, "empty")
    return value
