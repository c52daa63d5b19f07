"""A vLLM source tree read without importing vLLM: where the installed one is, which release a tree is, its files
parsed with ``ast`` (cached until :func:`forget_sources`) and the statement that defines a dotted symbol in one."""

from __future__ import annotations

import ast
import importlib.util
from functools import cache, lru_cache
from pathlib import Path
from typing import NamedTuple

from packaging.specifiers import SpecifierSet
from packaging.version import Version

SCOPED = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
"""The statements that open a scope with a name of their own."""


class Parsed(NamedTuple):
    """One source file: its syntax tree and its lines."""

    tree: ast.Module
    lines: list[str]


@lru_cache(maxsize=64)  # a release's files all fit; bounded, as the trees of many releases are large
def parse(vllm_root: Path, path: str) -> Parsed | str:
    """The parsed file, or why it cannot be parsed (cached per root and path)."""
    file = vllm_root / path
    try:
        source = file.read_text(encoding="utf-8")
        return Parsed(ast.parse(source, filename=str(file)), source.splitlines())
    except FileNotFoundError:
        return f"vllm/{path} does not exist"
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return f"cannot parse vllm/{path}: {exc}"


@cache
def _py_files(vllm_root: Path) -> tuple[str, ...]:
    return tuple(sorted(p.relative_to(vllm_root).as_posix() for p in vllm_root.rglob("*.py")))


@cache
def files_containing(vllm_root: Path, text: str) -> tuple[str, ...]:
    """The Python files of the tree (relative to ``vllm_root``) whose source contains ``text``."""
    needle = text.encode()
    return tuple(path for path in _py_files(vllm_root) if needle in (vllm_root / path).read_bytes())


def _binds(stmt: ast.stmt, name: str) -> bool:
    """Whether a statement of a module or class body binds ``name``."""
    if isinstance(stmt, SCOPED):
        return stmt.name == name
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        return any((a.asname or a.name.split(".")[0]) == name for a in stmt.names)
    return False


def locate(vllm_root: Path, path: str, symbol: str) -> tuple[ast.stmt, Parsed] | str:
    """The statement defining dotted ``symbol`` in the file's own bodies (the last binding wins), or why not."""
    module = parse(vllm_root, path)
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


def location(path: str, node: ast.AST) -> str:
    """``vllm/<path>:<line>`` of ``node``, as a problem names it."""
    return f"vllm/{path}:{getattr(node, 'lineno', '?')}"


def segment(module: Parsed, node: ast.stmt) -> str:
    """The source lines of ``node``."""
    return "\n".join(module.lines[node.lineno - 1 : node.end_lineno])


def forget_sources() -> None:
    """Drop the parsed trees and file scans: they are large, and every object kept alive is work for the GC of the
    process that checked (the tuner's front-end is the engine's front-end in offline and streaming modes)."""
    parse.cache_clear()
    files_containing.cache_clear()
    _py_files.cache_clear()


@cache
def installed_root() -> Path | None:
    """The installed ``vllm`` package directory, found without importing vLLM (None when not installed)."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def source_version(vllm_root: Path) -> Version | None:
    """The release of a vLLM source tree, read from its ``_version.py`` (None when it has none)."""
    found = locate(vllm_root, "_version.py", "__version__")
    value = None if isinstance(found, str) else getattr(found[0], "value", None)
    return Version(value.value) if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


def admits(specifier: str, version: Version) -> bool:
    """Whether the PEP 440 ``specifier`` ("" admits all) includes ``version``, development builds included."""
    return SpecifierSet(specifier).contains(version, prereleases=True)
