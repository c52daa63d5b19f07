"""Prompts as JSON Lines, as ``vllm bench``'s custom dataset takes them: ``{"prompt": "...", "output_tokens": 128}``.

Other keys are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, BinaryIO

from tuner.traffic.formats import fields
from tuner.traffic.records import BadRecord, TraceRequest


def read(stream: BinaryIO) -> Iterator[TraceRequest | BadRecord]:
    return fields.json_lines(stream, _request)


def _request(line: int, record: dict[str, Any]) -> TraceRequest:
    prompt = fields.string(record, "prompt")
    return TraceRequest(line=line, output_length=fields.count(record, "output_tokens"), prompt=prompt)
