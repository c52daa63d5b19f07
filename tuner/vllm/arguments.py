"""Engine args against the installed vLLM: command-line flags, value checks, and vLLM's refusals on one line.

vLLM defines its arguments twice, both usable here without copying a schema: the command-line parser built from
``EngineArgs`` (types, choices, JSON for dicts) and the config dataclasses ``create_engine_config`` validates
(ranges and cross-field rules, e.g. ``gpu_memory_utilization <= 1``). A value is checked against both before any
engine starts, so a wrong one costs a second, not an engine start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

from tuner.vllm.imports import import_vllm

BUILTIN_PREFIX = "builtin:"
"""``model: builtin:NAME`` is one of the tiny configs bundled with the tuner, run with dummy weights."""
BUILTIN_DIR = Path(__file__).parent.parent / "models"


def cli_flags(args: Mapping[str, Any]) -> list[str]:
    """``EngineArgs`` values as ``vllm serve`` flags (the one mapping: serve mode and ``winner.env`` use it).

    ``None`` leaves the default; booleans become ``--flag`` / ``--no-flag``; mappings are JSON; lists give one
    value per item. A single value is attached to its flag (``--name=value``), so one that begins with ``-``
    (``-1``, ``-0.5``) is never read as an option.
    """
    flags: list[str] = []
    for key, value in args.items():
        name = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            flags.append(name if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):  # any YAML mapping: keys of mixed types, dates (str() of what JSON lacks)
            flags.append(f"{name}={json.dumps(value, default=str)}")
        elif isinstance(value, list):
            flags += [name, *(json.dumps(v, default=str) if isinstance(v, dict) else str(v) for v in value)]
        else:
            flags.append(f"{name}={value}")
    return flags


class _Refused(ValueError):
    """vLLM's parser refused an argument (it would print usage and exit otherwise)."""


@cache
def _parser() -> Any:
    import_vllm()
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    class Parser(FlexibleArgumentParser):  # type: ignore[misc]
        def error(self, message: str) -> Any:
            raise _Refused(message)

    return EngineArgs.add_cli_args(Parser(add_help=False))


def value_problem(key: str, value: Any) -> str | None:
    """Why vLLM's own argument definition refuses ``key: value`` (None when it takes it)."""
    try:
        _parser().parse_args(["--model", "_", *cli_flags({key: value})])
    except _Refused as exc:
        return re.sub(r"^argument [^:]+: ", "", str(exc))
    except Exception as exc:  # vLLM's own pre-parsing can fail outright on odd values (e.g. list items like -0.5)
        return f"vLLM's argument parser cannot read {value!r} ({type(exc).__name__})"
    return None


def engine_config(args: dict[str, Any]) -> tuple[Any, tuple[str | None, str] | None]:
    """The ``VllmConfig`` vLLM resolves from ``args`` (resolved engine args): model runner, scheduling, executor,
    parallelism, as the engine will run them. On a refusal: ``(None, (engine arg it names or None, reason))``."""
    import_vllm()
    from vllm.engine.arg_utils import EngineArgs

    with _quiet("vllm"):  # a check, not a start: vLLM's info and warnings belong to the real engine start
        try:
            return EngineArgs(**args).create_engine_config(), None
        except Exception as exc:
            return None, (_named_field(exc, args), condense(exc))


@contextlib.contextmanager
def _quiet(logger_name: str) -> Iterator[None]:
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _named_field(exc: Exception, args: dict[str, Any]) -> str | None:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            locs = [str(part) for error in errors() for part in error.get("loc", ())]
        except Exception:  # not pydantic's errors()
            locs = []
        aliases = {"cache_dtype": "kv_cache_dtype"}
        for loc in locs:
            name = aliases.get(loc, loc)
            if name in args:
                return name
    text = str(exc)
    named = [key for key in args if re.search(rf"\b{re.escape(key)}\b", text)]
    return max(named, key=len, default=None)  # `max_model_len` over `model`


def condense(exc: BaseException) -> str:
    """One line for a vLLM refusal: pydantic's first error without its link, else the first line of the message."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ()) if not str(p).startswith("function-"))
            message = str(first.get("msg", "")).removeprefix("Value error, ")
            title = getattr(exc, "title", "")
            return f"{title}{'.' + where if where else ''}: {message}".lstrip(".: ")
        except Exception:  # not pydantic's errors()
            pass
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else 'no message'}"


def resolve_engine_args(engine: dict[str, Any]) -> dict[str, Any]:
    """Engine args as vLLM gets them: bundled models become a path with dummy weights and no tokenizer."""
    args = dict(engine)
    model = str(args.get("model", ""))
    if model.startswith(BUILTIN_PREFIX):
        args["model"] = str(BUILTIN_DIR / model.removeprefix(BUILTIN_PREFIX))
        args.setdefault("load_format", "dummy")
        args.setdefault("skip_tokenizer_init", True)
    args.setdefault("seed", 0)
    return args
