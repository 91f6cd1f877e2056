"""Layers point one way: cli -> serve -> runtime/conversation -> graph -> dispatch -> sources -> folders
-> store -> tools -> llm -> levels -> settings -> usage -> the foundations.

Checked on the source: every module-level import (not those under
`TYPE_CHECKING`, nor those inside functions, which run on first use). The full
order, function-level imports included, is the import-linter contract in
pyproject.toml (`lint-imports`, run by .ci/run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "orchestrator"

ASSEMBLY = ("cli", "serve", "runtime", "conversation")
# What the modules of each package may not import at module level.
FORBIDDEN = {
    "tools": (*ASSEMBLY, "store", "graph", "llm", "dispatch", "sources", "folders"),
    "folders": (*ASSEMBLY, "store", "graph", "llm", "dispatch", "sources"),
    "sources": (*ASSEMBLY, "graph", "dispatch"),
    "dispatch": (*ASSEMBLY, "graph"),
    "graph": ASSEMBLY,
    "terminal": ("cli",),
    "store": (*ASSEMBLY, "graph", "dispatch", "sources", "folders"),
    "llm": (*ASSEMBLY, "tools", "store", "graph", "dispatch", "sources", "folders"),
    "usage": (*ASSEMBLY, "tools", "store", "graph", "llm", "settings", "levels", "dispatch"),
}


def module_level_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # run on first use, not on import
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for inner in ast.walk(node):
            if isinstance(inner, ast.ImportFrom) and inner.module and inner.level == 0:
                found.append(inner.module)
            elif isinstance(inner, ast.Import):
                found.extend(alias.name for alias in inner.names)
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_above_it(package: str):
    wrong = [
        f"{path.relative_to(PACKAGE.parent)}: {module}"
        for path in sorted((PACKAGE / package).rglob("*.py"))
        for module in module_level_imports(path)
        if module.split(".")[:2] in (["orchestrator", above] for above in FORBIDDEN[package])
    ]
    assert wrong == []


def test_the_command_line_lives_in_its_package():
    loose = [p.name for p in PACKAGE.glob("*.py") if "typer" in p.read_text() or "rich" in p.read_text()]
    assert loose == []


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_unit_imports_one_that_imports_it_back():
    """A unit (a top-level package or module) and the units it imports form no two-way pair."""
    imports: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        unit = _unit(".".join(parts))
        for module in module_level_imports(path):
            if module.startswith("orchestrator.") and _unit(module) != unit:
                imports.setdefault(unit, set()).add(_unit(module))
    pairs = sorted(
        f"{a} <-> {b}" for a, seen in imports.items() for b in seen if a < b and a in imports.get(b, ())
    )
    assert pairs == []


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
