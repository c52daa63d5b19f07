"""``tuner strategies list`` (one line per strategy, to fit a terminal) and ``tuner strategies show NAME``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from strategies import Param, Strategy
from tuner.cli.output import console, fail, user_errors

COLUMNS = ("name", "applies", "switchable", "upstream", "description")


def strategies_list() -> None:
    """One line per strategy: whether it applies to the installed vLLM, how it is compared, where vLLM stands on it
    and what it does (`tuner strategies show NAME` for the rest)."""
    from strategies import strategy_classes

    upstream_of = _upstream_status()
    with user_errors():
        rows = [
            (name, "yes" if cls().applicable().ok else "no", _switch_kind(cls), upstream_of(cls), cls.description)
            for name, cls in strategy_classes().items()
        ]
    widths = [max(len(column), *(len(row[i]) for row in rows)) for i, column in enumerate(COLUMNS[:3])]
    text_width = max(12, (console.width - sum(widths) - 3 * len(COLUMNS) - 1) // 2)  # borders and padding
    table = Table(title="strategies (`tuner strategies show NAME` for the rest)")
    for column, width in zip(COLUMNS, [*widths, text_width, text_width], strict=True):
        table.add_column(column, no_wrap=True, overflow="ellipsis", min_width=width, max_width=width)
    for row in rows:
        table.add_row(*row)
    console.print(table)


def strategies_show(name: Annotated[str, typer.Argument(help="a strategy's name (`tuner strategies list`)")]) -> None:
    """Everything about one strategy: whether and why it applies, its vLLM releases and code paths, where vLLM
    stands on it, how it is switched, its processes and parameters."""
    from strategies import strategy_classes

    with user_errors():
        classes = strategy_classes()
        if name not in classes:
            fail(f"unknown strategy {name!r} (known: {', '.join(classes)})")
        cls = classes[name]
        verdict = cls().applicable()
    table = Table(title=name, show_header=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    rows = {
        "description": cls.description,
        "applies": "yes" if verdict.ok else f"no: {verdict.reason}",
        "vLLM": cls.vllm_versions.replace(",", ", ") or "any",
        "upstream": _upstream_status()(cls),
        "code paths": cls.paths or "-",
        "switchable": _switchable(cls),
        "processes": ", ".join(sorted(r.value for r in cls.roles)),
        "parameters": "\n".join(_describe_param(p) for p in cls.params) or "-",
    }
    for field, value in rows.items():
        table.add_row(field, escape(value))
    console.print(table)


def _upstream_status() -> Callable[[type[Strategy]], str]:
    """Where vLLM stands on a strategy, for the installed vLLM's release (read from its source, not imported)."""
    from strategies.framework import installed_root, source_version

    root = installed_root()
    installed = source_version(root) if root is not None else None
    return lambda cls: cls.upstream.status(installed)


def _switch_kind(cls: type[Strategy]) -> str:
    return "per step" if cls.step_switchable else "between runs" if cls.switchable else "restart"


def _switchable(cls: type[Strategy]) -> str:
    """When a strategy can be switched on a running engine: per step, or only between runs (and why)."""
    if cls.step_switchable:
        return "per step"
    return f"{_switch_kind(cls)}: {cls.run_level_reason}"


def _describe_param(param: Param) -> str:
    bounds = f" [{param.low:g}, {param.high:g}]" if param.low is not None and param.high is not None else ""
    return f"{param.name}: {param.kind} = {param.default}{bounds}"
