"""`orchestrator new-agent NAME [--kind tool|agent] [--in PARENT]`: a new drop-in folder from a template."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Literal

from orchestrator.errors import UserError
from orchestrator.folders.discovery import CHILDREN_DIR, discover_tree
from orchestrator.folders.naming import find_in_tree
from orchestrator.folders.tool_config import NAME_PATTERN, config_path

Kind = Literal["tool", "agent"]
TEMPLATES = files("orchestrator") / "templates"
# For each kind: template file -> path in the new folder.
LAYOUTS: dict[Kind, dict[str, str]] = {
    "tool": {
        "tool_config.yaml": "tool_config.yaml",
        "tool.py.tmpl": "{name}_tool.py",
        "README.md": "README.md",
        "test_tool.py.tmpl": "tests/test_{name}.py",
        "pytest.ini": "tests/pytest.ini",
    },
    # No Python: `kind: agent` and its instructions, and where its tools go.
    "agent": {
        "tool_config.yaml": "tool_config.yaml",
        "README.md": "README.md",
        "sub_graphs_README.md": "src/sub_graphs/README.md",
    },
}


NO_PARENT = (
    "--in {parent!r}: no tool folder there (give an agent's folder below {sub_graphs} "
    "as `orchestrator tools list` shows it, or its path)"
)


def children_directory(parent: str, *, sub_graphs: Path) -> Path:
    """Where the tool folders of the agent `parent` go: its `src/sub_graphs/`.

    `parent` is a folder below `sub_graphs` as any command names it (`trip`, `trip/flights`,
    `trip/src/sub_graphs/flights`, `flights`), or a path to one.
    """
    try:  # any form a folder is named by elsewhere (see `folders.naming`)
        return find_in_tree(discover_tree(sub_graphs), parent).children_dir
    except UserError:  # not a valid folder: its directory, if it is one (a broken one, say)
        pass
    for candidate in (sub_graphs / parent, Path(parent)):
        if config_path(candidate).is_file():
            return candidate / CHILDREN_DIR
    raise UserError(NO_PARENT.format(parent=parent, sub_graphs=sub_graphs))


def create_agent_folder(name: str, *, directory: Path, kind: Kind = "tool") -> Path:
    """Write `directory/name/` from the `kind` template; the folder must not exist yet."""
    if not re.match(NAME_PATTERN, name):
        raise UserError(
            f"{name!r} is not a valid tool name: lowercase letters, digits and _, "
            "starting with a letter, at most 40 characters"
        )
    folder = directory / name
    if folder.exists() or folder.is_symlink():  # a dangling link too: writing would follow it
        raise UserError(f"{folder} already exists")
    values = {
        "name": name,
        "class_name": "".join(part.capitalize() for part in name.split("_")),
        "words": name.replace("_", " "),
    }
    template = TEMPLATES / kind
    for source, target in LAYOUTS[kind].items():
        path = folder / target.format(name=name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(template.joinpath(source).read_text()).substitute(values))
    return folder
