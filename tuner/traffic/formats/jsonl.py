"""Prompts as JSON Lines, as ``vllm bench``'s custom dataset takes them: ``{"prompt": "...", "output_tokens": 128}``.

Other keys are ignored.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from tuner.traffic.formats import fields
from tuner.traffic.records import BadRecord, FieldError, TraceRequest


def read(stream: BinaryIO) -> Iterator[TraceRequest | BadRecord]:
    for number, raw in fields.numbered_lines(stream):
        if raw is not None and not raw.strip():
            continue
        try:
            if raw is None:
                raise fields.too_long_line()
            record = fields.json_object(raw)
            prompt = fields.string(record, "prompt")
            yield TraceRequest(line=number, output_length=fields.count(record, "output_tokens"), prompt=prompt)
        except FieldError as exc:
            yield BadRecord(number, exc.field, exc.message)
