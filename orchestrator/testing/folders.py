"""Loading a tool folder in its own tests, the way the host loads it (minus approval)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from orchestrator.store.engine import Database
from orchestrator.tools.base import Tool, ToolContext
from orchestrator.tools.config import CONFIG_FILE, load_tool_config
from orchestrator.tools.discovery import ToolFolder, content_hash
from orchestrator.tools.loader import import_tool


def load_tool_folder(
    path: Path, *, data_dir: Path | None = None, database: Database | None = None
) -> Tool:
    """Validate `path/tool_config.yaml`, import the entry point and build the tool.

    The tool keeps its files in `data_dir` (a new temporary directory by default)
    and its rows in `database`, if given.
    """
    config = load_tool_config(path / CONFIG_FILE)
    folder = ToolFolder(path=path, key=path.name, config=config, digest=content_hash(path))
    tool = import_tool(folder)
    directory = data_dir or Path(tempfile.mkdtemp(prefix="tool-data-"))
    tool.bind_context(ToolContext(data_dir=directory, database=database))
    return tool
