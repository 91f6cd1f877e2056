"""Layers point one way: cli -> session/runtime -> graph -> tools -> store/llm adapters.

Checked on the source: every module-level import (not those under
`TYPE_CHECKING`, nor those inside functions, which run on first use).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "orchestrator"

# What the modules of each package may not import at module level.
FORBIDDEN = {
    "tools": ("store", "graph", "llm", "cli", "session", "runtime", "recovery", "tasks"),
    "graph": ("cli", "session", "runtime", "recovery"),
    "store": ("graph", "cli", "session", "runtime", "recovery"),
    "llm": ("tools", "store", "graph", "cli", "session", "runtime"),
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
