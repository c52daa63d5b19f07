"""The experiment file's schema: pydantic models, strict (unknown keys refused), frozen."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tuner.config.capacity import CapacitySearch, LoadKnob
from tuner.config.search import Scalar, Search
from tuner.stats import StallRule
from tuner.traffic import Dataset

MAX_TOKENS = 1 << 24  # longer than any model's context
MAX_PROMPTS = 10_000_000
REQUEST_OVERHEAD_BYTES = 8 << 10  # per request: vLLM's Request and sampling state, our timing record


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class FixedLen(_Strict):
    dist: Literal["fixed"]
    value: int = Field(ge=1, le=MAX_TOKENS)

    @property
    def max(self) -> int:
        return self.value


class UniformLen(_Strict):
    dist: Literal["uniform"]
    low: int = Field(ge=1, le=MAX_TOKENS)
    high: int = Field(ge=1, le=MAX_TOKENS)

    @model_validator(mode="after")
    def _ordered(self) -> UniformLen:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        return self

    @property
    def max(self) -> int:
        return self.high


class NormalLen(_Strict):
    dist: Literal["normal"]
    mean: float = Field(gt=0, le=MAX_TOKENS)
    std: float = Field(ge=0, le=MAX_TOKENS)
    low: int = Field(1, ge=1, le=MAX_TOKENS, description="samples are clipped to [low, high]")
    high: int | None = Field(None, ge=1, le=MAX_TOKENS)

    @property
    def max(self) -> int:
        return self.high if self.high is not None else math.ceil(self.mean + 4 * self.std)


LengthDist = Annotated[FixedLen | UniformLen | NormalLen, Field(discriminator="dist")]


class Sampling(_Strict):
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0, description="0 disables top-k")
    ignore_eos: bool = True
    seed: int | None = Field(None, ge=0, le=2**63 - 1)


class Workload(_Strict):
    num_prompts: int = Field(64, ge=1, le=MAX_PROMPTS)
    input_len: LengthDist = FixedLen(dist="fixed", value=32)
    output_len: LengthDist = FixedLen(dist="fixed", value=64)
    rate: float = Field(
        math.inf, gt=0, allow_inf_nan=True, description="requests/s; inf submits everything at once (offline)"
    )
    arrival: Literal["poisson", "fixed"] = "poisson"
    concurrency: int | None = Field(None, ge=1, description="cap on requests in flight (streams)")
    sampling: Sampling = Sampling()
    seed: int = Field(0, ge=0, description="numpy takes no negative seeds")
    dataset: Dataset | None = Field(None, description="requests from a file instead of the synthetic ones")

    @field_validator("rate", mode="before")
    @classmethod
    def _parse_inf(cls, value: Any) -> Any:
        return math.inf if isinstance(value, str) and value.strip().lower() in {"inf", "infinity"} else value

    @model_validator(mode="after")
    def _one_source(self) -> Workload:
        if self.dataset is None:
            return self
        synthetic = [k for k in ("num_prompts", "input_len", "output_len", "arrival") if k in self.model_fields_set]
        if synthetic:
            raise ValueError(
                f"{', '.join(synthetic)}: for synthetic requests only; with a dataset its file gives the requests "
                "(dataset.num_prompts selects how many)"
            )
        if self.dataset.schedule == "trace" and math.isfinite(self.rate):
            raise ValueError("rate and dataset.schedule: trace both set arrival times: keep one")
        return self

    @property
    def streaming(self) -> bool:
        """Offline batch (like `vllm bench throughput`) unless a rate, a concurrency or a trace's schedule shapes
        arrivals."""
        trace = self.dataset is not None and self.dataset.schedule == "trace"
        return math.isfinite(self.rate) or self.concurrency is not None or trace


class Slo(_Strict):
    """Per-request latency targets; a request meeting all of them counts towards goodput."""

    ttft_ms: float | None = Field(None, gt=0)
    tpot_ms: float | None = Field(None, gt=0)
    e2e_ms: float | None = Field(None, gt=0)


class Stalls(_Strict):
    """``measure.stalls``: what a step-level comparison counts as a stall (:mod:`tuner.stats.stall_rate`)."""

    factor: float = Field(3.0, gt=1, le=1000, description="a stall is slower than this times its arm's running median")
    floor_ms: float = Field(20.0, ge=0, le=600_000, description="... and slower than this")

    def rule(self) -> StallRule:
        return StallRule(factor=self.factor, floor_s=self.floor_ms / 1e3)


class Measure(_Strict):
    repetitions: int = Field(3, ge=1, le=1000)
    warmup_prompts: int = Field(8, ge=0, le=MAX_PROMPTS, description="one untimed batch before the first repetition")
    slo: Slo = Field(Slo(), description="targets for goodput_requests_per_s (like `vllm bench serve --goodput`)")
    stalls: Stalls = Field(Stalls(), description="what step-level comparisons count as a stall")


class Serve(_Strict):
    """``mode: serve``: measure through vLLM's OpenAI-compatible HTTP server."""

    endpoint: str | None = Field(
        None, description="base URL of a server already running (measured from outside); none: the tuner starts one"
    )
    ready_timeout_s: float = Field(600, gt=0, description="how long the started server may take to become healthy")
    args: list[str] = Field(default_factory=list, description="extra command-line arguments for the server")
    server_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="how far below the tuner's the started server's CPU priority is (Linux: its session's autogroup "
        "and its processes' nice), so that the client's clock never waits behind the server for a CPU on a host "
        "they share; 0: as the host schedules",
    )

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s/]+/?", value):
            raise ValueError(f"must be a base URL like http://127.0.0.1:8000, got {value!r}")
        return value.rstrip("/") if value is not None else None


