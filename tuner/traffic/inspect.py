"""``tuner workload inspect``: a whole dataset file summarised streaming, without an engine.

Memory grows by the shape's 16 bytes (plus 8 per hash id) per request, never by the file's text: a million-line
trace is inspected in bounded memory (``benchmarks/engine/inspect_trace.py`` measures it).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

from tuner.errors import UserError
from tuner.traffic.dataset import Dataset, Format
from tuner.traffic.formats import READERS
from tuner.traffic.records import TraceRequest
from tuner.traffic.replay import Clipped, dataset_file, dataset_record, file_digest, text_tokenizer
from tuner.traffic.selection import Selection
from tuner.traffic.shape import ShapeBuilder
from tuner.traffic.tokens import TOKENIZE_BATCH, tokenize
from tuner.traffic.workload_record import WorkloadRecord

SUFFIXES = {".csv": Format.BURSTGPT, ".json": Format.SHAREGPT}
PEEK_BYTES = 1 << 16


def guess_format(path: Path) -> Format | None:
    """The format a file's name or first record says (None if neither does)."""
    if path.suffix.lower() in SUFFIXES:
        return SUFFIXES[path.suffix.lower()]
    with dataset_file(path) as stream:
        head = stream.read(PEEK_BYTES)
    first = next((line for line in head.splitlines() if line.strip()), b"")
    try:
        record = json.loads(first)
    except ValueError:
        return None
    if isinstance(record, dict) and ("hash_ids" in record or "input_length" in record):
        return Format.MOONCAKE
    if isinstance(record, dict) and "prompt" in record:
        return Format.JSONL
    return None


def inspect_file(
    path: Path, fmt: Format, *, tokenizer_model: str | None = None, skip_bad: bool = False
) -> WorkloadRecord:
    """Every request of ``path`` summarised as a record (all of them, at their recorded times)."""
    spec = Dataset(path=path, format=fmt, on_error="skip" if skip_bad else "refuse")
    tokenizer = None
    if fmt.text:
        if tokenizer_model is None:
            raise UserError.single(str(path), f"{fmt.value} prompts are text: give --tokenizer MODEL to count tokens")
        tokenizer = text_tokenizer({"model": tokenizer_model}, fmt)
    builder = ShapeBuilder()
    first: float | None = None
    with dataset_file(path) as stream:
        selection = Selection(READERS[fmt](stream), spec, 0, str(path))
        for request in _tokenized(iter(selection), tokenizer):
            if request.arrival_s is not None and first is None:
                first = request.arrival_s
            arrival = request.arrival_s - first if request.arrival_s is not None and first is not None else None
            builder.add(request.input_length or 0, request.output_length or 0, arrival, request.hash_ids)
        size, digest = file_digest(stream)
    shape = builder.shape()
    if not shape["requests"]:
        raise UserError.single(str(path), "no request in the file")
    dataset = dataset_record(spec, selection.counts, size, digest, requests=shape["requests"], clipped=Clipped())
    dataset["schedule"] = "trace" if fmt.timed else None  # inspected at the recorded times
    return {
        "source": "dataset",
        "dataset": dataset,
        "replay": "at their recorded times" if fmt.timed else "no recorded times",
        "shape": shape,
    }


def inspected(
    path: Path, fmt: Format | None, *, tokenizer_model: str | None = None, skip_bad: bool = False
) -> tuple[WorkloadRecord, Path, str]:
    """What ``tuner workload inspect FILE`` reports of a dataset file (``fmt``, else guessed): its record, where its
    files go by default, and its title. An experiment file's workload is :func:`tuner.measure.experiment_workload`."""
    fmt = fmt or guess_format(path)
    if fmt is None:
        raise UserError.single(str(path), "cannot tell its format from its name or first line: give --format")
    record = inspect_file(path, fmt, tokenizer_model=tokenizer_model, skip_bad=skip_bad)
    return record, Path("results") / "inspect" / path.stem, path.name


def _tokenized(requests: Iterator[TraceRequest], tokenizer: object | None) -> Iterator[TraceRequest]:
    if tokenizer is None:
        yield from requests
        return
    while batch := list(islice(requests, TOKENIZE_BATCH)):
        yield from tokenize(batch, tokenizer)
