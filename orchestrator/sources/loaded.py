"""An approved folder as loaded: its tool, its LangChain tools, its level and the folders below."""

from __future__ import annotations

from dataclasses import dataclass, field

from langchain_core.tools import BaseTool

from orchestrator.errors import FolderUnavailableError
from orchestrator.folders.discovery import ToolFolder
from orchestrator.levels import LevelConfig
from orchestrator.sources.deferred import LoadOnce
from orchestrator.tools.base import Tool

# The metadata key of a folder tool's approved content hash.
CONTENT_KEY = "content_hash"


@dataclass
class LoadedTool:
    """An approved folder's tool, with its own loaded sub-tools if it is an agent."""

    folder: ToolFolder
    tool: Tool | None  # None for an MCP server's folder: its tools are the server's
    children: list[LoadedTool] = field(default_factory=list)
    langchain: list[BaseTool] = field(default_factory=list)
    unapproved_children: list[str] = field(default_factory=list)  # names, for the user
    level: LevelConfig | None = None  # what it runs with (for an agent, its graph's level)
    # Offered from its manifest: the folder as its import gives it, at the first need (see `ready`).
    later: LoadOnce[LoadedTool] | None = None

    def __post_init__(self) -> None:
        # Each tool carries the approved content of its folder: results cached under it
        # are reused only while the folder (and its remote configuration in force) is as
        # then (see `dispatch.result_cache`).
        for tool in self.langchain:
            tool.metadata = {**(tool.metadata or {}), CONTENT_KEY: self.folder.content}

    async def ready(self) -> LoadedTool:
        """The folder imported: itself, or (offered from its manifest) as importing it now gives it.

        FolderUnavailableError when that import fails (its approval is forgotten then).
        """
        return self if self.later is None else self.later.get()

    def imported(self) -> LoadedTool | None:
        """The folder as imported: itself, its import once done, None while deferred (or failed)."""
        if self.later is None:
            return self
        try:
            return self.later.get() if self.later.done else None
        except FolderUnavailableError:
            return None
