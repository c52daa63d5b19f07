"""Mooncake traces (as AIPerf replays them): JSON Lines, one request a line.

``{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48]}``: ``timestamp`` in
milliseconds since the first request, each hash id one block of ``block_size`` prompt tokens (the same id, the
same tokens). Other keys are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from tuner.traffic.formats import fields
from tuner.traffic.records import BadRecord, FieldError, TraceRequest

MAX_HASH_ID = 2**63 - 1


def read(stream: BinaryIO) -> Iterator[TraceRequest | BadRecord]:
    return fields.json_lines(stream, _request)


def _request(line: int, record: dict[str, Any]) -> TraceRequest:
    if "timestamp" not in record:
        raise FieldError("timestamp", "missing")
    return TraceRequest(
        line=line,
        input_length=fields.count(record, "input_length"),
        output_length=fields.count(record, "output_length"),
        arrival_s=fields.time_value(record["timestamp"], "timestamp") / 1000.0,
        hash_ids=_hash_ids(record.get("hash_ids", [])),
    )


def _hash_ids(value: object) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise FieldError("hash_ids", f"expected a list of whole numbers, got {fields.kind(value)}")
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item <= MAX_HASH_ID:
            raise FieldError(f"hash_ids[{index}]", f"expected a whole number >= 0, got {item!r}"[:200])
    return tuple(value)
