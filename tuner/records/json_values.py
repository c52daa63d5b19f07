"""JSON values, for the record fields whose keys are not the tuner's: vLLM's engine arguments, a strategy's and
Optuna's parameters, the experiment file as loaded. Read-only (``Mapping``, ``Sequence``), so that a writer's
narrower dict (``dict[str, int]``) is one of them too."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = JsonScalar | Sequence["JsonValue"] | Mapping[str, "JsonValue"]
JsonObject: TypeAlias = Mapping[str, JsonValue]
StrategyParams: TypeAlias = Mapping[str, Mapping[str, JsonValue]]
"""Per strategy name, its parameters (``{}``: its defaults)."""
