"""Prompt token ids for file requests: generated from Mooncake hash ids (no tokenizer needed), or the model's own
tokenizer for text.

Hash-id blocks are deterministic in the seed and the id alone: the same id gives the same block in every request
and every run, so prefixes shared in a trace are shared in the replay and vLLM's prefix cache sees them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tuner.traffic.records import TraceRequest

FIRST_ORDINARY_TOKEN = 10
"""Low token ids are often special (pad/bos/eos/unk); generated prompts draw above them."""
TOKENIZE_BATCH = 256


class HashBlocks:
    """Token blocks for hash ids (cached: a trace reuses them) and request-unique tails beyond them."""

    def __init__(self, block_size: int, seed: int, vocab_size: int) -> None:
        self.block_size = block_size
        self._seed = seed
        self._high = max(vocab_size - 1, FIRST_ORDINARY_TOKEN + 1)
        self._blocks: dict[int, np.ndarray] = {}

    def block(self, hash_id: int) -> np.ndarray:
        found = self._blocks.get(hash_id)
        if found is None:
            rng = np.random.default_rng([self._seed, hash_id, 0])
            found = self._blocks[hash_id] = rng.integers(FIRST_ORDINARY_TOKEN, self._high, self.block_size)
        return found

    def prompt(self, request: TraceRequest) -> list[int]:
        """``input_length`` tokens: the hash ids' blocks in order, then tokens of this request alone (by its line)
        where the ids cover fewer tokens."""
        assert request.input_length is not None
        length = request.input_length
        ids = request.hash_ids[: -(-length // self.block_size)]
        parts = [self.block(h) for h in ids]
        covered = len(ids) * self.block_size
        if covered < length:
            rng = np.random.default_rng([self._seed, request.line, 1])
            parts.append(rng.integers(FIRST_ORDINARY_TOKEN, self._high, length - covered))
        tokens: list[int] = np.concatenate(parts)[:length].tolist() if parts else []
        return tokens


def load_tokenizer(model: str, *, trust_remote_code: bool = False) -> Any:
    """The model's own tokenizer from a local directory or the offline hub cache; :class:`LookupError` saying why
    when there is none."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise LookupError("text datasets need the transformers package (installed with vLLM)") from None
    try:
        return AutoTokenizer.from_pretrained(model, local_files_only=True, trust_remote_code=trust_remote_code)
    except Exception as exc:  # transformers raises OSError, ValueError, KeyError... for a missing tokenizer
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LookupError(f"no tokenizer for {model} found locally ({first[:200]})") from None


def tokenize(requests: Sequence[TraceRequest], tokenizer: Any) -> list[TraceRequest]:
    """Text requests with their prompt token ids (special tokens added as vLLM adds them to a text prompt) and, for
    a recorded reply, its token count as the output length."""
    done: list[TraceRequest] = []
    for start in range(0, len(requests), TOKENIZE_BATCH):
        batch = requests[start : start + TOKENIZE_BATCH]
        prompts = tokenizer([r.prompt or "" for r in batch])["input_ids"]
        replies = _reply_lengths(batch, tokenizer)
        for request, ids, reply in zip(batch, prompts, replies, strict=True):
            output = request.output_length if request.output_length is not None else max(reply, 1)
            done.append(replace(request, prompt_ids=tuple(ids), input_length=len(ids), output_length=output))
    return done


def _reply_lengths(batch: Iterable[TraceRequest], tokenizer: Any) -> list[int]:
    texts = [r.completion or "" for r in batch]
    if not any(texts):
        return [0] * len(texts)
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