class Experiment(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
    engine: dict[str, Any] = Field(default_factory=lambda: {"model": "builtin:opt-tiny"})
    env: dict[str, Scalar] = Field(
        default_factory=dict, description="vLLM's environment variables for every engine start (`vllm.envs` checks)"
    )
    mode: Literal["engine", "serve"] = Field(
        "engine", description="engine: vLLM in this process (LLMEngine/AsyncLLM); serve: over HTTP"
    )
    serve: Serve = Serve()
    workload: Workload = Workload()
    measure: Measure = Measure()
    strategies: dict[str, dict[str, Scalar | None]] = Field(default_factory=dict)
    search: Search | None = None
    capacity: CapacitySearch | None = Field(None, description="how `tuner capacity` searches the SLO's knee")
    output_dir: Path = Path("results")

    @property
    def serving(self) -> Serve | None:
        """The server settings in ``mode: serve``, else None."""
        return self.serve if self.mode == "serve" else None

    def load_knob(self) -> LoadKnob:
        """The workload knob ``tuner capacity`` turns: ``capacity.load``, else the one the workload uses (a trace's
        speed, a rate, then a concurrency cap); ValueError saying why there is none."""
        workload, trace = self.workload, self.workload.dataset is not None and self.workload.dataset.schedule == "trace"
        usable = {
            LoadKnob.SPEED: trace,
            LoadKnob.RATE: math.isfinite(workload.rate),
            LoadKnob.CONCURRENCY: workload.concurrency is not None,
        }
        wanted = self.capacity.load if self.capacity is not None else None
        if wanted is not None and not usable[wanted]:
            needs = {
                LoadKnob.SPEED: "workload.dataset.schedule: trace",
                LoadKnob.RATE: "a finite workload.rate",
                LoadKnob.CONCURRENCY: "workload.concurrency",
            }
            raise ValueError(f"load {wanted.value} needs {needs[wanted]}")
        found = wanted or next((knob for knob, ok in usable.items() if ok), None)
        if found is None:
            raise ValueError(
                "the workload sends everything at once: capacity needs a load to turn (a trace replayed with "
                "dataset.schedule: trace, a rate, or a concurrency)"
            )
        return found

    @model_validator(mode="after")
    def _endpoint_is_measured_as_is(self) -> Experiment:
        if self.serve != Serve() and self.mode != "serve":
            raise ValueError("a `serve:` section needs `mode: serve`")
        if self.mode == "serve" and self.serve.endpoint is not None:
            switched = sorted(self.strategies) + sorted(self.search.space if self.search else ()) + sorted(self.env)
            if switched:
                raise ValueError(
                    f"serve.endpoint is a server the tuner did not start: it cannot apply or search {switched} "
                    "(leave serve.endpoint out to let the tuner start the server)"
                )
        return self

    @field_validator("strategies", mode="before")
    @classmethod
    def _none_means_defaults(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: ({} if v is None else v) for k, v in value.items()}
        return value
