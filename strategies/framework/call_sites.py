"""Requirements that scan the whole vLLM tree: how every module that mentions a function reaches it, so that a
strategy that patches the function (or refuses to) knows it meets every call."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from strategies.framework.source_tree import SCOPED, files_containing, location, parse


def _scoped(node: ast.AST, scope: str = "") -> Iterator[tuple[str, ast.AST]]:
    """Every node under ``node`` with the dotted name of the class or function enclosing it ("" at module level)."""
    for child in ast.iter_child_nodes(node):
        inner = f"{scope}.{child.name}".lstrip(".") if isinstance(child, SCOPED) else scope
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
            parsed = parse(vllm_root, path)
            if isinstance(parsed, str):
                return f"{parsed} (it mentions {self.function})"
            node = next(self._unreached(parsed.tree, path), None)
            if node is not None:
                return (
                    f"{self.module}.{self.function} is used as `{ast.unparse(node)}` at {location(path, node)}, "
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
        return files_containing(vllm_root, self.function)


@dataclass(frozen=True)
class NoDirectCalls:
    """No code in the tree calls ``module.function()`` directly except in the ``allowed`` ``(path, scope)`` pairs,
    each a place known not to matter (e.g. ``gc.freeze()`` that is undone right away)."""

    module: str
    function: str
    allowed: tuple[tuple[str, str], ...] = ()

    def check(self, vllm_root: Path) -> str | None:
        for path in self.files(vllm_root):
            parsed = parse(vllm_root, path)
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
                        f"{self.module}.{self.function}() is called directly at {location(path, node)} "
                        f"(in {scope or 'module level'}), not through a function a strategy can patch"
                    )
        return None

    def files(self, vllm_root: Path) -> tuple[str, ...]:
        """The files that mention ``function`` and import from ``module`` (one import per line, as ruff wants)."""
        importers = {
            *files_containing(vllm_root, f"import {self.module}"),
            *files_containing(vllm_root, f"from {self.module} import"),
        }
        return tuple(path for path in files_containing(vllm_root, self.function) if path in importers)


def _import_names(tree: ast.Module, module: str, function: str) -> tuple[set[str], set[str]]:
    """The names ``tree`` binds to ``module`` and to ``module.function``, wherever it imports them."""
    modules, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name == module}
        elif isinstance(node, ast.ImportFrom) and node.module == module and not node.level:
            functions |= {a.asname or a.name for a in node.names if a.name == function}
    return modules, functions
