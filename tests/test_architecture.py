"""The package's boundaries, checked on the source: no import cycle, the plugin reached only through its protocol,
rich only in the command line, every command in the command table and no command importing another's, the rooms
(records, report, series) never importing the engine side or a command, one owner per record and per attribute key,
and the sizes that keep each module to one job.

Every import counts: top-level, inside functions (lazy) and under ``TYPE_CHECKING``, since each of them is a
dependency a reader has to follow.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

from tuner.cli.commands import COMMANDS
from tuner.cli.main import app

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tuner", "strategies")
BENCHMARKS = "benchmarks"
"""Scripts over the package: held to its sizes and its public names, and imported by nothing in it."""
ENGINE_SIDE = {"tuner.engine.session", "tuner.engine.server", "tuner.measure.workbench"}
"""The modules that start or drive a vLLM engine."""
COMMAND_MODULES = sorted({c.module for c in COMMANDS})
"""Each command's module, or its wing: a package whose modules are that command's alone."""
RECORD_ROOMS = ("tuner.records", "tuner.report", "tuner.series")
"""What is on disk and what is made of it: plain data, no engine, no command but their own."""


def _command(name: str) -> str | None:
    return next((c for c in COMMAND_MODULES if name == c or name.startswith(f"{c}.")), None)


def _in(name: str, room: str) -> bool:
    return name == room or name.startswith(f"{room}.")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    return {_module_name(p): p for package in packages for p in sorted((ROOT / package).rglob("*.py"))}


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules ``name`` imports (``from pkg import module`` counts as the module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found |= {t for t in targets if t.split(".")[0] in PACKAGES and t != name}
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def _plugin_side(name: str) -> bool:
    return name == "tuner.plugin" or name.startswith("tuner.plugin.")


def test_the_tuner_side_reaches_the_plugin_only_through_its_protocol() -> None:
    """Code that runs in the tuner imports ``tuner.plugin.protocol`` only: the rest runs inside vLLM's processes,
    loaded there by vLLM through the entry point."""
    wrong = {
        (name, target)
        for name, targets in import_graph().items()
        if not _plugin_side(name) and not name.startswith("strategies")
        for target in targets
        if _plugin_side(target) and target != "tuner.plugin.protocol"
    }
    assert wrong == set()


def test_the_plugin_protocol_imports_nothing_of_the_project() -> None:
    assert import_graph()["tuner.plugin.protocol"] == set()


def test_the_plugin_side_does_not_import_the_tuner_side() -> None:
    wrong = {
        (name, target)
        for name, targets in import_graph().items()
        if _plugin_side(name)
        for target in targets
        if target.startswith("tuner") and not _plugin_side(target)
    }
    assert wrong == set()


def test_the_record_rooms_never_import_the_engine_side_another_command_or_the_cli() -> None:
    """Records, reports and series read what is on disk: a report renders without vLLM installed."""
    wrong = {
        (name, target)
        for name, targets in import_graph().items()
        if any(_in(name, room) for room in RECORD_ROOMS)
        for target in targets
        if target in ENGINE_SIDE
        or (_command(target) and _command(target) != _command(name))
        or target.startswith("tuner.cli")
        or (_plugin_side(target) and target != "tuner.plugin.protocol")
    }
    assert wrong == set()


def test_records_import_nothing_made_from_them() -> None:
    """The record model is the bottom room of what is on disk: reports and series import it, never the reverse."""
    wrong = {
        (name, target)
        for name, targets in import_graph().items()
        if _in(name, "tuner.records")
        for target in targets
        if any(_in(target, room) for room in ("tuner.report", "tuner.series", "tuner.measure", "tuner.engine"))
    }
    assert wrong == set()


def _registered(group: Any, prefix: str = "") -> set[str]:
    found = set()
    for name, command in group.commands.items():
        if hasattr(command, "commands"):  # a group (typer vendors its own click)
            found |= _registered(command, f"{prefix}{name} ")
        else:
            found.add(f"{prefix}{name}")
    return found


def test_the_cli_registers_exactly_the_command_table() -> None:
    """The table is the dispatch: each row one command, registered under its name with its own function."""
    cli = typer.main.get_command(app)
    assert _registered(cli) == {c.name for c in COMMANDS}
    for command in COMMANDS:
        group: Any = cli
        for word in command.name.split():
            group = group.commands[word]
        assert getattr(group.callback, "__wrapped__", None) is command.handler, command.name  # typer wraps it
    assert all(module in _modules() for module in COMMAND_MODULES), COMMAND_MODULES


def _documented_commands(doc: Path) -> list[str]:
    """The commands a document's command table lists: each row's longest run of lower-case words after ``tuner``
    (``tuner export bench RESULT -o FILE`` -> ``export bench``)."""
    names = {c.name for c in COMMANDS}
    found = []
    for words in re.findall(r"^\| `tuner ((?:[a-z][a-z-]* ?)+)", doc.read_text(encoding="utf-8"), re.MULTILINE):
        parts = words.split()
        found.append(
            next((" ".join(parts[:k]) for k in range(len(parts), 0, -1) if " ".join(parts[:k]) in names), words)
        )
    return found


@pytest.mark.parametrize("doc", ["README.md", "docs/commands.md"])
def test_the_readme_and_the_commands_page_list_the_command_table(doc: str) -> None:
    """Each lists every command of the table once, and nothing else."""
    listed = _documented_commands(ROOT / doc)
    assert sorted(listed) == sorted(c.name for c in COMMANDS), listed


def _doc_units(text: str) -> list[str]:
    """A document's table rows and bullet items (each with its indented continuation lines)."""
    units: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("|"):
            units.append([line])
            current = None
        elif re.match(r"^\s*- ", line):
            current = [line]
            units.append(current)
        elif current is not None and line.startswith("  ") and line.strip():
            current.append(line)
        else:
            current = None
    return ["\n".join(unit) for unit in units]


