"""`orchestrator new-agent NAME`: a new drop-in folder from the template."""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path
from string import Template

from orchestrator.errors import UserError
from orchestrator.tools.config import NAME_PATTERN

TEMPLATE = files("orchestrator") / "templates" / "agent"
# template file -> path in the new folder
LAYOUT = {
    "tool_config.yaml": "tool_config.yaml",
    "tool.py.tmpl": "{name}_tool.py",
    "README.md": "README.md",
    "test_tool.py.tmpl": "tests/test_{name}.py",
    "pytest.ini": "tests/pytest.ini",
}


def create_agent_folder(name: str, *, directory: Path) -> Path:
    """Write `directory/name/` from the template; the folder must not exist yet."""
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
        "title": name.replace("_", " ").capitalize(),
    }
    for source, target in LAYOUT.items():
        path = folder / target.format(name=name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(TEMPLATE.joinpath(source).read_text()).substitute(values))
    return folder
