"""Experiment files: pydantic models and the YAML loader.

Every failure, whether YAML syntax, unknown key, wrong type, impossible value or unknown engine argument,
becomes a :class:`~tuner.errors.UserError` whose lines name the file, the line and the field.

One module per job: ``models`` (the schema), ``search`` (its ``search:`` section), ``yaml_source`` (reading and
locating), ``checks`` (against vLLM and this machine); :func:`load_experiment` puts them together.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from tuner.config.capacity import CapacitySearch, Contention, LoadKnob, Tier
from tuner.config.checks import (
    check_capacity,
    check_dataset,
    check_engine_args,
    check_engine_configs,
    check_env,
    check_lengths,
    check_search,
    check_strategies,
    check_workload_memory,
    context_limit,
)
from tuner.config.models import (
    Experiment,
    FixedLen,
    LengthDist,
    Measure,
    NormalLen,
    Sampling,
    Serve,
    Slo,
    UniformLen,
    Workload,
)
from tuner.config.search import RESTART_HEADS, Constraint, Objective, Pairs, Range, Scalar, Search, split_key
from tuner.config.start import StartConfig
from tuner.config.yaml_source import read_yaml, validation_problems
from tuner.errors import UserError


def load_experiment(path: Path | str) -> Experiment:
    """Load and validate an experiment file (engine args and strategies included)."""
    path = Path(path)
    data, root = read_yaml(path)
    try:
        experiment = Experiment.model_validate(data)
    except ValidationError as exc:
        raise UserError(str(path), validation_problems(exc, data, root)) from None
    problems = check_engine_args(experiment.engine, root) + check_strategies(experiment.strategies, root)
    problems += (
        check_env(experiment.env, root)
        + check_lengths(experiment, root)
        + check_workload_memory(experiment.workload, root)
    )
    if experiment.search is not None:
        problems += check_search(experiment.search, experiment.engine, root, experiment.env)
    if experiment.capacity is not None:
        problems += check_capacity(experiment, root)
    if not problems and experiment.serve.endpoint is None:
        problems = check_engine_configs(experiment, root)
    if not problems:
        problems = check_dataset(experiment, root)
    if problems:
        raise UserError(str(path), problems)
    return experiment


__all__ = [
    "RESTART_HEADS",
    "CapacitySearch",
    "Constraint",
    "Contention",
    "Experiment",
    "FixedLen",
    "LengthDist",
    "LoadKnob",
    "Measure",
    "NormalLen",
    "Objective",
    "Pairs",
    "Range",
    "Sampling",
    "Scalar",
    "Search",
    "Serve",
    "Slo",
    "StartConfig",
    "Tier",
    "UniformLen",
    "Workload",
    "check_capacity",
    "context_limit",
    "load_experiment",
    "split_key",
]
