"""What a patch needs from vLLM's source, checked with ``ast`` on a source tree (vLLM is never imported).

A requirement names a file relative to the ``vllm`` package directory and a symbol in it; ``check`` returns one
line naming the symbol and ``vllm/<path>[:line]`` when the tree does not provide it, else None. The same
declarations are checked against the installed vLLM (:meth:`strategies.Strategy.applicable`) and, in the test
suite, against the unpacked GPU wheels of every release in the support matrix.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import NamedTuple, Protocol

from packaging.specifiers import SpecifierSet
from packaging.version import Version

TESTED_VLLM = ">=0.26,<0.34"
"""The vLLM releases the static check covers: the ``gpu`` extra's floor and tested ceiling."""

_Scoped = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


class Requirement(Protocol):
    """One thing a patch needs from a vLLM source tree."""

    def check(self, vllm_root: Path) -> str | None:
        """One line naming the symbol and file when ``vllm_root`` does not provide what is needed, else None."""
        ...

    def files(self, vllm_root: Path) -> tuple[str, ...]:
        """The files (relative to ``vllm_root``) whose content decides the check."""
        ...


class _Module(NamedTuple):
    tree: ast.Module
    lines: list[str]


@lru_cache(maxsize=64)  # a release's files all fit; bounded, as the trees of many releases are large
def _parse(vllm_root: Path, path: str) -> _Module | str:
    """The parsed file, or why it cannot be parsed (cached per root and path)."""
    file = vllm_root / path
    try:
        source = file.read_text(encoding="utf-8")
        return _Module(ast.parse(source, filename=str(file)), source.splitlines())
    except FileNotFoundError:
        return f"vllm/{path} does not exist"
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return f"cannot parse vllm/{path}: {exc}"


@cache
def _py_files(vllm_root: Path) -> tuple[str, ...]:
    return tuple(sorted(p.relative_to(vllm_root).as_posix() for p in vllm_root.rglob("*.py")))


@cache
def _files_containing(vllm_root: Path, text: str) -> tuple[str, ...]:
    needle = text.encode()
    return tuple(path for path in _py_files(vllm_root) if needle in (vllm_root / path).read_bytes())


def _binds(stmt: ast.stmt, name: str) -> bool:
    """Whether a statement of a module or class body binds ``name``."""
    if isinstance(stmt, _Scoped):
        return stmt.name == name
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return any((a.asname or a.name.split(".")[0]) == name for a in stmt.names)
    return False


def _locate(vllm_root: Path, path: str, symbol: str) -> tuple[ast.stmt, _Module] | str:
    """The statement defining dotted ``symbol`` in the file's own bodies (the last binding wins), or why not."""
    module = _parse(vllm_root, path)
    if isinstance(module, str):
        return f"{module} (needed for {symbol})"
    body: list[ast.stmt] = module.tree.body
    found: ast.stmt | None = None
    parts = symbol.split(".")
    for depth, part in enumerate(parts):
        found = next((stmt for stmt in reversed(body) if _binds(stmt, part)), None)
        if found is None:
            owner = ".".join(parts[:depth])
            where = f" (not in {owner}'s own body)" if owner else ""
            return f"{symbol} is not defined in vllm/{path}{where}"
        body = found.body if isinstance(found, ast.ClassDef) else []
    assert found is not None
    return found, module


def _where(path: str, node: ast.AST) -> str:
    return f"vllm/{path}:{getattr(node, 'lineno', '?')}"


def _segment(module: _Module, node: ast.stmt) -> str:
    return "\n".join(module.lines[node.lineno - 1 : node.end_lineno])


@dataclass(frozen=True)
class Defined:
    """``symbol`` (``Class.method``, a class field, a module-level name) is defined in the file's own body."""

    path: str
    symbol: str

    def check(self, vllm_root: Path) -> str | None:
        found = _locate(vllm_root, self.path, self.symbol)
        return found if isinstance(found, str) else None

    def files(self, vllm_root: Path) -> tuple[str, ...]:
        return (self.path,)


@dataclass(frozen=True, kw_only=True)
class Absent(Defined):
    """``symbol`` is not defined in the file's own body (e.g. a subclass must not override a patched method)."""

    because: str

    def check(self, vllm_root: Path) -> str | None:
        found = _locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return None
        return f"{self.symbol} is defined at {_where(self.path, found[0])}, but must not be: {self.because}"