def test_every_module_of_the_package_is_named_in_the_architecture_page() -> None:
    """Every module of ``tuner/`` is named in ``docs/architecture.md``: by its path, or as `` `name.py` `` in a
    table row or bullet that names its package (a top-level module: the "top level" row)."""
    units = _doc_units((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    missing = []
    for path in sorted((ROOT / "tuner").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if path.name == "__init__.py":
            continue
        package = f"{relative.parts[0]}/{relative.parts[1]}/" if len(relative.parts) > 2 else "top level"
        named = f"`{path.name}`"
        if not any(relative.as_posix() in unit or (package in unit and named in unit) for unit in units):
            missing.append(relative.as_posix())
    assert not missing, f"not named in docs/architecture.md: {missing}"


def test_no_command_imports_another_commands_modules() -> None:
    """The commands stand side by side over one measuring core: what two of them share lives below them, never in
    one of them (a command's module is its own; a wing's modules are its command's alone)."""
    graph = import_graph()
    wrong = {
        (name, target)
        for name, targets in graph.items()
        for target in targets
        if _command(name) and _command(target) and _command(name) != _command(target)
    }
    assert wrong == set()


def test_the_measuring_core_imports_no_command() -> None:
    wrong = {
        (name, target)
        for name, targets in import_graph().items()
        if name.startswith("tuner")
        and not _command(name)
        and not name.startswith("tuner.cli")
        and name != "tuner.__main__"
        for target in targets
        if _command(target)
    }
    assert wrong == set()


def test_nothing_below_the_cli_imports_it() -> None:
    wrong = {
        (name, target)
        for name, targets in import_graph().items()
        if not name.startswith("tuner.cli") and name != "tuner.__main__"
        for target in targets
        if target.startswith("tuner.cli")
    }
    assert wrong == set()


@pytest.mark.parametrize("library", ["rich", "typer"])
def test_terminal_libraries_only_in_the_cli(library: str) -> None:
    users = set()
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            if any(n == library or n.startswith(f"{library}.") for n in names):
                users.add(name)
    assert users and all(u.startswith("tuner.cli") for u in users), sorted(users)


def test_trial_and_study_attributes_are_written_and_read_only_through_their_owners() -> None:
    """``tuner.sweep.trial_attrs`` owns a trial's Optuna user attributes, ``tuner.sweep.study_attrs`` the study's own
    (one TypedDict each for the writing and the reading half)."""
    found: dict[str, set[str]] = {"trial": set(), "study": set()}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in {"set_user_attr", "user_attrs"}:
                found["study" if "study" in ast.unparse(node.value).lower() else "trial"].add(name)
    assert found == {"trial": {"tuner.sweep.trial_attrs"}, "study": {"tuner.sweep.study_attrs"}}


def test_each_record_schema_has_one_owner() -> None:
    """Each file format (``tuner.run/1``, ``tuner.calibration/1``, ...) is named in one module, which writes and
    loads it: a renamed field is then one module's change, checked by mypy against its TypedDict."""
    owners: dict[str, set[str]] = {}
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and value.startswith("tuner.") and value.rstrip("0123456789").endswith("/"):
                owners.setdefault(node.value, set()).add(name)
    assert len(owners) >= 3 and all(len(modules) == 1 for modules in owners.values()), owners


def typed_dict_names(modules: dict[str, Path]) -> set[str]:
    """Every class of ``modules`` that is a TypedDict: ``TypedDict`` among its bases, or another such class."""
    bases = {
        node.name: {ast.unparse(base) for base in node.bases}
        for path in modules.values()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }
    names = {"TypedDict"}
    while grown := {name for name, of in bases.items() if name not in names and of & names}:
        names |= grown
    return names


def untyped_record_fields(modules: dict[str, Path], typed_dicts: set[str]) -> list[str]:
    """Every field of a TypedDict class (one of ``typed_dicts``) whose type is, or holds, ``dict[str, Any]`` or
    ``Any``: a key a reader would index unchecked."""
    loose = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or node.name not in typed_dicts:
                continue
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and re.search(r"\bAny\b", ast.unparse(item.annotation)):
                    loose.append(f"{name}.{node.name}.{ast.unparse(item.target)}: {ast.unparse(item.annotation)}")
    return loose


def test_every_record_field_is_typed_to_its_last_key() -> None:
    """What is on disk is typed at every level (``docs/records.md``): no field of a record type in
    ``tuner/records/`` is ``Any`` or holds it; open JSON (vLLM's engine arguments, Optuna's parameters) is a
    :data:`tuner.records.JsonObject`."""
    modules = _modules()
    records = {n: p for n, p in modules.items() if _in(n, "tuner.records")}
    assert untyped_record_fields(records, typed_dict_names(modules)) == []


def test_the_record_check_finds_an_untyped_field(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "class R(TypedDict):\n    ok: dict[str, float]\n    loose: dict[str, Any] | None\nclass S(R):\n    extra: Any\n"
    )
    probe = {"probe": module}
    assert untyped_record_fields(probe, typed_dict_names(probe)) == [
        "probe.R.loose: dict[str, Any] | None",
        "probe.S.extra: Any",
    ]


def _closure(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_the_sweep_summary_reads_a_study_without_the_engine() -> None:
    """``tuner report --storage`` summarises a shared study: plain data from storage, no engine imported."""
    reached = _closure(import_graph(), "tuner.sweep.summary")
    engine = reached & ENGINE_SIDE
    assert reached and not engine, sorted(engine)


TOP_LEVEL_MODULES = 8
MODULE_LINES = 400
CLASS_LINES = 200
FUNCTION_LINES = 80


def test_the_package_is_rooms_not_a_corridor() -> None:
    """At most eight modules directly in ``tuner/`` (entry points and what every room uses); the rest in rooms."""
    top = [name for name, path in _modules().items() if path.parent == ROOT / "tuner" and path.name != "__init__.py"]
    assert len(top) <= TOP_LEVEL_MODULES, sorted(top)


def test_modules_classes_and_functions_stay_small() -> None:
    """One job per module, class and function: no module over 400 lines, no class over 200, no function over 80
    (the benchmarks' scripts too)."""
    too_long = []
    for name, path in _modules((*PACKAGES, BENCHMARKS)).items():
        text = path.read_text()
        lines = text.count("\n")
        if lines > MODULE_LINES:
            too_long.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            limit = CLASS_LINES if isinstance(node, ast.ClassDef) else FUNCTION_LINES
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    too_long.append(f"{name}.{node.name}: {length} lines")
    assert too_long == []


def _rooms() -> list[Path]:
    """Every package of the project below its top level: the rooms and wings."""
    return sorted(p.parent for package in PACKAGES for p in (ROOT / package).glob("*/__init__.py"))


def test_every_room_has_a_face() -> None:
    """Each package says what it offers in ``__all__`` (as Optuna's ``samplers/__init__.py`` does), and offers it."""
    faceless, unbound = [], []
    for room in _rooms():
        tree = ast.parse((room / "__init__.py").read_text())
        listed = next(
            (
                node.value
                for node in tree.body
                if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__"
            ),
            None,
        )
        if not isinstance(listed, ast.List):
            faceless.append(room.name)
            continue
        bound = {
            alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
        }
        bound |= {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
        unbound += [
            f"{room.name}.{e.value}" for e in listed.elts if isinstance(e, ast.Constant) and e.value not in bound
        ]
    assert faceless == [] and unbound == []


def test_no_module_imports_another_packages_private_names() -> None:
    """A leading underscore is private to its package: what another package needs is on that package's face (the
    benchmarks' scripts read the package through its public names too)."""
    modules = _modules((*PACKAGES, BENCHMARKS))
    wrong = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            source_package = (
                node.module
                if node.module in modules and modules[node.module].name == "__init__.py"
                else node.module.rpartition(".")[0]
            )
            private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if private and source_package != package and node.module.split(".")[0] in (*PACKAGES, BENCHMARKS):
                wrong.append(f"{name}: {node.module} {private}")
    assert wrong == []


PLUGIN_FACE = "tuner.plugin.protocol"
"""The tuner side's face onto the plugin: the plugin's own face would load its hooks into the tuner's process."""


def _room(module: str) -> str:
    """The room a module lives in: a package directly under ``tuner/`` (its subpackages included), a module
    directly in ``tuner/``, or ``strategies``."""
    parts = module.split(".")
    return "strategies" if parts[0] == "strategies" else ".".join(parts[:2])


def _is_face(target: str, package: dict[str, Path]) -> bool:
    """Whether ``target`` is a package's face (its ``__init__``) or a module directly in ``tuner/``."""
    return target == _room(target) or (target in package and package[target].name == "__init__.py")


def faces_bypassed(modules: dict[str, Path]) -> list[str]:
    """Every import of another room's name not taken from a face (a package's ``__init__``), the plugin's protocol
    or, for the command line, a command's own module."""
    bypassed, package = [], _modules()
    for name, path in modules.items():
        room = _room(name)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                targets = [node.module]
            else:
                continue
            for target in targets:
                if target.split(".")[0] not in PACKAGES or _room(target) == room or _is_face(target, package):
                    continue
                if target == PLUGIN_FACE or (room == "tuner.cli" and target in COMMAND_MODULES):
                    continue
                bypassed.append(f"{name}: {target}")
    return bypassed


def test_imports_between_rooms_go_through_their_faces() -> None:
    """A room is reached through what its face offers (as Optuna's modules reach ``optuna.samplers``), so that what
    it keeps inside can move without its users changing: a submodule of another room is imported only where the
    face is the plugin's protocol or a command's own module (the command table names it)."""
    assert faces_bypassed(_modules()) == []


def test_the_face_check_finds_a_submodule_import(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text("from tuner.stats.power import power\nfrom tuner.stats import RatioEstimate\n")
    assert faces_bypassed({"tuner.report.probe": module}) == ["tuner.report.probe: tuner.stats.power"]


def test_the_package_imports_no_benchmark_and_no_test() -> None:
    """Imports only go down: the benchmarks and the tests stand on the package, never under it."""
    wrong = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            wrong += [f"{name}: {t}" for t in targets if t.split(".")[0] in (BENCHMARKS, "tests")]
    assert wrong == []


@pytest.mark.parametrize("group", sorted(p.parent.name for p in (ROOT / BENCHMARKS).glob("*/__init__.py")))
def test_each_benchmark_group_lists_its_scripts(group: str) -> None:
    """A group's README names every module in it (a script in its table, or a shared module below it), and the
    benchmarks' README names every group."""
    readme = (ROOT / BENCHMARKS / group / "README.md").read_text()
    modules = sorted(p.stem for p in (ROOT / BENCHMARKS / group).glob("*.py") if p.name != "__init__.py")
    assert modules
    assert [m for m in modules if f"`{m}`" not in readme] == []
    assert f"`{group}/`" in (ROOT / BENCHMARKS / "README.md").read_text()


def test_every_benchmark_command_the_docs_and_references_quote_names_a_script_that_exists() -> None:
    """``python -m benchmarks.<group>.<script>`` in the README, the docs, the reference results and the scripts
    themselves names a module on disk: a moved or renamed script fails here, not in a reader's shell."""
    sources = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "results" / "README.md"]
    sources += [*(ROOT / "results" / "reference").rglob("*.json"), *(ROOT / BENCHMARKS).rglob("*.py")]
    quoted = {m for path in sources for m in re.findall(r"python -m (benchmarks(?:\.\w+)+)", path.read_text())}
    assert len(quoted) >= 15  # the reader saw them
    missing = sorted(m for m in quoted if not (ROOT / Path(*m.split("."))).with_suffix(".py").is_file())
    assert missing == []


SHARED_ENGINE_FIXTURES = ("engine_session", "streaming_session")


def engine_tests_outside_their_folder(tests: Path) -> list[str]:
    """Tests outside ``tests/engine/`` that are marked ``engine`` or take a shared engine."""
    found = []
    for path in sorted(tests.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test_"):
                continue
            marked = any("mark.engine" in ast.unparse(d) for d in node.decorator_list)
            shared = any(a.arg in SHARED_ENGINE_FIXTURES for a in node.args.args)
            if marked or shared:
                found.append(f"{path.name}::{node.name}")
        if re.search(r"^pytestmark = .*mark\.engine", path.read_text(), re.M):
            found.append(path.name)
    return found


def test_engine_tests_live_in_their_folder() -> None:
    """Tests by job: a test that starts a real engine is in ``tests/engine/`` (marked ``engine`` by being there), and
    the engine-free loop is ``tests/`` without that folder."""
    assert engine_tests_outside_their_folder(ROOT / "tests") == []


def test_the_folder_check_finds_an_engine_test_outside(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(
        "@pytest.mark.engine\ndef test_a(): ...\ndef test_b(engine_session): ...\ndef test_c(): ...\n"
    )
    assert engine_tests_outside_their_folder(tmp_path) == ["test_probe.py::test_a", "test_probe.py::test_b"]
