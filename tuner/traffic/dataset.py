"""``workload.dataset``: which file of requests to replay, how much of it, and how."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_DATASET_BYTES = 8 << 30
"""Trace files are read streaming; the cap refuses a wrong path (a disk image, a log) before hours of reading."""
MAX_SELECTED = 10_000_000


class Format(StrEnum):
    MOONCAKE = "mooncake"
    SHAREGPT = "sharegpt"
    JSONL = "jsonl"
    BURSTGPT = "burstgpt"

    @property
    def timed(self) -> bool:
        """Whether its records carry arrival times."""
        return self in (Format.MOONCAKE, Format.BURSTGPT)

    @property
    def text(self) -> bool:
        """Whether its prompts are text (tokenized with the model's tokenizer) rather than token counts."""
        return self in (Format.SHAREGPT, Format.JSONL)


class Dataset(BaseModel):
    """Requests from a file instead of synthetic ones (``workload.dataset``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    path: Path = Field(description="the file; a relative path is taken from the working directory")
    format: Format
    num_prompts: int | None = Field(None, ge=1, le=MAX_SELECTED, description="how many requests; none: all")
    sample: Literal["first", "random"] = Field("first", description="first: the first N; random: a seeded sample")
    start_s: float = Field(0.0, ge=0, description="traces: skip the requests of the first start_s seconds")
    duration_s: float | None = Field(None, gt=0, description="traces: only requests within this many seconds")
    time_scale: float = Field(
        1.0, gt=0, le=1000, description="recorded times are multiplied by it: 0.5 replays twice as fast"
    )
    schedule: Literal["trace"] | None = Field(
        None, description="trace: send each request at its recorded (scaled) time"
    )
    block_size: int = Field(512, ge=1, le=1 << 20, description="mooncake: tokens per hash id")
    on_error: Literal["refuse", "skip"] = Field("refuse", description="a record that does not parse")
    too_long: Literal["refuse", "clip"] = Field("refuse", description="a request longer than max_model_len")

    @model_validator(mode="after")
    def _options_fit_the_format(self) -> Dataset:
        timed_only = [k for k in ("start_s", "duration_s", "time_scale", "schedule") if k in self.model_fields_set]
        if timed_only and not self.format.timed:
            raise ValueError(f"{', '.join(timed_only)}: {self.format.value} records have no arrival times")
        if "block_size" in self.model_fields_set and self.format is not Format.MOONCAKE:
            raise ValueError("block_size: only mooncake records have hash ids")
        if self.sample == "random" and self.num_prompts is None:
            raise ValueError("sample: random needs num_prompts (how many to draw)")
        return self
