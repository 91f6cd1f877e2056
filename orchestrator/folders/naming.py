"""Which tool folder a name given on the command line (or to `as_node`) means.

Every command reads a folder's name the same way, in every form `tools list`
or an error prints it: its tool name (`email_agent`, when no other folder has
it), its short path (`personal_assistant_agent/email_agent`), its key below the
top `sub_graphs/` (`personal_assistant_agent/src/sub_graphs/email_agent`), or
its path on disk, relative to the working directory or absolute.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.folders.discovery import CHILDREN_DIR, Discovery, FolderNode, ToolFolder

NO_SUCH_FOLDER = "No tool folder named {name!r}; `orchestrator tools list` shows them."
SEVERAL = "{name!r} names several folders; give the path of one: {paths}"


def find_in_tree(tree: Discovery, name: str) -> ToolFolder:
    """The folder `name` means (see the module's docstring); a UserError saying why none.

    Folders refused for sharing a name count too: a name that two folders
    share means neither, so a folder dropped beside yours is never the one
    approved by your folder's name.
    """
    candidates = [
        *_named(tree.nodes, ()),
        *((folder, (*_parent_names(folder), folder.name)) for folder in tree.same_named),
    ]
    # A path says which folder; a tool name alone, only when no folder is at that path.
    found = {folder.path: folder for folder, names in candidates if _at(name, folder, names)}
    if not found:
        found = {folder.path: folder for folder, _ in candidates if folder.name == name}
    if not found:
        raise UserError(NO_SUCH_FOLDER.format(name=name))
    if len(found) > 1:
        paths = " or ".join(sorted(_as_listed(folder.path) for folder in found.values()))
        raise UserError(SEVERAL.format(name=name, paths=paths))
    return next(iter(found.values()))


def short_path(folder: ToolFolder) -> str:
    """`parent/child`: the folder's key without the `src/sub_graphs/` between its parts."""
    return "/".join(path_parts(folder.key))


def path_parts(path: str) -> list[str]:
    """`a/b` or the key `a/src/sub_graphs/b`: the folder names from the top, `["a", "b"]`."""
    parts = [part for part in path.strip("/").split("/") if part]
    kept: list[str] = []
    position = 0
    while position < len(parts):
        if parts[position : position + 2] == list(CHILDREN_DIR.parts):
            position += 2
            continue
        kept.append(parts[position])
        position += 1
    return kept


def lineage(folder: ToolFolder) -> list[str]:
    """The keys of the folder's parents, from the top, then its own."""
    parts = folder.key.split(f"/{CHILDREN_DIR.as_posix()}/")
    return [f"/{CHILDREN_DIR.as_posix()}/".join(parts[: depth + 1]) for depth in range(len(parts))]


def _as_listed(path: Path) -> str:
    """`path` as `tools list` prints it: relative to the working directory when below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _named(
    nodes: list[FolderNode], above: tuple[str, ...]
) -> Iterator[tuple[ToolFolder, tuple[str, ...]]]:
    """Every folder with the tool names from the top down to its own."""
    for node in nodes:
        names = (*above, node.folder.name)
        yield node.folder, names
        yield from _named(node.children, names)


def _parent_names(folder: ToolFolder) -> tuple[str, ...]:
    # A folder refused for its name is not in the tree: its parents by their directories.
    return tuple(path_parts(folder.key)[:-1])


def _at(name: str, folder: ToolFolder, names: tuple[str, ...]) -> bool:
    """Whether `name` is the folder's path: by tool names, by directories, or on disk."""
    if path_parts(name) in (list(names), path_parts(folder.key)):
        return True
    try:  # a path on disk, as `tools list` prints it (relative to here) or absolute
        return Path(name).resolve() == folder.path.resolve()
    except (OSError, ValueError):  # not a usable path
        return False
