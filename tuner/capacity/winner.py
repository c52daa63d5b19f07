"""The configuration ``tuner capacity`` compares against the reference: a sweep's ``winner.yaml``, or the
experiment's own ``strategies:``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tuner.config import Experiment, StartConfig
from tuner.errors import UserError
from tuner.inputs import read_regular

WINNER_KEYS = {"engine", "env", "strategies"}
MAX_WINNER_BYTES = 1 << 20


def configuration_from(experiment: Experiment, against: Path | None) -> StartConfig:
    """``against`` (a winner file: ``strategies``, ``engine``, ``env``) or, without it, the experiment's
    ``strategies:`` with ``capacity.engine`` and ``capacity.env``; a file that is not one is refused with what is
    wrong."""
    if against is None:
        settings = experiment.capacity
        engine, env = (dict(settings.engine), dict(settings.env)) if settings else ({}, {})
        return StartConfig(engine=engine, env=env, strategies=dict(experiment.strategies))
    try:
        data: Any = yaml.safe_load(read_regular(against, MAX_WINNER_BYTES).decode("utf-8"))
    except OSError as exc:
        raise UserError.single(str(against), f"cannot read: {exc.strerror or exc}", "--against") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise UserError.single(str(against), f"not a YAML text file: {exc}", "--against") from None
    if not isinstance(data, dict) or not set(data) <= WINNER_KEYS or not isinstance(data.get("strategies"), dict):
        raise UserError.single(
            str(against), "not a winner file: expected `strategies:` (and `engine:`, `env:`) as `tuner sweep` writes"
        )
    strategies = {name: dict(params or {}) for name, params in data["strategies"].items()}
    return StartConfig(engine=dict(data.get("engine") or {}), env=dict(data.get("env") or {}), strategies=strategies)
