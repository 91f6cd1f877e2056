"""Finds drop-in tool folders and fingerprints them, without importing anything.

A folder is a tool when it holds a `tool_config.yaml`. Its own tools, if it
has any, live in its `src/sub_graphs/`; `discover` looks at one level, and
`discover_tree` walks every level for listing and approval.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.tools.config import CONFIG_FILE, ToolConfig, ToolConfigError, load_tool_config

CHILDREN_DIR = Path("src") / "sub_graphs"
# Written by running or testing a tool, not part of what was approved.
IGNORED_DIRS = frozenset(
    {"__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".git", ".venv", "node_modules"}
)
IGNORED_SUFFIXES = (".pyc", ".pyo")


@dataclass(frozen=True)
class ToolFolder:
    """A valid tool folder: where it is, what it declares, and the hash of its files."""

    path: Path
    key: str  # its path below the top `sub_graphs` directory, e.g. `assistant/src/sub_graphs/mail`
    config: ToolConfig
    digest: str

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def depth(self) -> int:
        return self.key.count(CHILDREN_DIR.as_posix() + "/")

    @property
    def children_dir(self) -> Path:
        return self.path / CHILDREN_DIR


@dataclass(frozen=True)
class Problem:
    """A folder that was skipped, and why."""

    path: Path
    reason: str


@dataclass
class ToolNode:
    """A folder with the tool folders of its own `src/sub_graphs/`."""

    folder: ToolFolder
    children: list[ToolNode] = field(default_factory=list)


@dataclass
class Discovery:
    """What one scan found: usable folders, and the skipped ones with their reasons."""

    nodes: list[ToolNode] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def skip(self, path: Path, reason: str) -> None:
        self.problems.append(Problem(path, reason))


def discover(directory: Path, *, root: Path | None = None) -> Discovery:
    """The tool folders directly inside `directory`; keys are relative to `root`."""
    found = Discovery()
    root = root or directory
    if not directory.is_dir():
        return found
    names: set[str] = set()
    for path in sorted(p for p in directory.iterdir() if (p / CONFIG_FILE).is_file()):
        folder = _inspect(path, root=root, found=found)
        if folder is None:
            continue
        if folder.name in names:
            found.skip(path, f"another folder here already has the tool name {folder.name!r}")
            continue
        names.add(folder.name)
        found.nodes.append(ToolNode(folder))
    return found


def discover_tree(directory: Path) -> Discovery:
    """Every level of tool folders below `directory`, each node with its children."""
    top = discover(directory)
    pending = list(top.nodes)
    while pending:
        node = pending.pop()
        level = discover(node.folder.children_dir, root=directory)
        node.children = level.nodes
        top.problems.extend(level.problems)
        pending.extend(level.nodes)
    return top


def walk(nodes: list[ToolNode]) -> Iterator[ToolNode]:
    """Every node of the tree, parents before children."""
    for node in nodes:
        yield node
        yield from walk(node.children)


def _inspect(path: Path, *, root: Path, found: Discovery) -> ToolFolder | None:
    try:
        config = load_tool_config(path / CONFIG_FILE)
    except ToolConfigError as error:
        found.skip(path, str(error))
        return None
    if not (path / config.entry_file).is_file():
        found.skip(path, f"entry point {config.entry_file} not found")
        return None
    try:
        digest = content_hash(path)
    except OSError as error:
        found.skip(path, f"cannot read its files: {error}")
        return None
    return ToolFolder(path=path, key=path.relative_to(root).as_posix(), config=config, digest=digest)


def content_hash(folder: Path) -> str:
    """SHA-256 over the folder's file names and contents, its own sub-tools excluded.

    Sub-tools are approved on their own, so a change inside one asks about that
    one only.
    """
    digest = hashlib.sha256()
    children = folder / CHILDREN_DIR
    for directory, dirnames, filenames in os.walk(folder):
        here = Path(directory)
        dirnames[:] = sorted(
            d for d in dirnames if d not in IGNORED_DIRS and here / d != children
        )
        for filename in sorted(filenames):
            if filename.endswith(IGNORED_SUFFIXES):
                continue
            file = here / filename
            digest.update(file.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(file.read_bytes() + b"\0")
    return digest.hexdigest()
