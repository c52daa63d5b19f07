"""What a patch needs from vLLM's source, checked with ``ast`` on a source tree (vLLM is never imported).

A requirement names a file relative to the ``vllm`` package directory and a symbol in it; ``check`` returns one
line naming the symbol and ``vllm/<path>[:line]`` when the tree does not provide it, else None. The same
declarations are checked against the installed vLLM (:meth:`strategies.Strategy.applicable`) and, in the test
suite, against the unpacked GPU wheels of every release in the support matrix. This module holds the kinds that
look at one symbol; :mod:`strategies.framework.call_sites` those that scan the whole tree, and
:mod:`strategies.framework.source_tree` reads the tree for both.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from strategies.framework.source_tree import locate, location, segment

TESTED_VLLM = ">=0.26,<0.34"
"""The vLLM releases the static check covers: the ``gpu`` extra's floor and tested ceiling."""


class Requirement(Protocol):
    """One thing a patch needs from a vLLM source tree."""

    def check(self, vllm_root: Path) -> str | None:
        """One line naming the symbol and file when ``vllm_root`` does not provide what is needed, else None."""
        ...

    def files(self, vllm_root: Path) -> tuple[str, ...]:
        """The files (relative to ``vllm_root``) whose content decides the check."""
        ...


@dataclass(frozen=True)
class Defined:
    """``symbol`` (``Class.method``, a class field, a module-level name) is defined in the file's own body."""

    path: str
    symbol: str

    def check(self, vllm_root: Path) -> str | None:
        found = locate(vllm_root, self.path, self.symbol)
        return found if isinstance(found, str) else None

    def files(self, vllm_root: Path) -> tuple[str, ...]:
        return (self.path,)


@dataclass(frozen=True, kw_only=True)
class Absent(Defined):
    """``symbol`` is not defined in the file's own body (e.g. a subclass must not override a patched method)."""

    because: str

    def check(self, vllm_root: Path) -> str | None:
        found = locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return None
        return f"{self.symbol} is defined at {location(self.path, found[0])}, but must not be: {self.because}"


@dataclass(frozen=True, kw_only=True)
class Params(Defined):
    """The function's parameter names start with ``names``."""

    names: tuple[str, ...]

    def check(self, vllm_root: Path) -> str | None:
        found = locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node = found[0]
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return f"{self.symbol} at {location(self.path, node)} is not a function"
        args = node.args
        actual = tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
        if actual[: len(self.names)] == self.names:
            return None
        return (
            f"{self.symbol}({', '.join(actual)}) at {location(self.path, node)}: "
            f"parameters do not start with ({', '.join(self.names)})"
        )


@dataclass(frozen=True, kw_only=True)
class Snippet(Defined):
    """``text`` occurs exactly ``count`` times in the source of ``symbol`` (e.g. a line a patch rewrites)."""

    text: str
    count: int = 1

    def check(self, vllm_root: Path) -> str | None:
        found = locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node, module = found
        seen = segment(module, node).count(self.text)
        if seen == self.count:
            return None
        return (
            f"`{self.text}` occurs {seen} times in {self.symbol} at {location(self.path, node)}, expected {self.count}"
        )


@dataclass(frozen=True, kw_only=True)
class Order(Defined):
    """In the source of ``symbol``, ``first`` occurs and comes before ``then``."""

    first: str
    then: str

    def check(self, vllm_root: Path) -> str | None:
        found = locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node, module = found
        source = segment(module, node)
        if -1 < source.find(self.first) < source.find(self.then):
            return None
        return f"`{self.first}` does not come before `{self.then}` in {self.symbol} at {location(self.path, node)}"


@dataclass(frozen=True, kw_only=True)
class AssignedIn(Defined):
    """The method ``symbol`` assigns ``self.<attribute>`` (an instance attribute a patch reads)."""

    attribute: str

    def check(self, vllm_root: Path) -> str | None:
        found = locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node = found[0]
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.ctx, ast.Store)
                and sub.attr == self.attribute
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
            ):
                return None
        return f"{self.symbol} at {location(self.path, node)} does not assign self.{self.attribute}"


# What would stop an instance from taking a new attribute, or pickle from carrying it.
_INSTANCE_DICT_OVERRIDES = ("__slots__", "__setattr__", "__getstate__", "__reduce__", "__reduce_ex__")


@dataclass(frozen=True)
class OpenDataclass(Defined):
    """The class ``symbol`` is decorated only by ``@dataclass``, with neither ``slots`` nor ``frozen`` set, and has
    no bases and none of :data:`_INSTANCE_DICT_OVERRIDES` in its own body: ``setattr`` on an instance adds to its
    ``__dict__``, and pickle carries it. (A Snippet cannot check this: a class's source starts after its decorators.)
    """

    def check(self, vllm_root: Path) -> str | None:
        found = locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node = found[0]
        where = f"{self.symbol} at {location(self.path, node)}"
        if not isinstance(node, ast.ClassDef):
            return f"{where} is not a class"
        decorators = [ast.unparse(d) for d in node.decorator_list]
        dataclass_call = len(node.decorator_list) == 1 and _is_dataclass(node.decorator_list[0])
        if not dataclass_call:
            return f"{where} is decorated {decorators or 'by nothing'}, expected only @dataclass"
        decorator = node.decorator_list[0]
        for keyword in decorator.keywords if isinstance(decorator, ast.Call) else []:
            if keyword.arg in ("slots", "frozen") and not _is_false(keyword.value):
                return f"{where} is decorated @{decorators[0]}: its instances cannot take a new attribute"
        if node.bases or node.keywords:
            return f"{where} has bases ({', '.join(ast.unparse(b) for b in [*node.bases, *node.keywords])})"
        for name in _INSTANCE_DICT_OVERRIDES:
            if not isinstance(locate(vllm_root, self.path, f"{self.symbol}.{name}"), str):
                return f"{where} defines {name}"
        return None


def _is_dataclass(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Name) and target.id == "dataclass") or (
        isinstance(target, ast.Attribute) and target.attr == "dataclass"
    )


def _is_false(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value is False


def unmet(requires: Iterable[Requirement], vllm_root: Path) -> list[str]:
    """The problem of every requirement ``vllm_root`` does not meet, in declaration order."""
    return [problem for requirement in requires if (problem := requirement.check(vllm_root))]
