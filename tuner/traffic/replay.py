"""A dataset made ready for an engine: read and selected, tokenized, held to the context length, recorded.

:func:`read_dataset` runs twice: when the experiment is loaded (so a bad file is refused with exit 2 before any
engine starts) and when the engine is up (:func:`engine_requests` then needs its vocabulary).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NamedTuple

from tuner.errors import Problem, UserError
from tuner.inputs import open_regular
from tuner.traffic.dataset import MAX_DATASET_BYTES, Dataset, Format
from tuner.traffic.formats import READERS
from tuner.traffic.records import TraceRequest
from tuner.traffic.requests import RequestSpec
from tuner.traffic.selection import MAX_REPORTED, Counts, Selection
from tuner.traffic.shape import ShapeBuilder, WorkloadShape
from tuner.traffic.tokens import HashBlocks, load_tokenizer, tokenize
from tuner.traffic.workload_record import DatasetRecord
from tuner.vllm import BUILTIN_DIR, BUILTIN_PREFIX

MAX_LEN_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")


class TokenizerMissing(LookupError):
    """A text dataset for a model without a tokenizer here; the message says what to do."""


@dataclass(frozen=True)
class DatasetRequests:
    requests: list[TraceRequest]  # lengths final (tokenized, clipped)
    record: DatasetRecord


def read_dataset(spec: Dataset, *, seed: int, engine: dict[str, Any], max_model_len: int | None) -> DatasetRequests:
    """The requests ``spec`` selects from its file. Raises :class:`UserError` naming the file's lines for bad
    records or requests longer than ``max_model_len`` (``too_long: refuse``), :class:`TokenizerMissing` for text
    without a tokenizer."""
    file = str(spec.path)
    with dataset_file(spec.path) as stream:
        selection = Selection(READERS[spec.format](stream), spec, seed, file)
        requests = list(selection)
        size, digest = file_digest(stream)
    if not requests:
        raise UserError.single(file, "no request selected (check start_s, duration_s and num_prompts)")
    if spec.format.text:
        requests = tokenize(requests, text_tokenizer(engine, spec.format))
    requests, clipped = fit_context(requests, spec, max_model_len, file)
    record = dataset_record(spec, selection.counts, size, digest, requests=len(requests), clipped=clipped)
    return DatasetRequests(requests, record)


def dataset_record(
    spec: Dataset, counts: Counts, size: int, digest: str, *, requests: int, clipped: Clipped
) -> DatasetRecord:
    return {
        "path": str(spec.path),
        "format": spec.format.value,
        "sha256": digest,
        "bytes": size,
        "records_read": counts.records,
        "read_to_end": counts.read_to_end,
        "bad_skipped": counts.bad,
        "bad_examples": counts.bad_examples,
        "before_window": counts.before_window,
        "clipped": clipped.requests,
        "output_clipped": clipped.outputs,
        "requests": requests,
        "sample": spec.sample,
        "schedule": spec.schedule,
        "time_scale": spec.time_scale,
    }


@contextlib.contextmanager
def dataset_file(path: Path) -> Iterator[io.BufferedReader]:
    """``path`` opened as a dataset: a regular file of at most :data:`MAX_DATASET_BYTES`, else :class:`UserError`."""
    try:
        stream = open_regular(path, MAX_DATASET_BYTES)
    except FileNotFoundError:
        raise UserError.single(str(path), "file not found") from None
    except IsADirectoryError:
        raise UserError.single(str(path), "is a directory, not a dataset file") from None
    except OSError as exc:
        raise UserError.single(str(path), f"cannot read: {exc.strerror or exc}") from None
    with stream:
        yield stream


def file_digest(stream: io.BufferedReader) -> tuple[int, str]:
    """The file's size and sha256, whatever was read of it."""
    stream.seek(0)
    digest = hashlib.file_digest(stream, "sha256").hexdigest()
    return stream.tell(), digest


def text_tokenizer(engine: dict[str, Any], fmt: Format) -> Any:
    """The tokenizer vLLM would use for the experiment's model (``engine.tokenizer`` or the model itself)."""
    model = str(engine.get("tokenizer") or engine.get("model", ""))
    hint = "use a model directory with its tokenizer, a hub id in the offline cache, or a format of token counts"
    if model.startswith(BUILTIN_PREFIX):
        raise TokenizerMissing(f"{fmt.value} prompts are text and the bundled {model} has no tokenizer: {hint}")
    try:
        return load_tokenizer(model, trust_remote_code=bool(engine.get("trust_remote_code", False)))
    except LookupError as exc:
        raise TokenizerMissing(f"{fmt.value} prompts are text: {exc}; {hint}") from None


