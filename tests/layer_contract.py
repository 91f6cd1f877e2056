"""The layer order as pyproject.toml's import-linter contract states it, and the package's imports.

The contract is the one statement of the order: tests/test_layers.py checks the
code against it, tests/test_docs.py the diagram of docs/architecture.md.
"""

from __future__ import annotations

import ast
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "orchestrator"


@cache
def layers() -> tuple[frozenset[str], ...]:
    """The contract's layers, top first: each the set of units (`cli`, `store`, `errors`) in it."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    # The package's own (a package inside it may have a contract of its own).
    [contract] = [c for c in config["contracts"] if c.get("containers") == ["orchestrator"]]
    assert contract["type"] == "layers"
    return tuple(frozenset(name.strip() for name in layer.split("|")) for layer in contract["layers"])


def depth(unit: str) -> int:
    """Which layer `unit` is in, counted from the top."""
    [found] = [n for n, layer in enumerate(layers()) if unit in layer]
    return found


def module_name(path: Path) -> str:
    """`orchestrator.sources.mcp.client` for its file (a package for its `__init__.py`)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package, by name."""
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path) -> set[str]:
    """The package's modules the file imports, wherever the import is: at module level, in a
    function (run on first use, still a dependency), under `TYPE_CHECKING` (the contract
    counts those too). `from a.b import c` is the module `a.b.c` when there is one."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules() else node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "orchestrator" or name.startswith("orchestrator.")}


def unit(module: str) -> str:
    """The top-level package or module of the package that `module` is part of."""
    return module.split(".")[1]