@dataclass(frozen=True, kw_only=True)
class Params(Defined):
    """The function's parameter names start with ``names``."""

    names: tuple[str, ...]

    def check(self, vllm_root: Path) -> str | None:
        found = _locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node = found[0]
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            return f"{self.symbol} at {_where(self.path, node)} is not a function"
        args = node.args
        actual = tuple(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
        if actual[: len(self.names)] == self.names:
            return None
        return (
            f"{self.symbol}({', '.join(actual)}) at {_where(self.path, node)}: "
            f"parameters do not start with ({', '.join(self.names)})"
        )


@dataclass(frozen=True, kw_only=True)
class Snippet(Defined):
    """``text`` occurs exactly ``count`` times in the source of ``symbol`` (e.g. a line a patch rewrites)."""

    text: str
    count: int = 1

    def check(self, vllm_root: Path) -> str | None:
        found = _locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node, module = found
        seen = _segment(module, node).count(self.text)
        if seen == self.count:
            return None
        return f"`{self.text}` occurs {seen} times in {self.symbol} at {_where(self.path, node)}, expected {self.count}"


@dataclass(frozen=True, kw_only=True)
class Order(Defined):
    """In the source of ``symbol``, ``first`` occurs and comes before ``then``."""

    first: str
    then: str

    def check(self, vllm_root: Path) -> str | None:
        found = _locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node, module = found
        source = _segment(module, node)
        if -1 < source.find(self.first) < source.find(self.then):
            return None
        return f"`{self.first}` does not come before `{self.then}` in {self.symbol} at {_where(self.path, node)}"


@dataclass(frozen=True, kw_only=True)
class AssignedIn(Defined):
    """The method ``symbol`` assigns ``self.<attribute>`` (an instance attribute a patch reads)."""

    attribute: str

    def check(self, vllm_root: Path) -> str | None:
        found = _locate(vllm_root, self.path, self.symbol)
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
        return f"{self.symbol} at {_where(self.path, node)} does not assign self.{self.attribute}"


# What would stop an instance from taking a new attribute, or pickle from carrying it.
_INSTANCE_DICT_OVERRIDES = ("__slots__", "__setattr__", "__getstate__", "__reduce__", "__reduce_ex__")


@dataclass(frozen=True)
class OpenDataclass(Defined):
    """The class ``symbol`` is decorated only by ``@dataclass``, with neither ``slots`` nor ``frozen`` set, and has
    no bases and none of :data:`_INSTANCE_DICT_OVERRIDES` in its own body: ``setattr`` on an instance adds to its
    ``__dict__``, and pickle carries it. (A Snippet cannot check this: a class's source starts after its decorators.)
    """

    def check(self, vllm_root: Path) -> str | None:
        found = _locate(vllm_root, self.path, self.symbol)
        if isinstance(found, str):
            return found
        node = found[0]
        where = f"{self.symbol} at {_where(self.path, node)}"
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
            if not isinstance(_locate(vllm_root, self.path, f"{self.symbol}.{name}"), str):
                return f"{where} defines {name}"
        return None


def _is_dataclass(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return (isinstance(target, ast.Name) and target.id == "dataclass") or (
        isinstance(target, ast.Attribute) and target.attr == "dataclass"
    )


def _is_false(value: ast.expr) -> bool:
    return isinstance(value, ast.Constant) and value.value is False


def _scoped(node: ast.AST, scope: str = "") -> Iterator[tuple[str, ast.AST]]:
    """Every node under ``node`` with the dotted name of the class or function enclosing it ("" at module level)."""
    for child in ast.iter_child_nodes(node):
        inner = f"{scope}.{child.name}".lstrip(".") if isinstance(child, _Scoped) else scope
        yield scope, child
        yield from _scoped(child, inner)


def _absolute(node: ast.ImportFrom, path: str) -> str:
    """The module an ``from ... import`` in ``vllm/<path>`` imports from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = ["vllm", *Path(path).parent.parts]
    base = package[: len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


@dataclass(frozen=True)
class CallSites:
    """Every module that mentions ``function`` (found by scanning the tree) binds it in a way that patching
    ``module.function`` and rebinding that name in the imported modules reaches: ``from module import function``
    without an alias, then ``function(...)``, or ``<module's last part>.function(...)``."""

    module: str
    function: str

    def check(self, vllm_root: Path) -> str | None:
        for path in self.files(vllm_root):
            parsed = _parse(vllm_root, path)
            if isinstance(parsed, str):
                return f"{parsed} (it mentions {self.function})"
            node = next(self._unreached(parsed.tree, path), None)
            if node is not None:
                return (
                    f"{self.module}.{self.function} is used as `{ast.unparse(node)}` at {_where(path, node)}, "
                    "which patching the module and rebinding the name in imported modules does not reach"
                )
        return None

    def _unreached(self, tree: ast.Module, path: str) -> Iterator[ast.AST]:
        """The uses of ``function`` in ``tree`` other than the three forms the patch reaches."""
        short = self.module.rsplit(".", 1)[-1]
        callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                aliases = [a for a in node.names if a.name == self.function]
                if aliases and (_absolute(node, path) != self.module or any(a.asname for a in aliases)):
                    yield node
            elif isinstance(node, ast.Name) and node.id == self.function and id(node) not in callees:
                yield node
            elif isinstance(node, ast.Attribute) and node.attr == self.function:
                via_module = isinstance(node.value, ast.Name) and node.value.id == short
                if id(node) not in callees or not via_module:
                    yield node

    def files(self, vllm_root: Path) -> tuple[str, ...]:
        return _files_containing(vllm_root, self.function)


@dataclass(frozen=True)
class NoDirectCalls:
    """No code in the tree calls ``module.function()`` directly except in the ``allowed`` ``(path, scope)`` pairs,
    each a place known not to matter (e.g. ``gc.freeze()`` that is undone right away)."""

    module: str
    function: str
    allowed: tuple[tuple[str, str], ...] = ()

    def check(self, vllm_root: Path) -> str | None:
        for path in self.files(vllm_root):
            parsed = _parse(vllm_root, path)
            if isinstance(parsed, str):
                return f"{parsed} (it mentions {self.function})"
            modules, functions = _import_names(parsed.tree, self.module, self.function)
            for scope, node in _scoped(parsed.tree):
                if not isinstance(node, ast.Call) or (path, scope) in self.allowed:
                    continue
                func = node.func
                if (isinstance(func, ast.Name) and func.id in functions) or (
                    isinstance(func, ast.Attribute)
                    and func.attr == self.function
                    and isinstance(func.value, ast.Name)
                    and func.value.id in modules
                ):
                    return (
                        f"{self.module}.{self.function}() is called directly at {_where(path, node)} "
                        f"(in {scope or 'module level'}), not through a function a strategy can patch"
                    )
        return None

    def files(self, vllm_root: Path) -> tuple[str, ...]:
        """The files that mention ``function`` and import from ``module`` (one import per line, as ruff wants)."""
        importers = {
            *_files_containing(vllm_root, f"import {self.module}"),
            *_files_containing(vllm_root, f"from {self.module} import"),
        }
        return tuple(path for path in _files_containing(vllm_root, self.function) if path in importers)


def _import_names(tree: ast.Module, module: str, function: str) -> tuple[set[str], set[str]]:
    """The names ``tree`` binds to ``module`` and to ``module.function``, wherever it imports them."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == module}
        elif isinstance(node, ast.ImportFrom) and node.module == module and not node.level:
            functions |= {a.asname or a.name for a in node.names if a.name == function}
    return modules, functions


def forget_sources() -> None:
    """Drop the parsed trees and file scans: they are large, and every object kept alive is work for the GC of the
    process that checked (the tuner's front-end is the engine's front-end in offline and streaming modes)."""
    _parse.cache_clear()
    _files_containing.cache_clear()
    _py_files.cache_clear()


def unmet(requires: Iterable[Requirement], vllm_root: Path) -> list[str]:
    """The problem of every requirement ``vllm_root`` does not meet, in declaration order."""
    return [problem for requirement in requires if (problem := requirement.check(vllm_root))]


@cache
def installed_root() -> Path | None:
    """The installed ``vllm`` package directory, found without importing vLLM (None when not installed)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def source_version(vllm_root: Path) -> Version | None:
    """The release of a vLLM source tree, read from its ``_version.py`` (None when it has none)."""
    found = _locate(vllm_root, "_version.py", "__version__")
    value = None if isinstance(found, str) else getattr(found[0], "value", None)
    return Version(value.value) if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


def admits(specifier: str, version: Version) -> bool:
    """Whether the PEP 440 ``specifier`` ("" admits all) includes ``version``, development builds included."""
    return SpecifierSet(specifier).contains(version, prereleases=True)
