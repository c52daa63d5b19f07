"""BurstGPT traces: CSV with a header, ``Timestamp`` in seconds, ``Request tokens`` and ``Response tokens``.

``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`` then rows such as
``5,ChatGPT,472,18,490,Conversation log``. A row with 0 response tokens is a failed request in the trace: it is a
bad record (``on_error: skip`` leaves such rows out and counts them).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import BinaryIO

from tuner.traffic.formats import fields
from tuner.traffic.records import BadFile, BadRecord, FieldError, TraceRequest

COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


def read(stream: BinaryIO) -> Iterator[TraceRequest | BadRecord]:
    lines = fields.numbered_lines(stream)
    header = next(((n, raw) for n, raw in lines if raw is None or raw.strip()), None)
    if header is None:
        raise BadFile(None, "empty: expected a header line naming the columns " + ", ".join(COLUMNS))
    number, raw = header
    try:
        names = _row(raw)
    except FieldError as exc:
        raise BadFile(number, f"header: {exc.message}") from None
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise BadFile(number, f"header: no column {', '.join(map(repr, missing))} (BurstGPT names {COLUMNS})")
    at = {column: names.index(column) for column in COLUMNS}
    for number, raw in lines:
        if raw is not None and not raw.strip():
            continue
        try:
            row = _row(raw)
            if len(row) != len(names):
                raise FieldError("", f"{len(row)} columns, the header has {len(names)}")
            yield TraceRequest(
                line=number,
                arrival_s=fields.time_value(_number(row[at["Timestamp"]], "Timestamp"), "Timestamp"),
                input_length=fields.count_value(_number(row[at["Request tokens"]], "Request tokens"), "Request tokens"),
                output_length=_response(row[at["Response tokens"]]),
            )
        except FieldError as exc:
            yield BadRecord(number, exc.field, exc.message)


def _row(raw: bytes | None) -> list[str]:
    if raw is None:
        raise fields.too_long_line()
    try:
        return next(csv.reader([fields.text(raw)]))
    except csv.Error as exc:
        raise FieldError("", f"not CSV: {exc}") from None


def _number(cell: str, column: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise FieldError(column, f"expected a number, got {cell!r}"[:200]) from None


def _response(cell: str) -> int:
    value = _number(cell, "Response tokens")
    if value == 0:
        raise FieldError("Response tokens", "0: a failed request in the trace (on_error: skip leaves these out)")
    return fields.count_value(value, "Response tokens")
