"""Loading a tool folder in its own tests, the way the host loads it (minus approval)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from orchestrator.folders.discovery import ToolFolder, child_folders
from orchestrator.folders.hashing import snapshot
from orchestrator.folders.loader import ToolLoadError, import_tool
from orchestrator.folders.tool_config import config_path, load_tool_config
from orchestrator.sources.folder_migrations import migrate_folder
from orchestrator.store.engine import Database
from orchestrator.tools.base import Tool, ToolContext
from orchestrator.tools.context import TextEmbedder


def load_tool_folder(
    path: Path,
    *,
    data_dir: Path | None = None,
    database: Database | None = None,
    embedder: TextEmbedder | None = None,
) -> Tool:
    """Validate `path/tool_config.yaml`, import the entry point and build the tool.

    The folder's own files are hashed and imported as the host does it (its
    sub-tools' are not visible to it here).

    The tool keeps its files in `data_dir` (a new temporary directory by default)
    and its rows in `database`, if given (its `migrations/` applied there, recorded
    under the folder's name); `embedder` is its embedding model. Its
    folder's own `.env` feeds its settings, as in the host.
    """
    config = load_tool_config(config_path(path))
    taken = snapshot(path, exclude=child_folders(path))
    folder = ToolFolder(
        path=path,
        key=path.name,
        config=config,
        digest=taken.digest,
        sources=taken.sources,
        requirements=taken.requirements,
        migrations=taken.migrations,
    )
    if folder.entry not in folder.sources:
        raise ToolLoadError(f"entry point {config.entry_file} not found in {path}")
    tool = import_tool(folder)
    migrate_folder(folder, database)  # its own tables, as the host makes them
    directory = data_dir or Path(tempfile.mkdtemp(prefix="tool-data-"))
    context = ToolContext(data_dir=directory, database=database, folder=path, embedder=embedder)
    tool.bind_context(context)
    return tool
