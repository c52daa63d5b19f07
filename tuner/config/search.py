"""The ``search:`` section of an experiment file: its space, objectives, constraints, pairs and confirmation.

Space keys (values are a list of choices, or ``{low, high, log?, step?}`` for a numeric range):

- ``<strategy>: [false, true]``: whether the strategy is in the set (the baseline has it off);
- ``<strategy>.<param>``: one of its parameters, suggested only in trials that include the strategy;
- ``engine.<arg>``: a vLLM engine argument;
- ``env.<NAME>``: one of vLLM's environment variables (``vllm.envs``).

Engine args, environment variables and restart-only strategies are compared by restart pairs (each arm on an
engine of its own, started afresh); strategies switch in place on one engine.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, Tag, model_validator

from tuner.metrics import HIGHER_IS_BETTER


def yaml_kind(value: Any) -> str:
    """What a parsed YAML value is, in the file's words (for messages)."""
    names = {type(None): "null", bool: "true/false", int: "a number", float: "a number", str: "a string"}
    return {**names, list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def _scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"expected a finite number, got {value}")
    if not isinstance(value, bool | int | float | str):
        raise ValueError(f"expected true/false, a number or a string, got {yaml_kind(value)}")
    return value


Scalar = Annotated[bool | int | float | str, BeforeValidator(_scalar)]
"""A search choice or a strategy parameter: true/false, a finite number or a string."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Range(_Strict):
    low: float
    high: float
    log: bool = False
    step: float | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Range:
        if self.low >= self.high:
            raise ValueError(f"low ({self.low:g}) must be below high ({self.high:g})")
        if self.log and self.low <= 0:
            raise ValueError("a log range needs low > 0")
        return self


class Objective(_Strict):
    metric: str
    direction: Literal["maximize", "minimize"] | None = None

    @property
    def resolved_direction(self) -> Literal["maximize", "minimize"]:
        return self.direction or ("maximize" if self.metric in HIGHER_IS_BETTER else "minimize")


class Constraint(_Strict):
    metric: str
    max: float | None = None
    min: float | None = None

    @model_validator(mode="after")
    def _one_bound(self) -> Constraint:
        if (self.max is None) == (self.min is None):
            raise ValueError("give exactly one of max or min")
        return self

    def violation(self, value: float) -> float:
        """Optuna's convention: <= 0 is feasible."""
        return value - self.max if self.max is not None else self.min - value  # type: ignore[operator]


class Pairs(_Strict):
    min: int = Field(6, ge=2, description="pairs before the first verdict (the rank test needs >= 6)")
    max: int = Field(12, ge=2)

    @model_validator(mode="after")
    def _ordered(self) -> Pairs:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) must not exceed max ({self.max})")
        return self


class Confirm(_Strict):
    """The confirmation phase: the screened candidates re-tested against the baseline with fresh pairs."""

    min_effect: float = Field(0.01, gt=0, lt=1, description="the smallest relative gain worth deploying")
    max_candidates: int = Field(3, ge=1, description="screened trials re-tested (Holm across them)")
    budget_s: float = Field(300, gt=0, description="measuring time per candidate")
    looks: int = Field(4, ge=1, description="group-sequential looks (O'Brien-Fleming)")


def _space_entry_kind(value: Any) -> str | None:
    if isinstance(value, list):
        return "choices"
    return "range" if isinstance(value, dict | Range) else None


SpaceEntry = Annotated[
    Annotated[list[Scalar], Field(min_length=1), Tag("choices")] | Annotated[Range, Tag("range")],
    Discriminator(
        _space_entry_kind,
        custom_error_type="space_entry",
        custom_error_message="expected a list of choices or a range {low, high, log?, step?}",
    ),
]


class Search(_Strict):
    space: dict[str, SpaceEntry] = Field(min_length=1)
    objectives: list[Objective] = Field(default_factory=lambda: [Objective(metric="output_tokens_per_s")], min_length=1)
    constraints: list[Constraint] = Field(default_factory=list)
    sampler: Literal["auto", "grid", "tpe", "nsga2", "random"] = "auto"
    n_trials: int | None = Field(None, ge=1, description="default: the whole grid, else 20")
    timeout_s: float | None = Field(None, gt=0)
    seed: int = Field(0, ge=0, le=2**32 - 1, description="Optuna's samplers take 32-bit seeds")
    pruner: Literal["none", "median"] = "none"
    pairs: Pairs = Pairs()
    confirm: Confirm = Confirm()
    resolution: float | None = Field(
        None, gt=0, lt=1, description="no longer used: screening precision derives from confirm.min_effect"
    )
    method: Literal["auto", "runs", "steps"] = Field(
        "auto", description="runs: paired repetitions; steps: in-engine interleaving; auto: steps where possible"
    )
    step_budget_s: float = Field(120, gt=0, description="time budget of one step-interleaved comparison")
    block_steps: int | None = Field(
        None, ge=1, description="engine steps per interleaved block; default: `tuner calibrate`'s choice, else 1"
    )
    step_estimand: Literal["body", "mean"] = Field(
        "body",
        description="what a step comparison measures offline: body (each step up to twice the running median, the "
        "whole time, pauses included, shown not 0.5% worse) or mean (the plain mean step time)",
    )
    trial_timeout_s: float | None = Field(
        None, gt=0, description="a trial running longer, once its engine is up, is killed and failed"
    )
    heartbeat_s: int = Field(10, ge=1, description="how often a running trial tells the study storage it is alive")
    grace_period_s: int = Field(60, ge=2, description="a running trial silent this long is failed and retried")

    @model_validator(mode="after")
    def _consistent(self) -> Search:
        if self.sampler == "grid" and any(isinstance(v, Range) for v in self.space.values()):
            raise ValueError("the grid sampler needs a list of choices for every space entry, not a range")
        if self.grace_period_s <= self.heartbeat_s:
            raise ValueError(f"grace_period_s ({self.grace_period_s}) must exceed heartbeat_s ({self.heartbeat_s})")
        return self

    @property
    def categorical(self) -> bool:
        return all(isinstance(v, list) for v in self.space.values())

    def notes(self) -> list[str]:
        """What an older experiment file asks for that this version reads differently (said at load)."""
        if self.resolution is None:
            return []
        return [
            f"search.resolution ({self.resolution:g}) is no longer used: a screening comparison spends its budget "
            f"(step_budget_s, pairs.max) and stops earlier only once its CI is no wider than confirm.min_effect "
            f"({self.confirm.min_effect:g}); remove the key"
        ]


RESTART_HEADS = ("engine", "env")
"""Space keys under these heads configure the engine start itself: a trial that changes one is measured by restart
pairs."""


def split_key(key: str) -> tuple[str, str | None]:
    """``"gc_threshold.k"`` -> ``("gc_threshold", "k")``; ``"engine.max_num_seqs"`` likewise."""
    head, _, tail = key.partition(".")
    return head, tail or None
