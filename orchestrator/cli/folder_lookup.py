"""Which tool folder a name on the command line means."""

from __future__ import annotations

from pathlib import Path

from orchestrator.errors import UserError
from orchestrator.folders.discovery import Discovery, ToolFolder, walk
from orchestrator.terminal.text import display_path


def find_folder(tree: Discovery, name: str) -> ToolFolder:
    """The folder `name` means: its tool name, its path key, or the path `tools list` prints.

    Folders refused for sharing a name count too: a name that two folders
    share approves neither, so a folder dropped beside yours is never the one
    approved by your folder's name.
    """
    folders = {f.path: f for f in [*(n.folder for n in walk(tree.nodes)), *tree.same_named]}
    matches = [f for f in folders.values() if _means(name, f)]
    if not matches:
        raise UserError(f"No tool folder named {name!r}; `orchestrator tools list` shows them.")
    if len(matches) > 1:
        paths = " or ".join(display_path(folder.path) for folder in matches)
        raise UserError(f"{name!r} names several folders; give the path of one: {paths}")
    return matches[0]


def _means(name: str, folder: ToolFolder) -> bool:
    if name in (folder.name, folder.key):
        return True
    try:  # a path, as `tools list` prints it (relative to here) or absolute
        return Path(name).resolve() == folder.path.resolve()
    except (OSError, ValueError):  # not a usable path
        return False
