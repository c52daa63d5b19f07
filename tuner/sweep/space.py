"""How one Optuna trial becomes a configuration and back: suggesting the space's entries, the grid of a
categorical space, and the baseline's params (the sweep's side of :mod:`tuner.config.search`)."""

from __future__ import annotations

import itertools
from typing import Any

from tuner.config import RESTART_HEADS, Range, Scalar, StartConfig, split_key


def config_from_params(params: dict[str, Any]) -> StartConfig:
    """The configuration a set of Optuna params stands for (absent toggles mean off)."""
    strategies: dict[str, dict[str, Any]] = {}
    starts: dict[str, dict[str, Any]] = {head: {} for head in RESTART_HEADS}
    for key, value in params.items():
        head, tail = split_key(key)
        if head in RESTART_HEADS and tail:
            starts[head][tail] = value
        elif tail is None and value is True:
            strategies.setdefault(head, {})
    for key, value in params.items():
        head, tail = split_key(key)
        if head not in RESTART_HEADS and tail and head in strategies:
            strategies[head][tail] = value
    return StartConfig(engine=starts["engine"], env=starts["env"], strategies=strategies)


def suggest(trial: Any, space: dict[str, list[Scalar] | Range]) -> dict[str, Any]:
    """Ask ``trial`` for every space entry; a strategy's parameters only when it is switched on."""

    def ask(key: str, spec: list[Scalar] | Range) -> Any:
        if isinstance(spec, list):
            return trial.suggest_categorical(key, spec)
        integral = all(float(v).is_integer() for v in (spec.low, spec.high, spec.step or 1))
        if integral:
            return trial.suggest_int(key, int(spec.low), int(spec.high), step=int(spec.step or 1), log=spec.log)
        return trial.suggest_float(key, spec.low, spec.high, step=spec.step, log=spec.log)

    params: dict[str, Any] = {}
    toggles = {k for k in space if split_key(k)[1] is None}
    for key in sorted(space, key=lambda k: (split_key(k)[1] is not None, k)):
        head, tail = split_key(key)
        if tail and head not in RESTART_HEADS and head in toggles and params.get(head) is not True:
            continue
        params[key] = ask(key, space[key])
    return params


def grid(space: dict[str, list[Scalar] | Range]) -> list[dict[str, Any]]:
    """Every distinct configuration of a categorical space, as Optuna params (no duplicates)."""
    keys = sorted(space)
    seen: set[str] = set()
    points = []
    for values in itertools.product(*(space[k] for k in keys)):  # type: ignore[misc]
        params = dict(zip(keys, values, strict=True))
        toggles = {k for k in keys if split_key(k)[1] is None}
        params = {
            k: v
            for k, v in params.items()
            if not (split_key(k)[1] and split_key(k)[0] in toggles and params[split_key(k)[0]] is not True)
        }
        marker = repr(sorted(params.items()))
        if marker not in seen:
            seen.add(marker)
            points.append(params)
    return points


def baseline_params(
    space: dict[str, list[Scalar] | Range], engine: dict[str, Any], env: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Optuna params of vLLM as installed: every toggle off, engine args and environment variables as the
    experiment sets them."""
    fixed = {"engine": engine, "env": env or {}}
    params: dict[str, Any] = {}
    for key in space:
        head, tail = split_key(key)
        if tail is None:
            params[key] = False
        elif head in fixed and tail in fixed[head]:
            params[key] = fixed[head][tail]
    return params
