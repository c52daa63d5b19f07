"""One reader per file format: ``read(stream)`` yields a :class:`~tuner.traffic.records.TraceRequest` or a
:class:`~tuner.traffic.records.BadRecord` per record, in file order, holding one record at a time; a file that
cannot be read at all raises :class:`~tuner.traffic.records.BadFile`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO

from tuner.traffic.dataset import Format
from tuner.traffic.formats import burstgpt, jsonl, mooncake, sharegpt
from tuner.traffic.records import BadRecord, TraceRequest

Reader = Callable[[BinaryIO], Iterator[TraceRequest | BadRecord]]

READERS: dict[Format, Reader] = {
    Format.MOONCAKE: mooncake.read,
    Format.SHAREGPT: sharegpt.read,
    Format.JSONL: jsonl.read,
    Format.BURSTGPT: burstgpt.read,
}
