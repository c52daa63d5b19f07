"""Reading an experiment file: a regular file, size-capped, YAML with duplicate keys refused and aliases
bounded, and where in it each value is (so every problem names its line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tuner.config.search import yaml_kind
from tuner.errors import Problem, UserError
from tuner.inputs import read_regular

MAX_FILE_BYTES = 1 << 20
MAX_EXPANDED_NODES = 100_000  # values in the document once aliases are expanded


def node_line(root: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (or of its deepest existing parent)."""
    node, line = root, (root.start_mark.line + 1 if root is not None else None)
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((v for k, v in node.value if getattr(k, "value", None) == str(key)), None)
            key_node = next((k for k, _ in node.value if getattr(k, "value", None) == str(key)), None)
            if match is None:
                return line
            node, line = match, (key_node or match).start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def _locate(loc: tuple[int | str, ...], data: Any, error_type: str) -> tuple[tuple[int | str, ...], str]:
    """Where a pydantic error is in the file, and its field name (``a.b[0].c``).

    Drops pydantic's own ``loc`` segments (union members, tags, ``[key]``), which are no keys in the file.
    """
    kept: list[int | str] = []
    field = ""
    node = data
    for index, key in enumerate(loc):
        is_index = isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node)
        if is_index or (isinstance(node, dict) and key in node):
            node = node[key]
        elif not (error_type == "missing" and index == len(loc) - 1):  # a missing field is named, not in the file
            continue
        kept.append(key)
        field += f"[{key}]" if is_index else f".{key}" if key != "" else '.""'  # an empty key shows as ""
    return tuple(kept), field.removeprefix(".")


def validation_problems(exc: ValidationError, data: Any, root: yaml.Node | None) -> list[Problem]:
    problems: list[Problem] = []
    for err in exc.errors():
        loc, field = _locate(tuple(err["loc"]), data, err["type"])
        if err["type"] == "extra_forbidden":
            message = "unknown key"
        elif err["loc"][-1:] == ("[key]",):
            message = f"keys must be strings, got {yaml_kind(err['input'])}"
        elif err["type"].endswith("_type"):  # "Input should be a valid integer": say what it is instead
            message = f"{err['msg']}, got {yaml_kind(err['input'])}"
        else:
            message = err["msg"].removeprefix("Value error, ")
        problem = Problem(message, field, node_line(root, loc))
        if problem not in problems:
            problems.append(problem)
    return problems


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys; a scalar it cannot convert is a YAML error with a line."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError) as exc:  # e.g. `2001-02-30`
            what = f"{node.value!r} " if isinstance(node, yaml.ScalarNode) else ""
            reason = f": {exc}" if isinstance(exc, ValueError) else ""  # the others say nothing useful
            message = f"cannot read {what}as {node.tag.rpartition(':')[2]}{reason}"
            raise yaml.constructor.ConstructorError(None, None, message, node.start_mark) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):  # e.g. `!!set 5`: the base class refuses it
            return super().construct_mapping(node, deep)
        first_lines: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base` may be overridden by design
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = first_lines.get(key)
            except TypeError:  # an unhashable key: the base class says so
                continue
            if first is not None:
                message = f"duplicate key {key!r} (first on line {first})"
                raise yaml.constructor.ConstructorError(None, None, message, key_node.start_mark)
            first_lines[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def _yaml_problem(exc: yaml.YAMLError, text: str) -> Problem:
    """One line for what PyYAML refused, with the line it refused."""
    if isinstance(exc, yaml.reader.ReaderError):
        message = f"YAML does not allow the character {chr(exc.character)!r} ({exc.reason})"
        return Problem(message, line=text.count("\n", 0, exc.position) + 1)
    mark = getattr(exc, "problem_mark", None)
    line = None if mark is None else mark.line + 1
    reason = ", ".join(part for part in (getattr(exc, "context", None), getattr(exc, "problem", None)) if part)
    if isinstance(exc, yaml.constructor.ConstructorError):
        return Problem(reason, line=line)
    return Problem(f"YAML syntax error: {reason or exc}", line=line)


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """How many nodes ``root`` stands for once every alias is expanded (counting stops past ``limit``).

    PyYAML composes an alias as a second reference to the same node, so the document is a graph whose
    expansion can be exponential in its size (a "billion laughs"); sizes are memoised per node.
    """
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = limit + 1  # a node that contains itself expands without end
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                total = min(total + size(child), limit + 1)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                total = min(total + size(key) + size(value), limit + 1)
        sizes[id(node)] = total
        return total

    return size(root)


def _parse(text: str, file: str = "<experiment>") -> tuple[Any, yaml.Node | None]:
    """The data and the node tree (for line numbers) of one YAML document, parsed once.

    Refuses a document whose aliases expand past :data:`MAX_EXPANDED_NODES` values anywhere in it, free-form
    engine args included, before anything is built from it.
    """
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        if root is not None and _expanded_size(root, MAX_EXPANDED_NODES) > MAX_EXPANDED_NODES:
            raise UserError.single(
                file,
                f"the document expands to more than {MAX_EXPANDED_NODES:,} values (YAML aliases): "
                "not an experiment file",
            )
        return (None if root is None else loader.construct_document(root)), root
    finally:
        loader.dispose()


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    """Parse ``path``; return the data and its node tree (for line numbers)."""
    file = str(path)
    try:
        raw = read_regular(path, MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise UserError.single(file, "file not found") from None
    except IsADirectoryError:
        raise UserError.single(file, "is a directory, not an experiment file") from None
    except OSError as exc:
        raise UserError.single(file, f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UserError.single(file, f"larger than {MAX_FILE_BYTES >> 20} MiB: not an experiment file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded"
        raise UserError.single(file, message, line=raw.count(b"\n", 0, exc.start) + 1) from None
    try:
        data, root = _parse(text, file)
    except yaml.YAMLError as exc:
        raise UserError(file, [_yaml_problem(exc, text)]) from None
    except RecursionError:
        raise UserError.single(file, "YAML nested too deeply") from None
    if data is None:
        raise UserError.single(file, "no experiment: the file is empty or only comments")
    if not isinstance(data, dict):
        message = f"expected a mapping of keys at the top, got {yaml_kind(data)}"
        raise UserError.single(file, message, line=node_line(root, ()))
    return data, root
