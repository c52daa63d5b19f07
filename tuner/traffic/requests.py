"""What is sent to the engine: one request's prompt token ids and output length."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RequestSpec:
    prompt_token_ids: list[int]
    max_tokens: int
