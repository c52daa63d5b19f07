"""ShareGPT conversations: one JSON array of ``{"conversations": [{"from": "human", "value": "..."}, {"from":
"gpt", "value": "..."}]}``; the first human turn is the prompt, the first model turn after it the recorded reply
(its token count is the output length), as ``vllm bench --dataset-name sharegpt`` reads it.

The array is read element by element (a 700 MB file in bounded memory), each element named by the line it starts on.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import Any, BinaryIO

from tuner.traffic.formats import fields
from tuner.traffic.records import BadFile, BadRecord, FieldError, TraceRequest

HUMAN = ("human", "user")
MODEL = ("gpt", "chatgpt", "bard", "bing", "model", "assistant")
CHUNK_BYTES = 1 << 20


def read(stream: BinaryIO) -> Iterator[TraceRequest | BadRecord]:
    for number, element in JsonArray(stream):
        try:
            prompt, completion = _turns(element)
            yield TraceRequest(line=number, prompt=prompt, completion=completion)
        except FieldError as exc:
            yield BadRecord(number, exc.field, exc.message)


def _turns(element: Any) -> tuple[str, str]:
    if not isinstance(element, dict):
        raise FieldError("", f"expected a conversation object, got {fields.kind(element)}")
    turns = element.get("conversations")
    if not isinstance(turns, list):
        raise FieldError("conversations", "missing" if turns is None else f"expected a list, got {fields.kind(turns)}")
    prompt = None
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise FieldError(f"conversations[{index}]", 'expected {"from": ..., "value": "text"}')
        if prompt is None and turn.get("from") in HUMAN and turn["value"]:
            prompt = turn["value"]
        elif prompt is not None and turn.get("from") in MODEL and turn["value"]:
            return prompt, turn["value"]
    raise FieldError("conversations", "no human turn followed by a model turn with text")


class JsonArray:
    """``(line, element)`` for each element of the JSON array in ``stream``, decoded one at a time."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = json.JSONDecoder()
        self._buf = ""
        self._pos = 0
        self._line = 1  # the line of self._buf[0]
        self._eof = False

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        if self._skip_space() != "[":
            raise BadFile(self._line_at(self._pos), "expected a JSON array of conversations ([ ... ])")
        self._pos += 1
        if self._skip_space() == "]":
            return
        while True:
            start = self._pos
            yield self._line_at(start), self._element()
            separator = self._skip_space()
            if separator == "]":
                return
            if separator != ",":
                what = "the end of the file" if separator == "" else repr(separator)
                raise BadFile(self._line_at(self._pos), f"expected ',' or ']' after an element, got {what}")
            self._pos += 1
            self._skip_space()

    def _element(self) -> Any:
        while True:
            try:
                value, end = self._json.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                if self._more():
                    continue
                raise BadFile(self._line_at(exc.pos), f"not JSON: {exc.msg}") from None
            if end == len(self._buf) and self._more():  # a number or literal may go on in the next chunk
                continue
            self._pos = end
            return value

    def _skip_space(self) -> str:
        """The next character that is not whitespace ('' at the end of the file)."""
        while True:
            while self._pos < len(self._buf) and self._buf[self._pos] in " \t\r\n":
                self._pos += 1
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._more():
                return ""

    def _more(self) -> bool:
        """Read the next chunk (dropping what was consumed); False at the end of the file."""
        if self._eof:
            return False
        if len(self._buf) - self._pos > fields.MAX_LINE_BYTES:
            raise BadFile(self._line_at(self._pos), f"an element longer than {fields.MAX_LINE_BYTES >> 20} MiB")
        self._line += self._buf.count("\n", 0, self._pos)
        self._buf = self._buf[self._pos :]
        self._pos = 0
        raw = self._stream.read(CHUNK_BYTES)
        try:
            chunk = self._decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            line = self._line + self._buf.count("\n") + raw.count(b"\n", 0, max(exc.start, 0))
            raise BadFile(line, "not UTF-8 text") from None
        self._eof = not raw
        self._buf += chunk
        return bool(chunk) or not self._eof

    def _line_at(self, pos: int) -> int:
        return self._line + self._buf.count("\n", 0, pos)
