"""One request as a file describes it, and one record of a file that does not parse."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """A request read from a file; token formats give lengths, text formats give text (tokenized later)."""

    line: int  # 1-based line where the record starts
    input_length: int | None = None  # prompt tokens (token formats, or once text is tokenized)
    output_length: int | None = None  # output tokens (token formats, or once a recorded reply is tokenized)
    arrival_s: float | None = None  # recorded time, seconds (timed formats)
    hash_ids: tuple[int, ...] = ()  # mooncake: one id per block of prompt tokens
    prompt: str | None = None  # text formats
    completion: str | None = None  # sharegpt: the recorded reply, whose length is the output length
    prompt_ids: tuple[int, ...] | None = None  # text formats, once tokenized


@dataclass(frozen=True, slots=True)
class BadRecord:
    """A record that does not parse: where, which field and why (``file:line: field: message``)."""

    line: int
    field: str
    message: str


class BadFile(Exception):
    """The file as a whole cannot be read (a missing header, a broken JSON array): never skippable."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


class FieldError(ValueError):
    """Raised by the field readers of :mod:`tuner.traffic.formats.fields`; becomes a :class:`BadRecord`."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