class Clipped(NamedTuple):
    """What ``too_long: clip`` changed: requests clipped (each lost prompt tokens), and those of them whose output
    alone did not fit either and was shortened too."""

    requests: int = 0
    outputs: int = 0


def fit_context(
    requests: list[TraceRequest], spec: Dataset, max_model_len: int | None, file: str
) -> tuple[list[TraceRequest], Clipped]:
    """Requests whose prompt plus output exceed ``max_model_len``: refused (naming their lines) or clipped (the
    prompt shortened first, keeping its prefix, so the request keeps its decode: its output up to
    ``max_model_len - 1`` tokens); counted, never dropped silently."""
    if max_model_len is None:
        return requests, Clipped()

    def length(r: TraceRequest) -> int:
        return (r.input_length or 0) + (r.output_length or 0)

    long = [r for r in requests if length(r) > max_model_len]
    if not long:
        return requests, Clipped()
    if spec.too_long == "refuse":
        problems = [
            Problem(
                f"{r.input_length} + {r.output_length} tokens, more than max_model_len {max_model_len}", line=r.line
            )
            for r in long[:MAX_REPORTED]
        ]
        many = f"{len(long)} requests are" if len(long) > 1 else "1 request is"
        problems.append(Problem(f"{many} too long in all (too_long: clip clips them)"))
        raise UserError(file, problems)
    fitted = [_clip(r, max_model_len) if length(r) > max_model_len else r for r in requests]
    pairs = zip(requests, fitted, strict=True)
    outputs = sum(after is not before and after.output_length != (before.output_length or 1) for before, after in pairs)
    return fitted, Clipped(len(long), outputs)


def _clip(request: TraceRequest, max_model_len: int) -> TraceRequest:
    """The output kept (up to ``max_model_len - 1``), the prompt's prefix shortened to what is left: clipping the
    prompt to the whole context left a replayed long-context trace with one output token per request, no decode."""
    output = min(request.output_length or 1, max_model_len - 1)
    prompt = min(request.input_length or 0, max_model_len - output)
    ids = request.prompt_ids[:prompt] if request.prompt_ids is not None else None
    return replace(request, input_length=prompt, output_length=output, prompt_ids=ids)


def model_max_len(engine: dict[str, Any]) -> int | None:
    """``engine.max_model_len``, else the model's own context length from its ``config.json`` (None if unknown)."""
    explicit = engine.get("max_model_len")
    if isinstance(explicit, int) and not isinstance(explicit, bool):
        return explicit
    model = str(engine.get("model", ""))
    directory = BUILTIN_DIR / model.removeprefix(BUILTIN_PREFIX) if model.startswith(BUILTIN_PREFIX) else Path(model)
    try:
        config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for key in MAX_LEN_KEYS:
        value = config.get(key) if isinstance(config, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def engine_requests(dataset: DatasetRequests, block_size: int, seed: int, vocab_size: int) -> list[RequestSpec]:
    """Token ids for each request: the tokenizer's for text, hash-id blocks (and request-unique tails) otherwise."""
    blocks = HashBlocks(block_size, seed, vocab_size)
    return [
        RequestSpec(list(r.prompt_ids) if r.prompt_ids is not None else blocks.prompt(r), r.output_length or 1)
        for r in dataset.requests
    ]


def trace_offsets(requests: list[TraceRequest], time_scale: float) -> list[float]:
    """Each request's send time: its recorded time after the first selected one, times ``time_scale``."""
    first = requests[0].arrival_s or 0.0
    return [((r.arrival_s or 0.0) - first) * time_scale for r in requests]


def dataset_shape(dataset: DatasetRequests, offsets: list[float] | None) -> WorkloadShape:
    builder = ShapeBuilder()
    for index, r in enumerate(dataset.requests):
        arrival = offsets[index] if offsets is not None else None
        builder.add(r.input_length or 0, r.output_length or 0, arrival, r.hash_ids)
    return builder.shape()
