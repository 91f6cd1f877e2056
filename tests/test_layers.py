"""Layers point one way, in the order of the import-linter contract in pyproject.toml.

`lint-imports` (run by .ci/run) checks the contract, chains of imports included;
these tests read the same contract (see `tests/layer_contract.py`) and check what
it cannot say: that it places every unit of the package, that a module names no
layer above its own in an import string either, and that no two modules import
each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.layer_contract import PACKAGE, depth, imports, layers, module_name, modules, unit


def units() -> list[str]:
    """The package's top-level packages and modules."""
    found = [p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"]
    found += [p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()]
    return sorted(found)


def test_the_contract_places_every_unit_of_the_package_once():
    placed = [name for layer in layers() for name in layer]
    assert sorted(placed) == units()


def _above(module: str, imported: str) -> str | None:
    """`imported`, when it is in a layer above (or beside) `module`'s; None when it may be."""
    if imported == "orchestrator" or unit(imported) == unit(module):
        return None
    return imported if depth(unit(imported)) <= depth(unit(module)) else None


@pytest.mark.parametrize("name", sorted({unit(m) for m in modules() if m != "orchestrator"}))
def test_a_unit_imports_nothing_above_it_nor_beside_it(name: str):
    wrong = [
        f"{module} imports {imported}"
        for module, path in modules().items()
        if module != "orchestrator" and unit(module) == name
        for imported in imports(path)
        if _above(module, imported)
    ]
    assert wrong == []


def import_strings(path: Path) -> set[str]:
    """The package's modules a file names in a string (a lazy export, a `-m` target)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in modules()
    }


def test_no_import_string_names_a_layer_above():
    """`tools/__init__.py` once re-exported `dispatch` and `sources` names through such strings."""
    wrong = [
        f"{module} names {named}"
        for module, path in modules().items()
        if module != "orchestrator"  # the package's front exports from every layer
        for named in import_strings(path)
        if _above(module, named)
    ]
    assert wrong == []


def test_no_two_modules_import_each_other():
    graph = {module: imports(path) - {module} for module, path in modules().items()}
    pairs = sorted(
        f"{a} <-> {b}" for a, seen in graph.items() for b in seen if a < b and a in graph.get(b, ())
    )
    assert pairs == []


def test_no_unit_imports_one_that_imports_it_back():
    """A unit (a top-level package or module) and the units it imports form no two-way pair."""
    graph: dict[str, set[str]] = {}
    for module, path in modules().items():
        if module != "orchestrator":
            graph.setdefault(unit(module), set()).update(
                unit(m) for m in imports(path) if m != "orchestrator" and unit(m) != unit(module)
            )
    pairs = sorted(f"{a} <-> {b}" for a, seen in graph.items() for b in seen if a < b and a in graph.get(b, ()))
    assert pairs == []


def test_the_cycle_check_sees_function_level_and_type_only_imports(tmp_path: Path):
    source = tmp_path / "orchestrator" / "terminal" / "text.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from orchestrator.folders.discovery import ToolFolder\n"
        "def f():\n    from orchestrator.terminal.folder_reach import reach_lines\n"
    )
    assert imports(source) == {"orchestrator.folders.discovery", "orchestrator.terminal.folder_reach"}
    assert module_name(PACKAGE / "sources" / "mcp" / "__init__.py") == "orchestrator.sources.mcp"


def test_the_command_line_lives_in_its_package():
    loose = [p.name for p in PACKAGE.glob("*.py") if "typer" in p.read_text() or "rich" in p.read_text()]
    assert loose == []


def _lines(path: Path) -> int:
    files = [path] if path.is_file() else list(path.rglob("*.py"))
    return sum(len(f.read_text().splitlines()) for f in files)


def test_no_unit_holds_more_than_a_fifth_of_the_package():
    """A package or module past a fifth of the whole is several concerns in one room."""
    total = _lines(PACKAGE)
    units = [p for p in PACKAGE.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()]
    sizes = {unit.name: _lines(unit) for unit in units}
    assert sum(sizes.values()) == total
    assert {name: size for name, size in sizes.items() if size > total / 5} == {}
