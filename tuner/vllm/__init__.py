"""The installed vLLM, never imported before it is needed: ``arguments`` (engine args against the installed vLLM:
flags, value checks, the built-in tiny models), ``imports`` (importing vLLM lazily, its environment variables) and
``environment`` (what a result was measured on: versions, hardware, git revision)."""

from tuner.vllm.arguments import (
    BUILTIN_DIR,
    BUILTIN_PREFIX,
    cli_flags,
    condense,
    engine_config,
    resolve_engine_args,
    value_problem,
)
from tuner.vllm.environment import EnvironmentRecord, environment_record
from tuner.vllm.imports import (
    engine_arg_names,
    env_overlay,
    env_problem,
    env_text,
    import_vllm,
    set_quiet_env,
    versions,
)

__all__ = [
    "BUILTIN_DIR",
    "BUILTIN_PREFIX",
    "EnvironmentRecord",
    "cli_flags",
    "condense",
    "engine_arg_names",
    "engine_config",
    "env_overlay",
    "env_problem",
    "env_text",
    "environment_record",
    "import_vllm",
    "resolve_engine_args",
    "set_quiet_env",
    "value_problem",
    "versions",
]
